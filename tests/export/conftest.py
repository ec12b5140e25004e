"""Tiny exported runs shared by the export tests: an ASCII catalogue and a Unicode one."""

from __future__ import annotations

import os

import numpy as np
import pytest

from tests.conftest import family_config
from bert4rec_tf.constants import vocab_size
from bert4rec_tf.export.saved_model import export_saved_model
from bert4rec_tf.models import BERT4Rec
from tests.conftest import import_blocker

# The start of a script run in a fresh process: importing bert4rec_tf fails there, then TensorFlow.
WITHOUT_PACKAGE = import_blocker("bert4rec_tf") + "import json\nimport tensorflow as tf\n"
MAX_LEN = 6
ITEMS = [f"i{k}" for k in range(1, 31)]
# Fewer than 10 items, each awkward for some file format, command line or terminal.
UNICODE_ITEMS = ["é", "商品", "a\tb", "x y", "1,2", "🙂", "back\\slash", "new\nline"]


def export_tiny(run_dir: str, items: list[str], max_len: int = MAX_LEN) -> BERT4Rec:
    """Exports an untrained one-layer model (hidden size 8) over `items` into `run_dir`/export.

    Returns:
        The exported Keras model, to compare the served scores with.
    """
    model = BERT4Rec(family_config(vocab_size=vocab_size(len(items)), max_len=max_len, hidden_size=8, num_heads=2,
                                 intermediate_size=16, num_layers=1))
    model.build()
    export_saved_model(model, np.array(items), os.path.join(run_dir, "export"))
    return model


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """(model, run folder) of a 30-item catalogue i1..i30."""
    run_dir = str(tmp_path_factory.mktemp("tiny_run"))
    return export_tiny(run_dir, ITEMS), run_dir


@pytest.fixture(scope="session")
def unicode_run(tmp_path_factory):
    """(model, run folder) of the 8 `UNICODE_ITEMS`."""
    run_dir = str(tmp_path_factory.mktemp("unicode_run"))
    return export_tiny(run_dir, UNICODE_ITEMS), run_dir
