"""The paper's and the original code's constants, each in one named place."""

# Special item ids. Real items are 1..num_items; [MASK] is num_items + 1 (see `mask_id`).
PAD_ID = 0

# Model (original modeling.py).
INITIALIZER_STDDEV = 0.02
LAYER_NORM_EPSILON = 1e-12
ATTENTION_MASK_VALUE = -10000.0

# Loss: sum(w * CE) / (sum(w) + LOSS_EPSILON).
LOSS_EPSILON = 1e-5

# Optimisation (original optimization.py).
ADAM_BETA_1 = 0.9
ADAM_BETA_2 = 0.999
ADAM_EPSILON = 1e-6
WEIGHT_DECAY_RATE = 0.01
WEIGHT_DECAY_EXCLUDE = ("LayerNorm", "layer_norm", "bias")
CLIP_NORM = 5.0
WARMUP_STEPS = 100

# Evaluation: the original seeded numpy with this before sampling negatives.
EVAL_SEED = 12345
# The seed of the sample of users validated during training (`train.valid_users`).
VALID_SEED = 54321
NUM_EVAL_NEGATIVES = 100
# The most scores (users x vocabulary, float32: 64 MB) that evaluation and serving hold for one
# batch; a batch of more users is scored in parts, so memory stays bounded at any catalogue size.
MAX_BATCH_SCORES = 2 ** 24
# How the three evaluation protocols are named to a reader (100 negatives sampled by popularity or
# uniformly, or every item ranked).
PROTOCOL_LABELS = {"pop": "pop-100", "uniform": "uniform-100", "full": "full ranking"}
# The validation metric that picks a run's best checkpoint: the paper's protocol and ranking metric.
SELECTION_METRIC = ("pop", "NDCG@10")
# A trained model whose best validation is not this many times POP's has learned little beyond
# popularity: too short a run, or a collapse (the network without residual paths at 3e-3 gave every
# user the same output and POP's ranking), whose metrics would otherwise pass for a result.
POP_MARGIN = 1.1


def mask_id(num_items: int) -> int:
    """The [MASK] id: the first id after the real items 1..num_items."""
    return num_items + 1


def vocab_size(num_items: int) -> int:
    """Embedding rows: padding 0, items 1..num_items and [MASK]."""
    return num_items + 2


def metric_label(metric: str, num_negatives: int = NUM_EVAL_NEGATIVES) -> str:
    """"pop/NDCG@10" (or ("pop", "NDCG@10")) -> "pop-100 NDCG@10": a metric as tables, figures and
    warnings name it; a sampled protocol with another number of negatives is named by it ("pop-20")."""
    protocol, name = metric.split("/", 1) if isinstance(metric, str) else metric
    label = PROTOCOL_LABELS.get(protocol, protocol)
    if protocol in ("pop", "uniform") and num_negatives != NUM_EVAL_NEGATIVES:
        label = f"{protocol}-{num_negatives}"
    return f"{label} {name}"
