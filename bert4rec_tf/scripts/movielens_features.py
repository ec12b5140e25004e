"""Writes ML-1m's item and user attribute files in the id space of its interaction file.

From MovieLens' movies.dat (genres, several per movie; the year in the title) and users.dat (gender,
age group, occupation, zip code), through the id maps to MovieLens ids (`sas_to_original_items.txt`,
`sas_to_original_users.txt`, plain or .gz): `item_features.csv` and `user_features.csv` in `--out`,
for `bert4rec-train --dataset ml-1m --config item_features=... --config user_features=...`.

Example:
    bert4rec-movielens-features --folder ../shared/datasets/ml-1m --out features/ml-1m
"""

from __future__ import annotations

import os

from bert4rec_tf import cli

NAMES = ("movies.dat", "users.dat", "sas_to_original_items.txt", "sas_to_original_users.txt")


def parse_args(argv: list[str] | None = None):
    parser = cli.argument_parser(__doc__)
    parser.add_argument("--folder", required=True,
                        help="the folder with movies.dat, users.dat and the two id maps (each plain or .gz)")
    parser.add_argument("--out", required=True, help="the folder the two feature files are written to")
    return parser.parse_args(argv)


def found(folder: str, name: str) -> str:
    """`folder/name` or `folder/name.gz`, whichever exists."""
    for candidate in (name, name + ".gz"):
        if os.path.isfile(os.path.join(folder, candidate)):
            return os.path.join(folder, candidate)
    raise FileNotFoundError(f"{os.path.join(folder, name)} (or .gz) not found")


def _run(args) -> None:
    from bert4rec_tf.data.features import read_features, write_movielens_features

    items, users = write_movielens_features(*(found(args.folder, name) for name in NAMES), args.out)
    for path, key in ((items, "item"), (users, "user")):
        table = read_features(path, key=key)
        attributes = ", ".join(f"{name} ({kind})" for name, kind in table.kinds.items())
        print(f"{path}: {len(table.ids):,} {key}s, attributes {attributes}")
    print(f"train with: --config item_features={items} --config user_features={users}")


def main(argv: list[str] | None = None) -> int:
    """The `bert4rec-movielens-features` command."""
    args = parse_args(argv)
    return cli.guarded(lambda: _run(args))


if __name__ == "__main__":
    raise SystemExit(main())
