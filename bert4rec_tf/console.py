"""What the package's commands print: their own lines, and of the libraries' only what matters.

TensorFlow prints INFO lines of its native code when it is first imported (the oneDNN notice, twice,
each after absl's notice that logging is not initialised yet), and `TF_CPP_MIN_LOG_LEVEL` does not
reach them. `quiet_native_import` runs an import with those lines held back: every other line the
import writes to the standard error (warnings, errors) is written after it. `--verbose` and `--debug`
show everything (`asks_for_library_logs` reads them before the flags are parsed, for the imports that
run before: a plugin's module may import TensorFlow while the Task registry loads it).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from typing import Iterator

# Native lines that tell a user nothing: absl's INFO lines ("I0000 00:00:... port.cc:153] ...") and
# its notice that logging has not been initialised.
_HARMLESS = re.compile(r"I\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [\w.]+:\d+\]|WARNING: All log messages before absl::InitializeLog")


def asks_for_library_logs(arguments: list[str]) -> bool:
    """Whether `arguments` (a command line without the program) turn on --verbose or --debug, read as
    absl reads a boolean flag (`--verbose`, `--verbose=true`; not `--noverbose` or after `--`)."""
    for argument in arguments:
        if argument == "--":
            break
        name, equals, value = argument.lstrip("-").partition("=")
        if argument.startswith("-") and name in ("verbose", "debug"):
            if not equals or value.lower() in ("true", "t", "1", "yes", "y"):
                return True
    return False


def harmless(line: str) -> bool:
    """Whether a line a library wrote to the standard error is one `quiet_native_import` holds back."""
    return bool(_HARMLESS.match(line))


@contextlib.contextmanager
def quiet_native_import() -> Iterator[None]:
    """Runs its block with file descriptor 2 captured, then writes the captured lines that are not
    `harmless` to the standard error; does nothing under --verbose or --debug."""
    if asks_for_library_logs(sys.argv[1:]):
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            kept = [line for line in capture.read().decode("utf-8", "replace").splitlines(keepends=True)
                    if not harmless(line)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()


def import_tensorflow_quietly() -> None:
    """Imports TensorFlow (once) under `quiet_native_import`."""
    if "tensorflow" in sys.modules:
        return
    with quiet_native_import():
        import tensorflow  # noqa: F401
