"""Data preparation end to end: source -> TFDS build -> split -> TFRecords, candidates, metadata.

Output folder ``<data_dir>/<dataset>/<key>/`` where the key hashes the data configuration and the
source, holding:

- ``train-*-of-*.tfrecord``: the static masked instances;
- ``sequences.npz``: every user's items (CSR: ``items``, ``offsets``), no pickle;
- ``vocab.txt`` (raw item id of model id i on line i) and ``users.txt`` (raw user ids);
- ``candidates.npz``: sampled negatives, ``pop_valid``, ``pop_test``, ``uniform_valid``, ...;
- ``metadata.json``: vocabulary size, special ids, counts, configuration, seed, file checksums.

Everything is written into a temporary folder that is renamed when complete, so a folder with the
final name is always whole.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import time

import numpy as np

import bert4rec_tf
from bert4rec_tf.config import DataConfig
from bert4rec_tf.constants import PAD_ID, mask_id, vocab_size
from bert4rec_tf.data import download as download_lib
from bert4rec_tf.data import instances as instances_lib
from bert4rec_tf.data import masking
from bert4rec_tf.data.errors import DataError
from bert4rec_tf.data.pipeline import sampled_candidates
from bert4rec_tf.data.preprocess import UserSequences
from bert4rec_tf.data.registry import get_spec
from bert4rec_tf.data.split import training_sequences

logger = logging.getLogger("bert4rec_tf")
METADATA = "metadata.json"
FORMAT_VERSION = 1


def default_data_dir() -> str:
    """`$BERT4REC_TF_DATA_DIR`, else the checkout's ``datasets/`` folder, else ``~/.cache/bert4rec_tf``."""
    if os.environ.get("BERT4REC_TF_DATA_DIR"):
        return os.environ["BERT4REC_TF_DATA_DIR"]
    checkout = os.path.dirname(os.path.dirname(os.path.abspath(bert4rec_tf.__file__)))
    if os.path.isfile(os.path.join(checkout, "setup.cfg")):
        return os.path.join(checkout, "datasets")
    return os.path.join(os.path.expanduser("~"), ".cache", "bert4rec_tf")


@dataclasses.dataclass
class PreparedData:
    """A complete prepared-data folder and its metadata."""

    directory: str
    metadata: dict

    @property
    def num_items(self) -> int:
        return int(self.metadata["num_items"])

    @property
    def train_files(self) -> list[str]:
        return [os.path.join(self.directory, name) for name in sorted(self.metadata["shards"])]

    def sequences(self) -> UserSequences:
        arrays = np.load(os.path.join(self.directory, "sequences.npz"), allow_pickle=False)
        return UserSequences(user_ids=_read_lines(os.path.join(self.directory, "users.txt")),
                             item_ids=_read_lines(os.path.join(self.directory, "vocab.txt")),
                             offsets=arrays["offsets"], items=arrays["items"])

    def candidates(self) -> dict[str, np.ndarray]:
        with np.load(os.path.join(self.directory, "candidates.npz"), allow_pickle=False) as arrays:
            return {name: arrays[name] for name in arrays.files}


def source_identity(source_file: str | None) -> str:
    """"official" for the downloaded source, "file-<sha256 prefix>" for a local file."""
    if source_file is None:
        return "official"
    if not os.path.isfile(source_file):
        raise DataError("no such file", source_file)
    return "file-" + download_lib.sha256_of(source_file)[:16]


def output_directory(config: DataConfig, data_dir: str, identity: str) -> str:
    """Where the data prepared with `config` from source `identity` lives."""
    key = json.dumps({"config": dataclasses.asdict(config), "source": identity, "format": FORMAT_VERSION},
                     sort_keys=True)
    return os.path.join(data_dir, config.dataset, hashlib.sha256(key.encode()).hexdigest()[:12])


def load_prepared(directory: str) -> PreparedData | None:
    """The prepared data in `directory`, or None when it is missing or incomplete."""
    path = os.path.join(directory, METADATA)
    if not os.path.isfile(path):
        return None
    with open(path) as handle:
        metadata = json.load(handle)
    for name, entry in metadata["files"].items():
        file = os.path.join(directory, name)
        if not os.path.isfile(file) or os.path.getsize(file) != entry["bytes"]:
            return None
    return PreparedData(directory=directory, metadata=metadata)


def prepare(config: DataConfig, data_dir: str | None = None, source_file: str | None = None,
            workers: int = 2, progress: bool = True) -> PreparedData:
    """Prepares `config.dataset` (reusing a complete earlier preparation) and returns it.

    Args:
        config: the data configuration (dataset, seed, masking, split ...).
        data_dir: the cache root (`default_data_dir()` when None).
        source_file: a local raw or preprocessed file instead of the official download.
        workers: shards written in parallel (the files do not depend on it).
        progress: show progress bars.

    Raises:
        DataError: for bad input, naming the file and line.
        ValueError: for an unknown data set or split.
    """
    from bert4rec_tf.data.tfds_builders import load_user_sequences  # heavy import, only when building

    get_spec(config.dataset)
    data_dir = data_dir or default_data_dir()
    identity = source_identity(source_file)
    directory = output_directory(config, data_dir, identity)
    prepared = load_prepared(directory)
    if prepared is not None:
        logger.info("reusing prepared data in %s", directory)
        return prepared

    started = time.time()
    sequences, builder = load_user_sequences(config.dataset, data_dir, source_file)
    train = training_sequences(sequences, config.split)
    if config.split == "valid" and sequences.lengths.min() < 3:
        raise DataError("the validation split needs at least 3 items per user")
    windows = instances_lib.make_windows(train, np.arange(1, sequences.num_users + 1), config.max_len,
                                         config.prop_sliding_window)

    if os.path.isdir(directory):
        shutil.rmtree(directory)  # an incomplete earlier attempt
    temporary = f"{directory}.incomplete-{os.getpid()}"
    shutil.rmtree(temporary, ignore_errors=True)
    os.makedirs(temporary)
    shards = instances_lib.write_static_instances(windows, config, sequences.num_items, temporary,
                                                  workers=workers, progress=progress)
    np.savez(os.path.join(temporary, "sequences.npz"), items=sequences.items, offsets=sequences.offsets)
    np.savez(os.path.join(temporary, "candidates.npz"), **sampled_candidates(sequences, config))
    _write_lines(os.path.join(temporary, "vocab.txt"), sequences.item_ids)
    _write_lines(os.path.join(temporary, "users.txt"), sequences.user_ids)

    files = {name: {"bytes": os.path.getsize(os.path.join(temporary, name)),
                    "sha256": download_lib.sha256_of(os.path.join(temporary, name))}
             for name in sorted(os.listdir(temporary))}
    metadata = {
        "format_version": FORMAT_VERSION,
        "dataset": config.dataset,
        "config": dataclasses.asdict(config),
        "seed": config.seed,
        "source": {"identity": identity, "file": os.path.abspath(source_file) if source_file else None,
                   "tfds_dir": os.fspath(builder.data_dir)},
        "num_users": sequences.num_users,
        "num_items": sequences.num_items,
        "vocab_size": vocab_size(sequences.num_items),
        "pad_id": PAD_ID,
        "mask_id": mask_id(sequences.num_items),
        "stats": sequences.stats(),
        "preprocessing": dict(builder.info.metadata or {}),
        "num_windows": len(windows),
        "num_instances": int(sum(shards.values())),
        "shards": shards,
        "feature_spec": {name: {"shape": list(spec.shape), "dtype": spec.dtype.name}
                         for name, spec in masking.feature_spec(config.max_len,
                                                                config.max_predictions_per_seq).items()},
        "files": files,
        "seconds": round(time.time() - started, 1),
    }
    with open(os.path.join(temporary, METADATA), "w") as handle:
        json.dump(metadata, handle, indent=2, sort_keys=True)
    os.replace(temporary, directory)
    return PreparedData(directory=directory, metadata=metadata)


def _write_lines(path: str, values: np.ndarray) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for value in values:
            handle.write(f"{value}\n")


def _read_lines(path: str) -> np.ndarray:
    with open(path, encoding="utf-8") as handle:
        return np.asarray([line.rstrip("\n") for line in handle], dtype=str)
