"""`bert4rec-large-catalogue` run from a checkout; the command is bert4rec_tf/scripts/large_catalogue.py."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bert4rec_tf.scripts.large_catalogue import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
