"""Feature files prepared with the data: encoded in the model's id order, bound to the data by their
contents, checked before anything is built, and refused by a family that reads none."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from bert4rec_tf import cli
from bert4rec_tf.data.errors import DataError
from bert4rec_tf.data import prepare as prepare_lib
from bert4rec_tf.data.prepare import output_directory, prepare, source_identity
from bert4rec_tf.tasks import preset
from tests.conftest import toy_sequences, write_pairs


def _config(**overrides):
    config = preset("beauty", "sasrec")
    for key, value in {"max_len": 10, **overrides}.items():
        config.override(key, value)
    return config.data


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("src")
    sequences = toy_sequences()
    items = sorted({item for history in sequences.values() for item in history}, key=int)
    with open(folder / "items.csv", "w", encoding="utf-8") as handle:
        handle.write("item,parity,size:numeric\n")
        handle.writelines(f"{item},{'even' if int(item) % 2 == 0 else 'odd'},{int(item)}\n" for item in items)
        handle.write("100000,odd,3\n")  # an item without interactions: counted, not encoded
    with open(folder / "users.csv", "w", encoding="utf-8") as handle:
        handle.write("user,group\n1,a\n2,b\n")
    return write_pairs(str(folder / "toy.txt"), sequences), str(folder / "items.csv"), str(folder / "users.csv")


def test_the_attributes_are_prepared_in_the_models_id_order(toy, tmp_path):
    source, items, users = toy
    prepared = prepare(_config(item_features=items, user_features=users), str(tmp_path), source, progress=False)
    encoded, people = prepared.features("item"), prepared.features("user")
    raw = prepared.sequences().item_ids
    vocabulary = encoded.vocabularies["parity"]
    assert vocabulary == ["<missing>", "even", "odd"]
    parity = encoded.arrays["parity"]
    assert parity.shape == (prepared.metadata["vocab_size"],) and parity[0] == 0 and parity[-1] == 0
    assert [vocabulary[parity[i]] for i in range(1, len(raw) + 1)] == [
        "even" if int(item) % 2 == 0 else "odd" for item in raw]
    mean, std = encoded.scales["size"]
    np.testing.assert_allclose(encoded.arrays["size"][1:len(raw) + 1] * std + mean, raw.astype(float), rtol=1e-5)
    assert (encoded.covered, encoded.unseen) == (len(raw), 1)
    user_ids = list(prepared.sequences().user_ids)
    groups = people.arrays["group"]
    assert groups.shape == (len(user_ids) + 1,)
    assert people.vocabularies["group"][groups[user_ids.index("1") + 1]] == "a" and groups[user_ids.index("3") + 1] == 0
    assert {"item_features.npz", "item_features.json", "user_features.npz"} <= set(prepared.metadata["files"])
    assert prepare(_config(), str(tmp_path), source, progress=False).features("item") is None


def test_the_data_key_holds_the_files_contents_not_their_paths(toy, tmp_path):
    source, items, _ = toy
    identity = source_identity(source)
    plain = output_directory(_config(), str(tmp_path), identity)
    with_features = output_directory(_config(item_features=items), str(tmp_path), identity)
    copy = str(tmp_path / "copy.csv")
    shutil.copy(items, copy)
    assert with_features != plain
    assert output_directory(_config(item_features=copy), str(tmp_path), identity) == with_features
    with open(copy, "a", encoding="utf-8") as handle:
        handle.write("100001,even,4\n")
    assert output_directory(_config(item_features=copy), str(tmp_path), identity) != with_features
    assert "item_features" not in _config().key_settings()  # without features: the key of before


def test_an_attribute_files_encoding_counts_in_the_key_when_it_is_not_the_datas(toy, tmp_path):
    source, items, _ = toy
    identity = source_identity(source)
    key = output_directory(_config(item_features=items), str(tmp_path), identity)
    assert output_directory(_config(item_features=items, item_features_encoding="utf-8"), str(tmp_path),
                            identity) == key
    assert output_directory(_config(item_features=items, item_features_encoding="latin-1"), str(tmp_path),
                            identity) != key
    assert not {"item_features_encoding", "user_features_encoding"} & set(_config().key_settings())


def _nothing_written(data_dir) -> bool:
    folder = data_dir / "beauty"
    return not folder.exists() or not [name for name in os.listdir(folder) if not name.startswith(".")]


@pytest.mark.parametrize("text, message", [
    ("user,group\n1,a\n99,b\n", r"1 user id\(s\) of the file are not in the data, e.g. .99."),
    ("user,group\n1,a,b\n", "line 2: 3 fields, the header has 2"),
])
def test_a_bad_feature_file_stops_the_preparation_before_anything_is_written(toy, tmp_path, text, message):
    source, _, _ = toy
    bad = tmp_path / "bad.csv"
    bad.write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match=message):
        prepare(_config(user_features=str(bad)), str(tmp_path / "data"), source, progress=False)
    assert _nothing_written(tmp_path / "data")


@pytest.mark.parametrize("key", ["item", "user"])
def test_a_file_whose_ids_match_none_of_the_datas_is_refused_naming_both(toy, tmp_path, key):
    source, _, _ = toy
    bad = tmp_path / "bad.csv"
    bad.write_text(f"{key},group\n" + "".join(f"x{k},a\n" for k in range(1, 5)), encoding="utf-8")
    with pytest.raises(DataError) as error:
        prepare(_config(**{f"{key}_features": str(bad)}), str(tmp_path / "data"), source, progress=False)
    assert str(error.value).startswith(f"{bad}: matches none of the data's ")
    assert "its ids ('x1', 'x2', 'x3', ...) are not written as the data's ('" in str(error.value)
    assert _nothing_written(tmp_path / "data")


def test_ids_with_surrounding_spaces_match_the_datas(toy, tmp_path):
    source, _, _ = toy
    spaced = tmp_path / "spaced.csv"
    spaced.write_text("user,group\n" + "".join(f" {user} ,a\n" for user in range(1, 13)), encoding="utf-8")
    prepared = prepare(_config(user_features=str(spaced)), str(tmp_path / "data"), source, progress=False)
    assert prepared.features("user").covered == 12


def test_a_file_matching_few_ids_is_warned_about_with_the_share(toy, tmp_path, caplog):
    source, _, users = toy  # users.csv gives 2 of the 12 users
    prepare(_config(user_features=users), str(tmp_path / "data"), source, progress=False)
    assert f"{users}: matches 2 of the data's 12 users (17%); the other 10 (" in caplog.text


def test_prepared_attributes_matching_no_id_are_prepared_again_and_refused(toy, tmp_path, monkeypatch):
    source, _, _ = toy
    bad = tmp_path / "bad.csv"
    bad.write_text("item,group\nx1,a\n", encoding="utf-8")
    config = _config(item_features=str(bad))
    with monkeypatch.context() as unchecked:  # as a preparation that did not check the coverage left it
        unchecked.setattr(prepare_lib, "check_coverage", lambda table, ids: None)
        assert prepare(config, str(tmp_path / "data"), source, progress=False).features("item").covered == 0
    with pytest.raises(DataError, match=r"bad.csv: matches none of the data's"):
        prepare(config, str(tmp_path / "data"), source, progress=False)


def test_a_latin1_attribute_file_beside_utf8_data_is_read_with_its_own_encoding(toy, tmp_path):
    source, _, _ = toy
    latin = tmp_path / "users.csv"
    latin.write_bytes("user,town\n1,Zürich\n2,Genève\n3,Genève\n4,Bern\n5,Bern\n6,Chur\n".encode("latin-1"))
    with pytest.raises(DataError) as error:
        prepare(_config(user_features=str(latin)), str(tmp_path / "data"), source, progress=False)
    assert str(error.value).startswith(f"{latin}, line 2: byte 0xfc")
    assert str(error.value).endswith("name the file's encoding, e.g. --config user_features_encoding=latin-1")
    assert _nothing_written(tmp_path / "data")
    prepared = prepare(_config(user_features=str(latin), user_features_encoding="latin-1"), str(tmp_path / "data"),
                       source, progress=False)
    assert prepared.features("user").vocabularies["town"] == ["<missing>", "Bern", "Chur", "Genève", "Zürich"]
    assert prepared.metadata["source"]["encoding"] == "utf-8"  # the data are still read as UTF-8


def test_a_family_that_reads_no_attributes_refuses_a_feature_file(toy):
    _, items, _ = toy
    with pytest.raises(ValueError, match=r"^--config item_features: gru4rec reads no item attributes \(families "
                                         r"that do: bert4rec, bert4rec_match, sasrec\)$"):
        cli.experiment_config("beauty", [f"item_features={items}"], None, "gru4rec", None)
    with pytest.raises(ValueError, match=r"^--config user_features: bert4rec_match reads no user attributes "
                                         r"\(families that do: bert4rec, sasrec\)$"):
        cli.experiment_config("beauty", [f"user_features={items}"], None, "bert4rec_match", None)
    with pytest.raises(ValueError, match=r"^--config attributes_at_output=true scores items from their attributes"):
        cli.experiment_config("beauty", ["attributes_at_output=true"], None, "sasrec", None)
    with pytest.raises(ValueError, match=r"^--config feature_items=true adds the items of the item feature file"):
        cli.experiment_config("beauty", ["feature_items=true"], None, "sasrec", None)
    with pytest.raises(ValueError, match=r"^--config user_features_encoding=latin-1 is the encoding of the user "
                                         r"feature file: give it with --config user_features=FILE$"):
        cli.experiment_config("beauty", ["user_features_encoding=latin-1"], None, "sasrec", None)
    with pytest.raises(ValueError, match=r"^--config item_features_encoding must be a text encoding Python knows"):
        cli.experiment_config("beauty", [f"item_features={items}", "item_features_encoding=klingon"], None, "sasrec",
                              None)


def test_feature_items_without_attributes_at_output_is_refused_saying_why(toy):
    _, items, _ = toy
    with pytest.raises(ValueError) as error:
        cli.experiment_config("beauty", [f"item_features={items}", "feature_items=true"], None, "sasrec", None)
    assert str(error.value) == ("--config feature_items=true adds items without interactions, whose own embedding "
                                "rows never train: give --config attributes_at_output=true too, so that they are "
                                "scored from their attributes")
    cli.experiment_config("beauty", [f"item_features={items}", "feature_items=true", "attributes_at_output=true"],
                          None, "sasrec", None)
