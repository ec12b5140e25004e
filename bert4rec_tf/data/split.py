"""Leave-one-out split: last item test, second last validation, the rest training."""

from __future__ import annotations

import numpy as np

from bert4rec_tf.data.preprocess import UserSequences

SPLITS = ("valid", "original")


def training_sequences(sequences: UserSequences, split: str) -> list[np.ndarray]:
    """Per user, the items training may use.

    Args:
        sequences: all users' sequences.
        split: "valid" keeps the last two items out (a real validation split); "original" keeps only
            the test item out, as the original code did (validation item appended to training).

    Raises:
        ValueError: for an unknown split mode.
    """
    held_out = {"valid": 2, "original": 1}
    if split not in held_out:
        raise ValueError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
    cut = held_out[split]
    return [sequences.sequence(u)[:-cut] for u in range(sequences.num_users)]


# Where each evaluation stage's target lies, counted from the end of a user's sequence (1: last); its
# history is every item before it.
_TARGET_FROM_END = {"valid": 2, "test": 1}


def target_from_end(stage: str) -> int:
    """Where `stage`'s target lies from the end of a sequence: 2 for "valid", 1 for "test".

    Raises:
        ValueError: for another stage.
    """
    if stage not in _TARGET_FROM_END:
        raise ValueError(f"unknown evaluation stage {stage!r}; known: valid, test")
    return _TARGET_FROM_END[stage]


def history_and_target(sequences: UserSequences, user: int, stage: str) -> tuple[np.ndarray, int]:
    """The history fed to the model and the item to predict for `stage` "valid" or "test"."""
    sequence = sequences.sequence(user)
    back = target_from_end(stage)
    return sequence[:-back], int(sequence[-back])
