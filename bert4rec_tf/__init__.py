"""BERT4Rec in TensorFlow 2 / Keras 3: data preparation, model, training, evaluation and export.

Importing the package registers its Keras classes, so `keras.saving.load_model(path, safe_mode=True)`
reads a saved model once `bert4rec_tf` is imported.
"""

__version__ = "0.1.0"

from bert4rec_tf import models as _models  # noqa: E402,F401  (registers the layers and the model)
from bert4rec_tf.training import optimization as _optimization  # noqa: E402,F401  (the schedule)
