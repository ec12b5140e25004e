"""Scale check: a synthetic data set the size of ML-20m through preparation and one pass of dynamic masking.

Writes a MovieLens-format `ratings.csv` of --users users, --items items and --interactions rows
(long-tailed user lengths and item popularity, like MovieLens), prepares it with the ML-20m preset
without static TFRecords (the original's static generation ran out of 64 GB on large data), then
draws every training window once through the dynamic-masking pipeline. Prints the time of each
stage and the peak memory (resident set) of the process.

    bert4rec-scale-check --work_dir /tmp/scale
    bert4rec-scale-check --work_dir /tmp/scale --users 20000 --items 5000 --interactions 2000000
"""

from __future__ import annotations

import os
import resource
import sys
import time

import numpy as np
from tqdm.auto import tqdm

from bert4rec_tf import cli
from bert4rec_tf.files import atomic_path


def peak_memory_gb() -> float:
    """The peak resident set size of this process so far, in GB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20


def tailed_lengths(tail: np.ndarray, total: int, shortest: int, longest: int) -> np.ndarray:
    """User lengths `shortest + floor(scale * tail)`, at most `longest`, at the largest scale whose
    lengths add up to at most `total` (a bisection over the scale)."""
    def lengths_at(scale: float) -> np.ndarray:
        return np.minimum(longest, shortest + np.floor(scale * tail)).astype(np.int64)

    low, high = 0.0, float(total)
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if lengths_at(middle).sum() < total else (low, middle)
    return lengths_at(low)


def write_ratings(path: str, users: int, items: int, interactions: int, seed: int) -> int:
    """A MovieLens-format ratings file: every user has 20 to items / 3 distinct movies, user lengths
    Pareto-tailed, movie popularity Zipf-like. Returns the number of rows written (`interactions`)."""
    rng = np.random.default_rng(seed)
    extra = rng.pareto(1.2, users)

    longest = items // 3  # leaves every user 100 negatives to sample (ML-20m's longest history: 9,254 of 26,744)

    lengths = tailed_lengths(extra, interactions, 20, longest)
    short = np.flatnonzero(lengths < longest)[: interactions - lengths.sum()]
    lengths[short] += 1
    popularity = np.cumsum(1.0 / np.arange(1, items + 1) ** 0.9)
    popularity /= popularity[-1]
    rows = 0
    with atomic_path(path) as temporary, open(temporary, "w", encoding="utf-8") as handle:
        handle.write("userId,movieId,rating,timestamp\n")
        for user in tqdm(range(users), desc="writing ratings.csv", unit="user", mininterval=2):
            draws = np.searchsorted(popularity, rng.random(int(lengths[user] * 1.5) + 20))
            movies = draws[np.sort(np.unique(draws, return_index=True)[1])][: lengths[user]]
            if len(movies) < lengths[user]:  # a long history: the rest from the movies not drawn yet
                rest = np.setdiff1d(rng.permutation(items), movies, assume_unique=True)
                movies = np.concatenate([movies, rest[: lengths[user] - len(movies)]])
            movies = movies + 1
            stamps = 1_000_000_000 + np.sort(rng.integers(0, 10 ** 8, len(movies)))
            handle.write("".join(f"{user + 1},{m},4.0,{t}\n" for m, t in zip(movies, stamps)))
            rows += len(movies)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = cli.argument_parser(__doc__)
    parser.add_argument("--work_dir", required=True, help="folder for ratings.csv and the prepared data")
    parser.add_argument("--users", type=int, default=138_493)
    parser.add_argument("--items", type=int, default=26_744)
    parser.add_argument("--interactions", type=int, default=20_000_263)
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    from bert4rec_tf.data.instances import make_windows
    from bert4rec_tf.data.pipeline import dynamic_training_dataset
    from bert4rec_tf.data.prepare import prepare
    from bert4rec_tf.data.split import training_sequences

    os.makedirs(args.work_dir, exist_ok=True)
    source = os.path.join(args.work_dir, "ratings.csv")
    start = time.perf_counter()
    if not os.path.isfile(source):
        rows = write_ratings(source, args.users, args.items, args.interactions, args.seed)
        print(f"ratings.csv: {rows:,} rows, {os.path.getsize(source) / 1e9:.2f} GB "
              f"({time.perf_counter() - start:.0f} s)", flush=True)

    config = cli.experiment_config("ml-20m", ["static_instances=false", "dynamic_masking=true"])
    start = time.perf_counter()
    prepared = prepare(config.data, os.path.join(args.work_dir, "data"), source)
    sequences = prepared.sequences()
    print(f"preparation: {time.perf_counter() - start:.0f} s, {sequences.num_users:,} users, "
          f"{prepared.num_items:,} items; peak memory so far {peak_memory_gb():.2f} GB", flush=True)

    start = time.perf_counter()
    train = training_sequences(sequences, config.data.split)
    windows = make_windows(train, np.arange(1, len(train) + 1), config.data.max_len, config.data.prop_sliding_window)
    count = len(windows)
    batches = count // args.batch_size
    stream = iter(dynamic_training_dataset(windows, config.data, prepared.num_items, batch_size=args.batch_size))
    slots = 0
    for _ in tqdm(range(batches), desc="one pass of dynamic masking", unit="batch"):
        slots += int(next(stream)["masked_lm_weights"].numpy().sum())
    seconds = time.perf_counter() - start
    print(f"one pass of dynamic masking: {count:,} windows, {batches * args.batch_size:,} instances with "
          f"{slots:,} masked items in {seconds:.0f} s ({batches * args.batch_size / seconds:.0f} instances/s); "
          f"peak memory {peak_memory_gb():.2f} GB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
