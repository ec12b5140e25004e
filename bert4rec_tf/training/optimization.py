"""The original optimisation: AdamW, linear warm-up then linear decay to zero, global-norm clipping.

Differences from the original optimization.py, on purpose: Keras' Adam applies bias correction (the
original did not); with warm-up and 1e-6 epsilon the two differ only in the first few hundred
steps. Weight decay is decoupled and scaled by the learning rate in both (w -= lr * 0.01 * w).
"""

from __future__ import annotations

import keras
from keras import ops

from bert4rec_tf import constants
from bert4rec_tf.config import TrainConfig


@keras.saving.register_keras_serializable(package="bert4rec_tf")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """lr * step / warmup before `warmup_steps`, then lr * (1 - step / total_steps), 0 from the end on.

    `total_steps` is a variable: under a time budget the trainer moves the end of the schedule as it
    learns how many steps the budget affords (`set_total_steps`), without retracing the train step.

    Args:
        learning_rate: the peak rate.
        warmup_steps: steps of linear warm-up from 0.
        total_steps: the step at which the rate reaches 0.
    """

    def __init__(self, learning_rate: float, warmup_steps: int, total_steps: int):
        self.learning_rate = learning_rate
        self.warmup_steps = warmup_steps
        self.total = keras.Variable(float(total_steps), dtype="float32", trainable=False, name="total_steps")

    @property
    def total_steps(self) -> int:
        return int(ops.convert_to_numpy(self.total))

    def set_total_steps(self, total_steps: int) -> None:
        """Moves the step at which the rate reaches 0."""
        self.total.assign(float(total_steps))

    def __call__(self, step):
        step = ops.cast(step, "float32")
        decayed = self.learning_rate * ops.maximum(0.0, 1.0 - step / self.total)
        if self.warmup_steps <= 0:
            return decayed
        warmup = self.learning_rate * step / float(self.warmup_steps)
        return ops.where(step < float(self.warmup_steps), warmup, decayed)

    def get_config(self) -> dict:
        return {"learning_rate": self.learning_rate, "warmup_steps": self.warmup_steps,
                "total_steps": self.total_steps}


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


def make_optimizer(config: TrainConfig, trainable_variables,
                   schedule: WarmupLinearDecay | None = None) -> keras.optimizers.AdamW:
    """AdamW with the original's constants, the schedule, clipping and the decay exclusions.

    Args:
        config: the training section (learning rate, steps, warm-up, decay, clip norm).
        trainable_variables: the model's built trainable variables (to exclude from decay).
        schedule: the learning-rate schedule (default: warm-up, then linear decay to 0 at
            `config.train_steps`).
    """
    optimizer = AdamW(
        learning_rate=schedule or WarmupLinearDecay(config.learning_rate, config.warmup_steps, config.train_steps),
        weight_decay=config.weight_decay,
        beta_1=constants.ADAM_BETA_1,
        beta_2=constants.ADAM_BETA_2,
        epsilon=constants.ADAM_EPSILON,
        global_clipnorm=config.clip_norm,
    )
    optimizer.exclude_from_weight_decay(var_list=decay_excluded(trainable_variables))
    return optimizer
