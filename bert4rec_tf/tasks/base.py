"""The `Task`: what makes a model family different, behind one interface.

The trainer, the evaluator, the export and the commands take any registered Task and never name a
model or a kind of training data. A Task owns:

- its presets (`presets`: preset name -> scope ("*" or a data set) -> overrides) and what the
  short-budget `cpu-*` recipes change for it (`cpu_recipes`: preset name -> data set -> overrides);
- validating its settings (`validate`, beside the generic checks of `ExperimentConfig.validate`);
- building its model from the model section (`build_model`);
- its training stream (`training_stream`): a pure function of the first instance number, so that a
  resumed run continues it exactly; its seeds come from `bert4rec_tf.data.seeds.Stream`;
- which of the settings that only some families read it reads (`settings`, `reads`): a command
  line that changes one it does not read is refused rather than run as if it had effect;
- which features of a training batch run along the sequence, and on which side they are padded
  (`sequence_features`, `padded_left`), for padding-aware batches;
- the features of its validation loss (`loss_features`);
- what its attention heat maps show at the last position (`attention_last_label`; None: none).

This module and every task module import TensorFlow, Keras and the models only inside methods, so
that the presets (and the commands' `--help`) answer without loading TensorFlow.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from bert4rec_tf.config import ExperimentConfig, ModelConfig

# preset name -> scope ("*": every data set, or a data set's name) -> {config key: value}
Presets = dict[str, dict[str, dict[str, Any]]]

# The settings ("section.field") that only some families read; each Task names those it reads
# (`Task.settings`, `Task.reads`). The others (sizes every family has, the data split, the
# optimiser, the evaluation) concern every trained family.
FAMILY_SETTINGS = tuple(f"model.{field}" for field in (
    "hidden_size", "num_layers", "num_heads", "intermediate_size", "hidden_dropout", "attention_dropout",
    "use_position_embedding", "use_ffn", "use_layer_norm", "use_residual", "padding_free", "code_network",
    "match_negatives", "match_scale", "train_negatives", "negative_alpha", "l2", "next_targets", "conv_filters",
    "vertical_filters", "learned_padding", "bpr_max_reg", "sampled_negatives")) + (
    "data.masked_lm_prob", "data.max_predictions_per_seq", "data.dupe_factor", "data.mask_prob", "data.mask_runs",
    "data.match_only_prob", "data.prop_sliding_window", "train.dynamic_masking")
# What every Transformer family reads (BERT4Rec's and SASRec's encoders, `bert4rec_tf.models.base`).
TRANSFORMER_SETTINGS = tuple(f"model.{field}" for field in (
    "hidden_size", "num_layers", "num_heads", "intermediate_size", "hidden_dropout", "attention_dropout",
    "use_position_embedding", "use_ffn", "use_layer_norm", "use_residual", "padding_free"))
# What a softmax model reads under `--loss sampled_softmax` (`bert4rec_tf.models.base.catalogue_sampler`).
SAMPLED_SOFTMAX_SETTINGS = ("model.sampled_negatives", "model.negative_alpha")


class Task:
    """A model family: its presets, settings checks, model, training stream and validation features.

    Subclasses set `name` (the `model.name` of their configurations) and `presets`, and override
    the methods their family needs. The defaults describe a model with nothing to train.
    """

    name: str = ""
    presets: Presets = {}
    cpu_recipes: dict[str, dict[str, dict[str, Any]]] = {}
    # The values of `model.loss` the family trains with (the first is its default).
    losses: tuple[str, ...] = ("ce",)
    # Data settings the family needs as given: {data field: value}.
    data_requirements: dict[str, Any] = {"matching": False}
    # Whether the family has weights to train (False: its statistics are its whole model).
    trains: bool = True
    # Whether the family reads the order of a history (False: a user's items as a set, BPR-MF and
    # NCF); the shared learning test asks a sequential family to learn a planted order.
    sequential: bool = True
    # Whether each validation ranks every item as well as the pop-100 candidates (False: pop-100
    # only, for a family whose full scoring costs many training intervals; the test ranks every
    # item all the same).
    full_ranking_validation: bool = True
    # Of `FAMILY_SETTINGS`, those the family reads whatever its loss (`reads` adds a loss's own).
    settings: tuple[str, ...] = ()
    sequence_features: tuple[str, ...] = ()
    padded_left: bool = False
    attention_last_label: str | None = None

    def validate(self, config: ExperimentConfig) -> None:
        """Checks the settings only this family constrains.

        Raises:
            ValueError: one line naming the flag (or `--config section.key`) and the value.
        """
        model = config.model
        if "model.num_heads" in self.reads(config) and model.hidden_size % model.num_heads:
            raise ValueError(f"--config num_heads must be at least 1 and a divisor of hidden_size {model.hidden_size}, "
                             f"got {model.num_heads}")
        if config.model.loss not in self.losses:
            raise ValueError(f"--loss must be {' or '.join(repr(loss) for loss in self.losses)} for {self.name}, "
                             f"got {config.model.loss!r}")
        for field, value in self.data_requirements.items():
            if getattr(config.data, field) != value:
                raise ValueError(f"--config {field} must be {str(value).lower()} for {self.name}, "
                                 f"got {getattr(config.data, field)!r}")

    def reads(self, config: ExperimentConfig) -> frozenset[str]:
        """Of `FAMILY_SETTINGS`, those a run of this family with `config` reads: `settings`, and
        under `--loss sampled_softmax` the sampled head's."""
        extra = SAMPLED_SOFTMAX_SETTINGS if config.model.loss == "sampled_softmax" else ()
        return frozenset(self.settings + extra)

    def build_model(self, config: ModelConfig):
        """The family's `SequentialRecommender` for the model section `config` (`vocab_size` set),
        with its weights created."""
        raise NotImplementedError(f"{type(self).__name__} builds no model")

    def training_stream(self, config: ExperimentConfig, prepared, train: list[np.ndarray]) -> Callable:
        """A function of the first instance number giving the endless training stream, batched by
        `config.train.batch_size`, every batch `config.data.max_len` wide.

        Args:
            config: the run's configuration.
            prepared: the `PreparedData` (its static TFRecords, `num_items`).
            train: per user, the training items.
        """
        raise NotImplementedError(f"{self.name} has nothing to train")

    def loss_features(self, model, histories: np.ndarray, targets: np.ndarray,
                      negatives: np.ndarray, users: np.ndarray | None = None) -> dict | None:
        """The training features for predicting `targets` after `histories`, one loss term per row,
        for the validation loss (`bert4rec_tf.evaluation.validation_loss`); None: no loss.

        Args:
            model: the family's model.
            histories: int [users, L] histories, right-padded.
            targets: int [users] the items to predict.
            negatives: int [users, C] items each user never had (C >= 1).
            users: int [users] their model user ids (1-based), for a family that learns user vectors.
        """
        return None


def history_features(model, histories: np.ndarray) -> dict[str, np.ndarray]:
    """`model.history_inputs(histories)` as NumPy arrays."""
    from keras import ops

    return {name: ops.convert_to_numpy(value) for name, value in model.history_inputs(histories).items()}
