"""`bert4rec-reproduce`: the command is bert4rec_tf/experiments/reproduce.py."""

import sys

from bert4rec_tf.experiments.reproduce import main

if __name__ == "__main__":
    sys.exit(main())
