"""The command-line tools, installed as console scripts (setup.cfg) and run from a checkout by the
thin wrappers in run_scripts/: each module's `main()` is one command. Their modules import no
TensorFlow until the flags are parsed, so `--help` answers at once."""
