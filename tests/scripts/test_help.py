"""Every command answers --help and --helpfull at once: status 0, its description and flags, no
TensorFlow loaded (so none of its start-up logs); and each has a console entry point.

run_scripts/benchmark.py is left out: it still imports TensorFlow before parsing its arguments.
"""

from __future__ import annotations

import ast
import configparser
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO, import_blocker

COMMANDS = ("train", "prepare_data", "evaluate", "recommend", "reproduce", "compare_runs", "count_params",
            "scale_check", "large_catalogue", "run_notebook", "benchmark", "tune", "movielens_features")

# Runs a run_scripts/ wrapper as `python run_scripts/<name>.py <flag>` would, then reports on stderr
# whether TensorFlow or Keras was imported.
PROBE = """
import runpy, sys
sys.argv = [sys.argv[1], sys.argv[2]]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
    code = 0
except SystemExit as exit:
    code = exit.code or 0
loaded = sorted(name for name in ("tensorflow", "keras") if name in sys.modules)
print("probe: loaded", ",".join(loaded) or "nothing", file=sys.stderr)
sys.exit(code)
"""


def _parse(module: str) -> ast.Module:
    with open(os.path.join(REPO, *module.split(".")) + ".py", encoding="utf-8") as handle:
        return ast.parse(handle.read())


def command_module(name: str) -> ast.Module:
    """The parsed source of the command bert4rec_tf/scripts/<name>.py, or of the module it takes its
    `main` from (an entry point of the experiments); importing it would define its flags here."""
    entry = _parse(f"bert4rec_tf.scripts.{name}")
    for node in entry.body:
        if isinstance(node, ast.ImportFrom) and any(alias.name == "main" for alias in node.names):
            return _parse(node.module)
    return entry


@pytest.mark.parametrize("flag", ["--help", "--helpfull"])
@pytest.mark.parametrize("name", COMMANDS)
def test_help_exits_0_without_tensorflow(name, flag):
    script = os.path.join(REPO, "run_scripts", f"{name}.py")
    result = subprocess.run([sys.executable, "-c", PROBE, script, flag], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "probe: loaded nothing\n"  # no TensorFlow log line, nothing imported
    assert ast.get_docstring(command_module(name)).splitlines()[0] in result.stdout
    if name in ("train", "prepare_data"):  # the shared data flags are listed with the command's own
        assert "--dataset" in result.stdout and "--source_file" in result.stdout


def test_every_command_has_a_console_entry_point():
    setup = configparser.ConfigParser()
    setup.read(os.path.join(REPO, "setup.cfg"))
    entries = dict(line.split(" = ") for line in setup["options.entry_points"]["console_scripts"].strip().splitlines())
    assert entries == {f"bert4rec-{name.replace('_', '-')}": f"bert4rec_tf.scripts.{name}:main" for name in COMMANDS}
    for name in COMMANDS:
        assert any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in command_module(name).body)
        with open(os.path.join(REPO, "run_scripts", f"{name}.py"), encoding="utf-8") as handle:
            assert f"from bert4rec_tf.scripts.{name} import main" in handle.read()


# Runs the train command with TensorFlow missing (its import fails, as without the cpu or gpu extra).
WITHOUT_TENSORFLOW = import_blocker("tensorflow") + """
import runpy
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_without_tensorflow_a_command_names_the_extras_in_one_line(tmp_path):
    source = tmp_path / "toy.txt"
    source.write_text("".join(f"{user} {item}\n" for user in range(1, 6) for item in range(1, 8)))
    script = os.path.join(REPO, "run_scripts", "train.py")
    result = subprocess.run([sys.executable, "-c", WITHOUT_TENSORFLOW, script, "--dataset", "custom",
                             "--source_file", str(source), "--data_dir", str(tmp_path / "data"),
                             "--model_dir", str(tmp_path / "run"), "--train_steps", "1"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: TensorFlow is not installed") and '".[cpu]"' in last and '".[gpu]"' in last, \
        result.stderr[-2000:]


def test_train_accepts_every_loss_a_registered_model_trains_with():
    from bert4rec_tf.tasks import TASKS

    script = os.path.join(REPO, "run_scripts", "train.py")
    result = subprocess.run([sys.executable, "-c", PROBE, script, "--helpfull"], capture_output=True, text=True,
                            timeout=120)
    accepted = result.stdout.split("  --loss: <", 1)[1].split(">", 1)[0].split("|")  # the flag's values
    assert {loss for task in TASKS.values() for loss in task.losses} <= set(accepted), accepted
