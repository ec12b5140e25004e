"""`bert4rec-movielens-features` run from a checkout; the command is bert4rec_tf/scripts/movielens_features.py."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bert4rec_tf.scripts.movielens_features import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
