"""BERT4Rec in TensorFlow 2 / Keras 3: data preparation, model, training, evaluation and export.

From Python, `from bert4rec_tf import api` trains, evaluates and recommends as the commands do
(`api.train`, `api.Run`).

Importing the package itself loads no TensorFlow, so the command-line tools parse their flags and
print `--help` at once. The Keras classes are registered when `bert4rec_tf.models` (layers and
models) and `bert4rec_tf.training.optimization` (optimizer and schedule) are imported;
`bert4rec_tf.training.registration.register_keras_objects()` imports both, after which
`keras.saving.load_model(path, safe_mode=True)` reads a saved `model.keras`.
"""

__version__ = "0.1.0"

import os as _os

# oneDNN kernels (matrix products, softmax, element-wise ops with AVX2/AVX-512 code chosen at run
# time) make training 1.6-1.9x faster on CPU; TensorFlow leaves them off on some CPUs (AMD ones),
# and reads this variable only when it is imported, so it is set before any TensorFlow import.
# TF_ENABLE_ONEDNN_OPTS=0 in the environment still turns them off.
_os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

