"""Configuration: each model family's sections (data / model / train) and the presets and recipes.

`sections` holds the sections every family shares and the parts a family's own sections are
composed of; `experiment` the configuration of a run, set key by key against its family's schema;
`model_parts` the parts the families' model sections are composed of; `presets` the data sets'
presets and the short-budget recipes.
"""

from bert4rec_tf.config.experiment import (FAMILIES, RUN_LENGTH, ExperimentConfig, Family, UnknownSetting,
                                           config_differences, family, model_section, register_family)
from bert4rec_tf.config.presets import PRESETS, RECIPES, SHORT_SEQUENCE_DATASETS, dataset_settings
from bert4rec_tf.config.model_parts import (AttributesPart, EmbeddingPart, L2Part, ModelConfig, NegativesPart,
                                            SampledSoftmaxPart, TrainedModelConfig, TransformerPart)
from bert4rec_tf.config.sections import (PADDING_FREE_CHOICES, DataConfig, MaskedData, MaskedTraining, MatchingData,
                                         RunConfig, Section, SlidingWindowData, TrainConfig, WindowData)

__all__ = ["AttributesPart", "FAMILIES", "PADDING_FREE_CHOICES", "PRESETS", "RECIPES", "RUN_LENGTH",
           "SHORT_SEQUENCE_DATASETS",
           "DataConfig", "EmbeddingPart", "ExperimentConfig", "Family", "L2Part", "MaskedData", "MaskedTraining",
           "MatchingData", "ModelConfig", "NegativesPart", "RunConfig", "SampledSoftmaxPart", "Section",
           "SlidingWindowData", "TrainConfig", "TrainedModelConfig", "TransformerPart", "UnknownSetting",
           "WindowData", "config_differences", "dataset_settings", "family", "model_section", "register_family"]
