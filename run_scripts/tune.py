"""`bert4rec-tune` run from a checkout; the command is bert4rec_tf/scripts/tune.py."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bert4rec_tf.scripts.tune import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
