"""The report's validation-curve figure: one row per data set, one panel per protocol."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from bert4rec_tf.constants import metric_label  # noqa: E402
from bert4rec_tf.experiments import figures  # noqa: E402


def _record(dataset, setting, curve, test=None):
    return {"dataset": dataset, "setting": setting, "curve": curve, "test": test or {}}


def _curve(scale):
    return [{"seconds": 60.0 * step, "pop/NDCG@10": scale * step, "full/NDCG@10": scale * step / 10}
            for step in (1, 2, 3)]


def test_metric_labels_name_the_protocols_as_the_tables_do():
    assert metric_label("pop/NDCG@10") == "pop-100 NDCG@10"
    assert metric_label(("pop", "NDCG@10")) == "pop-100 NDCG@10"
    assert metric_label("full/Recall@10") == "full ranking Recall@10"
    assert metric_label("uniform/MRR") == "uniform-100 MRR"


def test_curves_figure_draws_a_panel_per_protocol_and_a_row_per_data_set(tmp_path):
    import matplotlib.image

    records = [_record("ml-1m", "bert4rec", _curve(0.1)), _record("ml-1m", "sasrec-ce", _curve(0.2)),
               _record("ml-1m", "pop", [], {"pop": {"NDCG@10": 0.05}, "full": {"NDCG@10": 0.01}})]
    one = figures.curves_figure(records, str(tmp_path / "one.png"))
    height, width = matplotlib.image.imread(one).shape[:2]
    assert 2.4 < width / height < 4.0  # two panels side by side, each about 6 x 4
    two = figures.curves_figure([*records, _record("beauty", "bert4rec", _curve(0.05))],
                                str(tmp_path / "two.png"))
    height, width = matplotlib.image.imread(two).shape[:2]
    assert 1.2 < width / height < 2.0  # a second row for the second data set
    # Only POP (no curve): nothing to draw, no file.
    assert figures.curves_figure(records[2:], str(tmp_path / "none.png")) is None
    assert not (tmp_path / "none.png").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.png", "two.png"]  # no temporary left


def test_a_run_keeps_its_line_style_across_figures(monkeypatch, tmp_path):
    """With the plan's order, a setting is drawn alike in every data set's figure, whichever runs have
    finished (on 2026-11-25 BERT4Rec was orange on ML-1m and blue on Beauty)."""
    drawn = []
    import matplotlib.axes

    original = matplotlib.axes.Axes.plot

    def plot(self, *args, **kwargs):
        drawn.append((kwargs.get("label"), kwargs.get("color"), kwargs.get("linestyle")))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", plot)
    order = ["pop", "sasrec-ce", "bert4rec", "bert4rec-match"]
    figures.curves_figure([_record("ml-1m", "bert4rec-match", _curve(0.1)), _record("ml-1m", "bert4rec", _curve(0.1)),
                           _record("ml-1m", "sasrec-ce", _curve(0.2))], str(tmp_path / "a.png"), order=order)
    first = dict((label, (color, line)) for label, color, line in drawn)
    drawn.clear()
    figures.curves_figure([_record("beauty", "bert4rec", _curve(0.1)), _record("beauty", "sasrec-ce", _curve(0.2))],
                          str(tmp_path / "b.png"), order=order)
    second = dict((label, (color, line)) for label, color, line in drawn)
    assert second["bert4rec"] == first["bert4rec"] and second["sasrec-ce"] == first["sasrec-ce"]
    assert len(set(first.values())) == 3  # and the runs of one figure differ
    # The legend follows the plan's order, not the records'.
    assert [label for label, *_ in drawn[:2]] == ["sasrec-ce", "bert4rec"]


def test_the_steps_view_draws_quality_against_steps(monkeypatch, tmp_path):
    """Two runs that took the same steps at different paces (machines) share their x values in the
    steps view and not in the minutes view."""
    import matplotlib.axes

    drawn = []
    original = matplotlib.axes.Axes.plot

    def plot(self, xs, *args, **kwargs):
        drawn.append((kwargs.get("label"), list(xs)))
        return original(self, xs, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", plot)
    fast = [{"step": 500 * i, "seconds": 60.0 * i, "pop/NDCG@10": 0.1 * i} for i in (1, 2)]
    slow = [{"step": 500 * i, "seconds": 90.0 * i, "pop/NDCG@10": 0.1 * i} for i in (1, 2)]
    records = [_record("ml-1m", "fast", fast), _record("ml-1m", "slow", slow)]
    figures.curves_figure(records, str(tmp_path / "minutes.png"), metrics=("pop/NDCG@10",))
    assert dict(drawn) == {"fast": [1.0, 2.0], "slow": [1.5, 3.0]}
    drawn.clear()
    figures.curves_figure(records, str(tmp_path / "steps.png"), metrics=("pop/NDCG@10",), x="step")
    assert dict(drawn) == {"fast": [500, 1000], "slow": [500, 1000]}


def _sweep_rows(dataset, values):
    return [{"dataset": dataset, "value": v, "pop/HR@10": 0.5 + v / 1000, "pop/NDCG@10": 0.3 + v / 1000,
             "samples_per_second": 1000.0 / v} for v in values]


def test_the_sweep_figures_draw_the_papers_shape_beside_ours(monkeypatch, tmp_path):
    """max_len: the paper's Table 4 at every length it reports (ours here at two of them); mask_proportion:
    the paper's best rho per data set (0.2 on ML-1m, 0.6 on Beauty); hidden_size: no published number."""
    import matplotlib.axes

    drawn, lines = [], []
    original_plot, original_vline = matplotlib.axes.Axes.plot, matplotlib.axes.Axes.axvline

    def plot(self, xs, ys, *args, **kwargs):
        drawn.append((kwargs.get("label"), list(xs), list(ys)))
        return original_plot(self, xs, ys, *args, **kwargs)

    def axvline(self, x, *args, **kwargs):
        lines.append((kwargs.get("label"), x))
        return original_vline(self, x, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", plot)
    monkeypatch.setattr(matplotlib.axes.Axes, "axvline", axvline)
    figures.sweep_figure(_sweep_rows("ml-1m", [100, 200]), "max_len", str(tmp_path / "max_len.png"))
    paper = {label: (xs, ys) for label, xs, ys in drawn if label and label.startswith("paper")}
    assert paper["paper HR@10"] == ([10.0, 50.0, 100.0, 200.0, 400.0], [0.6788, 0.6854, 0.6947, 0.6955, 0.6898])
    assert paper["paper NDCG@10"][1] == [0.4631, 0.4743, 0.4758, 0.4759, 0.4715]
    assert lines == []

    drawn.clear()
    figures.sweep_figure(_sweep_rows("ml-1m", [0.1, 0.2]) + _sweep_rows("beauty", [0.6]), "mask_proportion",
                         str(tmp_path / "mask_proportion.png"))
    assert lines == [("paper's best rho (0.2)", 0.2), ("paper's best rho (0.6)", 0.6)]
    assert not [label for label, *_ in drawn if label.startswith("paper")]

    lines.clear(), drawn.clear()
    figures.sweep_figure(_sweep_rows("beauty", [32, 64]), "hidden_size", str(tmp_path / "hidden_size.png"))
    assert lines == [] and [label for label, *_ in drawn] == ["test pop-100 HR@10", "test pop-100 NDCG@10"]


def test_steps_of_runs_of_very_different_lengths_are_drawn_on_a_log_axis(monkeypatch, tmp_path):
    """On 2026-12-04 the Transformers' 5,000 steps were a vertical line at 0 beside BPR-MF's 400,000."""
    import matplotlib.axes

    scales = []
    original = matplotlib.axes.Axes.set_xscale
    monkeypatch.setattr(matplotlib.axes.Axes, "set_xscale", lambda self, value, **kw: (scales.append(value),
                                                                                         original(self, value, **kw)))

    def stepped(last):
        return [{"step": step, "pop/NDCG@10": 0.1, "full/NDCG@10": 0.01} for step in (0, last // 2, last)]

    long = [_record("ml-1m", "bpr-mf", stepped(400_000)), _record("ml-1m", "bert4rec", stepped(5_000))]
    figures.curves_figure(long, str(tmp_path / "long.png"), x="step")
    assert scales == ["log", "log"]  # both panels
    scales.clear()
    figures.curves_figure([_record("ml-1m", "bpr-mf", stepped(8_000)), _record("ml-1m", "bert4rec", stepped(5_000))],
                          str(tmp_path / "near.png"), x="step")
    figures.curves_figure(long, str(tmp_path / "minutes.png"))  # time: always linear
    assert scales == []
    # On 2026-12-06 Beauty's full-ranking panel was linear: NCF, the longest run, has no full-ranking
    # curve. A data set's panels share one scale.
    no_full = [{"step": step, "pop/NDCG@10": 0.1} for step in (0, 50_000, 100_000)]
    figures.curves_figure([_record("beauty", "ncf", no_full), _record("beauty", "bpr-mf", stepped(90_000)),
                           _record("beauty", "bert4rec", stepped(9_000))], str(tmp_path / "shared.png"), x="step")
    assert scales == ["log", "log"]


def test_a_tuned_row_is_drawn_in_its_untuned_rows_colour_dashed():
    """Eleven families and their tuned rows: each family its own colour (tab10 repeated the eleventh),
    its tuned row the same colour dashed."""
    bases = ["bpr-mf", "ncf", "fpmc", "gru4rec", "gru4rec-plus", "caser", "sasrec-bce", "sasrec-ce",
             "bert4rec-1mask", "bert4rec", "bert4rec-match"]
    names = [name for base in bases for name in (base, f"{base}-tuned")]
    styles = figures.paired_styles(names, {f"{base}-tuned": base for base in bases})
    assert len({styles[base]["color"] for base in bases}) == 11
    assert all(styles[base]["linestyle"] == "-" for base in bases)
    for base in bases:
        assert styles[f"{base}-tuned"]["color"] == styles[base]["color"]
        assert styles[f"{base}-tuned"]["linestyle"] == "--"
    # A partnered run whose partner is not drawn is a line of its own.
    alone = figures.paired_styles(["ncf-tuned", "fpmc"], {"ncf-tuned": "ncf"})
    assert alone["ncf-tuned"]["linestyle"] == "-" and alone["ncf-tuned"]["color"] != alone["fpmc"]["color"]


def test_paired_styles_stay_distinct_past_the_palette_and_for_chains_and_loops():
    """Thirty families with their tuned rows (past the 18 colours), a partner's partner and a loop of
    partners: every line a style of its own, and every partnered line in its family's colour."""
    bases = [f"family{i}" for i in range(30)]
    partner = {f"{base}-tuned": base for base in bases}
    names = [name for base in bases for name in (base, f"{base}-tuned")]
    styles = figures.paired_styles(names, partner)
    looks = {name: (style["color"], str(style["linestyle"]), style["marker"]) for name, style in styles.items()}
    assert len(set(looks.values())) == len(names)
    assert all(styles[f"{base}-tuned"]["color"] == styles[base]["color"] for base in bases)
    chained = figures.paired_styles(["a", "a-tuned", "a-tuned-again", "a-tuned-more", "a-other"],
                                    {"a-tuned": "a", "a-tuned-again": "a-tuned", "a-tuned-more": "a-tuned-again",
                                     "a-other": "a"})
    assert len({(style["color"]) for style in chained.values()}) == 1
    assert len({(str(style["linestyle"]), style["marker"]) for style in chained.values()}) == 5
    loop = figures.paired_styles(["x", "y", "z"], {"x": "y", "y": "x"})
    assert loop["x"]["linestyle"] == "-" and loop["y"]["color"] == loop["x"]["color"] and loop["y"]["linestyle"] == "--"
    assert loop["z"]["color"] != loop["x"]["color"]
