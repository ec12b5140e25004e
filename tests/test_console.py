"""The commands' console: the libraries' INFO logs hidden by default, back with --verbose; the
package's own log lines and the libraries' errors shown either way."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO

# A command's work as every absl command runs it (`cli.run_absl_command`): a log line from each source.
SCRIPT = """
import logging, os, sys
from absl import app, logging as absl_logging
from bert4rec_tf import cli

def run():
    logging.getLogger("bert4rec_tf").info("own info")
    logging.getLogger("bert4rec_tf").warning("own warning")
    absl_logging.info("absl info")          # TensorFlow's SavedModel code, TFDS's build
    absl_logging.warning("absl warning")    # TFDS's custom-configuration notice
    absl_logging.error("absl error")
    logging.getLogger("tensorflow").info("tensorflow info")
    print("TF_CPP_MIN_LOG_LEVEL", os.environ.get("TF_CPP_MIN_LOG_LEVEL"))

app.run(lambda argv: cli.guarded(run))
"""


@pytest.mark.parametrize("flag", [None, "--verbose", "--debug"])
def test_the_libraries_info_logs_are_hidden_unless_asked_for(flag):
    environment = {"PYTHONPATH": REPO, "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-c", SCRIPT, *([flag] if flag else [])], capture_output=True,
                            text=True, timeout=120, env=environment)
    assert result.returncode == 0, result.stderr
    printed = result.stderr
    assert "own info" in printed and "own warning" in printed and "absl error" in printed
    shown = flag is not None
    for line in ("absl info", "absl warning", "tensorflow info"):
        assert (line in printed) == shown, (line, printed)
    assert f"TF_CPP_MIN_LOG_LEVEL {None if shown else 1}" in result.stdout
