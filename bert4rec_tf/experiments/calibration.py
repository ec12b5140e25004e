"""How fast the cores a run trains on are, measured the same way at every commit.

Two machines of the same name and core count can run the same training step far apart (the lab
notebook has the measurements), so a one-hour budget is not the same compute on both. `measure` times
two kernels that do not depend on the package's code (so a faster model at a later commit does not
look like a faster machine):

- `float32_gflops`: a 2048^3 float32 matrix product (the best of five), the compute limit that
  the Transformer's matrix products meet;
- `stream_gbs`: an element-wise float32 add over 256 MB (bytes read and written per second, the
  best of five), the memory traffic that embeddings, softmax and the optimiser meet.

Both run on the cores of the calling process (its CPU affinity), beside whatever else runs on the
machine, as the training after it will. `reproduce.py` measures every run's cores just before it
trains and keeps the figures in the run's record; reports flag runs whose machines differ.

    python -m bert4rec_tf.experiments.calibration   # prints one JSON line
"""

from __future__ import annotations

import json
import os
import time

# Runs whose machines differ by more than this share of either figure are flagged in reports.
TOLERANCE = 0.10
# reproduce.py starts no run on cores at less than half the speed, on either figure, of the fastest
# cores that trained a run of the same experiment (unless told to): such a run's budget is a fraction
# of the others' compute, and its record would stand in for the run. Runs between
# this and TOLERANCE train and are flagged in the report; the margin is wide because a core measured
# beside a neighbour's training reads lower than the same core measured alone.
START_TOLERANCE = 0.5
FIGURES = ("float32_gflops", "stream_gbs")


def _best_seconds(function, argument, repeats: int) -> float:
    """The shortest of `repeats` timed calls of a compiled `function` on `argument` (after one untimed
    call), each until its result is materialised."""
    function(argument).numpy()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function(argument).numpy()
        best = min(best, time.perf_counter() - start)
    return best


def float32_limit(size: int = 2048, repeats: int = 5) -> float:
    """FLOP/s of a size^3 float32 matrix product on this process's cores (the best of `repeats`)."""
    import tensorflow as tf

    product = tf.function(lambda x: tf.matmul(x, x), autograph=False)
    return 2 * size ** 3 / _best_seconds(product, tf.random.normal([size, size]), repeats)


def stream_rate(megabytes: int = 256, repeats: int = 5) -> float:
    """Bytes per second read and written by an element-wise float32 add over `megabytes` (the best
    of `repeats`)."""
    import tensorflow as tf

    add = tf.function(lambda v: v + 1.0, autograph=False)
    return 2 * megabytes * 2 ** 20 / _best_seconds(add, tf.random.uniform([megabytes * 2 ** 20 // 4]), repeats)


def usable_cores() -> list[int]:
    """The cores this process may run on (its affinity; every core where the system has none)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return list(range(os.cpu_count() or 1))


def measure() -> dict:
    """This process's cores: {"float32_gflops", "stream_gbs", "cores", "time"} (a few seconds)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    cores = len(usable_cores())
    return {"float32_gflops": round(float32_limit() / 1e9, 1), "stream_gbs": round(stream_rate() / 1e9, 2),
            "cores": cores, "time": time.strftime("%Y-%m-%dT%H:%M:%S")}


def speed_range(measurements: list[dict] | None, figure: str) -> tuple[float, float] | None:
    """The lowest and highest of `figure` over a run's measurements (one per start), None if none."""
    values = [m[figure] for m in measurements or [] if isinstance(m, dict) and isinstance(m.get(figure), (int, float))]
    return (min(values), max(values)) if values else None


def fastest(runs: list[list[dict] | None]) -> dict[str, float]:
    """Per figure, the highest value over the runs (each a list of measurements) that measured both
    figures; {} when none did."""
    spans = [[speed_range(measurements, figure) for figure in FIGURES] for measurements in runs]
    measured = [run for run in spans if all(run)]
    return {figure: max(run[i][1] for run in measured) for i, figure in enumerate(FIGURES)} if measured else {}


def slower_than(measurements: list[dict] | None, reference: dict[str, float],
                tolerance: float = TOLERANCE) -> dict[str, float]:
    """The figures on which a run's slowest measurement falls more than `tolerance` below `reference`
    (the fastest of the runs compared), each as its relative difference (negative)."""
    found = {}
    for figure in FIGURES:
        span = speed_range(measurements, figure)
        if span and reference.get(figure) and span[0] < (1 - tolerance) * reference[figure]:
            found[figure] = span[0] / reference[figure] - 1
    return found


def describe(found: dict[str, float]) -> str:
    """`slower_than`'s figures in words, e.g. "float32 -30%, stream -20%"."""
    names = {"float32_gflops": "float32", "stream_gbs": "stream"}
    return ", ".join(f"{names[figure]} {value:+.0%}" for figure, value in found.items())


def main() -> None:
    print(json.dumps(measure()), flush=True)


if __name__ == "__main__":
    main()
