"""The shared layer check: config round trip, output shape, one fit step, .keras save and load."""

from __future__ import annotations

import inspect
from pathlib import Path

import keras
import numpy as np


def run_layer_test(
    layer_cls: type[keras.layers.Layer],
    init_kwargs: dict,
    inputs: np.ndarray,
    expected_output_shape: tuple[int, ...],
    tmp_path: Path,
    padding_mask: np.ndarray | None = None,
    unused_weights: tuple[str, ...] = (),
) -> keras.layers.Layer:
    """Checks a layer the same way for every layer of the package.

    1. `get_config` holds every constructor argument and `from_config` rebuilds an equal config.
    2. Inside a functional model (inputs and optional padding mask), the output has the
       expected shape.
    3. One `fit` step on random targets changes every trainable weight (nothing is cut off
       from the gradient).
    4. Saving to `.keras` and `keras.saving.load_model(..., safe_mode=True)` give identical
       outputs.

    Args:
        layer_cls: the layer class.
        init_kwargs: constructor arguments.
        inputs: one batch, [batch, ...].
        expected_output_shape: the output shape for `inputs`.
        tmp_path: a directory for the saved model.
        padding_mask: [batch, seq_len] passed as `padding_mask` when given.
        unused_weights: path endings of weights the layer holds but does not use (they must not
            train).

    Returns:
        The tested layer instance (trained one step).
    """
    layer = layer_cls(**init_kwargs)
    config = layer.get_config()
    arguments = [
        name
        for name, parameter in inspect.signature(layer_cls.__init__).parameters.items()
        if name != "self" and parameter.kind is not inspect.Parameter.VAR_KEYWORD
    ]
    assert set(arguments) <= set(config), f"missing from get_config: {set(arguments) - set(config)}"
    assert layer_cls.from_config(config).get_config() == config

    feature_input = keras.Input(shape=inputs.shape[1:], dtype=str(inputs.dtype), name="inputs")
    model_inputs = [feature_input]
    call_kwargs = {}
    data = [inputs]
    if padding_mask is not None:
        mask_input = keras.Input(shape=padding_mask.shape[1:], dtype="int32", name="padding_mask")
        model_inputs.append(mask_input)
        call_kwargs["padding_mask"] = mask_input
        data.append(padding_mask)
    model = keras.Model(model_inputs, layer(feature_input, **call_kwargs))

    outputs = model.predict(data, verbose=0)
    assert outputs.shape == expected_output_shape

    before = [variable.numpy().copy() for variable in layer.trainable_weights]
    assert before, "the layer has no trainable weights"
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-2), loss="mse")
    targets = np.random.default_rng(0).normal(size=outputs.shape).astype("float32")
    model.fit(data, targets, batch_size=len(inputs), epochs=1, verbose=0)
    for variable, old in zip(layer.trainable_weights, before):
        trained = bool(np.any(variable.numpy() != old))
        unused = variable.path.endswith(unused_weights) if unused_weights else False
        assert trained != unused, f"{variable.path}: trained {trained}"

    path = tmp_path / "layer_model.keras"
    model.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_array_equal(restored.predict(data, verbose=0), model.predict(data, verbose=0))
    return layer
