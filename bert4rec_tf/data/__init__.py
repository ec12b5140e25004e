"""Data: the known data sets and their sources, reading raw and custom files, preprocessing, the
leave-one-out split, masked-instance TFRecords, the prepared-data cache, negatives and evaluation
candidates, and the tf.data pipelines that feed training and evaluation. Importing this package loads
nothing: each module is imported on its own (the pipelines load TensorFlow, the registry does not).
"""
