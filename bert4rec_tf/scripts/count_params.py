"""Prints the parameter count of BERT4Rec for a dataset preset.

Example:
    bert4rec-count-params --dataset ml-1m
    bert4rec-count-params --dataset custom --num_items 1000
"""

from __future__ import annotations

import argparse
import math
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from bert4rec_tf import cli
from bert4rec_tf.config import PRESETS
from bert4rec_tf.constants import vocab_size
from bert4rec_tf.data.registry import get_spec
from bert4rec_tf.tasks import preset


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.argument_parser(__doc__)
    parser.add_argument("--dataset", default="ml-1m", choices=sorted(PRESETS))
    parser.add_argument("--num_items", type=int, default=None,
                        help="items n (vocabulary n + 2); default: the paper's count")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    from bert4rec_tf.models import BERT4Rec

    num_items = args.num_items
    if num_items is None:
        counts = get_spec(args.dataset).paper_counts
        if counts is None:
            raise SystemExit(f"{args.dataset} has no published item count: pass --num_items")
        num_items = counts[1]
    config = preset(args.dataset).model
    config.vocab_size = vocab_size(num_items)
    model = BERT4Rec(config)
    model.build()
    print(f"dataset {args.dataset}: {num_items} items, vocab {config.vocab_size}, "
          f"d {config.hidden_size}, {config.num_layers} layers, {config.num_heads} heads, "
          f"FFN {config.intermediate_size}, max_len {config.max_len}")
    counted = set()
    for layer in [model.embedding, *model.transformer_blocks, model.head]:
        own = [w for w in layer.weights if id(w) not in counted]
        counted.update(id(w) for w in own)
        print(f"  {layer.name:<20} {sum(math.prod(w.shape) for w in own):>12,}")
    print(f"total parameters: {model.count_params():,} (the tied item table counted once)")


if __name__ == "__main__":
    main()
