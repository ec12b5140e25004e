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


@pytest.mark.parametrize("arguments, asks", [
    ([], False), (["--dataset", "beauty"], False), (["--verbose"], True), (["--debug"], True),
    (["--verbose=true"], True), (["--debug=1"], True), (["--verbose=false"], False), (["--noverbose"], False),
    (["--", "--verbose"], False), (["--model", "verbose"], False),
])
def test_the_commands_read_verbose_and_debug_before_the_flags_are_parsed(arguments, asks):
    from bert4rec_tf.console import asks_for_library_logs

    assert asks_for_library_logs(arguments) is asks


def test_the_preparation_report_is_one_line():
    from bert4rec_tf.data.tfds_builders import preparation_summary

    report = {"interactions_read": 353962, "duplicate_rows": 2, "items_read": 12101, "items_dropped_rare": 3,
              "interactions_dropped_rare_items": 7, "users_read": 22363, "users_dropped_short": 1,
              "interactions_dropped_short_users": 4, "user_ids_not_positive_integers": 0}
    assert preparation_summary("beauty", report) == (
        "beauty: read 353,962 interactions of 22,363 users and 12,101 items; dropped 2 duplicate rows, 3 rare "
        "items (7 interactions) and 1 short users (4 interactions)")


NATIVE = """
import os, sys
from bert4rec_tf.console import quiet_native_import
with quiet_native_import():
    os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\\n")
    os.write(2, b"I0000 00:00:1796179493.962577   27126 port.cc:153] oneDNN custom operations are on.\\n")
    os.write(2, b"W0000 00:00:1796179493.962577   27126 other.cc:10] a native warning\\n")
    print("a python line on stderr", file=sys.stderr)
print("after", file=sys.stderr)
"""


@pytest.mark.parametrize("flag", [None, "--verbose"])
def test_a_native_import_keeps_its_warnings_and_drops_its_info_lines(flag):
    result = subprocess.run([sys.executable, "-c", NATIVE, *([flag] if flag else [])], capture_output=True,
                            text=True, timeout=60, env={"PYTHONPATH": REPO, "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert "W0000 00:00:1796179493.962577   27126 other.cc:10] a native warning" in lines
    assert lines[-2:] == ["a python line on stderr", "after"]
    assert any("port.cc" in line for line in lines) == (flag is not None)
    assert any("InitializeLog" in line for line in lines) == (flag is not None)
