"""Data preparation end to end: source -> TFDS build -> split -> TFRecords, candidates, metadata.

Output folder ``<data_dir>/<dataset>/<key>/`` where the key hashes the data configuration and the
source, holding:

- ``train-*-of-*.tfrecord``: the static masked instances;
- ``sequences.npz``: every user's items (CSR: ``items``, ``offsets``), no pickle;
- ``vocab.txt`` (raw item id of model id i on line i) and ``users.txt`` (raw user ids), written
  with `bert4rec_tf.data.id_files` so that any Unicode id round-trips;
- ``candidates.npz``: sampled negatives, ``pop_valid``, ``pop_test``, ``uniform_valid``, ...;
- ``metadata.json``: vocabulary size, special ids, counts, configuration, seed, file checksums.

Everything is written into a temporary folder (``.tmp-<pid>-<random>-<key>``, `files.atomic_path`)
that is renamed when complete, so a folder with the final name is always whole; temporary folders left
by processes that no longer run are removed. A folder is reused only after every file has been checked against the
size and SHA-256 recorded in ``metadata.json``; a damaged one is prepared again, with a warning
naming the damaged file.
"""

from __future__ import annotations

import codecs
import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import json
import logging
import os
import shutil
import time
from typing import Iterator

import numpy as np

from bert4rec_tf.config import DataConfig, MaskedData
from bert4rec_tf.constants import PAD_ID, mask_id, vocab_size
from bert4rec_tf.data import download as download_lib
from bert4rec_tf.data import instances as instances_lib
from bert4rec_tf.data import masking
from bert4rec_tf.data.candidates import check_enough_items, trivial_protocols_warning
from bert4rec_tf.data.errors import DataError
from bert4rec_tf.data.features import EncodedFeatures, check_coverage, encode, read_features
from bert4rec_tf.data.id_files import read_ids, write_ids
from bert4rec_tf.data.pipeline import sampled_candidates
from bert4rec_tf.data.preprocess import UserSequences
from bert4rec_tf.data.readers import READING_RULES, reading_rules
from bert4rec_tf.data.text_files import require_file
from bert4rec_tf.data.registry import get_spec
from bert4rec_tf.data.split import training_sequences
from bert4rec_tf.files import PACKAGE_PARENT, atomic_path, remove_abandoned, write_json_atomic

logger = logging.getLogger("bert4rec_tf")
METADATA = "metadata.json"
FORMAT_VERSION = 2


def default_data_dir() -> str:
    """`$BERT4REC_TF_DATA_DIR`, else the checkout's ``datasets/`` folder, else ``~/.cache/bert4rec_tf``."""
    if os.environ.get("BERT4REC_TF_DATA_DIR"):
        return os.environ["BERT4REC_TF_DATA_DIR"]
    if os.path.isfile(os.path.join(PACKAGE_PARENT, "setup.cfg")):
        return os.path.join(PACKAGE_PARENT, "datasets")
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
        return UserSequences(user_ids=self._ids("users.txt"), item_ids=self._ids("vocab.txt"),
                             offsets=arrays["offsets"], items=arrays["items"])

    def _ids(self, name: str) -> np.ndarray:
        return np.asarray(read_ids(os.path.join(self.directory, name)), dtype=object)

    def features(self, key: str) -> EncodedFeatures | None:
        """The encoded `key` ("item" or "user") attributes prepared with the data, or None."""
        path = os.path.join(self.directory, f"{key}_features.npz")
        if not os.path.isfile(path):
            return None
        with np.load(path, allow_pickle=False) as arrays:
            values = {name: arrays[name] for name in arrays.files}
        with open(os.path.join(self.directory, f"{key}_features.json"), encoding="utf-8") as handle:
            return EncodedFeatures.from_description(values, json.load(handle))

    def candidates(self) -> dict[str, np.ndarray]:
        with np.load(os.path.join(self.directory, "candidates.npz"), allow_pickle=False) as arrays:
            return {name: arrays[name] for name in arrays.files}


def source_identity(source_file: str | None, encoding: str = "utf-8") -> str:
    """"official" for the downloaded source, "file-<sha256 prefix>" for a local file, each followed
    by "-<encoding>" when it is read in another encoding than UTF-8 (the same bytes read otherwise
    are other data)."""
    if source_file is None:
        identity = "official"
    else:
        require_file(source_file)
        identity = "file-" + download_lib.sha256_of(source_file)[:16]
    return identity if encoding == "utf-8" else f"{identity}-{encoding}"


def attribute_files(config: DataConfig) -> dict[str, str]:
    """The identity of each attribute file `config` names, by its field ("item_features",
    "user_features"): "file-<sha256 prefix>" of its contents, followed by "-<encoding>" when it is read
    in another encoding than the data's (the same bytes read otherwise are other data).

    Raises:
        DataError: naming a file that does not exist.
    """
    found = {}
    for field, path in config.attribute_files().items():
        require_file(path)
        found[field] = "file-" + download_lib.sha256_of(path)[:16]
        encoding = config.features_encoding(field)
        if codecs.lookup(encoding).name != codecs.lookup(config.encoding).name:
            found[field] += f"-{encoding}"
    return found


def output_directory(config: DataConfig, data_dir: str, identity: str, rules: int = 1) -> str:
    """Where the data prepared with `config` from source `identity` (which holds the encoding), read
    under reading rules `rules` (`readers.reading_rules`), lives. Rules 1 is left out of the key, so
    data whose reading has not changed keeps the key it had before rules had versions. An attribute
    file counts by its contents (and encoding), not its path (`attribute_files`)."""
    settings = {**config.key_settings(), **attribute_files(config)}
    return os.path.join(data_dir, config.dataset, _key(settings, identity, rules))


def earlier_keys(settings: dict, identity: str) -> set[str]:
    """The keys data prepared from source `identity` had under the earlier configuration format (one
    data section for every family), for that format's data section `settings`, under any reading
    rules; a run folder of that format names its data by one of them."""
    values = {name: value for name, value in settings.items() if name != "encoding"}
    return {_key(values, identity, rules) for rules in {1, *READING_RULES.values()}}


def _key(settings: dict, identity: str, rules: int) -> str:
    """The name of a prepared-data folder: a hash of its settings, source, format and reading rules."""
    key = {"config": settings, "source": identity, "format": FORMAT_VERSION}
    if rules != 1:
        key["reading_rules"] = rules
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]


def load_prepared(directory: str) -> PreparedData | None:
    """The prepared data in `directory` after checking every file, or None when there is none.

    Each file listed in ``metadata.json`` must have the recorded size and SHA-256 (a fraction of a
    second for ML-1m's 110 MB).

    Raises:
        DataError: naming the first file that is missing or damaged (``metadata.json`` included).
    """
    if not os.path.isdir(directory):
        return None
    path = os.path.join(directory, METADATA)
    try:
        with open(path, encoding="utf-8") as handle:
            metadata = json.load(handle)
        files = metadata["files"]
        if metadata["format_version"] != FORMAT_VERSION:
            raise ValueError(f"format version {metadata['format_version']}, not {FORMAT_VERSION}")
        checks = [(name, int(entry["bytes"]), str(entry["sha256"])) for name, entry in files.items()]
    except FileNotFoundError:
        raise DataError("missing", path) from None
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise DataError(f"damaged, not the metadata of prepared data ({error})", path) from None
    for name, size, digest in checks:
        file = os.path.join(directory, name)
        if not os.path.isfile(file):
            raise DataError("missing", file)
        if os.path.getsize(file) != size or download_lib.sha256_of(file) != digest:
            raise DataError(f"damaged: its size or SHA-256 differs from the one recorded in {METADATA}", file)
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
        DataError: for bad input, naming the file and line, or a catalogue too small for
            `config.num_negatives` (right after reading the source: nothing is built or written).
        ValueError: for an unknown data set or split.
    """
    get_spec(config.dataset)
    data_dir = data_dir or default_data_dir()
    with data_folder_lock(data_dir):
        prepared = _prepare_locked(config, data_dir, source_file, workers, progress)
    warning = trivial_protocols_warning(config.num_negatives, prepared.num_items)
    if warning:
        logger.warning(warning)
    return prepared


@contextlib.contextmanager
def data_folder_lock(data_dir: str) -> Iterator[None]:
    """Holds `data_dir` (creating it) for one preparation at a time (the workers of a multi-worker run,
    two runs started together): a later one waits, then reuses what the first prepared. Whatever
    build a holder finds unfinished there was abandoned by a killed process."""
    os.makedirs(data_dir, exist_ok=True)
    with open(os.path.join(data_dir, ".prepare.lock"), "a+b") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logger.info("waiting for another process preparing data in %s", data_dir)
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def check_usable(sequences: UserSequences, config: DataConfig) -> None:
    """Refuses sequences that `config` cannot be prepared from.

    Raises:
        DataError: when the validation split finds a user with fewer than 3 items, or a user leaves
            fewer than `config.num_negatives` items to sample (`check_enough_items`).
    """
    if config.split == "valid" and sequences.lengths.min() < 3:
        raise DataError("the validation split needs at least 3 items per user")
    check_enough_items(sequences, config.num_negatives)


def read_feature_files(config: DataConfig, sequences: UserSequences) -> tuple[UserSequences, dict[str, EncodedFeatures]]:
    """The feature files `config` names, each read in its encoding and encoded in the order of the
    model's ids: items in the vocabulary's (padding 0, items 1..n, the special ids after them), users
    as their indices (1..n). A user of the file the data lack is an error. An item of the file the
    data lack is counted (`unseen`) and left out, or with `data.feature_items` joins the catalogue
    after the items with interactions (in the file's order), so that it can be recommended from its
    attributes. A file that matches none of the data's ids is an error, one that matches few of them
    is warned about (`features.check_coverage`).

    Returns:
        the sequences (with the file's items, under `feature_items`) and the encoded features by key.

    Raises:
        DataError: one line naming the file, line and column of the first problem.
    """
    found, coverage = {}, []
    for field, path in config.attribute_files().items():
        key = field.split("_")[0]
        table = read_features(path, config.features_encoding(field), key=key)
        coverage.append(check_coverage(table, sequences.item_ids if key == "item" else sequences.user_ids))
        if key == "item" and config.feature_items:
            known = set(sequences.item_ids)
            extra = [raw for raw in table.ids if raw not in known]
            if extra:
                sequences = dataclasses.replace(
                    sequences, item_ids=np.concatenate([sequences.item_ids, np.asarray(extra, dtype=object)]))
        ids = sequences.item_ids if key == "item" else sequences.user_ids
        rows = vocab_size(len(ids)) if key == "item" else len(ids) + 1
        vocabulary = [None, *ids, *[None] * (rows - len(ids) - 1)]
        found[key] = encode(table, vocabulary, unknown="ignore" if key == "item" else "error")
    for warning in filter(None, coverage):  # once every file is known to be usable
        logger.warning(warning)
    return sequences, found


def _matches_no_id(prepared: PreparedData) -> bool:
    """Whether an attribute file of `prepared` matched none of its ids."""
    return any(encoded is not None and not encoded.covered for encoded in map(prepared.features, ("item", "user")))


def _prepare_locked(config: DataConfig, data_dir: str, source_file: str | None, workers: int,
                    progress: bool) -> PreparedData:
    """`prepare`, holding the data folder's lock."""
    from bert4rec_tf.data.tfds_builders import load_user_sequences  # heavy import, only when building

    identity = source_identity(source_file, config.encoding)
    rules = reading_rules(source_file, get_spec(config.dataset).source_format, config.encoding)
    directory = output_directory(config, data_dir, identity, rules)
    remove_abandoned(os.path.dirname(directory))
    try:
        prepared = load_prepared(directory)
    except DataError as damage:
        logger.warning("%s; preparing the data again", damage)
        prepared = None
    if prepared is not None and _matches_no_id(prepared):
        logger.warning("%s holds the attributes of a file that matches none of the data's ids; preparing the data "
                       "again, which refuses such a file", directory)
    elif prepared is not None:
        logger.info("reusing prepared data in %s (every file checked)", directory)
        return prepared

    started = time.time()
    # A new build is refused right after reading, before it spends memory and disk; an earlier one here.
    sequences, builder = load_user_sequences(config.dataset, data_dir, source_file, config.encoding,
                                             check=functools.partial(check_usable, config=config))
    check_usable(sequences, config)
    # A bad file stops here, before anything is built.
    sequences, features = read_feature_files(config, sequences)
    train = training_sequences(sequences, config.split)
    candidates = sampled_candidates(sequences, config)
    masked = isinstance(config, MaskedData)  # the Cloze families' instances, written here

    if os.path.isdir(directory):
        shutil.rmtree(directory)  # a damaged earlier preparation
    with atomic_path(directory) as temporary:
        os.makedirs(temporary)
        shards, windows = {}, None
        if masked:
            windows = instances_lib.make_windows(train, np.arange(1, sequences.num_users + 1), config.max_len,
                                                 config.prop_sliding_window)
        if masked and config.static_instances:
            shards = instances_lib.write_static_instances(windows, config, sequences.num_items, temporary,
                                                          workers=workers, progress=progress)
        np.savez(os.path.join(temporary, "sequences.npz"), items=sequences.items, offsets=sequences.offsets)
        np.savez(os.path.join(temporary, "candidates.npz"), **candidates)
        write_ids(os.path.join(temporary, "vocab.txt"), sequences.item_ids)
        write_ids(os.path.join(temporary, "users.txt"), sequences.user_ids)
        for key, encoded in features.items():
            np.savez(os.path.join(temporary, f"{key}_features.npz"), **encoded.arrays)
            write_json_atomic(os.path.join(temporary, f"{key}_features.json"), encoded.description())

        files = download_lib.file_records(temporary, os.listdir(temporary))
        metadata = {
            "format_version": FORMAT_VERSION,
            "dataset": config.dataset,
            "config": dataclasses.asdict(config),
            "seed": config.seed,
            "source": {"identity": identity, "file": os.path.abspath(source_file) if source_file else None,
                       "encoding": config.encoding, "tfds_dir": os.fspath(builder.data_dir)},
            "num_users": sequences.num_users,
            "num_items": sequences.num_items,
            "vocab_size": vocab_size(sequences.num_items),
            "pad_id": PAD_ID,
            "mask_id": mask_id(sequences.num_items),
            "stats": sequences.stats(),
            "preprocessing": dict(builder.info.metadata or {}),
            "num_windows": len(windows) if masked else None,
            "num_instances": int(sum(shards.values())),
            "shards": shards,
            "feature_spec": {name: {"shape": list(spec.shape), "dtype": spec.dtype.name} for name, spec in
                             masking.feature_spec(config.max_len, config.max_predictions_per_seq,
                                                  config.matching).items()} if masked else None,
            "files": files,
            "seconds": round(time.time() - started, 1),
        }
        write_json_atomic(os.path.join(temporary, METADATA), metadata)
    return PreparedData(directory=directory, metadata=metadata)
