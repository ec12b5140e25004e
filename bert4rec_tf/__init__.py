"""BERT4Rec in TensorFlow 2 / Keras 3: data preparation, model, training, evaluation and export."""

__version__ = "0.1.0"
