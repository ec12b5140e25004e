"""Opening an interaction file as text: plain, ``.gz`` or ``.zip``, in a named encoding.

A zip is read through its ratings member. Line ends are kept as they are in the file, and bytes the
encoding cannot decode are an error naming the file, the line and the byte offset, never replaced.
The formats of the lines are read in `bert4rec_tf.data.readers`.
"""

from __future__ import annotations

import codecs
import gzip
import io
import os
import zipfile
import zlib
from typing import BinaryIO, Iterator

from bert4rec_tf.config.sections import flag_of, setting_of
from bert4rec_tf.data.errors import DataError

_ZIP_MEMBERS = ("ratings.dat", "ratings.csv")


def require_file(path: str) -> None:
    """Checks that `path` names an existing file.

    Raises:
        DataError: naming `path` when it does not exist, or is a folder (or anything else that is not
            a regular file).
    """
    if os.path.isfile(path):
        return
    if os.path.isdir(path):
        raise DataError("is a folder, not a file: give the data file itself", path)
    if os.path.exists(path):
        raise DataError("is not a regular file", path)
    raise DataError("no such file", path)


def _open_binary(path: str) -> BinaryIO:
    """Opens a plain, gzip or zip file's content as bytes (a zip through its ``ratings.*`` member)."""
    require_file(path)
    if zipfile.is_zipfile(path):
        archive = zipfile.ZipFile(path)
        names = [n for n in archive.namelist() if os.path.basename(n) in _ZIP_MEMBERS]
        if not names:
            raise DataError(f"zip archive has no member named {' or '.join(_ZIP_MEMBERS)}", path)
        return archive.open(names[0])
    with open(path, "rb") as probe:
        magic = probe.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rb")
    return open(path, "rb")


def _codec(encoding: str) -> str:
    """Python's codec for `encoding`: UTF-8 also reads a file that starts with a byte-order mark."""
    return "utf-8-sig" if codecs.lookup(encoding).name == "utf-8" else encoding


def text_lines(path: str | os.PathLike, encoding: str = "utf-8", setting: str = "encoding") -> Iterator[str]:
    """The lines of a plain, gzip or zip file (a zip through its ``ratings.*`` member), as text.

    A UTF-8 byte-order mark at the start is dropped. Line ends (LF, CRLF or CR) are kept as they are,
    not translated, as `csv` needs to read a line break inside a quoted field.

    Args:
        path: the file.
        encoding: its text encoding, a name Python's `codecs` knows.
        setting: the configuration field that names this file's encoding, which a decoding error
            advises (`encoding`, the data's; `item_features_encoding` for the item attribute file).

    Raises:
        DataError: naming the file when it is missing, a zip has no ratings member, the file (a
            compressed one above all) is truncated or damaged, or it holds bytes `encoding` cannot
            decode (then also the line and byte offset).
    """
    path = os.fspath(path)
    number = 0
    with io.TextIOWrapper(_open_binary(path), encoding=_codec(encoding), newline="") as handle:
        try:
            for number, line in enumerate(handle, start=1):
                yield line
        except UnicodeError as error:  # a UnicodeDecodeError, or a codec's own (UTF-16 without a byte-order mark)
            raise _decoding_error(path, encoding, error, setting) from None
        except (EOFError, OSError, zlib.error, zipfile.BadZipFile) as error:
            raise DataError(f"unreadable after line {number}, truncated or damaged ({error}); download or copy "
                            "it again", path) from None


def _decoding_error(path: str, encoding: str, error: UnicodeError, setting: str) -> DataError:
    """The error naming the line and byte offset (in the file's uncompressed content) of the first
    bytes of `path` that `encoding` cannot decode, or the line where the codec gave up on the file
    (UTF-16 without a byte-order mark); `error` is what decoding raised, `setting` the field that
    names the file's encoding."""
    utf8 = codecs.lookup(encoding).name == "utf-8"
    hint = (f"name the file's encoding, e.g. {setting_of(setting, 'latin-1')}" if utf8
            else f"name the file's encoding with {flag_of(setting)}")
    decoder = codecs.getincrementaldecoder(_codec(encoding))()
    offset = 0
    with _open_binary(path) as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                decoder.decode(raw)
            except UnicodeDecodeError as found:
                # `found.object` holds the bytes the decoder had buffered and those of this line.
                position = offset + len(raw) - len(found.object) + found.start
                return DataError(f"byte 0x{found.object[found.start]:02x} at byte offset {position} is not "
                                 f"{encoding} text ({found.reason}); {hint}", path, number)
            except UnicodeError as found:
                return DataError(f"does not decode as {encoding} text ({found}); {hint}", path, number)
            offset += len(raw)
    return DataError(f"does not decode as {encoding} text ({getattr(error, 'reason', error)}); {hint}", path)
