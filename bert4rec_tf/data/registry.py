"""The data sets the package knows: official sources and the preprocessing each needs."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """One data set.

    Attributes:
        name: the name used by the command-line tools.
        description: where it comes from.
        url: the official raw source (None: the user must give a file).
        filename: the cached download's name.
        sha256: the pinned digest of the official file (the MovieLens zips: GroupLens' files as
            recorded by tensorflow-datasets). None where no digest is published (Amazon, Steam):
            then the first complete download's digest is recorded and enforced afterwards.
        min_user_interactions: users with fewer interactions are dropped.
        min_item_interactions: items with fewer interactions are dropped (0: no item filter).
        paper_counts: (users, items, actions) reported for it, for the documentation.
        source_format: the reader format every source must have; None: detected from the file
            (the official raw format or the original code's preprocessed files).
    """

    name: str
    description: str
    url: str | None
    filename: str | None
    sha256: str | None
    min_user_interactions: int = 5
    min_item_interactions: int = 0
    paper_counts: tuple[int, int, int] | None = None
    source_format: str | None = None


_AMAZON = "http://snap.stanford.edu/data/amazon/productGraph/categoryFiles/"

DATASETS: dict[str, DatasetSpec] = {spec.name: spec for spec in (
    DatasetSpec(
        name="ml-1m",
        description="MovieLens 1M (GroupLens); movies with fewer than 5 ratings are dropped",
        url="https://files.grouplens.org/datasets/movielens/ml-1m.zip",
        filename="ml-1m.zip",
        sha256="a6898adb50b9ca05aa231689da44c217cb524e7ebd39d264c56e2832f2c54e20",
        min_item_interactions=5,
        paper_counts=(6040, 3416, 999_611),
    ),
    DatasetSpec(
        name="ml-20m",
        description="MovieLens 20M (GroupLens); every rated movie is kept",
        url="https://files.grouplens.org/datasets/movielens/ml-20m.zip",
        filename="ml-20m.zip",
        sha256="96f243c338a8665f6bcc89c53edf6ee39162a846940de6b7c8c48aeada765ff3",
        paper_counts=(138_493, 26_744, 20_000_263),
    ),
    DatasetSpec(
        name="beauty",
        description="Amazon Beauty ratings (McAuley 2014); users >= 5, items not filtered",
        url=_AMAZON + "ratings_Beauty.csv",
        filename="ratings_Beauty.csv",
        sha256=None,
        paper_counts=(40_226, 54_542, 353_962),
    ),
    DatasetSpec(
        name="steam",
        description="Steam reviews (Kang & McAuley 2018); users >= 5 and items >= 5",
        url="http://cseweb.ucsd.edu/~wckang/steam_reviews.json.gz",
        filename="steam_reviews.json.gz",
        sha256=None,
        min_item_interactions=5,
        paper_counts=(281_428, 13_044, 3_500_000),
    ),
    DatasetSpec(
        name="video-games",
        description="Amazon Video Games 5-core reviews (McAuley 2014)",
        url=_AMAZON + "reviews_Video_Games_5.json.gz",
        filename="reviews_Video_Games_5.json.gz",
        sha256=None,
        min_item_interactions=5,
        paper_counts=(24_303, 10_672, 231_780),
    ),
    DatasetSpec(
        name="beauty-5core",
        description="Amazon Beauty 5-core reviews (McAuley 2014), as in the matching-task paper",
        url=_AMAZON + "reviews_Beauty_5.json.gz",
        filename="reviews_Beauty_5.json.gz",
        sha256=None,
        min_item_interactions=5,
        paper_counts=(22_363, 12_101, 198_502),
    ),
    DatasetSpec(
        name="custom",
        description="your own CSV or TSV with a header naming user, item, timestamp (rating optional)",
        url=None,
        filename=None,
        sha256=None,
        source_format="custom",
    ),
)}


def get_spec(name: str) -> DatasetSpec:
    """The spec of data set `name`.

    Raises:
        ValueError: for an unknown name, listing the known ones.
    """
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    return DATASETS[name]
