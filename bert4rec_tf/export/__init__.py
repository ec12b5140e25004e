"""Export: the Keras model file, a serving SavedModel with raw-id signatures, the vocabulary."""
