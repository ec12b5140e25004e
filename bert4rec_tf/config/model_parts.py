"""The model sections' shared parts: a family's model section (next to its Task, `bert4rec_tf.tasks`)
is composed of `ModelConfig` or `TrainedModelConfig` and the parts it has, e.g.
`BERT4RecConfig(SampledSoftmaxPart, TransformerPart, TrainedModelConfig)`. Each part checks its own
fields (`Section.check`).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from bert4rec_tf.config.sections import (PADDING_FREE_CHOICES, Section, check_dropout, check_nonnegative,
                                         require)


@dataclasses.dataclass
class ModelConfig(Section):
    """What every model has: its family, and the vocabulary and users the data give it.

    Attributes:
        name: the model family, a Task registered in `bert4rec_tf.tasks`.
        vocab_size: embedding rows (padding, items, [MASK]); set from the prepared data.
        num_users: model user ids are 1..num_users (0: unknown); set from the prepared data, read
            by the models that learn a vector per user.
    """

    name: str = ""
    vocab_size: int = 0
    num_users: int = 0

    # The values of `loss` the family trains with (the first is its default); none: nothing to train.
    losses: ClassVar[tuple[str, ...]] = ()
    # The attributes a model reads (fields of `AttributesPart`): none, by default.
    item_attributes: ClassVar[tuple] = ()
    user_attributes: ClassVar[tuple] = ()
    attributes_at_output: ClassVar[bool] = False

    def loss_note(self) -> str | None:
        """What a run's records say of a loss that is not its paper's (None: the paper's loss)."""
        return None


@dataclasses.dataclass
class TrainedModelConfig(ModelConfig):
    """A model with weights to train, by one of its family's losses.

    Attributes:
        loss: the training loss, one of `losses` (e.g. SASRec's "bce", the paper's, or "ce").
    """

    loss: str = ""

    def __post_init__(self) -> None:
        if not self.loss and self.losses:
            self.loss = self.losses[0]

    def check(self) -> None:
        super().check()
        if self.loss not in self.losses:
            raise ValueError(f"--loss must be {' or '.join(repr(loss) for loss in self.losses)} for {self.name}, "
                             f"got {self.loss!r}")


@dataclasses.dataclass
class EmbeddingPart(Section):
    """Attributes:
        hidden_size: d, the width of the item (and user) vectors.
    """

    hidden_size: int = 64

    def check(self) -> None:
        super().check()
        require(self.hidden_size >= 1, "hidden_size", self.hidden_size, "at least 1")


@dataclasses.dataclass
class TransformerPart(EmbeddingPart):
    """The Transformer encoder of BERT4Rec, its variants and SASRec; the `use_*` switches are the
    BERT4Rec paper's ablations.

    Attributes:
        max_len: positions of the learned position embedding (kept equal to `data.max_len`).
        num_layers: L Transformer blocks.
        num_heads: h attention heads (hidden_size must divide by it).
        intermediate_size: FFN inner size (4d in BERT).
        hidden_dropout: dropout on embeddings, attention output and FFN output.
        attention_dropout: dropout on the attention probabilities.
        use_position_embedding / use_ffn / use_layer_norm / use_residual: ablation switches.
        padding_free: the per-position work on the real positions only: "on", "off", or "auto" (on
            when the training windows are less than half full on average,
            `bert4rec_tf.models.base.packs_positions`). The outputs are the same either way, within
            float32 rounding; only the speed differs.
    """

    max_len: int = 200
    num_layers: int = 2
    num_heads: int = 2
    intermediate_size: int = 256
    hidden_dropout: float = 0.2
    attention_dropout: float = 0.2
    use_position_embedding: bool = True
    use_ffn: bool = True
    use_layer_norm: bool = True
    use_residual: bool = True
    padding_free: str = "auto"

    def check(self) -> None:
        super().check()
        require(self.num_layers >= 1, "num_layers", self.num_layers, "at least 1")
        require(self.num_heads >= 1 and self.hidden_size % self.num_heads == 0, "num_heads", self.num_heads,
                f"at least 1 and a divisor of hidden_size {self.hidden_size}")
        require(self.intermediate_size >= 1, "intermediate_size", self.intermediate_size, "at least 1")
        check_dropout(self, "hidden_dropout", "attention_dropout")
        require(self.padding_free in PADDING_FREE_CHOICES, "padding_free", self.padding_free,
                f"one of {', '.join(PADDING_FREE_CHOICES)}")


@dataclasses.dataclass
class AttributesPart(Section):
    """Item and user attributes of the feature files (`data.item_features`, `data.user_features`)
    in a sequence model: the item attributes join the item representation (`ItemEmbedding`), the
    user's are added at every position of the input.

    Attributes:
        item_attributes, user_attributes: the attributes of the feature files, as `FeatureEmbedding`
            takes them; set from the prepared data (empty: ids only, the paper's model).
        attributes_at_output: also score items from their attributes: the tied output table is
            E + F instead of E, so an item whose id row never trained is scored by its attributes.
    """

    item_attributes: list = dataclasses.field(default_factory=list)
    user_attributes: list = dataclasses.field(default_factory=list)
    attributes_at_output: bool = False


@dataclasses.dataclass
class SampledSoftmaxPart(Section):
    """The sampled head of a softmax model under `loss` "sampled_softmax" (not the papers' loss).

    Attributes:
        sampled_negatives: K, the negatives a batch shares, drawn by training popularity **
            `negative_alpha` (uniform at 0).
        negative_alpha: the exponent of the negatives' popularity.
    """

    sampled_negatives: int = 1024
    negative_alpha: float = 0.0

    loss_fields: ClassVar[dict[str, tuple[str, ...]]] = {"sampled_negatives": ("sampled_softmax",),
                                                          "negative_alpha": ("sampled_softmax",)}

    def check(self) -> None:
        super().check()
        require(self.sampled_negatives >= 1, "sampled_negatives", self.sampled_negatives, "at least 1")
        check_nonnegative(self, "negative_alpha")

    def loss_note(self) -> str | None:
        if getattr(self, "loss", None) == "sampled_softmax":
            return f"sampled softmax over {self.sampled_negatives} negatives (not the paper's loss)"
        return super().loss_note()


@dataclasses.dataclass
class NegativesPart(Section):
    """Sampled training negatives.

    Attributes:
        train_negatives: sampled negatives per training target (NCF's 4, Caser's 3, GRU4Rec+'s
            extra negatives shared by a batch).
        negative_alpha: negatives are drawn with probability proportional to popularity ** alpha
            (0: uniform).
    """

    train_negatives: int = 1
    negative_alpha: float = 0.0

    def check(self) -> None:
        super().check()
        require(self.train_negatives >= 1, "train_negatives", self.train_negatives, "at least 1")
        check_nonnegative(self, "negative_alpha")


@dataclasses.dataclass
class L2Part(Section):
    """Attributes:
        l2: L2 penalty on the embedding rows a batch uses, added to the loss.
    """

    l2: float = 0.0

    def check(self) -> None:
        super().check()
        check_nonnegative(self, "l2")
