"""Files the package writes and reads back: always valid JSON, complete or absent, named on error."""

from __future__ import annotations

import contextlib
import errno
import gc
import json
import logging
import math
import os
import resource
import secrets
import shutil
import sys
import traceback
from typing import Any, Iterator

logger = logging.getLogger(__name__)

TEMPORARY_PREFIX = ".tmp-"
# The folder that holds the package: a checkout's root (beside setup.cfg), or site-packages.
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def package_environment() -> dict[str, str]:
    """This process's environment with `PACKAGE_PARENT` first on PYTHONPATH, so that a child process
    (a run, a stage) imports this same package."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": PACKAGE_PARENT + (os.pathsep + path if path else "")}


def _finite_or_null(value: Any) -> Any:
    """`value` with every non-finite float replaced by None, so that it is valid JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite_or_null(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_null(item) for item in value]
    return value


def write_json_atomic(path: str | os.PathLike, value: Any) -> None:
    """Writes `value` as JSON under a temporary name, then renames it into place.

    NaN and infinities become `null`: strict JSON has no such numbers.
    """
    text = json.dumps(_finite_or_null(value), indent=2, sort_keys=True, allow_nan=False, ensure_ascii=False)
    write_text_atomic(path, text + "\n")


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Writes `text` (UTF-8) under a temporary name, then renames it into place."""
    with atomic_path(path) as temporary, open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)


def copy_file_atomic(source: str | os.PathLike, path: str | os.PathLike) -> None:
    """Copies the file `source` to `path` under a temporary name, then renames it into place."""
    with atomic_path(path) as temporary:
        shutil.copyfile(source, temporary)


def temporary_name(path: str | os.PathLike) -> str:
    """A fresh name beside `path` for writing it: ``<folder>/.tmp-<pid>-<random>-<name>``.

    Unique per process and call; it keeps the name's ending, so writers that check the extension
    (``.keras``, ``.weights.h5``, ``.png``) accept it, and `TEMPORARY_PREFIX` marks it as a leftover.
    """
    folder, name = os.path.split(os.path.abspath(os.fspath(path)))
    return os.path.join(folder, f"{TEMPORARY_PREFIX}{os.getpid()}-{secrets.token_hex(4)}-{name}")


def temporary_owner(name: str) -> int | None:
    """The process id in a `temporary_name` (its base name), or None when `name` is not one."""
    if not name.startswith(TEMPORARY_PREFIX):
        return None
    pid = name[len(TEMPORARY_PREFIX):].split("-", 1)[0]
    return int(pid) if pid.isdigit() else None


def process_running(pid: int) -> bool:
    """Whether process `pid` runs on this machine (as any user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it runs, as another user
    return True


def remove_abandoned(folder: str | os.PathLike, including_own: bool = False) -> None:
    """Removes the temporaries (`temporary_name`) in `folder` of processes that no longer run, with a
    warning naming each; those of running processes are left to them.

    Args:
        folder: where to look (not below).
        including_own: also remove this process's own, when it knows it writes nothing there now.
    """
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        return
    for name in sorted(os.listdir(folder)):
        pid = temporary_owner(name)
        if pid is not None and ((including_own and pid == os.getpid()) or not process_running(pid)):
            logger.warning("removing %s, left incomplete by process %s", os.path.join(folder, name), pid)
            _remove(os.path.join(folder, name))


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.remove(path)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[str]:
    """Yields a temporary name for `path` (`temporary_name`); when the block ends normally it takes
    `path`'s place, so `path` is complete or absent (or still the old one).

    The temporary may be a file or a folder. An old folder at `path` is kept whole until the new one
    is complete, then removed. When the block raises, the temporary is removed and `path` is untouched.

    Raises:
        OSError: naming `path` and the cause, when writing fails for want of room, a file-size limit,
            permission or a read-only disk (the writer's own message names only the temporary).

    Example:
        with atomic_path("runs/x/model.keras") as temporary:
            model.save(temporary)
    """
    path = os.fspath(path)
    temporary = temporary_name(path)
    try:
        yield temporary
    except OSError as error:
        _remove(temporary)
        raise write_error(path, error) from None
    except BaseException:
        _remove(temporary)
        raise
    if os.path.isdir(temporary) and os.path.isdir(path):
        old = temporary_name(path)
        os.replace(path, old)
        os.replace(temporary, path)
        _remove(old)
    else:
        os.replace(temporary, path)


# The causes of a failed write a user can act on, by errno, as the one-line error names them.
_WRITE_FAILURES = {errno.ENOSPC: "no space left on the disk", errno.EFBIG: "file too large for the disk or the "
                   "file-size limit (ulimit -f)", errno.EDQUOT: "disk quota exceeded", errno.EROFS: "read-only disk",
                   errno.EACCES: "permission denied", errno.EPERM: "permission denied"}


# The same causes as other writers (TensorFlow's file system) name them in their messages.
_WRITE_FAILURE_TEXTS = {"No space left": errno.ENOSPC, "File too large": errno.EFBIG, "Disk quota": errno.EDQUOT,
                        "Read-only file system": errno.EROFS, "Permission denied": errno.EACCES}


def write_failure_cause(error: BaseException) -> int | None:
    """The errno of why a write failed: `error`'s own, or the one its message names the way
    TensorFlow's file system and TFDS do ("File too large", "No space left"); None when neither."""
    text = " ".join(str(error).split())
    return getattr(error, "errno", None) or next(
        (number for words, number in _WRITE_FAILURE_TEXTS.items() if words.lower() in text.lower()), None)


def write_error(path: str, error: BaseException) -> OSError:
    """A one-line OSError for a failed write of `path`: the file and the cause (`error`'s errno, or
    one its message names), nothing of the temporary name; its `errno` is the cause's."""
    text = " ".join(str(error).split())
    code = write_failure_cause(error)
    failure = OSError(f"{path}: cannot be written: {_WRITE_FAILURES.get(code) or text[:200] or type(error).__name__}")
    failure.errno = code
    return failure


@contextlib.contextmanager
def quiet_after_failed_write() -> Iterator[None]:
    """Keeps a failed write to its one-line error: what objects raise while being finalised in the
    block is held back, as text, and dropped when the block raises an `OSError` (h5py prints
    "Exception ignored in ObjectID.__dealloc__", a traceback for each open object of a file whose
    write failed, dozens above the error). Otherwise it is written to stderr at the end of the block.

    Main thread only: it swaps the process-wide `sys.unraisablehook` and `sys.excepthook` (through
    which Cython prints such a traceback) while the block runs. Only text is kept, never the object
    being finalised (keeping it would bring it back to life).
    """
    held: list[str] = []
    hooks = sys.unraisablehook, sys.excepthook

    def unraisable(complaint) -> None:
        where = f"Exception ignored in: {complaint.object!r}\n" if complaint.object is not None else ""
        held.append(where + "".join(traceback.format_exception(complaint.exc_type, complaint.exc_value,
                                                               complaint.exc_traceback)))

    sys.unraisablehook = unraisable
    sys.excepthook = lambda kind, value, trace: held.append("".join(traceback.format_exception(kind, value, trace)))
    try:
        yield
    except OSError as error:
        # The failed writer's objects live on in the frames of the error's traceback and of the
        # errors it was raised from: free them now, while their complaints are held.
        chained = error
        while chained is not None:
            traceback.clear_frames(chained.__traceback__)
            chained = chained.__cause__ or chained.__context__
        gc.collect()
        held.clear()
        raise
    finally:
        sys.unraisablehook, sys.excepthook = hooks
        if held:
            sys.stderr.write("".join(held))


def ensure_room(path: str | os.PathLike, size: int) -> None:
    """Refuses, before writing, a file of about `size` bytes at `path` that the disk's free space or
    the process's file-size limit (ulimit -f) cannot hold: for writers (HDF5) that fail messily
    half-way.

    Raises:
        OSError: as `write_error` gives it.
    """
    path = os.fspath(path)
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY and size > limit:
        raise write_error(path, OSError(errno.EFBIG, "file too large"))
    stats = os.statvfs(os.path.dirname(os.path.abspath(path)))
    if size > stats.f_bavail * stats.f_frsize:
        raise write_error(path, OSError(errno.ENOSPC, "no space left"))


def read_json(path: str | os.PathLike, what: str = "file") -> Any:
    """The JSON value in `path`.

    Args:
        path: the file.
        what: what the file is, for the error message ("run configuration", ...).

    Raises:
        ValueError: naming the file when it is not valid JSON (a damaged or truncated file).
        FileNotFoundError: when it is missing.
    """
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: the {what} is damaged, not valid JSON ({error})") from None
