"""A study folder bound like a run folder: to what it tunes (study.json's `BINDING` fields), to the
data it tunes on (the source's identity, each attribute file's contents and the prepared data's key)
and to its storage (`storage.storage_record`). A command that gives another of any of them for the
same folder is refused in one line naming what differs, before anything is written."""

from __future__ import annotations

import dataclasses
import os

from bert4rec_tf.files import read_json, write_json_atomic
from bert4rec_tf.tuning.settings import StudySettings
from bert4rec_tf.tuning.storage import describe, storage_record

STUDY_FILE = "study.json"
# The fields of study.json that bind a study folder: the same command must give the same values.
BINDING = ("dataset", "model", "loss", "recipe", "trial_budget", "schedule_budget", "overrides", "seed", "eval_every",
           "space")


def data_record(prepared, data_config) -> dict:
    """What binds a study to its data: the source's identity, the prepared data's key (which holds the
    data settings and every attribute file's contents and encoding) and, per attribute file of
    `data_config`, its path and contents (`prepare.attribute_files`), so that a refusal can name it."""
    from bert4rec_tf.data.prepare import attribute_files

    files = {field: {"path": os.path.abspath(getattr(data_config, field)), "contents": identity}
             for field, identity in attribute_files(data_config).items()}
    return {"source": prepared.metadata["source"]["identity"],
            "data_key": os.path.basename(os.path.normpath(prepared.directory)), "files": files}


def bind(study_dir: str, settings: StudySettings, storage: str | None = None, data: dict | None = None
         ) -> StudySettings:
    """Writes study.json for a new study folder, or checks that an existing one is this study, on this
    data (`data_record`; None: not checked) in this storage (its recorded budget may be raised: a larger
    `budget` tunes on). An existing study keeps the pruning rule it was made with (`stop_in_warmup`),
    which the returned settings carry. A folder of older code that recorded no storage or data takes
    this command's.

    Raises:
        ValueError: one line naming the first binding that differs and the way out; nothing is written.
    """
    path = os.path.join(study_dir, STUDY_FILE)
    settings = dataclasses.replace(settings, storage=storage_record(storage), data=data or {})
    if os.path.isfile(path):
        recorded = read_json(path, "study settings")
        for key in BINDING:
            if recorded.get(key) != dataclasses.asdict(settings)[key]:
                raise ValueError(f"{study_dir} holds another study: its {key} is {recorded.get(key)!r}, this command's "
                                 f"{dataclasses.asdict(settings)[key]!r}; use another --study_dir")
        if recorded.get("storage") and recorded["storage"] != settings.storage:
            raise ValueError(f"{study_dir} keeps its trials in {describe(recorded['storage'])}, this command in "
                             f"{describe(settings.storage)}: give the same --storage again, or use another --study_dir")
        if data is None or not recorded.get("data"):
            settings = dataclasses.replace(settings, data=recorded.get("data") or settings.data)
        else:
            _check_data(study_dir, recorded["data"], settings.data)
        settings = dataclasses.replace(settings, stop_in_warmup=bool(recorded.get("stop_in_warmup", False)))
    os.makedirs(study_dir, exist_ok=True)
    write_json_atomic(path, dataclasses.asdict(settings))
    return settings


def _check_data(study_dir: str, recorded: dict, data: dict) -> None:
    """Refuses `data` (`data_record`) when it is not the data `recorded` for the study in `study_dir`,
    naming what differs: the source file, an attribute file, or the prepared data.

    Raises:
        ValueError: one line.
    """
    way_out = "use another --study_dir for this data, or give the study's own again"
    if recorded.get("source") != data["source"]:
        raise ValueError(f"{study_dir} was tuned on another source file (identity {recorded.get('source')}, this "
                         f"command's {data['source']}): {way_out}")
    theirs, ours = recorded.get("files", {}), data["files"]
    for field in sorted(set(theirs) | set(ours)):
        before, now = theirs.get(field), ours.get(field)
        if (before or {}).get("contents") != (now or {}).get("contents"):
            was = f"{before['path']} (contents {before['contents']})" if before else "none"
            given = f"{now['path']} (contents {now['contents']})" if now else "none"
            raise ValueError(f"{study_dir} was tuned with another --config {field}: the study's was {was}, this "
                             f"command's is {given}: {way_out}")
    if recorded.get("data_key") != data["data_key"]:
        raise ValueError(f"{study_dir} was tuned on other prepared data (data key {recorded.get('data_key')}, this "
                         f"command's {data['data_key']}): {way_out}")


def load_settings(study_dir: str) -> StudySettings:
    """The study.json of `study_dir`."""
    return StudySettings(**read_json(os.path.join(study_dir, STUDY_FILE), "study settings"))
