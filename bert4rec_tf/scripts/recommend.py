"""Top-10 recommendations from a run's serving SavedModel.

    bert4rec-recommend --model_dir runs/ml1m --history "1 2 3"
    bert4rec-recommend --model_dir runs/beauty --history "B0001,B0002" --separator ,
    bert4rec-recommend --model_dir runs/beauty --history_file history.txt
    bert4rec-recommend --model_dir runs/ml1m-orig --history "1193 661" \\
        --titles ../shared/datasets/ml-1m/movies.dat.gz
    bert4rec-recommend --model_dir runs/ml1m --history "1 2 3" \\
        --titles ../shared/datasets/ml-1m/movies.dat.gz --id_map ../shared/datasets/ml-1m/sas_to_original_items.txt.gz
    bert4rec-recommend --model_dir runs/ml1m-bpr --user 42 --history "1 2 3"
A model that reads users needs --user, a raw user id of its data (an unknown user is refused): one
that learned a vector per training user (BPR-MF, NCF, FPMC, Caser), whose history is optional (the
items to leave out, and the recent items FPMC and Caser read), and BERT4Rec or SASRec trained with
user attributes (`--config user_features=FILE`), which reads the user's attributes beside the
history. The other models take a history only.
The history is the data set's raw item ids, oldest first, from exactly one of --history (split at
runs of whitespace, or at --separator) and --history_file (one id a line, UTF-8, escaped as in the
export's vocab.txt). Ids missing from the export's vocab.txt are named on stderr and ignored; when
none is known the command fails rather than recommend for an empty history. Printed ids are escaped
as in vocab.txt; fewer than 10 lines are printed only when fewer items are unseen. --titles reads a
MovieLens movies.dat (`id::title::genres`, plain or .gz); --id_map maps the run's raw item ids to its
ids (ml-1m.txt.gz uses SASRec's ids: sas_to_original_items.txt.gz maps them to MovieLens ids).
"""

from __future__ import annotations

import os
import sys

from absl import flags

from bert4rec_tf import cli
from bert4rec_tf.data.id_files import escape_id, unescape_id
from bert4rec_tf.data.titles import read_id_map, read_titles, title_of

flags.DEFINE_string("model_dir", None, "A folder written by bert4rec-train (reads its export/).")
flags.DEFINE_string("history", None, "Raw item ids, oldest first, separated by whitespace or --separator.")
flags.DEFINE_string("user", None, "The raw user id of the data, for a model that reads users: one that learned "
                    "a vector per training user (BPR-MF, NCF, FPMC, Caser), or BERT4Rec or SASRec trained with user "
                    "attributes (it reads the user's attributes).")
flags.DEFINE_string("separator", None, "The string between the ids of --history, e.g. ',' or 'tab' "
                    "(default: runs of whitespace).")
flags.DEFINE_string("history_file", None, "A UTF-8 file of raw item ids, oldest first, one a line, with "
                    "backslash, tab, line feed and carriage return escaped as \\\\ \\t \\n \\r (as in "
                    "export/vocab.txt); a byte-order mark, CRLF line ends and blank lines are fine.")
flags.DEFINE_string("titles", None, "Optional movies.dat-style file giving a title per raw item id.")
flags.DEFINE_string("id_map", None, "Optional 'run_id title_id' file (plain or .gz) when --titles uses other ids, "
                    "e.g. ../shared/datasets/ml-1m/sas_to_original_items.txt.gz for runs on ml-1m.txt.gz.")
flags.mark_flag_as_required("model_dir")
FLAGS = flags.FLAGS


def command_line_text(value: str, flag: str) -> str:
    """`value` of `--flag` read as UTF-8, whatever the locale Python decoded the command line with.

    Raises:
        ValueError: when the command-line bytes are not UTF-8.
    """
    try:
        return os.fsencode(value).decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"--{flag} is not UTF-8 text ({error.reason} at byte {error.start})") from None


def split_history(text: str, separator: str | None) -> list[str]:
    """The ids of `text`, split at `separator` ("tab" for a tab; None: runs of whitespace), empty ones dropped."""
    pieces = text.split() if separator is None else text.split("\t" if separator == "tab" else separator)
    return [piece for piece in pieces if piece]


def read_history_file(path: str) -> list[str]:
    """The ids of a --history_file: one escaped id a line, UTF-8 with or without byte-order mark.

    Line ends may be LF, CRLF or CR (a carriage return inside an id is escaped); blank lines are skipped.

    Raises:
        FileNotFoundError: when `path` is missing.
        ValueError: for text that is not UTF-8 or a malformed escape, naming `path`.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--history_file {path}: no such file")
    try:
        with open(path, encoding="utf-8-sig") as handle:
            lines = handle.read().split("\n")
    except UnicodeDecodeError as error:
        raise ValueError(f"--history_file {path} is not UTF-8 text ({error.reason} at byte {error.start})") from None
    return [unescape_id(line, path, number) for number, line in enumerate(lines, start=1) if line]


def read_history(optional: bool = False) -> tuple[list[str], str]:
    """The history ids from --history or --history_file, and the flag they came from.

    Args:
        optional: an empty history is allowed (a model that serves users by id).

    Raises:
        ValueError: unless exactly one of the two is given (at most one when `optional`), or for
            --separator without --history.
    """
    if FLAGS.history is not None and FLAGS.history_file is not None or (
            not optional and FLAGS.history is None and FLAGS.history_file is None):
        raise ValueError("give exactly one of --history and --history_file")
    if FLAGS.history is None and FLAGS.history_file is None:
        return [], "--history"
    if FLAGS.history_file is not None:
        if FLAGS.separator is not None:
            raise ValueError("--separator applies to --history only; --history_file holds one id a line")
        return read_history_file(FLAGS.history_file), "--history_file"
    separator = None if FLAGS.separator is None else command_line_text(FLAGS.separator, "separator")
    return split_history(command_line_text(FLAGS.history, "history"), separator), "--history"


def _run() -> None:
    from bert4rec_tf.export.recommender import Recommender

    sys.stdout.reconfigure(errors="backslashreplace")  # any id prints, whatever the terminal's encoding
    recommender = Recommender(os.path.join(FLAGS.model_dir, "export"))
    user = None if FLAGS.user is None else command_line_text(FLAGS.user, "user")
    recommender.check_users(None if user is None else [user], 1, "--user")
    history, source = read_history(optional=recommender.users is not None)
    unknown = recommender.unknown_ids(history, source)
    if unknown:
        print(f"unknown ids (ignored): {', '.join(repr(item) for item in unknown)}", file=sys.stderr)
    if FLAGS.id_map and not FLAGS.titles:
        raise ValueError("--id_map maps ids to those of --titles; give --titles too")
    titles = read_titles(FLAGS.titles) if FLAGS.titles else {}
    id_map = read_id_map(FLAGS.id_map) if FLAGS.id_map else None
    [top] = recommender.recommend([history], users=None if user is None else [user])
    for rank, (item, score) in enumerate(top, start=1):
        print(f"{rank:2d}. {escape_id(item):>12}  {score:8.3f}  {title_of(item, titles, id_map)}".rstrip())


def main() -> None:
    """The `bert4rec-recommend` command (also `python run_scripts/recommend.py` in a checkout)."""
    cli.run_absl_command(_run, __name__)


if __name__ == "__main__":
    main()
