"""Compares finished or running training runs: their validation curves side by side, the best point
of each, the test metrics of finished runs, and optionally a figure of the curves.

Example:
    bert4rec-compare-runs runs/beauty-a runs/beauty-b --metrics pop/HR@10,full/NDCG@10 \\
        --figure curves.png
    bert4rec-compare-runs "lr 1e-3=runs/a" "lr 3e-3=runs/b" --x minutes
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from bert4rec_tf import cli  # noqa: E402
from bert4rec_tf.files import read_json  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.argument_parser(__doc__)
    parser.add_argument("runs", nargs="+", help="run folders, each DIR or LABEL=DIR (label: the folder's name)")
    parser.add_argument("--metrics", default="pop/HR@10,full/NDCG@10",
                        help="validation metrics, comma-separated; the first one picks the best point")
    parser.add_argument("--figure", default=None, help="write the curves to this PNG (needs the report extra)")
    parser.add_argument("--x", choices=("step", "minutes", "samples"), default="step",
                        help="the figure's x axis; samples: training sequences seen (step x the run's batch size, "
                             "to compare runs of different batch sizes)")
    parser.add_argument("--title", default="", help="the figure's title")
    return parser.parse_args(argv)


def load_run(spec: str) -> tuple[str, str, list[dict], dict | None]:
    """(label, folder, validation points, results or None) of `spec` ("DIR" or "LABEL=DIR")."""
    label, _, folder = spec.rpartition("=")
    folder = folder.rstrip("/")
    label = label or os.path.basename(folder)
    curve_file = os.path.join(folder, "validation.json")
    if not os.path.isdir(folder):
        raise ValueError(f"{folder}: no such run folder")
    if not os.path.isfile(curve_file):
        raise ValueError(f"{folder}: no validation.json yet (the run has not validated)")
    points = read_json(curve_file, "validation curve")
    results_file = os.path.join(folder, "results.json")
    results = read_json(results_file, "results") if os.path.isfile(results_file) else None
    return label, folder, points, results


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    try:
        runs = [load_run(spec) for spec in args.runs]
        if args.figure and args.x == "samples":
            runs = [(label, folder, _with_samples(folder, points), results)
                    for label, folder, points, results in runs]
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for name in metrics:
        if not any(name in point for _, _, points, _ in runs for point in points):
            print(f"error: no run has the validation metric {name!r}", file=sys.stderr)
            return 2
    key = metrics[0]
    width = max(len(label) for label, *_ in runs)
    steps = sorted({p["step"] for _, _, points, _ in runs for p in points})
    print(f"validation {key} by step")
    print(f"{'run':<{width}} " + " ".join(f"{s:>7d}" for s in steps))
    for label, _, points, _ in runs:
        at = {p["step"]: p.get(key) for p in points}
        print(f"{label:<{width}} " + " ".join(f"{at[s]:7.4f}" if at.get(s) is not None else " " * 7 for s in steps))
    print()
    header = " ".join(f"{m:>13}" for m in metrics)
    # The test metrics are those of the checkpoint the run itself kept (chosen during training by
    # constants.SELECTION_METRIC): its step can differ from the best point of --metrics.
    print(f"{'run':<{width}} {'best step':>9} {header}  |  test at the checkpoint the run kept: {'step':>6} {header}")
    for label, _, points, results in runs:
        scored = [p for p in points if p.get(key) is not None]
        best = max(scored, key=lambda p: p[key]) if scored else {}
        test = (f"{results.get('best_step', '-'):>6} " + " ".join(f"{_test_metric(results, m):>13}" for m in metrics)
                if results else "(not finished)")
        print(f"{label:<{width}} {best.get('step', '-'):>9} "
              + " ".join(f"{best[m]:13.4f}" if best.get(m) is not None else f"{'-':>13}" for m in metrics)
              + f"  |  {test}")
    if args.figure:
        from bert4rec_tf.experiments.figures import runs_figure

        path = runs_figure({label: points for label, _, points, _ in runs}, metrics, args.figure, args.x,
                           args.title)
        print(f"\nfigure: {path}")
    return 0


def _with_samples(folder: str, points: list[dict]) -> list[dict]:
    """`points` with "samples": the training sequences seen by each point's step (the global batch of
    the run's config.json times the step)."""
    config_file = os.path.join(folder, "config.json")
    if not os.path.isfile(config_file):
        raise ValueError(f"{folder}: no config.json, so no batch size for --x samples")
    batch_size = read_json(config_file, "configuration").get("train", {}).get("batch_size")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"{config_file}: no train.batch_size for --x samples")
    return [{**point, "samples": point["step"] * batch_size} for point in points]


def _test_metric(results: dict, name: str) -> str:
    protocol, _, metric = name.partition("/")
    value = results.get("test", {}).get(protocol, {}).get(metric)
    return "-" if value is None else f"{value:.4f}"


if __name__ == "__main__":
    sys.exit(main())
