"""tensorflow-datasets builders: one example per user (user id, time-ordered item ids, timestamps).

Each data set of `bert4rec_tf.data.registry.DATASETS` has a builder. It reads, in this order, an
explicit `source_file`, a file in the download config's `manual_dir` (the official raw file or the
original code's preprocessed ``user item`` file), or downloads the official source once into
`download_dir`; then applies the data set's preprocessing. A builder made from an explicit file gets
a configuration named after the file's SHA-256, so a different file never reuses an old build.

Ids are stored as UTF-8 text, any Unicode string. Timestamps are stored as the exact decimal text
read (``"978300760"``, ``"1.25"``; empty for files without timestamps), in the exact time order.
`load_user_sequences` reads the whole build back; a build it cannot read (a damaged or truncated
record, a missing file, a damaged `dataset_info.json`) is removed and built again, with a warning
naming its folder; a build that fails leaves nothing behind.

Example:
    builder = BUILDERS["ml-1m"](data_dir="datasets/tfds", source_file="ml-1m.txt.gz")
    builder.download_and_prepare()
    users = builder.as_dataset(split="train")
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
from typing import Callable, Iterator

import numpy as np
import pandas as pd
import tensorflow as tf
import tensorflow_datasets as tfds
from google.protobuf import json_format

from bert4rec_tf.data import download as download_lib
from bert4rec_tf.data.errors import DataError
from bert4rec_tf.data.preprocess import UserSequences, preprocess
from bert4rec_tf.data.readers import Interactions, read_interactions, reading_rules
from bert4rec_tf.data.text_files import require_file
from bert4rec_tf.data.registry import DATASETS, DatasetSpec, get_spec
from bert4rec_tf.files import write_error, write_failure_cause

logger = logging.getLogger("bert4rec_tf")


def preparation_summary(name: str, report: dict) -> str:
    """One line of what preprocessing read and dropped (the build's metadata keeps every count)."""
    def get(key: str) -> str:
        return f"{report.get(key, 0):,}"

    return (f"{name}: read {get('interactions_read')} interactions of {get('users_read')} users and "
            f"{get('items_read')} items; dropped {get('duplicate_rows')} duplicate rows, {get('items_dropped_rare')} "
            f"rare items ({get('interactions_dropped_rare_items')} interactions) and {get('users_dropped_short')} "
            f"short users ({get('interactions_dropped_short_users')} interactions)")


class _UserSequenceBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """Shared logic of the per-dataset builders; `DATASET` names the registry entry."""

    VERSION = tfds.core.Version("2.0.0")
    RELEASE_NOTES = {
        "1.0.0": "One example per user after the paper's preprocessing.",
        "2.0.0": "Timestamps as exact decimal text, ordered by their exact value; the documented id "
                 "order; duplicate rows and non-integer ids reported in the metadata.",
    }
    BUILDER_CONFIGS = [tfds.core.BuilderConfig(name="official", description="the official raw source")]
    MANUAL_DOWNLOAD_INSTRUCTIONS = (
        "Place the official raw file, or the original code's preprocessed `user item` file, in the "
        "manual directory, or pass source_file=.")
    DATASET = ""

    def __init__(self, *, source_file: str | os.PathLike | None = None, encoding: str = "utf-8",
                 check: Callable[[UserSequences], None] | None = None, **kwargs):
        self._source_file = os.fspath(source_file) if source_file is not None else None
        self._encoding = encoding
        self._check = check
        if kwargs.get("config") is None and (self._source_file is not None or encoding != "utf-8"):
            kwargs["config"] = source_config(self._source_file, encoding, get_spec(self.DATASET).source_format)
        super().__init__(**kwargs)

    @property
    def spec(self) -> DatasetSpec:
        return get_spec(self.DATASET)

    def _info(self) -> tfds.core.DatasetInfo:
        return self.dataset_info_from_configs(
            description=self.spec.description,
            features=tfds.features.FeaturesDict({
                "user_index": np.int64,
                "user_id": tfds.features.Text(),
                "item_ids": tfds.features.Sequence(tfds.features.Text()),
                "timestamps": tfds.features.Sequence(tfds.features.Text()),
            }),
            supervised_keys=None,
            homepage=self.spec.url,
            metadata=tfds.core.MetadataDict(),
        )

    def _split_generators(self, dl_manager: tfds.download.DownloadManager):
        return {"train": self._generate_examples(self._resolve_source(dl_manager))}

    def _resolve_source(self, dl_manager: tfds.download.DownloadManager) -> str:
        if self._source_file is not None:
            return self._source_file
        manual = getattr(dl_manager, "_manual_dir", None)
        if manual is not None and os.path.isdir(manual):
            files = sorted(os.path.join(manual, name) for name in os.listdir(manual))
            named = [f for f in files if os.path.basename(f) == self.spec.filename]
            if named or files:
                return (named or files)[0]
        if self.spec.url is None:
            raise DataError(f"dataset {self.spec.name!r} has no official source: give a source file")
        return download_lib.download(self.spec.url, dl_manager.download_dir, self.spec.filename,
                                     self.spec.sha256)

    def _generate_examples(self, path: str):
        sequences, report = preprocess(read_interactions(path, self.spec.source_format, self._encoding),
                                       self.spec.min_user_interactions,
                                       self.spec.min_item_interactions)
        if self._check is not None:
            self._check(sequences)
        self.info.metadata.update(report)  # saved with the build: what was dropped on purpose
        logger.info("%s", preparation_summary(self.spec.name, report))
        stamps = sequences.timestamps.astype(str) if sequences.timestamps is not None else None
        for user in range(sequences.num_users):
            begin, end = sequences.offsets[user], sequences.offsets[user + 1]
            yield user, {
                "user_index": user,
                "user_id": sequences.user_ids[user],
                "item_ids": list(sequences.item_ids[sequences.items[begin:end] - 1]),
                "timestamps": list(stamps[begin:end]) if stamps is not None else [],
            }


def _builder_class(spec: DatasetSpec) -> type[_UserSequenceBuilder]:
    """The builder of one registry entry: class `Bert4rec<Name>`, TFDS name `bert4rec_<name>`."""
    class_name = "Bert4rec" + "".join(part.capitalize() for part in spec.name.split("-"))
    return type(class_name, (_UserSequenceBuilder,), {
        "__doc__": spec.description, "__module__": __name__,
        "name": "bert4rec_" + spec.name.replace("-", ""), "DATASET": spec.name})


# One builder per data set of the registry, made from it (e.g. BUILDERS["ml-1m"] is Bert4recMl1m).
BUILDERS: dict[str, type[_UserSequenceBuilder]] = {name: _builder_class(spec) for name, spec in DATASETS.items()}


# The causes of a failed build that are the disk's or the file-size limit's, not the source's.
_ROOM_FAILURES = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS)

# What reading a damaged build raises: a damaged, truncated or missing record file (OpError), a
# damaged dataset_info.json (ParseError), a build without its split (KeyError) or without examples.
_DAMAGED_BUILD_ERRORS = (tf.errors.OpError, json_format.ParseError, KeyError, ValueError, OSError)


def source_config(source_file: str | None, encoding: str = "utf-8", fmt: str | None = None
                  ) -> tfds.core.BuilderConfig:
    """The builder configuration of a source read in `encoding` and format `fmt` (detected when None):
    named after the local file's SHA-256 ("official" for the download), then the encoding unless it
    is UTF-8, then the version of the format's reading rules unless it is 1 (`readers.READING_RULES`),
    so a file read under other rules is built again.

    Raises:
        DataError: when the file is missing or a folder.
    """
    if source_file is None:
        name, description = "official", "the official raw source"
    else:
        require_file(source_file)
        digest = download_lib.sha256_of(source_file)
        name, description = f"file-{digest[:16]}", f"built from {source_file} (sha256 {digest})"
    if encoding != "utf-8":
        name, description = f"{name}-{encoding}", f"{description}, read as {encoding}"
    rules = reading_rules(source_file, fmt, encoding)
    if rules != 1:
        name, description = f"{name}-rules{rules}", f"{description}, under reading rules {rules}"
    return tfds.core.BuilderConfig(name=name, description=description)


def load_user_sequences(dataset: str, data_dir: str | os.PathLike, source_file: str | None = None,
                        encoding: str = "utf-8", check: Callable[[UserSequences], None] | None = None,
                        ) -> tuple[UserSequences, tfds.core.DatasetBuilder]:
    """Builds data set `dataset` with its TFDS builder (once) and returns its user sequences. The
    caller holds `data_dir` (`prepare.data_folder_lock`).

    An earlier build that cannot be read back is removed and built again, with a warning naming its
    folder. A build that fails (bad input, `check`'s refusal, Ctrl-C) leaves nothing behind: the
    folders and files it created under `data_dir` are removed; a completed download is kept.

    Args:
        dataset: a name of `DATASETS`.
        data_dir: the cache root; the TFDS build goes to `data_dir/tfds`, downloads to
            `data_dir/downloads`, a manual file may sit in `data_dir/manual/<dataset>`.
        source_file: a local raw or preprocessed file to use instead of the download.
        encoding: the source's text encoding (Python's codec name).
        check: called with the preprocessed sequences before a new build writes them, to refuse
            data that cannot be used (its error ends the build before the build's memory and disk
            are spent); not called when an earlier build is read.

    Returns:
        The sequences (ids as documented in `bert4rec_tf.data.preprocess`) and the builder.
    """
    spec = get_spec(dataset)
    if spec.url is None and source_file is None:
        raise DataError(f"dataset {dataset!r} needs --source_file (a CSV or TSV with a header naming "
                        "user, item, timestamp)")
    data_dir = os.fspath(data_dir)
    builder_class = BUILDERS[dataset]
    config = source_config(source_file, encoding, spec.source_format) if source_file is not None or encoding != "utf-8" else None
    config_folder = os.path.join(data_dir, "tfds", builder_class.name, config.name if config else "official")
    folder = os.path.join(config_folder, str(builder_class.VERSION))
    _remove_abandoned_builds(config_folder)
    existed = os.path.isdir(folder)
    # What download_and_prepare creates besides the build, parents first: the folders of the build,
    # the builder's default-config record, the download folders.
    made = [os.path.join(data_dir, "tfds"), os.path.dirname(config_folder),
            os.path.join(os.path.dirname(config_folder), ".config"),
            os.path.join(os.path.dirname(config_folder), ".config", "metadata.json"), config_folder,
            os.path.join(data_dir, "downloads"), os.path.join(data_dir, "downloads", "extracted")]
    with _removed_on_failure(made, folder):
        try:
            builder = _prepared_builder(builder_class, data_dir, dataset, source_file, encoding, config, check)
            return sequences_from_builder(builder), builder
        except _DAMAGED_BUILD_ERRORS as error:
            if not existed:
                raise
            reason = " ".join(str(error).split())[:200]
            logger.warning("%s: the TFDS build cannot be read (%s: %s); removing it and building it again",
                           folder, type(error).__name__, reason)
            shutil.rmtree(folder)
        builder = _prepared_builder(builder_class, data_dir, dataset, source_file, encoding, config, check)
        return sequences_from_builder(builder), builder


def _remove_abandoned_builds(config_folder: str) -> None:
    """Removes the unfinished builds (TFDS's ``incomplete.*`` folders) in `config_folder`: the caller
    holds the data folder (`prepare.data_folder_lock`), so they were left by a killed process."""
    if not os.path.isdir(config_folder):
        return
    for name in sorted(os.listdir(config_folder)):
        if name.startswith("incomplete."):
            logger.info("removing %s, an unfinished build a killed process left", os.path.join(config_folder, name))
            shutil.rmtree(os.path.join(config_folder, name), ignore_errors=True)


@contextlib.contextmanager
def _removed_on_failure(paths: list[str], build: str) -> Iterator[None]:
    """Removes, when the block raises before the build folder `build` is complete, those of `paths`
    (parents before children) that did not exist before it: files, and folders once empty (a folder
    that holds anything else is kept). A build that completed is kept whole."""
    new = [path for path in paths if not os.path.lexists(path)]
    try:
        yield
    except BaseException:
        if not os.path.isdir(build):
            for path in reversed(new):
                try:
                    if os.path.isdir(path) and not os.path.islink(path):
                        os.rmdir(path)
                    elif os.path.lexists(path):
                        os.remove(path)
                except OSError:
                    pass  # a folder not empty: it holds more than the failed build's (a download)
        raise


def _prepared_builder(builder_class: type[_UserSequenceBuilder], data_dir: str, dataset: str,
                      source_file: str | None, encoding: str, config: tfds.core.BuilderConfig | None,
                      check: Callable[[UserSequences], None] | None = None) -> tfds.core.DatasetBuilder:
    """The builder of `dataset`, built unless an earlier build exists (see `load_user_sequences` for
    `check`)."""
    builder = builder_class(data_dir=os.path.join(data_dir, "tfds"), source_file=source_file, encoding=encoding,
                            config=config, check=check)
    try:
        builder.download_and_prepare(
            download_dir=os.path.join(data_dir, "downloads"),
            download_config=tfds.download.DownloadConfig(
                manual_dir=os.path.join(data_dir, "manual", dataset),
                compute_stats=tfds.download.ComputeStatsMode.SKIP,
            ),
        )
    except (tf.errors.OpError, RuntimeError) as error:
        # TFDS reports a full disk or a file-size limit as "Failed to finalize writing of split ...:
        # ... File too large", in a RuntimeError around TensorFlow's error.
        if write_failure_cause(error) not in _ROOM_FAILURES:
            raise
        raise write_error(os.fspath(builder.data_dir), error) from None
    return builder


# Examples read from a build per tf.data batch: reading them one at a time costs an eager iterator
# call each, minutes for the 40,226 users of Beauty on a slow machine.
READ_BATCH = 4096


def sequences_from_builder(builder: tfds.core.DatasetBuilder) -> UserSequences:
    """Reads a prepared builder's examples back into `UserSequences`, users in their original order.

    The items of each example are already in time order, so the timestamps are not read.

    Raises:
        ValueError: when the build holds no examples.
    """
    dataset = builder.as_dataset(split="train", shuffle_files=False)
    dataset = dataset.map(lambda example: (example["user_index"], example["user_id"], example["item_ids"]))
    indices, user_ids, lengths, flat_items = [], [], [], []
    for index, user_id, item_ids in dataset.ragged_batch(READ_BATCH):
        indices.append(index.numpy())
        user_ids.append(user_id.numpy())
        lengths.append(item_ids.row_lengths().numpy())
        flat_items.append(item_ids.flat_values.numpy())
    if not indices:
        raise ValueError(f"the build in {builder.data_dir} holds no examples")
    # The examples come in the build's order; put the users in index order, each user's items in theirs
    # (a stable sort of the items by their user's index).
    index, lengths = np.concatenate(indices), np.concatenate(lengths)
    flat = np.concatenate(flat_items)[np.argsort(np.repeat(index, lengths), kind="stable")]
    order = np.argsort(index)
    lengths = lengths[order]
    user_ids = np.asarray([user.decode("utf-8") for user in np.concatenate(user_ids)[order]], dtype=object)
    codes, raw_items = pd.factorize(flat)
    items = np.asarray([item.decode("utf-8") for item in raw_items], dtype=object)[codes]
    table = Interactions(users=np.repeat(user_ids, lengths), items=items, timestamps=None,
                         path=os.fspath(builder.data_dir), format="tfds")
    sequences, _ = preprocess(table, min_user_interactions=0, min_item_interactions=0)
    return sequences
