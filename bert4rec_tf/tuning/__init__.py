"""Tuning on validation (`bert4rec-tune`, `bert4rec_tf.api.tune`): a study per data set, model and
loss, whose trials are time-budgeted run folders stopped early on their validation curves.

`space` declares search spaces without TensorFlow or Optuna; `study` runs a study (Optuna, with its
trials in a database).
"""
