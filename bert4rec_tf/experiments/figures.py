"""The reproduction report's figures (matplotlib, from the `report` extra): validation curves against
training time, metrics against a swept setting, and the attention heat maps of the paper's figure."""

from __future__ import annotations

import os

import numpy as np

from bert4rec_tf.constants import metric_label
from bert4rec_tf.evaluation.attention_plot import attention_panel, pyplot
from bert4rec_tf.experiments.plans import SWEEPS
from bert4rec_tf.experiments.published import PAPER_BEST_MASK_PROPORTION, paper_sweep_points
from bert4rec_tf.files import atomic_path


def _save(figure, path: str) -> str:
    with atomic_path(path) as temporary:
        figure.savefig(temporary, dpi=110, bbox_inches="tight")
    return path


def line_styles(count: int) -> list[dict]:
    """`count` distinguishable line styles: the ten tab10 colours, then the same colours dashed with
    another marker, then dotted, so no two lines of a figure look the same (matplotlib's default
    cycle repeats its colours after ten lines)."""
    patterns = [("-", "o"), ("--", "s"), (":", "^"), ("-.", "D")]
    return [{"color": f"C{i % 10}", "linestyle": line, "marker": marker}
            for i in range(count) for line, marker in [patterns[(i // 10) % len(patterns)]]]


# tab10, then eight more colours far from it and from each other: one colour per line of a figure of
# up to 18 families before the line styles take over.
_COLOURS = [f"C{i}" for i in range(10)] + ["black", "gold", "navy", "lime", "maroon", "teal", "magenta", "tan"]


def paired_styles(names: list[str], partner: dict[str, str]) -> dict[str, dict]:
    """Line styles for runs of which some are drawn beside another (`partner`: run -> the run it departs
    from, e.g. a tuned row -> its untuned row): each other run takes its own colour as a solid line, and
    a partnered run takes its partner's colour as a dashed line, so a family's two lines read as a pair.
    Past the palette's 18 colours the runs take them again with other markers (four rounds: up to 72
    families), and the second, third ... run partnered to one family (directly or through another
    partnered run) takes another dash pattern (up to four): no two lines look the same."""
    def chain(name: str) -> list[str]:
        """`name`, its partner, that run's partner, ... up to the run the pairs start from: one without a
        partner drawn, or in a loop of partners the loop's first run in `names`."""
        found = [name]
        while partner.get(found[-1]) in names and partner[found[-1]] not in found:
            found.append(partner[found[-1]])
        if partner.get(found[-1]) in found:  # a loop: it starts from its first run in `names`
            loop = found[found.index(partner[found[-1]]):]
            found = found[:found.index(min(loop, key=names.index)) + 1]
        return found

    solid, marks = [("-", "o"), (":", "^"), ("-", "v"), (":", "<")], ["s", "D", "P", "X"]
    dashes = ["--", "-.", (0, (6, 2, 1, 2, 1, 2)), (0, (8, 2))]
    family = {name: chain(name)[-1] for name in names}
    bases = [name for name in names if family[name] == name]
    styles = {}
    for i, base in enumerate(bases):
        line, marker = solid[(i // len(_COLOURS)) % len(solid)]
        styles[base] = {"color": _COLOURS[i % len(_COLOURS)], "linestyle": line, "marker": marker}
    for name in names:
        if name not in styles:
            base = family[name]
            nth = [other for other in names if family[other] == base and other != base].index(name)
            styles[name] = {"color": styles[base]["color"], "linestyle": dashes[nth % len(dashes)],
                            "marker": marks[(bases.index(base) // len(_COLOURS)) % len(marks)]}
    return styles


def _legend(axis, lines: int) -> None:
    if lines > 6:
        axis.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    else:
        axis.legend(fontsize=8)


def curves_figure(records: list[dict], path: str, metrics: tuple[str, ...] = ("pop/NDCG@10", "full/NDCG@10"),
                  order: list[str] | None = None, x: str = "minutes",
                  partner: dict[str, str] | None = None) -> str | None:
    """Validation quality against training time (minutes; `x="step"`: against training steps, the
    view that does not depend on the machine's pace): one row per data set, one panel per
    metric (the sampled and the full-ranking view, which can order the runs differently), one line per
    run (the runs' records, `bert4rec_tf.experiments.records.make_record`). A run without a curve
    (POP, which does not train) is a dashed horizontal line at its test value.

    `order` names the experiment's settings (runs) in its plan's order: a setting keeps its line style
    and its place in the legend in every panel and in every figure drawn with the same `order`, whichever
    runs have finished. Settings not in it follow, in the records' order. `partner` (setting -> the
    setting it departs from, e.g. a tuned row -> its untuned row) draws the pair in one colour, the
    partnered setting dashed (`paired_styles`)."""
    plt = pyplot()
    names = list(dict.fromkeys([*(order or []), *(record["setting"] for record in records)]))
    styles = paired_styles(names, partner) if partner else dict(zip(names, line_styles(len(names))))
    records = sorted(records, key=lambda record: names.index(record["setting"]))
    datasets = list(dict.fromkeys(record["dataset"] for record in records))
    key, position = ("seconds", lambda p: p["seconds"] / 60) if x == "minutes" else ("step", lambda p: p["step"])
    panels = []
    for dataset in datasets:
        for metric in metrics:
            lines, flat = [], []
            for record in (r for r in records if r["dataset"] == dataset):
                points = [p for p in record.get("curve", []) if p.get(key) is not None and p.get(metric) is not None]
                if points:
                    lines.append((record["setting"], [position(p) for p in points], [p[metric] for p in points]))
                elif not record.get("curve"):  # trained nothing (POP): its test value as a line
                    # (a trained run without this metric in its curve, e.g. NCF's full ranking, is left out)
                    protocol, name = metric.split("/", 1)
                    value = record.get("test", {}).get(protocol, {}).get(name)
                    if value is not None:
                        flat.append((record["setting"], value))
            if lines:
                panels.append((dataset, metric, lines, flat))
    if not panels:
        return None
    rows = list(dict.fromkeys(dataset for dataset, *_ in panels))
    columns = max(sum(1 for panel in panels if panel[0] == dataset) for dataset in rows)
    figure, axes = plt.subplots(len(rows), columns, figsize=(6 * columns, 4 * len(rows)), squeeze=False)
    for row, dataset in enumerate(rows):
        mine = [panel for panel in panels if panel[0] == dataset]
        # Steps of runs whose lengths differ by more than ten times (400,000 of BPR-MF, 5,000 of a
        # Transformer in the same hour) on a log axis, or the short runs are a vertical line at 0; one
        # scale for a data set's panels, also when a run lacks one panel's metric (NCF's full ranking).
        ends = [max(positions) for *_, lines, _ in mine for _, positions, _ in lines if positions]
        log_steps = x != "minutes" and min(ends) > 0 and max(ends) / min(ends) > 10
        for column in range(columns):
            axis = axes[row][column]
            if column >= len(mine):
                axis.set_visible(False)
                continue
            _, metric, lines, flat = mine[column]
            for label, positions, values in lines:
                if log_steps:
                    kept = [index for index, position in enumerate(positions) if position > 0]
                    positions, values = [positions[i] for i in kept], [values[i] for i in kept]
                axis.plot(positions, values, markersize=3, label=label, **styles[label])
            if log_steps:
                axis.set_xscale("log")
            for label, value in flat:
                axis.axhline(value, color="grey", linestyle="--", linewidth=1, label=f"{label} (test, untrained)")
            axis.set_title(f"{dataset}: {metric_label(metric)}")
            axis.set_xlabel("training and validation time (minutes)" if x == "minutes" else
                            f"training steps{' (log scale)' if log_steps else ''}")
            axis.set_ylabel(f"validation {metric_label(metric)}")
            axis.grid(alpha=0.3)
            if len(lines) + len(flat) <= 6:
                _legend(axis, len(lines) + len(flat))
            elif column == len(mine) - 1:  # a long legend once, at the right, of every run of the row
                found = {}
                for other in axes[row][:len(mine)]:
                    for handle, label in zip(*other.get_legend_handles_labels()):
                        found.setdefault(label, handle)
                axis.legend(list(found.values()), list(found), fontsize=8, loc="upper left",
                            bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    figure.tight_layout()
    return _save(figure, path)


def runs_figure(curves: dict[str, list[dict]], metrics: list[str], path: str, x: str = "step",
                title: str = "") -> str:
    """Validation curves of several runs: one panel per metric, one line per run.

    Args:
        curves: run label -> its validation points (validation.json: dicts with "step", optionally
            "seconds", and the metrics).
        metrics: the metrics to draw, e.g. ["pop/HR@10", "full/NDCG@10"].
        path: the PNG to write (complete or absent).
        x: "step", "minutes" (points without "seconds" are left out then) or "samples" (each point's
            "samples": training sequences seen).
        title: the figure's title.
    """
    plt = pyplot()
    figure, axes = plt.subplots(1, len(metrics), figsize=(5.5 * len(metrics), 4), squeeze=False)
    for axis, metric in zip(axes[0], metrics):
        for (label, points), style in zip(curves.items(), line_styles(len(curves))):
            points = [p for p in points if p.get(metric) is not None
                      and (x != "minutes" or p.get("seconds") is not None)]
            positions = [p["seconds"] / 60 if x == "minutes" else p[x] for p in points]
            axis.plot(positions, [p[metric] for p in points], markersize=3, label=label, **style)
        axis.set_xlabel({"step": "training step", "minutes": "training and validation time (minutes)",
                         "samples": "training sequences seen (step x batch size)"}[x])
        if x == "samples":  # 6-digit tick labels run into each other: 250000 -> 250k
            axis.xaxis.set_major_formatter(lambda value, _: _short_number(value))
        axis.set_ylabel(f"validation {metric_label(metric)}")
        axis.grid(alpha=0.3)
        _legend(axis, len(curves))
    if title:
        figure.suptitle(title)
    return _save(figure, path)


def _short_number(value: float) -> str:
    """A tick label: 250000 -> "250k", 2000000 -> "2M", 500 -> "500"."""
    for size, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def sweep_figure(rows: list[dict], experiment: str, path: str) -> str | None:
    """Test pop-100 HR@10 and NDCG@10 against the swept value, per data set, beside the paper's shape:
    its Table 4 numbers for max_len (dotted), its best rho for mask_proportion (a vertical line); for
    max_len also the training samples/s (right axis)."""
    plt = pyplot()
    by_dataset: dict[str, dict[float, dict]] = {}
    for row in rows:
        if row["value"] is not None:
            by_dataset.setdefault(row["dataset"], {})[row["value"]] = row
    if not by_dataset:
        return None
    figure, axes = plt.subplots(1, len(by_dataset), figsize=(6.5 * len(by_dataset), 4.6), squeeze=False,
                                layout="constrained")
    for axis, (dataset, points) in zip(axes[0], by_dataset.items()):
        values = sorted(points)
        paper = paper_sweep_points(dataset, experiment)
        for metric, color in (("pop/HR@10", "tab:blue"), ("pop/NDCG@10", "tab:orange")):
            axis.plot(values, [points[v][metric] for v in values], marker="o", color=color,
                      label=f"test {metric_label(metric)}")
            name = metric.split("/")[1]
            if paper:
                axis.plot(sorted(paper), [paper[v][name] for v in sorted(paper)], marker="x", linestyle=":",
                          color=color, label=f"paper {name}")
        if experiment == "mask_proportion" and dataset in PAPER_BEST_MASK_PROPORTION:
            best = PAPER_BEST_MASK_PROPORTION[dataset]
            axis.axvline(best, color="grey", linestyle=":", label=f"paper's best rho ({best:g})")
        axis.set_xlabel(SWEEPS.get(experiment, experiment))
        axis.set_ylabel("test metric (pop-100)")
        axis.set_title(dataset)
        axis.grid(alpha=0.3)
        if experiment in ("max_len", "hidden_size"):
            ticks = sorted(set(values) | set(paper))
            axis.set_xscale("log", base=2)
            axis.set_xticks(ticks, [str(int(v)) for v in ticks])
        handles, labels = axis.get_legend_handles_labels()
        if experiment == "max_len":
            speed = axis.twinx()
            speed.plot(values, [points[v]["samples_per_second"] or np.nan for v in values], color="grey",
                       linestyle="--", marker="s", label="training samples/s")
            speed.set_ylabel("training samples/s")
            more, more_labels = speed.get_legend_handles_labels()
            handles, labels = handles + more, labels + more_labels
        # Below the panel, where it covers no point.
        axis.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, fontsize=8)
    return _save(figure, path)


def attention_figure(model_dir: str, path: str, users: int = 1024, last: int = 10) -> str | None:
    """The paper's heat-map figure: the average attention among the last `last` positions ([mask]
    last) of the validation histories, one panel per layer and head, rows queries, columns keys.

    On data whose histories are all shorter than `last` positions the window is the longest history's;
    with fewer than two positions there is nothing to show and no figure (None)."""
    from bert4rec_tf.data.pipeline import evaluation_histories
    from bert4rec_tf.evaluation.attention import average_last_attention
    from bert4rec_tf.training.trainer import load_finished_run

    plt = pyplot()
    model, prepared, config = load_finished_run(model_dir)
    histories = evaluation_histories(prepared.sequences(), "valid", config.data.history_length())[0][:users]
    inputs = model.history_inputs(histories)["input_ids"]
    last = min(last, int(np.max(np.count_nonzero(np.asarray(inputs), axis=1), initial=0)))
    if last < 2:
        return None
    # The histories are the first validation users', model user ids 1, 2, ...
    weights = average_last_attention(model, histories, last, users=np.arange(1, len(histories) + 1))
    layers, heads = weights.shape[:2]
    figure, axes = plt.subplots(layers, heads, figsize=(4.6 * heads, 4.0 * layers), squeeze=False)
    figure.subplots_adjust(wspace=0.35, hspace=0.45)
    for layer in range(layers):
        for head in range(heads):
            attention_panel(figure, axes[layer][head], weights[layer, head], f"layer {layer + 1}, head {head + 1}",
                            query_label=head == 0)
    run = os.path.basename(os.path.normpath(model_dir))
    figure.suptitle(f"{run}: average attention over the last {last} positions ({len(histories)} validation users)")
    return _save(figure, path)
