"""The user pages (README.md and every .md under docs/) speak of the package, not of the team's work.

- No absolute path of any machine (`/home/...`, `/tmp/...`, `C:\\...`; web addresses are not paths),
  and no path that leaves the checkout in a command (commands run from the checkout's root, so a
  `../` in a code span or block names a folder a user of the package does not have).
- No work history: none of the words of `HISTORY` (sessions, CI and virtual machines, who shared a
  machine, dates, commit hashes), except in a results report's provenance section ("Where each run
  comes from"), whose commits, dates and machines are the record. Link targets are addresses, not
  prose, and are not read. The run log is kept apart, in lab_notebook/.
- The README's ```bash commands run from a fresh clone: each program is the venv's Python or pip, or
  a command the package installs (setup.cfg), and every `--source_file` is a file of the checkout.
  That they parse against the real flag definitions is tests/test_docs.py's check.

Each check is a function of the checkout's root; the last tests plant an absolute path, a path
outside the checkout and a history sentence in a copy of the pages and require each to be found.
"""

from __future__ import annotations

import configparser
import re
import shlex
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Work history that user pages do not hold: (what it is, pattern).
HISTORY = [
    # a work session, not GRU4Rec's sessions of a user's items
    ("a session", re.compile(r"\b(this|that|last|next|previous|earlier|later|the (first|second|"
                             r"third|\w+th|same|last|next|previous))\s+sessions?\b|\bsessions?\s+(of|on)\s+\d",
                             re.I)),
    ("CI", re.compile(r"\bCI\b")),
    ("a virtual machine", re.compile(r"\bvirtual machines?\b", re.I)),
    ("a time of day", re.compile(r"\b(?:the (?:night|morning|afternoon|evening|day) of|(?:this|last|that) "
                                 r"(?:night|morning|afternoon|evening|week)|yesterday|tonight)\b", re.I)),
    ("who shared a machine", re.compile(r"\b(?:on the other core|shared (?:the|a|its|their) machine|"
                                        r"beside (?:it|them) on the other)\b", re.I)),
    ("people and tickets", re.compile(r"\b(?:the lead|engineers?|teammates?|landed)\b|\bissues? #?\d+", re.I)),
    ("a date", re.compile(r"\b20\d\d-\d\d-\d\d\b")),
    ("a commit hash", re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b(?:\+changes)?")),
]
# An absolute path: after a space, quote, parenthesis, `=` or the line's start, `/` and two names or
# more, or one of the usual roots; a Windows drive. `~/` (the user's home) is a documented default.
_ABSOLUTE = re.compile(r"(?:^|(?<=[\s`'\"(=,]))(?:/[\w.+-]+(?:/[\w.+-]*)+|/(?:home|tmp|work|Users|usr|opt|mnt|"
                       r"var|root|srv|scratch|data)\b)|\b[A-Za-z]:\\\w", re.M)
_ADDRESS = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+")
_OUTSIDE = re.compile(r"(?:^|(?<=[\s`'\"(=,]))\.\./")
PROVENANCE = "## Where each run comes from"


def user_pages(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def _prose(text: str) -> str:
    """`text` without link targets and web addresses, and without a report's provenance section."""
    if PROVENANCE in text:
        start = text.index(PROVENANCE)
        following = re.search(r"^## ", text[start + len(PROVENANCE):], flags=re.M)
        text = text[:start] + (text[start + len(PROVENANCE) + following.start():] if following else "")
    return _ADDRESS.sub(" ", re.sub(r"\]\([^)\s]*\)", "]", text))


def _code(text: str) -> list[str]:
    """The fenced blocks and inline code spans of `text`."""
    blocks = re.findall(r"```[^\n]*\n(.*?)```", text, flags=re.S)
    rest = re.sub(r"```.*?```", "", text, flags=re.S)
    return blocks + re.findall(r"`([^`\n]+)`", rest)


def _found(root: Path, path: Path, text: str, match: re.Match, what: str) -> str:
    line = text.count("\n", 0, match.start()) + 1
    return f"{path.relative_to(root)}:{line}: {what}: {match.group(0)!r}"


def absolute_paths(root: Path) -> list[str]:
    found = []
    for path in user_pages(root):
        text = _ADDRESS.sub(lambda m: " " * len(m.group(0)), path.read_text(encoding="utf-8"))
        found += [_found(root, path, text, match, "absolute path") for match in _ABSOLUTE.finditer(text)]
    return found


def paths_outside_the_checkout(root: Path) -> list[str]:
    found = []
    for path in user_pages(root):
        for code in _code(path.read_text(encoding="utf-8")):
            found += [f"{path.relative_to(root)}: a path outside the checkout in {code.strip()[:120]!r}"
                      for _ in _OUTSIDE.finditer(code)][:1]
    return found


def history_words(root: Path) -> list[str]:
    found = []
    for path in user_pages(root):
        text = _prose(path.read_text(encoding="utf-8"))
        for what, pattern in HISTORY:
            found += [_found(root, path, text, match, what) for match in pattern.finditer(text)]
    return found


def installed_commands(root: Path) -> set[str]:
    parser = configparser.ConfigParser()
    parser.read(root / "setup.cfg", encoding="utf-8")
    lines = parser["options.entry_points"]["console_scripts"].strip().split("\n")
    return {line.split("=")[0].strip() for line in lines if line.strip()}


def readme_commands(root: Path) -> list[list[str]]:
    """The shell commands of the README's ```bash blocks, each as its words (continuation lines joined,
    split at `&&`)."""
    text = (root / "README.md").read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").split("\n"):
            for part in line.split("&&"):
                if part.strip() and not part.strip().startswith("#"):
                    commands.append(shlex.split(part))
    return commands


def fresh_clone_problems(root: Path) -> list[str]:
    """What in the README's commands a fresh clone lacks."""
    known = installed_commands(root)
    problems = []
    for words in readme_commands(root):
        program = words[0]
        name = program.removeprefix(".venv/bin/")
        if program == "python3" and words[1:3] == ["-m", "venv"]:
            continue
        if program not in (".venv/bin/python", ".venv/bin/pip", ".venv/bin/tensorboard") and (
                not program.startswith(".venv/bin/") or name not in known):
            problems.append(f"{shlex.join(words)}: {program} is neither the venv's Python or pip nor a command "
                            "the package installs")
        for index, word in enumerate(words):
            if word == "--source_file" and index + 1 < len(words):
                source = words[index + 1].split("=")[-1]
                if not (root / source).is_file():
                    problems.append(f"{shlex.join(words)}: --source_file {source} is not a file of the checkout")
    return problems


def test_user_pages_name_no_absolute_path():
    assert not absolute_paths(ROOT), "\n".join(absolute_paths(ROOT))


def test_user_pages_name_no_folder_outside_the_checkout():
    assert not paths_outside_the_checkout(ROOT), "\n".join(paths_outside_the_checkout(ROOT))


def test_user_pages_hold_no_work_history():
    found = history_words(ROOT)
    assert not found, "work history in user pages (the run log belongs in lab_notebook/):\n" + "\n".join(found)


def test_the_readme_commands_run_from_a_fresh_clone():
    assert readme_commands(ROOT), "README.md has no ```bash command"
    assert not fresh_clone_problems(ROOT), "\n".join(fresh_clone_problems(ROOT))


def _copy_pages(tmp_path: Path) -> Path:
    copy = tmp_path / "checkout"
    shutil.copytree(ROOT / "docs", copy / "docs", ignore=shutil.ignore_patterns("*.png", "*.json", "*.csv"))
    for name in ("README.md", "setup.cfg"):
        shutil.copy(ROOT / name, copy / name)
    (copy / "docs" / "examples").mkdir(exist_ok=True)
    shutil.copy(ROOT / "docs" / "examples" / "interactions.csv", copy / "docs" / "examples" / "interactions.csv")
    return copy


def test_a_planted_absolute_path_is_found(tmp_path):
    copy = _copy_pages(tmp_path)
    assert not absolute_paths(copy)
    with open(copy / "docs" / "data.md", "a", encoding="utf-8") as page:
        page.write("\nThe prepared data is in /home/alice/bert4rec/datasets/ml-1m.\n")
    found = absolute_paths(copy)
    assert len(found) == 1 and found[0].startswith("docs/data.md:") and "/home/alice/bert4rec" in found[0]


def test_a_planted_folder_outside_the_checkout_is_found(tmp_path):
    copy = _copy_pages(tmp_path)
    readme = copy / "README.md"
    text = readme.read_text(encoding="utf-8")
    readme.write_text(text.replace("--source_file docs/examples/interactions.csv --stats",
                                   "--source_file ../shared/datasets/mine.csv --stats", 1), encoding="utf-8")
    assert paths_outside_the_checkout(copy) and paths_outside_the_checkout(copy)[0].startswith("README.md:")
    assert any("../shared/datasets/mine.csv is not a file of the checkout" in problem
               for problem in fresh_clone_problems(copy))


def test_a_planted_history_sentence_is_found(tmp_path):
    copy = _copy_pages(tmp_path)
    assert not history_words(copy)
    with open(copy / "docs" / "training.md", "a", encoding="utf-8") as page:
        page.write("\nThis recipe was chosen in the third session of 2026-11-25 (4383a67), on the CI machine,\n"
                   "with a test run on the other core.\n")
    found = {line.split(": ")[1] for line in history_words(copy)}
    assert found == {"a session", "a date", "a commit hash", "CI", "who shared a machine"}, found
    # A report's provenance section may name commits, dates and machines; its discussion may not.
    report = copy / "docs" / "results" / "table2.md"
    text = report.read_text(encoding="utf-8")
    assert "4383a67" in text[text.index(PROVENANCE):] and not any("results/table2.md" in line
                                                                 for line in history_words(copy))
