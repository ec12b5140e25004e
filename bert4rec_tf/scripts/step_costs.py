"""The work of one training step, counted and measured: its floating-point operations (forward and
backward, from the shapes), the floor of the exact full-softmax head (its three matrix products
timed alone), and where the step's op time goes per model part (`bert4rec_tf.profiling`)."""

from __future__ import annotations

import time

import tensorflow as tf

from bert4rec_tf.config import TransformerPart


# The largest [rows, items] matrix `head_products_seconds` builds (1 GB of float32): on a larger
# catalogue the exact head's floor is not measured.
HEAD_FLOOR_ELEMENTS = 2 ** 28


def head_products_seconds(rows: int, classes: int, width: int, repeats: int = 5) -> float:
    """Seconds of the three float32 matrix products an exact full-softmax head runs per step.

    The logits [rows, classes] = hidden [rows, width] . table^T, and in the backward pass the
    gradients of the hidden states (logits' gradient . table) and of the table (its transpose .
    hidden). Any training step with a full softmax over `classes` items takes at least this long,
    whatever its kernels do around them: the floor of the head, the best of `repeats`.
    """
    hidden = tf.random.normal([rows, width])
    table = tf.random.normal([classes, width])
    gradient = tf.random.normal([rows, classes])

    @tf.function(autograph=False)
    def products(hidden, table, gradient):
        logits = tf.matmul(hidden, table, transpose_b=True)
        d_hidden = tf.matmul(gradient, table)
        d_table = tf.matmul(gradient, hidden, transpose_a=True)
        return logits[0, 0] + d_hidden[0, 0] + d_table[0, 0]

    products(hidden, table, gradient).numpy()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        products(hidden, table, gradient).numpy()
        best = min(best, time.perf_counter() - start)
    return best


def training_flops(config: TransformerPart, seq_len: int, slots: float) -> float:
    """Floating-point operations of one training sample, forward and backward (3x forward).

    Counts the matrix products: per layer the four attention projections, the two attention
    products (over the full padded length, as computed) and the two FFN projections; the head's
    transform and item scores at `slots` masked positions. Element-wise work is not counted.
    """
    d, n = config.hidden_size, seq_len
    per_layer = 2 * n * d * (4 * d + 2 * config.intermediate_size) + 2 * 2 * n * n * d
    head = 2 * slots * d * (d + config.vocab_size)
    return 3 * (config.num_layers * per_layer + head)


def profile_table(step) -> str:
    """Where `step`'s op time goes, one indented line per model part (`bert4rec_tf.profiling`)."""
    from bert4rec_tf.profiling import profile_steps

    shares = profile_steps(step, steps=3)
    total = sum(shares.values()) or 1.0
    return "\n".join(f"    {name:<34} {value / total:>6.1%}" for name, value in shares.items() if value)
