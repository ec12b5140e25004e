"""The models by name: `--model` picks a preset of `bert4rec_tf.config.MODEL_PRESETS`, whose
`model.name` picks the class here."""

from __future__ import annotations

from bert4rec_tf.config import MODEL_NAMES, ModelConfig
from bert4rec_tf.models.base import SequentialRecommender
from bert4rec_tf.models.bert4rec import BERT4Rec
from bert4rec_tf.models.bert4rec_match import BERT4RecMatch
from bert4rec_tf.models.pop import POP
from bert4rec_tf.models.sasrec import SASRec

MODELS: dict[str, type[SequentialRecommender]] = {
    "bert4rec": BERT4Rec, "sasrec": SASRec, "bert4rec_match": BERT4RecMatch, "pop": POP,
}
assert tuple(MODELS) == MODEL_NAMES


def build_model(config: ModelConfig) -> SequentialRecommender:
    """The model `config.name` with its weights created.

    The Cloze models are built `packed` (logits only for the real masked slots in training).

    Args:
        config: the model section, with `vocab_size` set from the data.
    """
    model_class = MODELS[config.name]
    model = model_class(config, packed=True) if issubclass(model_class, BERT4Rec) else model_class(config)
    model.build()
    return model
