"""The papers' published numbers that the reproduction report compares with, and what the BERT4Rec
paper says of the sweeps it shows only as figures.

`PUBLISHED` and `PUBLISHED_FULL` map (data set, setting) to (protocol, {metric: value}, source): the
protocol that paper used (pop-100 for BERT4Rec, uniform-100 for the matching paper, full ranking for
later work). The settings are those of the plans (`bert4rec_tf.experiments.plans`).
"""

from __future__ import annotations

# Published numbers (../shared/SPEC.md). Keys: (dataset, setting) -> (protocol, {metric: value}, source).
_BERT4REC = "BERT4Rec paper, Table 2 (pop-100)"
_ABLATION = "BERT4Rec paper, Table 5 (pop-100, d 64)"
_LENGTH = "BERT4Rec paper, Table 4 (pop-100)"
_MATCH = "Zhang & Li, Table 3 (uniform-100)"
_MATCH_ABLATION = "Zhang & Li, ablation (uniform-100, MRR)"
PUBLISHED: dict[tuple[str, str], tuple[str, dict[str, float], str]] = {
    ("ml-1m", "pop"): ("uniform", {"NDCG@10": 0.2455, "HR@10": 0.4458, "MRR": 0.2070}, _MATCH),
    ("ml-1m", "sasrec-bce"): ("pop", {"HR@10": 0.6629, "NDCG@10": 0.4368}, _BERT4REC),
    ("ml-1m", "bert4rec"): ("pop", {"HR@1": 0.2863, "HR@5": 0.5876, "HR@10": 0.6970, "NDCG@5": 0.4454,
                                    "NDCG@10": 0.4818, "MRR": 0.4254}, _BERT4REC),
    ("ml-1m", "bert4rec-1mask"): ("pop", {"HR@10": 0.6869, "NDCG@10": 0.4696, "MRR": 0.4127},
                                  "BERT4Rec paper, Table 3 (pop-100, d 256)"),
    ("ml-1m", "bert4rec-match"): ("uniform", {"NDCG@10": 0.5669, "HR@10": 0.7896, "MRR": 0.4973}, _MATCH),
    ("beauty", "sasrec-bce"): ("pop", {"HR@10": 0.2653, "NDCG@10": 0.1633}, _BERT4REC),
    ("beauty", "bert4rec"): ("pop", {"HR@1": 0.0953, "HR@5": 0.2207, "HR@10": 0.3025, "NDCG@5": 0.1599,
                                     "NDCG@10": 0.1862, "MRR": 0.1701}, _BERT4REC),
    ("beauty", "bert4rec-1mask"): ("pop", {"HR@10": 0.2940, "NDCG@10": 0.1769, "MRR": 0.1618},
                                   "BERT4Rec paper, Table 3 (pop-100, d 256)"),
}
_TABLE5 = {  # NDCG@10, Beauty / ML-1m
    "default": (0.1832, 0.4759), "no-pe": (0.1741, 0.2155), "no-ffn": (0.1803, 0.4544),
    "no-ln": (0.1642, 0.4334), "no-residual": (0.1619, 0.4643), "no-dropout": (0.1658, 0.4553),
    "layers-1": (0.1782, 0.4412), "layers-3": (0.1859, 0.4864), "layers-4": (0.1834, 0.4898),
    "heads-1": (0.1853, 0.4568), "heads-4": (0.1830, 0.4770), "heads-8": (0.1823, 0.4743),
}
for _name, (_beauty, _ml1m) in _TABLE5.items():
    PUBLISHED[("beauty", f"ablation-{_name}")] = ("pop", {"NDCG@10": _beauty}, _ABLATION)
    PUBLISHED[("ml-1m", f"ablation-{_name}")] = ("pop", {"NDCG@10": _ml1m}, _ABLATION)
PUBLISHED[("ml-1m", "ablation-only-mask")] = ("uniform", {"MRR": 0.4517}, _MATCH_ABLATION)
PUBLISHED[("ml-1m", "ablation-only-matching")] = ("uniform", {"MRR": 0.2284}, _MATCH_ABLATION)
# Full-ranking numbers of later work (SPEC.md; history excluded; Recall@10 is HR@10 with one target):
# the original BERT4Rec code at its 400k steps, and SASRec with full cross-entropy (on Beauty the low
# end of the range reported).
_FULL = "later work, full ranking (SPEC.md)"
PUBLISHED_FULL: dict[tuple[str, str], tuple[str, dict[str, float], str]] = {
    ("ml-1m", "bert4rec"): ("full", {"Recall@10": 0.1518, "NDCG@10": 0.0806}, _FULL),
    ("ml-1m", "sasrec-ce"): ("full", {"Recall@10": 0.3152, "NDCG@10": 0.1821}, _FULL),
    ("beauty", "bert4rec"): ("full", {"Recall@10": 0.0338, "NDCG@10": 0.0187}, _FULL),
    ("beauty", "sasrec-ce"): ("full", {"Recall@10": 0.0533, "NDCG@10": 0.0327}, _FULL),
}
# Table 4: (HR@10, NDCG@10) per maximum length N; its lengths are the max_len sweep's.
TABLE4 = {
    "beauty": {10: (0.3006, 0.1826), 20: (0.3061, 0.1875), 30: (0.3057, 0.1837), 40: (0.3054, 0.1833),
               50: (0.3047, 0.1832)},
    "ml-1m": {10: (0.6788, 0.4631), 50: (0.6854, 0.4743), 100: (0.6947, 0.4758), 200: (0.6955, 0.4759),
              400: (0.6898, 0.4715)},
}
for _dataset, _lengths in TABLE4.items():
    for _n, (_hr, _ndcg) in _lengths.items():
        PUBLISHED[(_dataset, f"max-len-{_n}")] = ("pop", {"HR@10": _hr, "NDCG@10": _ndcg}, _LENGTH)
# The mask proportion rho that the BERT4Rec paper found best (Figure 4; a figure without a table).
PAPER_BEST_MASK_PROPORTION = {"ml-1m": 0.2, "ml-20m": 0.2, "beauty": 0.6, "steam": 0.4}
# The paper's training speed on a GTX 1080 Ti (samples/s), Table 4.
PAPER_SAMPLES_PER_SECOND = {("beauty", 10): 5504, ("beauty", 20): 3256, ("beauty", 30): 2284, ("beauty", 40): 1776,
                            ("beauty", 50): 1441, ("ml-1m", 10): 14255, ("ml-1m", 50): 8890, ("ml-1m", 100): 5711,
                            ("ml-1m", 200): 2918, ("ml-1m", 400): 1213}


# What the BERT4Rec paper says of the sweeps it shows only as figures (SPEC.md).
PAPER_SWEEP_SHAPES = {"mask_proportion": "performance falls for rho above 0.6 on every data set, and rho 0.2 beats 0.1",
                      "hidden_size": "quality converges as d grows, and a large d overfits on sparse data"}


def paper_sweep_points(dataset: str, experiment: str) -> dict[int, dict[str, float]]:
    """The paper's pop-100 numbers per swept value on `dataset`: Table 4's per N for max_len; {} for
    the sweeps it shows only as figures."""
    if experiment != "max_len":
        return {}
    return {int(setting[len("max-len-"):]): metrics for (name, setting), (_, metrics, _) in PUBLISHED.items()
            if name == dataset and setting.startswith("max-len-")}


def paper_best_value(dataset: str, experiment: str) -> float | None:
    """The swept value the paper found best on `dataset`: Figure 4's rho, Table 4's N by NDCG@10;
    None where it gives none (d, or a data set it did not sweep)."""
    if experiment == "mask_proportion":
        return PAPER_BEST_MASK_PROPORTION.get(dataset)
    points = paper_sweep_points(dataset, experiment)
    return max(points, key=lambda n: points[n]["NDCG@10"]) if points else None
