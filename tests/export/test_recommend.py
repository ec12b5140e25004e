"""run_scripts/recommend.py over an exported run: history sources, unknown ids, Unicode, bad input."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bert4rec_tf.data.id_files import escape_id
from tests.conftest import REPO
from tests.export.conftest import UNICODE_ITEMS

# Each check starts the recommend command (a new process importing TensorFlow): slow checks.
pytestmark = pytest.mark.slow


def recommend(run_dir: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, os.path.join(REPO, "run_scripts", "recommend.py"), "--model_dir", run_dir,
                           *args], capture_output=True, text=True, timeout=300, env=env)


def printed_ids(stdout: str) -> list[str]:
    """The ids of the ranked lines `NN. <id>  <score>`, in rank order."""
    lines = [line for line in stdout.splitlines() if line[:2].strip().isdigit() and line[2:4] == ". "]
    assert [int(line[:2]) for line in lines] == list(range(1, len(lines) + 1)), stdout
    return [line[4:].rsplit(None, 1)[0].strip() for line in lines]


def test_history_file_with_bom_crlf_and_escapes_names_the_unknown_ids(unicode_run, tmp_path):
    _, run_dir = unicode_run
    history = tmp_path / "history.txt"
    history.write_bytes("é\r\na\\tb\r\n\r\nnope\r\nnew\\nline\r\n".encode("utf-8-sig"))
    result = recommend(run_dir, "--history_file", str(history))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "unknown ids (ignored): 'nope'\n" in result.stderr
    expected = {escape_id(item) for item in UNICODE_ITEMS} - {"é", "a\\tb", "new\\nline"}
    ids = printed_ids(result.stdout)
    assert len(ids) == 5 and set(ids) == expected  # only the 5 unseen items: no empty slot is printed


def test_separator_and_ids_outside_ascii_work_under_an_ascii_locale(unicode_run):
    _, run_dir = unicode_run
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONIOENCODING", "LANG", "LC_CTYPE")}
    env.update(LC_ALL="C", PYTHONUTF8="0", PYTHONCOERCECLOCALE="0")  # ASCII command line and stdout
    result = recommend(run_dir, "--history", "商品\t1,2\tx y", "--separator", "tab", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "unknown ids" not in result.stderr
    assert sorted(printed_ids(result.stdout)) == sorted(["\\xe9", "a\\tb", "\\U0001f642", "back\\\\slash",
                                                         "new\\nline"])


@pytest.mark.parametrize("args, needle", [
    (["--history", "nope zzz"], "no id of --history is in {export}/vocab.txt: 'nope', 'zzz'"),
    (["--history", "é", "--history_file", "h.txt"], "give exactly one of --history and --history_file"),
    (["--history_file", "/nonexistent/h.txt"], "--history_file /nonexistent/h.txt: no such file"),
])
def test_bad_input_is_a_one_line_error(unicode_run, args, needle):
    _, run_dir = unicode_run
    result = recommend(run_dir, *args)
    assert result.returncode == 1, result.stdout
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: {needle.format(export=os.path.join(run_dir, 'export'))}"], result.stderr[-2000:]


def test_titles_through_an_id_map(unicode_run, tmp_path):
    _, run_dir = unicode_run
    titles = tmp_path / "movies.dat"
    titles.write_bytes("10::Amélie (2001)::Comedy\n20::Smile (1975)::Comedy\n".encode("iso-8859-1"))
    id_map = tmp_path / "map.txt"
    id_map.write_text("é 10\n\U0001f642 20\n", encoding="utf-8")
    result = recommend(run_dir, "--history", "商品", "--titles", str(titles), "--id_map", str(id_map))
    assert result.returncode == 0, result.stderr[-3000:]
    lines = {line[4:].split()[0]: line for line in result.stdout.splitlines() if line[2:4] == ". "}
    assert lines["é"].endswith("Amélie (2001)") and lines["\U0001f642"].endswith("Smile (1975)")
    assert sum(line.endswith(")") for line in lines.values()) == 2  # the others have no title
    without_titles = recommend(run_dir, "--history", "商品", "--id_map", str(id_map))
    assert without_titles.returncode == 1 and "give --titles too" in without_titles.stderr
