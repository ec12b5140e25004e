"""BERT4Rec in TensorFlow 2 / Keras 3: data preparation, model, training, evaluation and export.

Importing the package registers its Keras classes, so `keras.saving.load_model(path, safe_mode=True)`
reads a saved model once `bert4rec_tf` is imported.
"""

__version__ = "0.1.0"

import os as _os

# oneDNN kernels (matrix products, softmax, element-wise ops with AVX2/AVX-512 code chosen at run
# time) make training 1.6-1.9x faster on CPU; TensorFlow leaves them off on some CPUs (AMD ones),
# and reads this variable only when it is imported, so it is set before any TensorFlow import.
# TF_ENABLE_ONEDNN_OPTS=0 in the environment still turns them off.
_os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

from bert4rec_tf import models as _models  # noqa: E402,F401  (registers the layers and the model)
from bert4rec_tf.training import optimization as _optimization  # noqa: E402,F401  (the schedule)
