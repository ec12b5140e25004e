"""The `Task`: what makes a model family different, behind one interface.

The trainer, the evaluator, the export and the commands take any registered Task and never name a
model or a kind of training data. A Task owns:

- its presets (`presets`: preset name -> scope ("*" or a data set) -> overrides) and what the
  short-budget `cpu-*` recipes change for it (`cpu_recipes`: preset name -> data set -> overrides);
- its configuration: one class per section (`data_config`, `model_config`, `train_config`,
  `bert4rec_tf.config.sections`), whose fields are the settings the family has, and the checks across
  sections (`validate`, beside each section's own, `ExperimentConfig.validate`);
- building its model from the model section (`build_model`);
- its training stream (`training_stream`): a pure function of the first instance number, so that a
  resumed run continues it exactly; its seeds come from `bert4rec_tf.data.seeds.Stream`;
- which features of a training batch run along the sequence, and on which side they are padded
  (`sequence_features`, `padded_left`), for padding-aware batches;
- the features of its validation loss (`loss_features`);
- what its attention heat maps show at the last position (`attention_last_label`; None: none);
- the settings its tuning varies (`space`, `search_space`).

This module and every task module import TensorFlow, Keras and the models only inside methods, so
that the presets (and the commands' `--help`) answer without loading TensorFlow.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from bert4rec_tf.config import DataConfig, ExperimentConfig, ModelConfig, RunConfig
from bert4rec_tf.tasks.space import SearchSpace

# preset name -> scope ("*": every data set, or a data set's name) -> {config key: value}
Presets = dict[str, dict[str, dict[str, Any]]]

class Task:
    """A model family: its presets, settings checks, model, training stream and validation features.

    Subclasses set `name` (the `model.name` of their configurations) and `presets`, and override
    the methods their family needs. The defaults describe a model with nothing to train.
    """

    name: str = ""
    presets: Presets = {}
    cpu_recipes: dict[str, dict[str, dict[str, Any]]] = {}
    # The classes of the family's sections: their fields are its settings.
    data_config: type[DataConfig] = DataConfig
    model_config: type[ModelConfig] = ModelConfig
    train_config: type[RunConfig] = RunConfig
    # Whether the family has weights to train (False: its statistics are its whole model).
    trains: bool = True
    # Whether the family reads the order of a history (False: a user's items as a set, BPR-MF and
    # NCF); the shared learning test asks a sequential family to learn a planted order.
    sequential: bool = True
    # Whether each validation ranks every item as well as the pop-100 candidates (False: pop-100
    # only, for a family whose full scoring costs many training intervals; the test ranks every
    # item all the same).
    full_ranking_validation: bool = True
    sequence_features: tuple[str, ...] = ()
    padded_left: bool = False
    attention_last_label: str | None = None
    # The attributes the family's model reads (`data.item_features`, `data.user_features`): "item",
    # "user"; a feature file it does not read is refused (`registry.validate`), never ignored.
    reads_features: tuple[str, ...] = ()
    # What tuning varies (`bert4rec_tf.tuning`): config key -> `Choice`, `Float`, `Int` or `Derived`
    # (`bert4rec_tf.tasks.space`); empty: nothing to tune.
    space: SearchSpace = {}

    def search_space(self, model: str) -> SearchSpace:
        """The search space of the `--model` preset `model` (by default the family's `space`)."""
        return dict(self.space)

    @property
    def losses(self) -> tuple[str, ...]:
        """The values of `model.loss` the family trains with (the first is its default)."""
        return self.model_config.losses

    def validate(self, config: ExperimentConfig) -> None:
        """Checks what the family constrains across its sections (each section checks its own fields).

        Raises:
            ValueError: one line naming the flag (or `--config section.key`) and the value.
        """

    def model_class(self) -> type:
        """The family's `SequentialRecommender` class (imported here, so that the presets load without
        TensorFlow)."""
        raise NotImplementedError(f"{type(self).__name__} builds no model")

    def build_model(self, config: ModelConfig):
        """The family's model (`model_class`) for the model section `config` (`vocab_size` set),
        with its weights created."""
        model = self.model_class()(config)
        model.build()
        return model

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


def history_features(model, histories: np.ndarray, users: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """`model.history_inputs(histories)` as NumPy arrays, with the users' `info` [users, 1] for a
    model with user attributes (`SequentialRecommender.with_users`)."""
    from keras import ops

    features = model.with_users(model.history_inputs(histories), users)
    return {name: ops.convert_to_numpy(value) for name, value in features.items()}
