"""The command-line tools, installed as console scripts (setup.cfg) and run from a checkout by the
thin wrappers in run_scripts/: each module's `main()` is one command. Their modules import no
TensorFlow until the flags are parsed, so `--help` answers at once.

Every command imports this package first, and here TensorFlow's native INFO logs are turned off
unless the command line asks for the libraries' logs (--verbose, --debug): TensorFlow reads the
setting once, when it is first imported, which may be before the flags are parsed
(`bert4rec_tf.console`).
"""

import os as _os
import sys as _sys

from bert4rec_tf.console import asks_for_library_logs as _asks_for_library_logs

if not _asks_for_library_logs(_sys.argv[1:]):
    _os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
