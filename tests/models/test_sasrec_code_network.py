"""SASRec with `model.code_network`: the network of the SASRec authors' code, against a NumPy reference (its
one fit step and save/reload run with every family's, in test_relatives.py)."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from bert4rec_tf.config import ExperimentConfig
from bert4rec_tf.tasks import validate
from tests.models.test_relatives import HISTORY, build_model, config

EPSILON = 1e-8  # the code's LayerNorm


@pytest.fixture(autouse=True)
def _seed():
    keras.utils.set_random_seed(11)


def code_model(**changes):
    model = build_model(config("sasrec", code_network=True, **changes))
    # Non-trivial LayerNorms and biases, so that the reference has to place each one.
    rng = np.random.default_rng(3)
    for variable in model.weights:
        if variable.path.endswith(("gamma", "beta", "bias")):
            variable.assign(variable.numpy() + rng.normal(0.0, 0.3, variable.shape).astype("float32"))
    return model


def weight(model, suffix: str) -> np.ndarray:
    matches = [v.numpy().astype(np.float64) for v in model.weights if v.path.endswith(suffix)]
    assert len(matches) == 1, (suffix, [v.path for v in model.weights])
    return matches[0]


def layer_norm(x, model, prefix):
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPSILON) * weight(model, f"{prefix}/gamma") + weight(model, f"{prefix}/beta")


def reference_output(model, items: np.ndarray) -> np.ndarray:
    """The code's forward pass (no dropout) over left-padded `items` [batch, n]: [batch, n, d]."""
    settings = model.model_config
    d, heads, n = settings.hidden_size, settings.num_heads, items.shape[1]
    mask = (items != 0).astype(np.float64)[:, :, None]
    table = weight(model, "item_embedding/embeddings")
    positions = weight(model, "position_embedding/embeddings")[settings.max_len - n:]
    x = (table[items] * np.sqrt(d) + positions[None]) * mask
    allowed = np.tril(np.ones((n, n), bool))[None] & (items != 0)[:, None, :]  # [batch, query, key]
    for block in range(settings.num_layers):
        name = f"transformer_block_{block}"
        q_in = layer_norm(x, model, f"{name}/attention_layer_norm")

        def project(inputs, which):
            return inputs @ weight(model, f"{name}/self_attention/{which}/kernel") + weight(
                model, f"{name}/self_attention/{which}/bias")

        q, k, v = project(q_in, "query"), project(x, "key"), project(x, "value")
        size = d // heads
        context = np.zeros_like(x)
        for h in range(heads):
            part = slice(h * size, (h + 1) * size)
            scores = np.einsum("bqc,bkc->bqk", q[..., part], k[..., part]) / np.sqrt(size)
            scores = np.where(allowed, scores, -1e9)
            probs = np.exp(scores - scores.max(-1, keepdims=True))
            probs /= probs.sum(-1, keepdims=True)
            context[..., part] = probs @ v[..., part]
        f = layer_norm(q_in + context, model, f"{name}/feed_forward_layer_norm")
        inner = np.maximum(f @ weight(model, f"{name}/feed_forward/intermediate/kernel")
                           + weight(model, f"{name}/feed_forward/intermediate/bias"), 0.0)
        x = (f + inner @ weight(model, f"{name}/feed_forward/output/kernel")
             + weight(model, f"{name}/feed_forward/output/bias")) * mask
    return layer_norm(x, model, "final_layer_norm")


def test_scores_match_the_numpy_reference_of_the_authors_code():
    model = code_model()
    items = np.asarray(model.history_inputs(HISTORY)["input_ids"])
    hidden = reference_output(model, items)
    expected = hidden[:, -1] @ weight(model, "item_embedding/embeddings").T
    np.testing.assert_allclose(np.asarray(model.score_next(HISTORY)), expected, rtol=1e-4, atol=1e-4)
    # Every real position of the sequence output, not only the last (the training loss reads them all).
    output = np.asarray(model.encode({"input_ids": items}))
    real = items != 0
    np.testing.assert_allclose(output[real], hidden[real], rtol=1e-4, atol=1e-4)


def test_the_code_network_differs_from_the_paper_network_in_exactly_its_weights():
    paths = {False: set(), True: set()}
    for code in paths:
        model = build_model(config("sasrec", code_network=code))
        paths[code] = {v.path.split("/", 1)[1] for v in model.weights}
    # No attention output projection and no input LayerNorm; a LayerNorm after the blocks.
    assert paths[False] - paths[True] == {
        "embedding/layer_norm/gamma", "embedding/layer_norm/beta",
        *(f"transformer_block_{b}/self_attention/output/{w}" for b in (0, 1) for w in ("kernel", "bias"))}
    assert paths[True] - paths[False] == {"final_layer_norm/gamma", "final_layer_norm/beta"}


def test_the_code_network_runs_whole_windows_and_refuses_packing():
    experiment = ExperimentConfig.for_family("sasrec")
    experiment.model = config("sasrec", code_network=True, padding_free="on")
    with pytest.raises(ValueError, match="padding_free=on cannot be used with --config code_network=true"):
        validate(experiment)
    model = build_model(config("sasrec", code_network=True, padding_free="auto"))
    model.fit_statistics([np.array([1, 2])] * 5)  # windows far less than half full: "auto" would pack
    assert not model.pack_positions
    items = np.asarray(model.history_inputs(HISTORY)["input_ids"])
    np.testing.assert_allclose(np.asarray(model.encode({"input_ids": items}))[items != 0],
                               reference_output(model, items)[items != 0], rtol=1e-4, atol=1e-4)
