"""Registering the package's Keras classes, so that a saved `model.keras` loads."""

from __future__ import annotations

import importlib
import pkgutil


def register_keras_objects() -> None:
    """Registers the package's Keras classes: every module of the layers and the models (the families'
    too, which their Tasks import only when they build), the optimizer and its schedule.

    Example:
        >>> import keras
        >>> from bert4rec_tf.training.registration import register_keras_objects
        >>> register_keras_objects()
        >>> model = keras.saving.load_model("runs/ml-1m/model.keras", safe_mode=True)
    """
    from bert4rec_tf import layers, models
    from bert4rec_tf.training import optimization  # noqa: F401  (the optimizer and its schedule)

    for package in (layers, models):
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{package.__name__}.{module.name}")
