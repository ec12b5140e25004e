"""`bert4rec-compare-runs`: the command is bert4rec_tf/experiments/compare_runs.py."""

import sys

from bert4rec_tf.experiments.compare_runs import main

if __name__ == "__main__":
    sys.exit(main())
