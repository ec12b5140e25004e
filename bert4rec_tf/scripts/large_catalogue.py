"""Large-catalogue check: a synthetic data set of a million items through the whole job.

Writes a custom-format `interactions.csv` (header user,item,timestamp) of --users users over
--items items with about --interactions rows, then runs the package's own commands on it, each in a
process of its own, and prints each one's wall time and peak resident memory:

1. `prepare_data.py --dataset custom` (dynamic masking: no TFRecords);
2. `train.py --model <--model> --loss sampled_softmax --recipe cpu-30m` for --minutes (BERT4Rec by
   default, or another model with a softmax over the catalogue, such as SASRec; negatives drawn by
   popularity ** --negative_alpha), validating and testing on a fixed sample of --eval_users users
   (`train.eval_users`);
3. `evaluate.py --eval_users` (pop-100, uniform-100 and full ranking of every item);
4. `recommend.py` for one user's history, through the exported SavedModel.

    bert4rec-large-catalogue --work_dir /tmp/large
    bert4rec-large-catalogue --work_dir /tmp/tiny --users 2000 --items 10000 --interactions 100000 --minutes 1

The data: user lengths are 10 plus a Pareto tail (at most 2,000), scaled to the interactions asked
for, before repeats are dropped (so a few percent fewer rows than asked); item
popularity is Zipf-like (item k drawn with weight k^-0.9). A planted sequential pattern gives a
model something to learn beyond popularity: each next item is, with probability 0.6, 1 to 10 ids
after the user's previous item, and otherwise a new draw by popularity. A user's repeated items are
dropped (keeping the first), and every item no walk reached is given to a random user at a random
time, so the catalogue has exactly --items items. POP is printed beside the model (`results.json`'s
validation of POP on the same users).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np

from bert4rec_tf import cli
from bert4rec_tf.files import atomic_path, package_environment, write_json_atomic
from bert4rec_tf.scripts.scale_check import tailed_lengths
from bert4rec_tf.tasks import preset

FOLLOW = 0.6  # the chance that the next item follows the previous one
STRIDE = 10  # how far it follows: 1 to STRIDE ids after it
ZIPF = 0.9
LONGEST = 2_000  # the longest user sequence (before repeats are dropped)


def interactions(users: int, items: int, count: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The synthetic interactions as (user, item, timestamp) arrays, sorted by user then time.

    Users are 1..users, items 1..items (every item occurs at least once), timestamps increase within a
    user. See the module's docstring for the pattern.
    """
    if items < STRIDE + 1 or users < 1 or count < users * 10:
        raise ValueError(f"need at least {STRIDE + 1} items, one user and 10 interactions per user; got {items:,} "
                         f"items, {users:,} users, {count:,} interactions")
    rng = np.random.default_rng(seed)
    tail = rng.pareto(1.2, users)
    longest = min(LONGEST, items // 2)

    lengths = tailed_lengths(tail, count, 10, longest)  # adding up to `count` before repeats are dropped
    user = np.repeat(np.arange(1, users + 1), lengths)  # [n]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    n = len(user)
    # The walk: at a restart (each user's first item, or with probability 1 - FOLLOW) a popularity
    # draw, otherwise the previous item plus 1..STRIDE (wrapping around the catalogue).
    restart = rng.random(n) >= FOLLOW
    restart[starts] = True
    weights = np.cumsum(1.0 / np.arange(1, items + 1) ** ZIPF)
    drawn = np.searchsorted(weights / weights[-1], rng.random(n))  # 0-based item
    steps = np.where(restart, 0, rng.integers(1, STRIDE + 1, n))
    climbed = np.cumsum(steps)
    last_restart = np.maximum.accumulate(np.where(restart, np.arange(n), 0))
    item = (drawn[last_restart] + climbed - climbed[last_restart]) % items + 1
    position = np.arange(n) - starts[user - 1]  # within the user
    # Keep each user's first occurrence of an item.
    _, first = np.unique(user.astype(np.int64) * (items + 1) + item, return_index=True)
    keep = np.sort(first)
    user, item, position = user[keep], item[keep], position[keep]
    # Every item no walk reached goes to a random user at a random point of their sequence.
    missing = np.setdiff1d(np.arange(1, items + 1), item, assume_unique=False)
    extra_user = rng.integers(1, users + 1, len(missing))
    extra_position = rng.random(len(missing)) * lengths[extra_user - 1]
    user = np.concatenate([user, extra_user])
    item = np.concatenate([item, missing])
    when = np.concatenate([position.astype(np.float64), extra_position])  # ties: probability zero
    order = np.lexsort((when, user))
    user, item = user[order], item[order]
    first_row = np.searchsorted(user, user)  # each row's user's first row
    return user, item, 1_000_000_000 + 60 * (np.arange(len(user)) - first_row)  # a minute apart


def write_interactions(path: str, users: int, items: int, count: int, seed: int) -> int:
    """Writes `interactions` as a custom-format CSV (header user,item,timestamp); returns its rows."""
    import pandas as pd

    user, item, stamp = interactions(users, items, count, seed)
    with atomic_path(path) as temporary:
        pd.DataFrame({"user": user, "item": item, "timestamp": stamp}).to_csv(temporary, index=False)
    return len(user)


def _sampled_models() -> list[str]:
    """The registered models whose loss can be `sampled_softmax`."""
    from bert4rec_tf.tasks import TASKS

    return [name for name, task in TASKS.items() if "sampled_softmax" in task.losses]


def run_stage(name: str, arguments: list[str], log_path: str) -> dict:
    """Runs one command in a new process, its output into `log_path`; returns its wall time (s), peak
    resident memory (GB) and exit status, printed as one line."""
    start = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as log:
        process = subprocess.Popen([sys.executable, *arguments], stdout=log, stderr=subprocess.STDOUT,
                                   env=package_environment())
        _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - start
    stage = {"seconds": round(seconds, 1), "peak_gb": round(usage.ru_maxrss / 2 ** 20, 2),
             "exit": process.returncode}
    print(f"{name}: {seconds:.0f} s, peak resident memory {stage['peak_gb']:.2f} GB"
          + ("" if process.returncode == 0 else f", FAILED with exit status {process.returncode} (see {log_path})"),
          flush=True)
    return stage


def main(argv: list[str] | None = None) -> int:
    parser = cli.argument_parser(__doc__)
    parser.add_argument("--work_dir", required=True, help="folder for the data, the run and the logs")
    parser.add_argument("--users", type=int, default=200_000)
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--interactions", type=int, default=10_000_000)
    parser.add_argument("--minutes", type=float, default=30.0, help="training time budget")
    parser.add_argument("--eval_users", type=int, default=10_000, help="users validated, tested and evaluated")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sparse_updates", action="store_true",
                        help="train with train.sparse_updates=true (only the item rows a batch touched move)")
    parser.add_argument("--negative_alpha", type=float, default=1.0,
                        help="the sampled negatives' popularity exponent (model.negative_alpha; 0: uniform)")
    parser.add_argument("--model", default="bert4rec", choices=_sampled_models(),
                        help="the model trained (one whose loss can be the sampled softmax)")
    parser.add_argument("--run_name", default="run",
                        help="the run's folder in --work_dir: another name trains again on the same data")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting for the prepare and train stages alike (repeatable), e.g. max_len=10")
    args = parser.parse_args(argv)
    # Bad input (a malformed --config, too small a catalogue) ends in one line, `error: ...`, and exit 1.
    return cli.guarded(lambda: _run(args))


def _run(args) -> int:
    """The stages of `main`; the exit status (1 when a stage failed)."""
    # The settings are checked before the data is written: each stage would otherwise refuse them later.
    cli.experiment_config("custom", args.config, model=args.model, recipe="cpu-30m")
    root = os.path.abspath(args.work_dir)
    os.makedirs(root, exist_ok=True)
    source = os.path.join(root, "interactions.csv")
    data_dir, model_dir = os.path.join(root, "data"), os.path.join(root, args.run_name)
    if not os.path.isfile(source):
        start = time.perf_counter()
        rows = write_interactions(source, args.users, args.items, args.interactions, args.seed)
        print(f"interactions.csv: {rows:,} rows, {os.path.getsize(source) / 1e9:.2f} GB "
              f"({time.perf_counter() - start:.0f} s)", flush=True)
    # What the prepare and train stages share, the model included: training reads the data prepared for it.
    data = ["--dataset", "custom", "--source_file", source, "--data_dir", data_dir, "--model", args.model,
            *(part for setting in args.config for part in ("--config", setting))]
    # The cpu-30m recipe's settings (dynamic masking, batch 128, rate 3e-3), with the time asked for.
    settings = ["--recipe", "cpu-30m", "--time_budget", f"{args.minutes * 60:.0f}s",
                "--config", f"train.eval_users={args.eval_users}",
                "--config", f"model.negative_alpha={args.negative_alpha}"]
    if args.sparse_updates:
        settings += ["--config", "train.sparse_updates=true"]
    # No static instances: a family that masks its windows masks them as it trains (only it takes the setting).
    masking = (["--config", "static_instances=false", "--config", "train.dynamic_masking=true"]
               if preset("custom", args.model).has("train.dynamic_masking") else [])
    stages = {
        "prepare": ["-m", "bert4rec_tf.scripts.prepare_data", *data, *masking],
        "train": ["-m", "bert4rec_tf.scripts.train", *data, "--model_dir", model_dir, "--loss", "sampled_softmax",
                  *settings],
        "evaluate": ["-m", "bert4rec_tf.scripts.evaluate", "--model_dir", model_dir,
                     "--eval_users", str(args.eval_users)],
        "serve": ["-m", "bert4rec_tf.scripts.recommend", "--model_dir", model_dir,
                  "--history", " ".join(str(k) for k in range(1, 21))],
    }
    # The logs and the report of a run named other than "run" carry its name.
    prefix = "" if args.run_name == "run" else f"{args.run_name}-"
    report = {}
    for name, arguments in stages.items():
        report[name] = run_stage(name, arguments, os.path.join(root, f"{prefix}{name}.log"))
        if report[name]["exit"] != 0:
            return 1
    with open(os.path.join(model_dir, "results.json"), encoding="utf-8") as handle:
        results = json.load(handle)
    full = results["test"]["full"]
    pop = results.get("pop_validation", {}).get("full", {})
    print(f"test on {results.get('evaluated_users', args.users):,} users: full Recall@10 {full['Recall@10']:.4f}, "
          f"NDCG@10 {full['NDCG@10']:.4f}; its validation above POP's: {results.get('above_pop')}"
          + (f" (POP's validation full Recall@10 {pop['Recall@10']:.4f}, NDCG@10 {pop['NDCG@10']:.4f})"
             if pop else ""), flush=True)
    write_json_atomic(os.path.join(root, f"{prefix}report.json"),
                      {"stages": report, "model": args.model, "train_settings": settings, "config": args.config,
                       "test": results["test"],
                       "above_pop": results.get("above_pop"), "pop_validation": results.get("pop_validation")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
