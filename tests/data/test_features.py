"""Feature files: read and checked line by line, encoded in a vocabulary's order, and ML-1m's
attributes written from movies.dat and users.dat through the id maps."""

from __future__ import annotations

import gzip
import os

import numpy as np
import pytest

from bert4rec_tf.data.errors import DataError
from bert4rec_tf.data.features import MISSING, check_coverage, encode, read_features, write_movielens_features
from tests.conftest import real_file

GOOD = ("item,genres:multi,year:numeric,brand\n"
        "b,Comedy,2000,acme\n"
        "a,Animation|Comedy,1990,\n"
        "\"c\r\",,1996,zeta\n")


def _write(tmp_path, text, name="items.csv", encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return str(path)


def test_a_feature_file_is_encoded_in_the_vocabularys_order_with_hand_computed_values(tmp_path):
    table = read_features(_write(tmp_path, GOOD), key="item")
    assert table.ids == ["b", "a", "c\r"]  # a quoted id keeps its line break: "c\r" is not "c"
    assert table.kinds == {"genres": "multi", "year": "numeric", "brand": "categorical"}
    encoded = encode(table, [None, "a", "b", "c", "c\r"], unknown="ignore")
    assert encoded.vocabularies == {"genres": [MISSING, "Animation", "Comedy"], "brand": [MISSING, "acme", "zeta"]}
    np.testing.assert_array_equal(encoded.arrays["genres"], [[0, 0], [1, 2], [2, 0], [0, 0], [0, 0]])
    np.testing.assert_array_equal(encoded.arrays["brand"], [0, 0, 1, 0, 2])  # a's brand is empty: missing
    mean, std = 1995.3333333, np.std([2000, 1990, 1996])
    assert encoded.scales["year"] == pytest.approx((mean, std))
    np.testing.assert_allclose(encoded.arrays["year"], [0, (1990 - mean) / std, (2000 - mean) / std, 0,
                                                        (1996 - mean) / std], rtol=1e-6)
    assert encoded.covered == 3 and encoded.arrays["genres"].dtype == np.int32


def test_a_tab_separated_gzipped_user_file_reads_alike(tmp_path):
    path = tmp_path / "users.tsv.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("user\tgender\tage\n1\tF\t25\n2\tM\t1\n")
    table = read_features(str(path), key="user")
    assert table.values == {"gender": ["F", "M"], "age": ["25", "1"]}


@pytest.mark.parametrize("text, message", [
    ("id,genres\n1,a\n", "line 1: the first column must be named item or user, got 'id'"),
    ("item,genres:list\n1,a\n", "line 1: column 'genres' has kind 'list'; the kinds are categorical, multi, numeric"),
    ("item,year:\n1,1990\n", "line 1: column 'year' has an empty kind after its ':'; the kinds are categorical, "
                             "multi, numeric"),
    ("item\n1\n", "line 1: the header names no attribute column"),
    ("item,genres,year:numeric\n1,a,1990\n2,b\n", "line 3: 2 fields, the header has 3"),
    ("item,year:numeric\n1,1990\n2,nineteen\n", "line 3: column 'year' is numeric, got 'nineteen'"),
    ("item,year:numeric\n1,\n", "line 2: column 'year' is numeric and empty"),
    ("item,year:numeric\n1,inf\n", "line 2: column 'year' is numeric and must be finite"),
    ("item,price:numeric\n1,5\n2,-1e308\n", "line 3: column 'price' is numeric and must lie within float32's range"),
    ("item,brand\n i1,a\ni1 ,b\n", "line 3: item 'i1' appears twice (first on line 2)"),
    ("item,brand\n1,a\n1,b\n", "line 3: item '1' appears twice (first on line 2)"),
    ("item,brand\n ,a\n", "line 2: empty item id"),
    ("user,gender\n1,F\n", "line 1: is a user feature file; item attributes were asked for"),
    ("item,brand\n", "has a header but no item rows"),
    ("", "is empty: a feature file starts with a header"),
])
def test_a_bad_feature_file_is_one_line_naming_the_file_and_line(tmp_path, text, message):
    path = _write(tmp_path, text)
    with pytest.raises(DataError) as error:
        read_features(path, key="item")
    assert message in str(error.value) and str(error.value).startswith(path) and "\n" not in str(error.value)


def test_a_latin1_file_read_as_utf8_names_the_byte_and_the_encoding_to_give(tmp_path):
    path = _write(tmp_path, "item,title\n1,Amélie\n", encoding="latin-1")
    with pytest.raises(DataError, match=r"line 2: byte 0xe9 .* is not utf-8 text .*--encoding latin-1"):
        read_features(path)
    assert read_features(path, encoding="latin-1").values["title"] == ["Amélie"]


@pytest.mark.parametrize("key", ["item", "user"])
def test_an_attribute_file_that_does_not_decode_names_its_own_encoding_setting(tmp_path, key):
    path = _write(tmp_path, f"{key},title\n1,Amélie\n", encoding="latin-1")
    with pytest.raises(DataError) as error:
        read_features(path, key=key)
    assert str(error.value).endswith(f"name the file's encoding, e.g. --config {key}_features_encoding=latin-1")
    assert "--encoding" not in str(error.value)


def test_ids_lose_their_surrounding_spaces_as_in_the_interaction_files(tmp_path):
    table = read_features(_write(tmp_path, "item,brand\n i5 ,a\n\"\ti6\u00a0\",b\n"), key="item")
    assert table.ids == ["i5", "\ti6\u00a0"]  # spaces only: a tab or a non-breaking space is kept


def test_a_file_matching_no_id_of_the_data_is_refused_with_examples_of_both(tmp_path):
    path = _write(tmp_path, "item,brand\n" + "".join(f"{k},a\n" for k in range(1, 6)))
    data = [f"i{k}" for k in range(1, 6)]
    with pytest.raises(DataError) as error:
        check_coverage(read_features(path, key="item"), data)
    assert str(error.value) == (f"{path}: matches none of the data's 5 items: its ids ('1', '2', '3', ...) are not "
                                "written as the data's ('i1', 'i2', 'i3', ...); write them as the interaction file "
                                "does")


def test_a_file_matching_few_ids_of_the_data_is_worded_as_a_warning(tmp_path):
    path = _write(tmp_path, "item,brand\ni1,a\n2,b\n")
    data = [f"i{k}" for k in range(1, 5)]
    warning = check_coverage(read_features(path, key="item"), data)
    assert warning == (f"{path}: matches 1 of the data's 4 items (25%); the other 3 ('i2', 'i3', 'i4') have every "
                       "attribute missing, and 1 id(s) of the file are not the data's ('2')")
    assert check_coverage(read_features(path, key="item"), data[:2]) is None  # half: enough


def test_ids_of_the_file_missing_from_the_data_are_an_error_unless_ignored(tmp_path):
    table = read_features(_write(tmp_path, GOOD))
    with pytest.raises(DataError, match=r"1 item id\(s\) of the file are not in the data, e.g. 'c\\r'"):
        encode(table, [None, "a", "b", "c"])
    assert encode(table, [None, "a", "b", "c"], unknown="ignore").covered == 2


def _movielens(tmp_path, movies="1::Toy Story (1995)::Animation|Comedy\n7::Heat (1995)::Action\n"):
    files = {"movies.dat": movies, "users.dat": "5::F::25::4::90210\n6::M::1::10::02139-1234\n",
             "items.txt": "1 7\n2 1\n", "users.txt": "1 6\n2 5\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="iso-8859-1")
    return [str(tmp_path / name) for name in files]


def test_movielens_attributes_are_written_in_the_interaction_files_id_space(tmp_path):
    items, users = write_movielens_features(*_movielens(tmp_path), str(tmp_path / "features"))
    assert open(items).read() == "item,genres:multi,year:numeric\n1,Action,1995\n2,Animation|Comedy,1995\n"
    assert open(users).read() == "user,gender,age,occupation,zip_region\n1,M,1,10,0\n2,F,25,4,9\n"
    assert read_features(items, key="item").values["genres"] == [["Action"], ["Animation", "Comedy"]]


def test_a_movie_without_its_year_or_its_row_writes_nothing(tmp_path):
    paths = _movielens(tmp_path, movies="1::Toy Story::Animation\n7::Heat (1995)::Action\n")
    with pytest.raises(DataError, match="title 'Toy Story' ends without its year"):
        write_movielens_features(*paths, str(tmp_path / "features"))
    paths = _movielens(tmp_path, movies="1::Toy Story (1995)::Animation\n")
    with pytest.raises(DataError, match=r"movie 7 \(item 1\) is not in"):
        write_movielens_features(*paths, str(tmp_path / "features"))
    assert not (tmp_path / "features").exists()


def test_ml1m_attributes_of_the_real_files(tmp_path):
    folder = os.path.dirname(real_file("ml-1m/movies.dat.gz"))
    items, users = write_movielens_features(*(os.path.join(folder, name) for name in (
        "movies.dat.gz", "users.dat.gz", "sas_to_original_items.txt.gz", "sas_to_original_users.txt.gz")),
        str(tmp_path))
    item_table, user_table = read_features(items, key="item"), read_features(users, key="user")
    assert len(item_table.ids) == 3416 and len(user_table.ids) == 6040
    # Item 1 is MovieLens movie 1198, Raiders of the Lost Ark (1981).
    assert (item_table.values["genres"][0], item_table.values["year"][0]) == (["Action", "Adventure"], 1981.0)
    encoded = encode(item_table, [None, *map(str, range(1, 3417))])
    assert len(encoded.vocabularies["genres"]) == 19 and encoded.covered == 3416  # 18 genres and missing
    assert sorted(set(user_table.values["age"]), key=int) == ["1", "18", "25", "35", "45", "50", "56"]


def test_the_movielens_features_command_writes_both_files_or_says_what_is_missing(tmp_path, capsys):
    from bert4rec_tf.scripts import movielens_features

    assert movielens_features.main(["--folder", str(tmp_path / "none"), "--out", str(tmp_path / "out")]) == 1
    error = capsys.readouterr().err.strip()
    assert error == f"error: {tmp_path}/none/movies.dat (or .gz) not found" and not (tmp_path / "out").exists()
    folder = os.path.dirname(real_file("ml-1m/movies.dat.gz"))
    assert movielens_features.main(["--folder", folder, "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "item_features.csv: 3,416 items, attributes genres (multi), year (numeric)" in printed
    assert "user_features.csv: 6,040 users, attributes gender (categorical), age (categorical)" in printed
    assert sorted(os.listdir(tmp_path / "out")) == ["item_features.csv", "user_features.csv"]
