"""compare_runs.py: the validation table, the best point, the test metrics, the figure, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

SCRIPT = os.path.join(REPO, "run_scripts", "compare_runs.py")


def compare(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=300)


def make_run(folder, hr, ndcg, test=None):
    os.makedirs(folder)
    points = [{"step": step, "seconds": 60.0 * i, "pop/HR@10": h, "full/NDCG@10": n}
              for i, (step, h, n) in enumerate(zip((100, 200, 300), hr, ndcg), start=1)]
    with open(os.path.join(folder, "validation.json"), "w", encoding="utf-8") as handle:
        json.dump(points, handle)
    if test is not None:
        with open(os.path.join(folder, "results.json"), "w", encoding="utf-8") as handle:
            json.dump({"test": {"pop": {"HR@10": test[0]}, "full": {"NDCG@10": test[1]}}, "best_step": 300}, handle)
    return str(folder)


def test_table_best_point_test_metrics_and_figure(tmp_path):
    a = make_run(tmp_path / "a", [0.1, 0.3, 0.2], [0.01, 0.02, 0.03], test=(0.25, 0.015))
    b = make_run(tmp_path / "b", [0.2, 0.25, 0.4], [0.02, 0.01, 0.05])
    figure = tmp_path / "curves.png"
    result = compare(f"first={a}", b, "--figure", str(figure), "--x", "minutes")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1].split() == ["run", "100", "200", "300"]
    assert lines[2].split() == ["first", "0.1000", "0.3000", "0.2000"]
    first = next(line for line in lines[4:] if line.startswith("first"))
    second = next(line for line in lines[4:] if line.startswith("b "))
    # The best point by the first metric (pop/HR@10): step 200 for "first", 300 for "b".
    assert first.split()[1:4] == ["200", "0.3000", "0.0200"]
    # The test metrics are the run's own best checkpoint's (step 300 in results.json), not step 200's.
    assert first.split("|")[1].split() == ["300", "0.2500", "0.0150"]
    assert second.split()[1:4] == ["300", "0.4000", "0.0500"] and "(not finished)" in second
    assert figure.stat().st_size > 10_000


def test_bad_input_is_one_line(tmp_path):
    result = compare(str(tmp_path / "missing"))
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0 and "no such run folder" in result.stderr
    run = make_run(tmp_path / "a", [0.1, 0.2, 0.3], [0.1, 0.2, 0.3])
    result = compare(run, "--metrics", "pop/HR@11")
    assert result.returncode == 2 and "pop/HR@11" in result.stderr
    os.remove(os.path.join(run, "validation.json"))
    result = compare(run)
    assert result.returncode == 2 and "no validation.json" in result.stderr


def test_damaged_curve_is_named(tmp_path):
    run = make_run(tmp_path / "a", [0.1, 0.2, 0.3], [0.1, 0.2, 0.3])
    with open(os.path.join(run, "validation.json"), "w", encoding="utf-8") as handle:
        handle.write('[{"step": 1')
    result = compare(run)
    assert result.returncode == 2 and "validation.json: the validation curve is damaged" in result.stderr


def test_every_line_of_a_crowded_figure_looks_different(tmp_path, monkeypatch):
    # matplotlib's default cycle repeats its ten colours: the 11th run looked like the 1st.
    pytest.importorskip("matplotlib")
    from bert4rec_tf.evaluation.attention_plot import pyplot
    from bert4rec_tf.experiments import figures

    drawn = []
    plt = pyplot()
    monkeypatch.setattr(figures, "_save", lambda figure, path: drawn.append(figure) or path)
    curves = {f"run{i}": [{"step": 1, "pop/HR@10": 0.1 * i}, {"step": 2, "pop/HR@10": 0.2}] for i in range(14)}
    figures.runs_figure(curves, ["pop/HR@10"], str(tmp_path / "x.png"))
    lines = drawn[0].axes[0].get_lines()
    looks = {(line.get_color(), line.get_linestyle(), line.get_marker()) for line in lines}
    assert len(lines) == 14 and len(looks) == 14
    plt.close(drawn[0])


def _write_batch_size(folder, batch_size):
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as handle:
        json.dump({"train": {"batch_size": batch_size}}, handle)


def test_samples_axis_puts_runs_of_different_batch_sizes_at_equal_data(tmp_path, monkeypatch):
    # A run of batch 256 at step 100 has seen what a run of batch 128 sees at step 200.
    pytest.importorskip("matplotlib")
    from bert4rec_tf.evaluation.attention_plot import pyplot
    from bert4rec_tf.experiments import compare_runs, figures

    small = make_run(tmp_path / "b128", [0.1, 0.2, 0.3], [0.01, 0.02, 0.03])
    large = make_run(tmp_path / "b256", [0.15, 0.25, 0.35], [0.01, 0.02, 0.03])
    _write_batch_size(small, 128)
    _write_batch_size(large, 256)
    drawn = []
    monkeypatch.setattr(figures, "_save", lambda figure, path: drawn.append(figure) or path)
    assert compare_runs.main([small, large, "--figure", str(tmp_path / "x.png"), "--x", "samples"]) == 0
    lines = drawn[0].axes[0].get_lines()
    assert [list(line.get_xdata()) for line in lines] == [[12800, 25600, 38400], [25600, 51200, 76800]]
    assert drawn[0].axes[0].get_xlabel() == "training sequences seen (step x batch size)"
    # Tick labels are short (six digits each ran into the next): 250000 -> 250k.
    assert [figures._short_number(v) for v in (500, 64000, 250000, 2000000)] == ["500", "64k", "250k", "2M"]
    pyplot().close(drawn[0])
    # Without the batch size the axis cannot be drawn: one line naming the folder.
    os.remove(os.path.join(large, "config.json"))
    result = compare(small, large, "--figure", str(tmp_path / "y.png"), "--x", "samples")
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0
    assert "b256: no config.json" in result.stderr and not (tmp_path / "y.png").exists()
    # ... and before any output, as for the other bad input (no half-printed table above the error).
    assert result.stdout == ""
