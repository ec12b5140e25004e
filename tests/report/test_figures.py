"""The report's validation-curve figure: one row per data set, one panel per protocol."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from bert4rec_tf import report_figures  # noqa: E402


def _record(dataset, setting, curve, test=None):
    return {"dataset": dataset, "setting": setting, "curve": curve, "test": test or {}}


def _curve(scale):
    return [{"seconds": 60.0 * step, "pop/NDCG@10": scale * step, "full/NDCG@10": scale * step / 10}
            for step in (1, 2, 3)]


def test_metric_labels_name_the_protocols_as_the_tables_do():
    assert report_figures.metric_label("pop/NDCG@10") == "pop-100 NDCG@10"
    assert report_figures.metric_label("full/Recall@10") == "full-ranking Recall@10"
    assert report_figures.metric_label("uniform/MRR") == "uniform-100 MRR"


def test_curves_figure_draws_a_panel_per_protocol_and_a_row_per_data_set(tmp_path):
    import matplotlib.image

    records = [_record("ml-1m", "bert4rec", _curve(0.1)), _record("ml-1m", "sasrec-ce", _curve(0.2)),
               _record("ml-1m", "pop", [], {"pop": {"NDCG@10": 0.05}, "full": {"NDCG@10": 0.01}})]
    one = report_figures.curves_figure(records, str(tmp_path / "one.png"))
    height, width = matplotlib.image.imread(one).shape[:2]
    assert 2.4 < width / height < 4.0  # two panels side by side, each about 6 x 4
    two = report_figures.curves_figure([*records, _record("beauty", "bert4rec", _curve(0.05))],
                                       str(tmp_path / "two.png"))
    height, width = matplotlib.image.imread(two).shape[:2]
    assert 1.2 < width / height < 2.0  # a second row for the second data set
    # Only POP (no curve): nothing to draw, no file.
    assert report_figures.curves_figure(records[2:], str(tmp_path / "none.png")) is None
    assert not (tmp_path / "none.png").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.png", "two.png"]  # no temporary left
