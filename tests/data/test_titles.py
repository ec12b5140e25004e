"""Titles and id maps for printed recommendations."""

import gzip

import pytest

from bert4rec_tf.data.titles import read_id_map, read_titles, title_of


def test_titles_through_a_gzipped_id_map(tmp_path):
    movies = tmp_path / "movies.dat.gz"
    with gzip.open(movies, "wt", encoding="iso-8859-1") as handle:
        handle.write("1193::One Flew Over the Cuckoo's Nest (1975)::Drama\n2::Amélie (2001)::Comedy\n")
    mapping = tmp_path / "map.txt.gz"
    with gzip.open(mapping, "wt", encoding="utf-8") as handle:
        handle.write("1 1193\n\n2 2\n")
    titles, id_map = read_titles(str(movies)), read_id_map(str(mapping))
    assert title_of("1", titles, id_map) == "One Flew Over the Cuckoo's Nest (1975)"
    assert title_of("2", titles, id_map) == "Amélie (2001)"
    assert title_of("3", titles, id_map) == "" and title_of("1193", titles) == titles["1193"]


def test_a_malformed_id_map_line_is_named(tmp_path):
    mapping = tmp_path / "map.txt"
    mapping.write_text("1 1193\n2\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"map.txt, line 2: expected 'from_id to_id', got '2'"):
        read_id_map(str(mapping))
