"""A study folder bound like a run folder: to its storage and to the data it tunes on (the source,
each attribute file's contents); every argument checked before anything is written; each refusal
one line that names what differs, with the folder and its database left byte for byte as they were."""

from __future__ import annotations

import os
import shutil

import pytest

from bert4rec_tf import api
from bert4rec_tf.tuning.settings import new_settings
from bert4rec_tf.tuning.workers import check_jobs, start
from tests.tasks.harness import planted_source

FIXED = ["num_negatives=20", "valid_users=0", "warmup_steps=100"]


def _settings(model: str = "bpr_mf", overrides=FIXED, **kwargs):
    return new_settings("beauty", model, None, "cpu-30m", 18.0, 6.0, list(overrides), eval_every=100, **kwargs)


def _snapshot(folder) -> dict[str, bytes]:
    """Every file under `folder` and its bytes."""
    found = {}
    for parent, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(parent, name)
            with open(path, "rb") as handle:
                found[os.path.relpath(path, folder)] = handle.read()
    return found


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return planted_source(str(tmp_path_factory.mktemp("planted")))


def test_a_study_refuses_another_storage_in_either_direction(planted, tmp_path):
    """The study of `--storage sqlite:///ext.db` run again without --storage would start an empty study
    in the folder's study.db, whose trials would train in the first one's run folders."""
    source_file, data_dir = planted
    study_dir, external = tmp_path / "study", tmp_path / "ext.db"
    url = f"sqlite:///{external}"
    start(str(study_dir), _settings(), url, data_dir, source_file, None)
    before, database = _snapshot(study_dir), external.read_bytes()
    with pytest.raises(ValueError) as refused:
        start(str(study_dir), _settings(), None, data_dir, source_file, None)
    assert str(refused.value) == (f"{study_dir} keeps its trials in --storage {url}, this command in SQLite in the study "
                                  "folder (no --storage): give the same --storage again, or use another --study_dir")
    assert _snapshot(study_dir) == before and external.read_bytes() == database
    assert not (study_dir / "study.db").exists()
    start(str(study_dir), _settings(), url, data_dir, source_file, None)  # the same storage goes on

    own = tmp_path / "own"
    start(str(own), _settings(), None, data_dir, source_file, None)
    before = _snapshot(own)
    with pytest.raises(ValueError, match="keeps its trials in SQLite in the study folder"):
        start(str(own), _settings(), f"sqlite:///{tmp_path / 'other.db'}", data_dir, source_file, None)
    assert _snapshot(own) == before and not (tmp_path / "other.db").exists()


def test_a_study_refuses_another_source_file_and_an_edited_attribute_file(planted, tmp_path):
    source_file, data_dir = planted
    study_dir = tmp_path / "study"
    start(str(study_dir), _settings(), None, data_dir, source_file, None)
    other = tmp_path / "other.txt"
    shutil.copy(source_file, other)
    with open(other, "a", encoding="utf-8") as handle:  # one interaction more: other data
        handle.write(open(source_file, encoding="utf-8").readline())
    before = _snapshot(study_dir)
    with pytest.raises(ValueError) as refused:
        start(str(study_dir), _settings(), None, data_dir, str(other), None)
    message = str(refused.value)
    assert message.startswith(f"{study_dir} was tuned on another source file (identity file-")
    assert message.endswith("use another --study_dir for this data, or give the study's own again")
    assert _snapshot(study_dir) == before

    # SASRec reads item attributes: the study binds the file's contents, not its path.
    items = tmp_path / "items.csv"
    items.write_text("item,group\n" + "".join(f"i{item},g{item % 7}\n" for item in range(1, 101)), encoding="utf-8")
    overrides = [*FIXED, f"item_features={items}"]
    features_dir = tmp_path / "features"
    start(str(features_dir), _settings("sasrec", overrides), None, data_dir, source_file, None)
    items.write_text("item,group\n" + "".join(f"i{item},g{item % 5}\n" for item in range(1, 101)), encoding="utf-8")
    before = _snapshot(features_dir)
    with pytest.raises(ValueError) as refused:
        start(str(features_dir), _settings("sasrec", overrides), None, data_dir, source_file, None)
    message = str(refused.value)
    assert message.startswith(f"{features_dir} was tuned with another --config item_features: the study's was {items} "
                              "(contents file-")
    assert f"this command's is {items} (contents file-" in message
    assert _snapshot(features_dir) == before


@pytest.mark.parametrize("url, expected", [
    ("notadb://x", "--storage 'notadb://x': SQLAlchemy knows no database 'notadb'; use sqlite, postgresql or mysql"),
    ("not a url", "--storage 'not a url' is not a database URL such as sqlite:///studies/trials.db"),
    ("sqlite:////no/such/folder/trials.db", "--storage 'sqlite:////no/such/folder/trials.db': the folder /no/such/folder "
                                            "does not exist"),
    ("postgresql://tuner@127.0.0.1:9/studies", "--storage 'postgresql://tuner@127.0.0.1:9/studies': "),
])
def test_a_storage_that_cannot_hold_the_study_is_refused_before_anything_is_written(tmp_path, url, expected):
    study_dir = tmp_path / "study"
    with pytest.raises(ValueError) as refused:  # a storage that passed would fail next on the absent source file
        start(str(study_dir), _settings(), url, str(tmp_path / "data"), str(tmp_path / "absent.txt"), None)
    message = str(refused.value)
    assert message.startswith(expected) and "\n" not in message
    if url.startswith("postgresql"):  # without its driver here, or with it and nothing listening on port 9
        assert ("its driver, the Python module 'psycopg', is not installed: install the package that provides it "
                "with pip (psycopg[binary])" in message or "the database cannot be reached" in message)
    assert not study_dir.exists() and not (tmp_path / "data").exists()


def test_a_damaged_study_database_and_a_study_dir_that_is_a_file_are_named(planted, tmp_path):
    source_file, data_dir = planted
    study_dir = tmp_path / "study"
    start(str(study_dir), _settings(), None, data_dir, source_file, None)
    database = study_dir / "study.db"
    database.write_bytes(database.read_bytes()[:5000])
    before = _snapshot(study_dir)
    with pytest.raises(ValueError) as refused:
        start(str(study_dir), _settings(), None, data_dir, source_file, None)
    assert str(refused.value).startswith(f"the study's database {database} is ")
    assert "another --study_dir" in str(refused.value) and _snapshot(study_dir) == before

    afile = tmp_path / "afile"
    afile.write_text("x", encoding="utf-8")
    with pytest.raises(ValueError, match=f"^--study_dir {afile} is a file, not a folder"):
        start(str(afile), _settings(), None, data_dir, source_file, None)
    assert afile.read_text(encoding="utf-8") == "x"


@pytest.mark.parametrize("changes, expected", [
    ({"budget": float("nan")}, "--budget must be a positive, finite number of seconds, got nan"),
    ({"budget": "1x"}, "--budget '1x' is not a duration"),
    ({"budget": None}, "--budget must be seconds or a duration such as 10m, got None"),
    ({"trial_budget": 0}, "--trial_budget must be a positive, finite number of seconds, got 0"),
    ({"eval_every": 0}, "--eval_every must be a whole number of steps, at least 1, got 0"),
    ({"min_resource": 3600}, "--min_resource (1 hour) must be below --trial_budget (6 seconds)"),
    ({"storage": "notadb://x"}, "--storage 'notadb://x': SQLAlchemy knows no database 'notadb'"),
])
def test_every_argument_of_api_tune_is_checked_before_anything_is_written(tmp_path, changes, expected):
    arguments = {"model": "bpr_mf", "budget": 18.0, "trial_budget": 6.0, "overrides": FIXED, "eval_every": 100,
                 "source_file": str(tmp_path / "absent.txt"), "data_dir": str(tmp_path / "data"), **changes}
    if "min_resource" in changes:
        with pytest.raises(ValueError) as refused:
            new_settings("beauty", "bpr_mf", None, "cpu-30m", 18.0, 6.0, FIXED, eval_every=100,
                                min_resource=changes["min_resource"])
    else:
        with pytest.raises(ValueError) as refused:
            api.tune("beauty", str(tmp_path / "study"), **arguments)
    assert str(refused.value).startswith(expected)
    assert not (tmp_path / "study").exists() and not (tmp_path / "data").exists()


def test_budgets_may_be_durations():
    settings = new_settings("beauty", "bpr_mf", None, "cpu-30m", "1m", "10s", FIXED, eval_every=100,
                                   min_resource="2s")
    assert (settings.budget, settings.trial_budget, settings.min_resource) == (60.0, 10.0, 2.0)


def test_more_jobs_than_usable_cores_is_refused(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {3})
    check_jobs(1)
    with pytest.raises(ValueError) as refused:
        check_jobs(3)
    assert str(refused.value) == ("--jobs 3 runs more trials at once than the 1 core(s) this process may use (3): each "
                                  "trial needs a core of its own, or it trains on a fraction of the compute its budget "
                                  "implies; give --jobs 1 or fewer")
    with pytest.raises(ValueError, match="--jobs must be at least 1, got 0"):
        check_jobs(0)
