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


def history_and_target(sequences: UserSequences, user: int, stage: str) -> tuple[np.ndarray, int]:
    """The history fed to the model and the item to predict for `stage` "valid" or "test"."""
    sequence = sequences.sequence(user)
    if stage == "test":
        return sequence[:-1], int(sequence[-1])
    if stage == "valid":
        return sequence[:-2], int(sequence[-2])
    raise ValueError(f"unknown evaluation stage {stage!r}; known: valid, test")
