"""The wheel holds the whole package: every folder of Python files is a package that setup.cfg finds.

`packages = find:` lists only folders with an `__init__.py`; a folder without one is left out of the
wheel (and of a non-editable install), while an editable install still imports it as a namespace
package, so only a check like this one catches it. CI also builds the wheel and runs the commands
from a fresh environment (.ci/run).
"""

from __future__ import annotations

import configparser
import os
from pathlib import Path

import setuptools

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "bert4rec_tf"


def setup_cfg() -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg", encoding="utf-8")
    return parser


def python_folders() -> list[str]:
    """The dotted names of the folders under bert4rec_tf/ that hold .py files."""
    folders = {path.parent for path in PACKAGE.rglob("*.py") if "__pycache__" not in path.parts}
    return sorted(".".join(folder.relative_to(ROOT).parts) for folder in folders)


def found_packages() -> list[str]:
    """The packages setup.cfg's `packages = find:` lists, with its own include patterns."""
    cfg = setup_cfg()
    assert cfg["options"]["packages"].strip() == "find:"
    include = [pattern.strip() for pattern in cfg["options.packages.find"]["include"].replace("\n", ",").split(",")
               if pattern.strip()]
    return sorted(setuptools.find_packages(where=str(ROOT), include=include))


def test_every_folder_of_python_files_has_an_init():
    missing = [name for name in python_folders() if not (ROOT / name.replace(".", "/") / "__init__.py").is_file()]
    assert not missing, f"folders without __init__.py (left out of the wheel): {missing}"


def test_setup_cfg_finds_every_folder_of_python_files():
    left_out = sorted(set(python_folders()) - set(found_packages()))
    assert not left_out, f"setup.cfg's packages = find: leaves out {left_out}"


def test_every_console_script_is_in_a_found_package():
    packages = set(found_packages())
    for line in setup_cfg()["options.entry_points"]["console_scripts"].strip().splitlines():
        command, target = (part.strip() for part in line.split("="))
        module = target.split(":")[0]
        assert module.rpartition(".")[0] in packages, f"{command}: {module} is not in a packaged folder"
        assert (ROOT / (module.replace(".", "/") + ".py")).is_file(), f"{command}: {module} does not exist"


def test_register_keras_objects_registers_every_models_classes():
    """A fresh process that registers the package's Keras objects can load any family's model.keras:
    building every registered family's model afterwards registers nothing new (GRU4Rec's class,
    imported only by its Task, was missing, so `evaluate.py` failed on a finished GRU4Rec run)."""
    import subprocess
    import sys

    script = """
import keras
from bert4rec_tf.training.registration import register_keras_objects
register_keras_objects()
registered = set(keras.saving.get_custom_objects())
from bert4rec_tf.tasks import TASKS
from tests.models.test_relatives import build_model, config
for name, task in TASKS.items():
    build_model(config(name))
missing = sorted(set(keras.saving.get_custom_objects()) - registered)
assert not missing, missing
print("ok", len(registered))
"""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    result = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.startswith("ok"), result.stderr[-2000:]
