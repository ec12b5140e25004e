"""Where a study's trials live: its database, checked before anything is written, and how the study
folder records it.

A study's trials are in `study.db` (SQLite) in its folder, or in the database a `--storage` URL
names, which several processes or machines can share. The study folder (study.json) records which,
and a command that gives another storage for the same folder is refused: it would start an empty
study whose trials train in the first one's run folders.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
from typing import Iterator

DEFAULT_DATABASE = "study.db"
LOCK_FILE = ".queue.lock"
# The pip package of a database driver SQLAlchemy names by its module, where the two names differ.
DRIVER_PACKAGES = {"psycopg": "psycopg[binary]", "psycopg2": "psycopg2-binary", "MySQLdb": "mysqlclient",
                   "pymysql": "PyMySQL"}


def storage_url(study_dir: str, storage: str | None) -> str:
    """The database URL of the study: `storage`, else SQLite in `study_dir`."""
    return storage or f"sqlite:///{os.path.abspath(os.path.join(study_dir, DEFAULT_DATABASE))}"


def storage_record(storage: str | None) -> str:
    """How study.json records the storage: `DEFAULT_DATABASE` for SQLite in the study folder, else the
    URL without its password (`check_storage` has parsed it)."""
    if storage is None:
        return DEFAULT_DATABASE
    from sqlalchemy.engine import make_url

    return make_url(storage).render_as_string(hide_password=True)


def describe(record: str) -> str:
    """A recorded storage as a person reads it."""
    return "SQLite in the study folder (no --storage)" if record == DEFAULT_DATABASE else f"--storage {record}"


def check_storage(study_dir: str, storage: str | None) -> None:
    """Refuses a storage that cannot hold the study, writing nothing: a URL that is not one, a
    database whose driver is not installed or which does not answer, an SQLite file in a folder that
    does not exist, or an SQLite file (the study folder's own included) that is not a readable
    database.

    Raises:
        ValueError: one line naming the flag, the value and the cause.
    """
    if storage is None:
        path = os.path.join(study_dir, DEFAULT_DATABASE)
        if os.path.exists(path):
            _check_sqlite_file(path, f"the study's database {path}")
        return
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

    flag = f"--storage {storage!r}"
    try:
        url = make_url(storage)
        url.get_dialect()
    except NoSuchModuleError:  # an ArgumentError too
        raise ValueError(f"{flag}: SQLAlchemy knows no database {url.drivername!r}; "
                         "use sqlite, postgresql or mysql") from None
    except (ArgumentError, ValueError):
        raise ValueError(f"{flag} is not a database URL such as sqlite:///studies/trials.db or "
                         "postgresql://user@host/database") from None
    if url.get_backend_name() == "sqlite":
        path = url.database or ""
        if not path or path == ":memory:":
            raise ValueError(f"{flag} keeps no trials: give an SQLite file, e.g. sqlite:///studies/trials.db")
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise ValueError(f"{flag}: the folder {folder} does not exist; create it or give another path")
        if os.path.exists(path):
            _check_sqlite_file(path, flag)
        return
    try:
        engine = create_engine(url)
        with engine.connect():
            pass
        engine.dispose()
    except ImportError as error:
        module = (error.name or str(error)).split(".")[0]
        raise ValueError(f"{flag}: its driver, the Python module {module!r}, is not installed: install the package "
                         f"that provides it with pip ({DRIVER_PACKAGES.get(module, module)})") from None
    except SQLAlchemyError as error:
        cause = " ".join(str(getattr(error, "orig", None) or error).split())[:300]
        raise ValueError(f"{flag}: the database cannot be reached ({cause})") from None


def _check_sqlite_file(path: str, what: str) -> None:
    """Refuses an SQLite file that is not a readable database (read-only: the file is not changed)."""
    if os.path.isdir(path):
        raise ValueError(f"{what} is a folder, not a database file")
    try:
        connection = sqlite3.connect(f"file:{os.path.abspath(path)}?mode=ro", uri=True)
        try:
            result = connection.execute("PRAGMA quick_check").fetchone()
        finally:
            connection.close()
    except sqlite3.Error as error:
        raise ValueError(f"{what} is not a readable SQLite database ({error}); restore it from a copy, or use "
                         "another --study_dir") from None
    if not result or result[0] != "ok":
        raise ValueError(f"{what} is damaged (SQLite's check: {result[0] if result else 'no answer'}); restore it "
                         "from a copy, or use another --study_dir")


def study_storage(study_dir: str, storage: str | None, heartbeat_seconds: int, grace_seconds: int):
    """Optuna's RDB storage of the study (`storage_url`), with heartbeats and the retry of a trial whose
    process died (in the same run folder: `trials.original_number`)."""
    import optuna

    return optuna.storages.RDBStorage(
        storage_url(study_dir, storage), heartbeat_interval=heartbeat_seconds, grace_period=grace_seconds,
        heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(
            inherit_intermediate_values=True))


@contextlib.contextmanager
def study_lock(study_dir: str) -> Iterator[None]:
    """Holds the study folder's lock file: the processes of one machine take trials (and draw new
    settings) one at a time."""
    with open(os.path.join(study_dir, LOCK_FILE), "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
