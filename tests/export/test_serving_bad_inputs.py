"""Inputs of the wrong rank or batch fail at the serving boundary with a message naming the input."""

from __future__ import annotations

import os

import pytest
import tensorflow as tf


@pytest.fixture(scope="module")
def served(tiny_run):
    return tf.saved_model.load(os.path.join(tiny_run[1], "export"))


@pytest.mark.parametrize("signature, inputs, message", [
    ("serving_default", {"history": ["i1", "i2"]},
     r"history must be a string matrix \[batch, length\]\] \[got shape\] \[2\]"),
    ("serving_default", {"history": [[["i1", "i2"]]]},
     r"history must be a string matrix \[batch, length\]\] \[got shape\] \[1 1 2\]"),
    ("score_candidates", {"history": ["i1", "i2"], "candidates": [["i3"]]},
     r"history must be a string matrix \[batch, length\]"),
    ("score_candidates", {"history": [["i1", "i2"]], "candidates": ["i3"]},
     r"candidates must be a string matrix \[batch, num_candidates\]"),
    ("score_candidates", {"history": [["i1"], ["i2"]], "candidates": [["i3", "i4"]]},
     r"candidates must have one row per history row\] \[got shape\] \[1 2\]"),
])
def test_signatures_reject_a_wrong_rank_or_batch_by_name(served, signature, inputs, message):
    arguments = {name: tf.constant(value) for name, value in inputs.items()}
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        served.signatures[signature](**arguments)


def test_restored_functions_reject_a_vector_history_when_binding(served):
    with pytest.raises(TypeError, match=r"Can not cast TensorSpec\(shape=\(2,\), dtype=tf.string, name='history'\) "
                                        r"to TensorSpec\(shape=\(None, None\)"):
        served.serving_default(tf.constant(["i1", "i2"]))
