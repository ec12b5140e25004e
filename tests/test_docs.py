"""README.md and docs/ (every .md under it) agree with the command-line tools in run_scripts/.

A command line names its tool as `run_scripts/<name>.py` or as the installed command
`bert4rec-<name>` (dashes for underscores; `setup.cfg` maps each to the module of the same name).

- Every `--flag` written after a script's name in a command line (a code block or an inline code span)
  is a flag of that script (or absl's `--flagfile`, for an absl script), and so is every flag of a
  flag table under a heading naming the script.
- Every flag a script defines is documented: in a command line of that script, or in a section whose
  heading names the script. Adding a flag therefore only needs its line in the script's flag table.
- A flag table (`| flag | default | ... |`) names each default the code has as a code literal, and
  names none (a single literal) where the code has none.
- Every ```bash command that runs a run_scripts/*.py script parses: absl scripts through absl's flag
  parser (required flags and enum values checked), argparse scripts through their own parser. Nothing
  is run: one subprocess imports the scripts without running their main and parses the commands. A
  planted command with a misspelt flag must fail to parse there, so the check is known to bite.
- Relative links and images point at files that exist, and the README stays at most 250 lines.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT_DIR = ROOT / "run_scripts"
SCRIPTS = sorted(path.stem for path in SCRIPT_DIR.glob("*.py"))
README_MAX_LINES = 250
# Shell words that end a command.
_OPERATORS = {"&&", "||", "|", ";", "&", "(", ")"}
_FLAG = re.compile(r"--([A-Za-z][\w-]*)")


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@dataclasses.dataclass
class Command:
    """One command line of a script found in a Markdown file."""

    script: str
    args: list[str]
    where: str  # file:line
    runnable: bool  # from a ```bash block: it must parse


@dataclasses.dataclass
class Section:
    """The text under one heading, up to the next heading of the same or a higher level."""

    heading: str
    text: str
    where: str


def _script_of(word: str) -> str | None:
    """The run_scripts/ script a command word names: `.../<name>.py` or the installed `bert4rec-<name>`."""
    match = re.search(r"(?:^|/)(\w+)\.py$", word) or re.search(r"(?:^|/)bert4rec-([a-z][a-z-]*)$", word)
    name = match.group(1).replace("-", "_") if match else None
    return name if name in SCRIPTS else None


def _words(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # an unbalanced quote in prose code: fall back to spaces
        return line.split()


def commands_in(line: str, where: str, runnable: bool) -> list[Command]:
    """The script commands of one shell line: the words after a script's name up to a shell operator."""
    found: list[Command] = []
    for word in _words(line):
        script = _script_of(word)
        if script:
            found.append(Command(script, [], where, runnable))
        elif word in _OPERATORS:
            if found:
                found.append(Command("", [], where, False))  # words after an operator belong to no script
        elif found:
            found[-1].args.append(word)
    for command in found:
        # absl reads a --flagfile as it parses: the file is one an earlier command writes (a tuning
        # study's best.flags, whose format tests/tuning checks), so such a command is not parsed here.
        if any(argument.startswith("--flagfile") for argument in command.args):
            command.runnable = False
    return [command for command in found if command.script]


def parse_markdown(path: Path) -> tuple[list[Command], list[Section]]:
    """The script commands (code blocks and inline code) and the heading sections of one file."""
    name = path.relative_to(ROOT)
    commands: list[Command] = []
    headings: list[tuple[int, str, int]] = []  # (level, text, line index)
    lines = path.read_text(encoding="utf-8").split("\n")
    fence, block, block_start = None, [], 0
    for index, line in enumerate(lines):
        stripped = line.strip()
        if fence is not None:
            if stripped.startswith("```"):
                logical, first = "", block_start
                for number, text in enumerate(block, start=block_start + 1):
                    first = first if logical else number
                    if text.endswith("\\"):
                        logical += text[:-1] + " "
                        continue
                    commands += commands_in(logical + text, f"{name}:{first}", fence == "bash")
                    logical = ""
                fence = None
            else:
                block.append(line)
            continue
        if stripped.startswith("```"):
            fence, block, block_start = stripped[3:].strip().lower(), [], index + 1
            continue
        heading = re.match(r"(#+)\s+(.*)", line)
        if heading:
            headings.append((len(heading.group(1)), heading.group(2), index))
        for span in re.findall(r"`([^`]+)`", line):
            commands += commands_in(span, f"{name}:{index + 1}", False)
    sections = []
    for position, (level, text, start) in enumerate(headings):
        end = next((line for lvl, _, line in headings[position + 1:] if lvl <= level), len(lines))
        sections.append(Section(text, "\n".join(lines[start + 1:end]), f"{name}:{start + 1}"))
    return commands, sections


def flag_tables(section: Section) -> list[tuple[str, str, str]]:
    """(flag, default cell, where) of every row of the section's tables headed `| flag | default |`."""
    rows, in_table = [], False
    for line in section.text.split("\n"):
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) >= 2 and cells[0].lower() == "flag" and cells[1].lower() == "default":
            in_table = True
        elif not cells:
            in_table = False
        elif in_table and not set(cells[0]) <= set("-: "):
            for flag in _FLAG.findall(cells[0])[:1]:
                rows.append((flag, cells[1], section.where))
    return rows


@pytest.fixture(scope="module")
def docs():
    commands: list[Command] = []
    sections: list[Section] = []
    for path in doc_files():
        found, headed = parse_markdown(path)
        commands += found
        sections += headed
    return commands, sections


def _probe_request(commands: list[Command]) -> dict[str, list[list[str]]]:
    request: dict[str, list[list[str]]] = {script: [] for script in SCRIPTS}
    for command in commands:
        if command.runnable:
            request[command.script].append(command.args)
    return request


# A command that must not parse: appended after the documented ones (its error is the script's last).
PLANTED_BAD_COMMAND = ("train", ["--datset", "beauty"])


@pytest.fixture(scope="module")
def probed(docs):
    """{script: {"flags": {name: default as text or None}, "bools": [...], "errors": [one per ```bash command,
    then the planted one's for its script]}}."""
    request = _probe_request(docs[0])
    request[PLANTED_BAD_COMMAND[0]].append(PLANTED_BAD_COMMAND[1])
    result = subprocess.run([sys.executable, "-c", "import sys, tests.test_docs as t; t.probe_main()"],
                            input=json.dumps(request), capture_output=True, text=True, cwd=ROOT,
                            env=_probe_env(), timeout=300)
    assert result.returncode == 0, f"the probe failed:\n{result.stderr[-3000:]}"
    return json.loads(result.stdout.strip().split("\n")[-1])


def _probe_env() -> dict[str, str]:
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=os.pathsep.join(paths))


def _known(flag: str, info: dict) -> bool:
    if flag in info["flags"] or flag in ("help", "helpfull", "helpshort") or (flag == "flagfile" and info.get("absl")):
        return True
    return flag.startswith("no") and flag[2:] in info["bools"]  # absl's --noFLAG for a boolean


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; keep it at most {README_MAX_LINES}"


def test_relative_links_exist():
    missing = []
    for path in doc_files():
        text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            if not (path.parent / target.split("#")[0]).exists():
                missing.append(f"{path.relative_to(ROOT)}: {target}")
    assert not missing, "links to missing files:\n" + "\n".join(missing)


def _flag_words(args: list[str]) -> list[str]:
    """The words of a command that name a flag (`--flag`, `--flag=value`, `[--flag]`); a quoted value
    with spaces, such as `--extra "--batch_size 8"`'s, names none of the command's own."""
    return [word for word in args if word.startswith(("--", "[--")) and not any(c.isspace() for c in word)]


def test_documented_flags_exist(docs, probed):
    commands, sections = docs
    wrong = [f"{command.where}: {command.script}.py has no --{flag}"
             for command in commands for word in _flag_words(command.args)
             for flag in _FLAG.findall(word)[:1] if not _known(flag, probed[command.script])]
    for section in sections:
        for script in _scripts_named(section.heading):
            wrong += [f"{where}: the flag table of {script}.py lists --{flag}, which it does not define"
                      for flag, _, where in flag_tables(section) if not _known(flag, probed[script])]
    assert not wrong, "\n".join(wrong)


def _scripts_named(heading: str) -> list[str]:
    return [script for script in SCRIPTS if re.search(rf"\b{script}\.py\b", heading)]


def test_every_flag_is_documented(docs, probed):
    commands, sections = docs
    documented = {script: set() for script in SCRIPTS}
    for command in commands:
        for word in _flag_words(command.args):
            documented[command.script].update(_FLAG.findall(word)[:1])
    for section in sections:
        for script in _scripts_named(section.heading):
            documented[script].update(_FLAG.findall(section.text))
    missing = [f"{script}.py --{flag}" for script in SCRIPTS for flag in sorted(probed[script]["flags"])
               if flag not in documented[script]]
    assert not missing, ("flags documented nowhere (add each to the flag table under a heading naming its "
                         "script, in README.md or docs/*.md):\n" + "\n".join(missing))


def _same_default(written: str, actual: str) -> bool:
    """Whether a documented default names the code's: the same text, number or on/off list."""
    def normal(text: str) -> list[str]:
        return [{"on": "true", "off": "false"}.get(item.strip().lower(), item.strip()) for item in text.split(",")]

    if normal(written) == normal(actual):
        return True
    try:
        return float(written) == float(actual)
    except ValueError:
        return False


def test_documented_defaults_match(docs, probed):
    """A flag table's default cell names the code's default as a code literal; a flag without a default
    (None, or empty) has no single literal there, only words such as "none" or "required"."""
    _, sections = docs
    wrong = []
    for section in sections:
        for script in _scripts_named(section.heading):
            for flag, cell, where in flag_tables(section):
                if flag not in probed[script]["flags"]:
                    continue  # reported by test_documented_flags_exist
                actual = probed[script]["flags"][flag]
                literals = re.findall(r"`([^`]*)`", cell)
                if actual:
                    ok = any(_same_default(literal, actual) for literal in literals)
                else:
                    ok = not re.fullmatch(r"`[^`]*`", cell)
                if not ok:
                    wrong.append(f"{where}: {script}.py --{flag} is documented with default {cell!r}, "
                                 f"the code has {actual!r}")
    assert not wrong, "\n".join(wrong)


def test_bash_commands_parse(docs, probed):
    commands = [command for command in docs[0] if command.runnable]
    assert commands, "no ```bash command of a run_scripts/*.py script found"
    seen = {script: 0 for script in SCRIPTS}
    failures = []
    for command in commands:
        error = probed[command.script]["errors"][seen[command.script]]
        seen[command.script] += 1
        if error:
            failures.append(f"{command.where}: {command.script}.py {shlex.join(command.args)}\n    {error}")
    assert not failures, "documented commands that do not parse:\n" + "\n".join(failures)


def test_a_planted_command_that_does_not_parse_is_caught(probed):
    script, args = PLANTED_BAD_COMMAND
    error = probed[script]["errors"][-1]
    assert error and "datset" in error, f"bert4rec-{script} {' '.join(args)} parsed: {error!r}"
    assert commands_in(f".venv/bin/bert4rec-{script} {' '.join(args)}", "planted", True)[0].script == script


# The probe: runs in its own process (absl keeps its flags in one global registry, and the scripts
# import TensorFlow), reads {script: [args, ...]} on stdin and prints one JSON line. A script's flags
# are those it defines on import; a script that defines them in `main` (absl) or builds an argparse
# parser there has its `main` called with `absl.app.run` and `parse_args` replaced by a stop, so
# nothing runs.

class _Stop(Exception):
    """Raised in place of `absl.app.run` or `ArgumentParser.parse_args`; carries the parser, if any."""

    def __init__(self, parser=None):
        super().__init__("stopped before running")
        self.parser = parser


def _text(value) -> str | None:
    """A default as the docs write it: None stays None, booleans lower case, lists comma-separated."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return ",".join(_text(item) for item in value)
    return str(value)


def _load(script: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_docs_probe_{script}", SCRIPT_DIR / f"{script}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # absl names the module that defines each flag from sys.modules
    spec.loader.exec_module(module)  # __name__ is not "__main__": main does not run
    return module


def _stopped_main(script: str, module):
    """The argparse parser `module.main` builds, or None when it reaches `absl.app.run` first."""
    import argparse
    from unittest import mock

    def stop_parse(self, *args, **kwargs):
        raise _Stop(self)

    def stop_run(*args, **kwargs):
        raise _Stop()

    main = getattr(module, "main", None)
    if main is None:
        raise RuntimeError(f"{script}.py defines no flags on import and has no main()")
    with mock.patch.object(argparse.ArgumentParser, "parse_args", stop_parse), \
            mock.patch("absl.app.run", stop_run), mock.patch.object(sys, "argv", [f"{script}.py"]):
        try:
            main([])
        except TypeError:  # a main() without argv, as console entry points have
            try:
                main()
            except _Stop as stop:
                return stop.parser
        except _Stop as stop:
            return stop.parser
    raise RuntimeError(f"{script}.py: main() returned without parsing arguments")


def _probe_absl(script: str, added: set[str], commands: list[list[str]]) -> dict:
    from absl import flags

    values = flags.FLAGS
    own = {name for name, flag in values._flags().items() if name == flag.name  # not the short names
           and values.find_module_defining_flag(name, "").startswith(("bert4rec_tf", "_docs_probe_"))}
    errors = []
    for args in commands:
        values.unparse_flags()
        try:
            rest = values([f"{script}.py", *args], known_only=False)
            errors.append(f"unexpected positional arguments {rest[1:]}" if rest[1:] else None)
        except flags.Error as error:
            errors.append(f"{type(error).__name__}: {error}")
    values.unparse_flags()
    info = {"flags": {name: _text(values[name].default) for name in sorted(own)},
            "bools": sorted(name for name in own if isinstance(values[name], flags.BooleanFlag)),
            "errors": errors, "absl": True}
    for name in added:  # the next script defines its own
        delattr(values, name)
    return info


def _probe_argparse(parser, commands: list[list[str]]) -> dict:
    import contextlib
    import io

    options = {option[2:]: action for action in parser._actions for option in action.option_strings
               if option.startswith("--") and option not in ("--help", "--helpfull")}
    errors = []
    for args in commands:
        stderr = io.StringIO()
        try:
            with contextlib.redirect_stderr(stderr):
                parser.parse_args(args)
            errors.append(None)
        except SystemExit:
            errors.append(stderr.getvalue().strip().splitlines()[-1])
    return {"flags": {name: _text(action.default) for name, action in options.items()}, "bools": [],
            "errors": errors}


def probe_main() -> None:
    from absl import flags

    import bert4rec_tf.cli  # noqa: F401  (its --debug is every absl script's)

    request = json.loads(sys.stdin.read())
    report = {}
    for script, commands in request.items():
        before = set(flags.FLAGS)
        module = _load(script)
        parser = None if set(flags.FLAGS) - before else _stopped_main(script, module)
        added = set(flags.FLAGS) - before
        report[script] = _probe_absl(script, added, commands) if added else _probe_argparse(parser, commands)
    print(json.dumps(report))
