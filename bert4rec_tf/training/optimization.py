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

    Args:
        learning_rate: the peak rate.
        warmup_steps: steps of linear warm-up from 0.
        total_steps: the step at which the rate reaches 0.
    """

    def __init__(self, learning_rate: float, warmup_steps: int, total_steps: int):
        self.learning_rate = learning_rate
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps

    def __call__(self, step):
        step = ops.cast(step, "float32")
        decayed = self.learning_rate * ops.maximum(0.0, 1.0 - step / float(self.total_steps))
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


def make_optimizer(config: TrainConfig, trainable_variables) -> keras.optimizers.AdamW:
    """AdamW with the original's constants, the schedule, clipping and the decay exclusions.

    Args:
        config: the training section (learning rate, steps, warm-up, decay, clip norm).
        trainable_variables: the model's built trainable variables (to exclude from decay).
    """
    optimizer = keras.optimizers.AdamW(
        learning_rate=WarmupLinearDecay(config.learning_rate, config.warmup_steps, config.train_steps),
        weight_decay=config.weight_decay,
        beta_1=constants.ADAM_BETA_1,
        beta_2=constants.ADAM_BETA_2,
        epsilon=constants.ADAM_EPSILON,
        global_clipnorm=config.clip_norm,
    )
    optimizer.exclude_from_weight_decay(var_list=decay_excluded(trainable_variables))
    return optimizer
