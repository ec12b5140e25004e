"""The original optimisation: AdamW, linear warm-up then linear decay to zero, global-norm clipping.

Differences from the original optimization.py, on purpose: Keras' Adam applies bias correction (the
original did not); with warm-up and 1e-6 epsilon the two differ only in the first few hundred
steps. Weight decay is decoupled and scaled by the learning rate in both (w -= lr * 0.01 * w).
"""

from __future__ import annotations

import keras
import tensorflow as tf
from keras import ops

from bert4rec_tf import constants
from bert4rec_tf.config import TrainConfig


@keras.saving.register_keras_serializable(package="bert4rec_tf")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """lr * step / warmup before `warmup_steps`, then lr * (1 - step / total_steps), 0 from the end on
    (with `decay` False: lr from the end of the warm-up on).

    `total_steps` is a variable: under a time budget the trainer moves the end of the schedule as it
    learns how many steps the budget affords (`set_total_steps`), without retracing the train step.

    Args:
        learning_rate: the peak rate.
        warmup_steps: steps of linear warm-up from 0.
        total_steps: the step at which the rate reaches 0.
        decay: False keeps the peak rate after the warm-up (`train.decay`).
    """

    def __init__(self, learning_rate: float, warmup_steps: int, total_steps: int, decay: bool = True):
        self.learning_rate = learning_rate
        self.warmup_steps = warmup_steps
        self.decay = decay
        self.total = keras.Variable(float(total_steps), dtype="float32", trainable=False, name="total_steps")

    @property
    def total_steps(self) -> int:
        return int(ops.convert_to_numpy(self.total))

    def set_total_steps(self, total_steps: int) -> None:
        """Moves the step at which the rate reaches 0."""
        self.total.assign(float(total_steps))

    def __call__(self, step):
        step = ops.cast(step, "float32")
        if self.decay:
            decayed = self.learning_rate * ops.maximum(0.0, 1.0 - step / self.total)
        else:
            decayed = self.learning_rate * ops.ones_like(step)
        if self.warmup_steps <= 0:
            return decayed
        warmup = self.learning_rate * step / float(self.warmup_steps)
        return ops.where(step < float(self.warmup_steps), warmup, decayed)

    def get_config(self) -> dict:
        return {"learning_rate": self.learning_rate, "warmup_steps": self.warmup_steps,
                "total_steps": self.total_steps, "decay": self.decay}


def decay_excluded(variables) -> list:
    """The variables weight decay skips: LayerNorm and bias variables (by path), as the original."""
    return [v for v in variables if any(pattern in v.path for pattern in constants.WEIGHT_DECAY_EXCLUDE)]


@keras.saving.register_keras_serializable(package="bert4rec_tf")
class AdamW(keras.optimizers.AdamW):
    """Keras' AdamW for gradients that are already the sum over the replicas.

    Under a `tf.distribute` strategy with several replicas, `SequentialRecommender.train_step` sums
    the replicas' gradients itself, so that the gradient norm it logs and the global norm clipping
    both see the gradient of the whole batch, as on one device. The optimizer must then not sum them
    a second time. With one replica nothing differs from `keras.optimizers.AdamW`.
    """

    def _all_reduce_sum_gradients(self, grads_and_vars):
        return list(grads_and_vars)

    def update_step(self, gradient, variable, learning_rate):
        """Keras' Adam update of a dense gradient in one fused kernel (`ResourceApplyAdam`, the same
        equations: m += (g - m)(1 - beta_1), v += (g^2 - v)(1 - beta_2), w -= alpha m / (sqrt(v) +
        epsilon) with alpha = lr sqrt(1 - beta_2^t) / (1 - beta_1^t)): one pass over the weights and
        both moments instead of about a dozen (on Beauty's item table a tenth of the step's op time,
        at a million items most of it). It differs from Keras' element-wise ops in float32 rounding
        only. Sparse gradients and AMSGrad take Keras' path."""
        if isinstance(gradient, tf.IndexedSlices) or self.amsgrad:
            return super().update_step(gradient, variable, learning_rate)
        dtype = variable.dtype
        step = ops.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = ops.cast(self.beta_1, dtype), ops.cast(self.beta_2, dtype)
        index = self._get_variable_index(variable)
        tf.raw_ops.ResourceApplyAdam(
            var=_handle(variable), m=_handle(self._momentums[index]), v=_handle(self._velocities[index]),
            beta1_power=ops.power(beta_1, step), beta2_power=ops.power(beta_2, step),
            lr=ops.cast(learning_rate, dtype), beta1=beta_1, beta2=beta_2, epsilon=ops.cast(self.epsilon, dtype),
            grad=ops.cast(gradient, dtype))


def _handle(variable):
    """The resource handle of a Keras or TensorFlow variable (of this device's copy under a strategy)."""
    return (variable.value if isinstance(variable, keras.Variable) else variable).handle


@keras.saving.register_keras_serializable(package="bert4rec_tf")
class SparseRowsAdamW(AdamW):
    """`AdamW` that updates only the rows a sparse gradient touches (`--config train.sparse_updates=true`).

    A gradient that arrives as `tf.IndexedSlices` (a table read by lookups only: the item table under
    `--loss sampled_softmax`, the output bias, user tables) updates the moments, the weight decay
    and the weights of its rows alone, each row exactly as `AdamW` updates it when its gradient is
    nonzero ("lazy" Adam). The other rows keep their moments and weights; under `AdamW` they would
    still move by their decaying moments and be decayed. A dense gradient is updated as by `AdamW`.
    The global-norm clipping sees the same norm. The indices must be unique (the training step sums
    repeated rows first, `bert4rec_tf.models.base.unique_rows`).

    At a million items the dense update reads and writes the whole table and both its moments at
    every step; this one touches the batch's few thousand rows.
    """

    updates_sparse_rows = True  # read by `SequentialRecommender.train_step`

    def _apply_weight_decay(self, variables):
        pass  # in `update_step`, row by row for a sparse gradient

    def _clip_gradients(self, grads):
        if not self.global_clipnorm or self.global_clipnorm <= 0:
            return super()._clip_gradients(grads)
        squares = [tf.reduce_sum(tf.square(g.values if isinstance(g, tf.IndexedSlices) else g))
                   for g in grads if g is not None]
        norm = tf.sqrt(tf.add_n(squares))
        # As Keras' clip_by_global_norm: no change below the threshold, NaN scale for a non-finite norm.
        scale = self.global_clipnorm * tf.minimum(1.0 / norm, 1.0 / self.global_clipnorm) + (norm - norm)
        return [None if g is None else
                tf.IndexedSlices(g.values * scale, g.indices, g.dense_shape) if isinstance(g, tf.IndexedSlices)
                else g * scale for g in grads]

    def update_step(self, gradient, variable, learning_rate):
        lr = ops.cast(learning_rate, variable.dtype)
        decay = self.weight_decay is not None and self._use_weight_decay(variable)
        if not isinstance(gradient, tf.IndexedSlices):
            if decay:
                variable.assign_sub(variable * ops.cast(self.weight_decay, variable.dtype) * lr)
            return super().update_step(gradient, variable, learning_rate)
        rows, values = gradient.indices, ops.cast(gradient.values, variable.dtype)
        step = ops.cast(self.iterations + 1, variable.dtype)
        alpha = lr * ops.sqrt(1 - ops.power(ops.cast(self.beta_2, variable.dtype), step)) / (
            1 - ops.power(ops.cast(self.beta_1, variable.dtype), step))
        m = self._momentums[self._get_variable_index(variable)]
        v = self._velocities[self._get_variable_index(variable)]
        m_rows = tf.gather(m.value, rows)
        v_rows = tf.gather(v.value, rows)
        m_rows = m_rows + (values - m_rows) * (1 - self.beta_1)
        v_rows = v_rows + (tf.square(values) - v_rows) * (1 - self.beta_2)
        weights = tf.gather(variable, rows)
        if decay:
            weights = weights - weights * ops.cast(self.weight_decay, variable.dtype) * lr
        weights = weights - m_rows * alpha / (tf.sqrt(v_rows) + self.epsilon)
        m.value.scatter_update(tf.IndexedSlices(m_rows, rows))
        v.value.scatter_update(tf.IndexedSlices(v_rows, rows))
        variable.scatter_update(tf.IndexedSlices(weights, rows))


def make_optimizer(config: TrainConfig, trainable_variables,
                   schedule: WarmupLinearDecay | None = None) -> keras.optimizers.AdamW:
    """AdamW with the original's constants, the schedule, clipping and the decay exclusions.

    Args:
        config: the training section (learning rate, steps, warm-up, decay, clip norm).
        trainable_variables: the model's built trainable variables (to exclude from decay).
        schedule: the learning-rate schedule (default: warm-up, then linear decay to 0 at
            `config.train_steps`).
    """
    optimizer = (SparseRowsAdamW if config.sparse_updates else AdamW)(
        learning_rate=schedule or WarmupLinearDecay(config.learning_rate, config.warmup_steps, config.train_steps,
                                                                config.decay),
        weight_decay=config.weight_decay,
        beta_1=constants.ADAM_BETA_1,
        beta_2=constants.ADAM_BETA_2,
        epsilon=constants.ADAM_EPSILON,
        global_clipnorm=config.clip_norm,
    )
    optimizer.exclude_from_weight_decay(var_list=decay_excluded(trainable_variables))
    return optimizer
