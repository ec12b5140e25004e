"""Resumable, cached, checksummed downloads.

A file is streamed to ``<name>.part`` (resumed with an HTTP Range request when a partial file is
there), its SHA-256 checked, and only then renamed to ``<name>``; ``<name>.sha256`` records the
verified digest. A later use skips the download but hashes the cached file again: one that changed
since (damaged or edited) is removed with an error instead of being read.
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request

from tqdm.auto import tqdm

from bert4rec_tf.data.errors import DataError
from bert4rec_tf.files import write_text_atomic

_CHUNK = 1 << 20


def sha256_of(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def file_records(directory: str | os.PathLike, names) -> dict[str, dict]:
    """{name: {"bytes", "sha256"}} of the files `names` (paths relative to `directory`), in name order:
    what a folder's record says of its files, to tell later that they are intact."""
    return {name: {"bytes": os.path.getsize(os.path.join(directory, name)),
                   "sha256": sha256_of(os.path.join(directory, name))} for name in sorted(names)}


def download(url: str, directory: str | os.PathLike, filename: str, sha256: str | None = None,
             timeout: float = 60.0) -> str:
    """Downloads `url` once into `directory/filename` and returns the path.

    Args:
        url: the official address.
        directory: the cache folder (created when missing).
        filename: the cached file's name.
        sha256: the expected digest; when None the digest of the first complete download is
            recorded and every later use is checked against it.
        timeout: seconds per network operation.

    Raises:
        DataError: on a network error (the partial file is kept for resuming) or a checksum
            mismatch (the bad file is removed).
    """
    os.makedirs(directory, exist_ok=True)
    final = os.path.join(directory, filename)
    record = final + ".sha256"
    if os.path.isfile(final):
        # Checked against the pinned digest, else the one recorded at its download (a file without
        # either, copied in by hand, is taken as it is and its digest recorded).
        expected = sha256 if sha256 is not None else _recorded_digest(record)
        _verify_and_record(final, final, record, expected, url)
        return final
    partial = final + ".part"
    offset = os.path.getsize(partial) if os.path.isfile(partial) else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={offset}-"} if offset else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            if offset and response.status != 206:
                offset = 0  # the server ignored the range: start again
            total = response.length + offset if response.length is not None else None
            with open(partial, "ab" if offset else "wb") as out, tqdm(
                    total=total, initial=offset, unit="B", unit_scale=True, desc=f"downloading {filename}",
                    mininterval=1.0) as bar:
                for block in iter(lambda: response.read(_CHUNK), b""):
                    out.write(block)
                    bar.update(len(block))
    except (urllib.error.URLError, OSError) as error:
        raise DataError(f"download failed ({error}); run again to resume from "
                        f"{os.path.getsize(partial) if os.path.isfile(partial) else 0} bytes", url) from None
    _verify_and_record(partial, final, record, sha256, url)
    return final


def _recorded_digest(record: str) -> str | None:
    if not os.path.isfile(record):
        return None
    with open(record) as handle:
        return handle.read().strip()


def _verify_and_record(path: str, final: str, record: str, sha256: str | None, url: str) -> None:
    actual = sha256_of(path)
    if sha256 is not None and actual != sha256:
        os.remove(path)
        raise DataError(f"checksum mismatch for {url}: expected sha256 {sha256}, got {actual}; "
                        "the file was removed, run again to download it anew", final)
    if path != final:
        os.replace(path, final)
    if _recorded_digest(record) == actual:
        return  # a cache that is only read is never written to
    write_text_atomic(record, actual + "\n")
