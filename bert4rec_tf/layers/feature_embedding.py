"""The embedding of ids from their attributes: one table per attribute, pooled and summed."""

from __future__ import annotations

import keras
import numpy as np
from keras import ops

from bert4rec_tf.layers.initializers import kernel_initializer

KINDS = ("categorical", "multi", "numeric")


@keras.saving.register_keras_serializable(package="bert4rec_tf")
class FeatureEmbedding(keras.layers.Layer):
    """F[id] = sum over attributes a of the embedding of id's value of a, for ids of a vocabulary.

    Each attribute is one of
    - categorical: A_a[v] for the id's value index v (0, missing: a zero vector);
    - multi: the mean of A_a[v] over the id's value indices v > 0 (none: a zero vector), e.g. genres;
    - numeric: x w_a for the id's standardised number x (a learned direction w_a of d values).

    The attributes of every id (the arrays of `bert4rec_tf.data.features.encode`) are held as
    non-trainable weights, so a saved model carries them and serves from ids alone; the tables A_a and
    directions w_a train.

    Args:
        attributes: one dict per attribute: "name", "kind", and for categorical and multi ones
            "size" (values including index 0) and for multi ones "width" (most values of one id).
        rows: ids of the vocabulary (rows of every attribute array).
        hidden_size: d.
        values: the arrays, by attribute name (given when the layer is made, not saved in its
            config: the weights hold them).
        of: "item" or "user", whose attributes they are (`SequentialRecommender.set_attributes`).
        **kwargs: passed to `keras.layers.Layer`.
    """

    def __init__(self, attributes: list[dict], rows: int, hidden_size: int, values: dict | None = None,
                 of: str = "item", **kwargs):
        super().__init__(**kwargs)
        if of not in ("item", "user"):
            raise ValueError(f"of must be 'item' or 'user', got {of!r}")
        self.of = of
        for attribute in attributes:
            if attribute["kind"] not in KINDS:
                raise ValueError(f"attribute {attribute['name']!r} has kind {attribute['kind']!r}; kinds: {KINDS}")
        self.attributes = [dict(attribute) for attribute in attributes]
        self.rows = rows
        self.hidden_size = hidden_size
        self._initial_values = values

    def build(self, input_shape=None):
        self.value_tables, self.embeddings = {}, {}
        for attribute in self.attributes:
            name, kind = attribute["name"], attribute["kind"]
            shape = (self.rows, attribute["width"]) if kind == "multi" else (self.rows,)
            self.value_tables[name] = self.add_weight(
                name=f"{name}_values", shape=shape, dtype="float32" if kind == "numeric" else "int32",
                initializer="zeros", trainable=False)
            if kind == "numeric":
                self.embeddings[name] = self.add_weight(name=f"{name}_direction", shape=(self.hidden_size,),
                                                        initializer=kernel_initializer())
            else:
                self.embeddings[name] = self.add_weight(name=f"{name}_embeddings",
                                                        shape=(attribute["size"], self.hidden_size),
                                                        initializer=kernel_initializer())
        self.built = True
        if self._initial_values is not None:
            self.assign_values(self._initial_values)
            self._initial_values = None

    def assign_values(self, values: dict, extra_rows: int = 0) -> None:
        """Sets the attributes of every id: `values` by attribute name, the arrays of
        `bert4rec_tf.data.features.encode`; `extra_rows` ids after them (tokens a model adds after
        the vocabulary) get no attribute.

        Raises:
            ValueError: an attribute missing from `values`, or of another shape than the layer's.
        """
        if not self.built:
            self.build()
        for name, table in self.value_tables.items():
            if name not in values:
                raise ValueError(f"attribute {name!r} has no values (given: {', '.join(values) or 'none'})")
            array = np.asarray(values[name])
            if extra_rows:
                array = np.concatenate([array, np.zeros((extra_rows, *array.shape[1:]), array.dtype)])
            if tuple(array.shape) != tuple(table.shape):
                raise ValueError(f"attribute {name!r}: values of shape {array.shape}, the layer holds {table.shape}")
            table.assign(array.astype(table.dtype))

    def call(self, ids):
        """The attribute embedding of `ids` (int, any shape S): [*S, hidden_size]."""
        total = None
        for attribute in self.attributes:
            name, kind = attribute["name"], attribute["kind"]
            values = ops.take(self.value_tables[name], ids, axis=0)
            table = ops.cast(self.embeddings[name], self.compute_dtype)
            if kind == "numeric":
                part = ops.expand_dims(ops.cast(values, self.compute_dtype), -1) * table
            else:
                present = ops.expand_dims(ops.cast(values > 0, self.compute_dtype), -1)
                part = ops.take(table, values, axis=0) * present
                if kind == "multi":
                    count = ops.maximum(ops.sum(present, axis=-2), 1.0)
                    part = ops.sum(part, axis=-2) / count
            total = part if total is None else total + part
        return total

    def all_rows(self):
        """F for every id of the vocabulary, [rows, hidden_size] (the output side's item features)."""
        return self(ops.arange(self.rows))

    def get_config(self) -> dict:
        config = super().get_config()
        # The values are in the layer's weights, not its config: a loaded layer gets them from the file.
        config.update({"attributes": self.attributes, "rows": self.rows, "hidden_size": self.hidden_size,
                       "values": None, "of": self.of})
        return config


def user_attribute_layer(config, dtype=None) -> FeatureEmbedding | None:
    """The `FeatureEmbedding` of the users (rows 0..num_users, 0 an unknown user with no attribute)
    for a model section with `user_attributes`; None without any."""
    attributes = config.user_attributes
    if not attributes:
        return None
    return FeatureEmbedding(attributes, rows=config.num_users + 1, hidden_size=config.hidden_size, of="user",
                            dtype=dtype, name="user_features")
