"""Where a training step's time goes: TensorFlow's profiler, its op events grouped by the model part.

`profile_steps` runs a few training steps under `tf.profiler`, reads the trace it writes (the
XSpace protocol buffer) and adds up the duration of every TensorFlow op executed on the CPU
threads by category, using the ops' names (the Keras layer names of the models, e.g.
`transformer_block_0/self_attention/query/...`, and their `gradient_tape/` twins):

- attention products: the two batched matrix products QK^T and PV, forward and backward;
- attention softmax, mask, dropout: the element-wise work on the [batch, heads, N, N] tensors;
- projections: the query, key, value and output Dense layers;
- FFN: the position-wise feed-forward network (with its activation; the XLA-compiled GELU of
  training runs as `CpuExecutable` events, counted here: it is the only XLA code in the step);
- residual, LayerNorm, dropout: the rest of each Transformer block;
- embedding: the item and position lookups, their LayerNorm and dropout, and the lookups' gradient;
- output head and loss: the head's transform, the item scores, the loss and its gradient (the
  training step calls them outside the model's name scope: top-level `MatMul`, `Softmax`, ...);
- optimizer: the clipping and the AdamW update;
- gradient sums: adding the gradient contributions of tensors used twice (`AddN`);
- other: the rest.

Ops run concurrently on the inter-op threads, so the shares are of the summed op time, not of
the wall time; the input pipeline is measured apart (its time per batch on its own).
"""

from __future__ import annotations

import collections
import glob
import os
import re
import tempfile
from typing import Callable

CATEGORIES = ("attention products", "attention softmax, mask, dropout", "projections", "FFN",
              "residual, LayerNorm, dropout", "embedding", "output head and loss", "optimizer", "gradient sums",
              "other")

_RULES = (
    ("projections", r"self_attention[^/]*/(query|key|value|output)[^/]*/"),
    ("attention products", r"self_attention[^/]*/(.*/)?MatMul(_1)?(/|:)|self_attention[^/]*/.*BatchMatMul"),
    ("attention softmax, mask, dropout", r"self_attention[^/]*/"),
    ("FFN", r"feed_forward[^/_]*/|feed_forward_\d+/|^xla:"),
    ("residual, LayerNorm, dropout", r"transformer_block_\d+"),
    ("embedding", r"embedding[^/]*/|UnsortedSegmentSum"),
    ("output head and loss", r"masked_item_head|ReduceLogSumExp|Softmax|TensorScatter|GatherNd|^mul_?\d*:|"
                             r"^(sub|add|truediv|Sum|Neg|Log|Exp|MatMul|BiasAdd|Maximum|concat)(_\d+)?[:/]|loss|"
                             r"^(strided_slice|transform|layer_norm|Gelu)"),
    ("optimizer", r"adam_?w|global_norm|clip|Assign|ResourceApply"),
    ("gradient sums", r"^AddN"),
)
_XLA_RUN = "CpuExecutable::ExecuteAsyncOnStream"
_COMPILED = tuple((category, re.compile(pattern, re.IGNORECASE)) for category, pattern in _RULES)


def categorize(op_name: str) -> str:
    """The category of a profiled op, from its `name:type` (first matching rule, else "other").

    Example: categorize("gradient_tape/bert4_rec/transformer_block_0/self_attention/query/MatMul:_MklMatMul")
    == "projections".
    """
    name = op_name.split("gradient_tape/", 1)[-1]
    for category, pattern in _COMPILED:
        if pattern.search(name):
            return category
    return "other"


def op_times(trace_dir: str) -> dict[str, float]:
    """Seconds per op (`name:type`) summed over the CPU compute threads of the newest trace in `trace_dir`."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    paths = sorted(glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True), key=os.path.getmtime)
    if not paths:
        raise ValueError(f"{trace_dir}: the profiler wrote no trace")
    space = xplane_pb2.XSpace()
    with open(paths[-1], "rb") as handle:
        space.ParseFromString(handle.read())
    totals: dict[str, float] = collections.Counter()
    for plane in space.planes:
        names = plane.event_metadata
        for line in plane.lines:
            if not line.name.startswith("tf_Compute"):
                continue
            for event in line.events:
                name = names[event.metadata_id].name
                if ":" in name and "::" not in name:  # an op (name:type), not a runtime region
                    totals[name] += event.duration_ps * 1e-12
                elif name == _XLA_RUN:  # an XLA-compiled function (the fused GELU) runs as one event
                    totals["xla:" + name] += event.duration_ps * 1e-12
    return dict(totals)


def profile_steps(step: Callable[[], None], steps: int = 3) -> dict[str, float]:
    """Seconds per category (`CATEGORIES`) of `steps` calls of `step`, a compiled training step that
    has run before (so that tracing is not profiled)."""
    import tensorflow as tf

    with tempfile.TemporaryDirectory(prefix="bert4rec-profile-") as trace_dir:
        tf.profiler.experimental.start(trace_dir)
        try:
            for _ in range(steps):
                step()
        finally:
            tf.profiler.experimental.stop()
        times = op_times(trace_dir)
    shares = dict.fromkeys(CATEGORIES, 0.0)
    for name, seconds in times.items():
        shares[categorize(name)] += seconds
    return shares
