"""Training throughput of BERT4Rec on synthetic batches, per preset and speed option.

Times `train_on_batch` (plain AdamW) with masked-slot packing off, dynamic (exactly the real
slots) and bucketed (a static capacity: the batch's real slots rounded up to a multiple of
--bucket), with XLA off and on, in float32 and mixed precision, all in one process, and prints a
table. Dynamic packing under XLA is very slow on CPU and is left out unless --dynamic_xla.

Each row also gives the share of this machine's float32 limit: the model's floating-point work
per sample (forward and backward, counted from the shapes) times samples/s, over the rate of a
2048^3 float32 matrix product measured at the start. With --recbole (RecBole's samples/s measured
beside it, see ../shared/peers/recbole) it gives the ratio to RecBole. --pipeline also times the
dynamic-masking input pipeline alone on synthetic histories shaped like the data set's.

--real times the training step of the shipped path instead, for any registered family: the model
of --model with the settings of --recipe (a cpu-* recipe; they share their shapes) on batches of the
real prepared data (--source_files), as train.py makes them. For a family with a sequence input the
batches are timed padding-aware (each batch trimmed to its longest sequence, `train.length_groups`
as the recipe has it) and, beside it, full-width in stream order (train.length_groups 0). The batches
are made first and timed apart: `input/s` is the input stream's own rate and `input x` that rate over
the step's samples/s (the stream keeps up with the step above 1x). `real` is the share of the timed
batches' positions that hold an item, `packed` whether the Transformer blocks run on those positions
only (`model.padding_free`, decided from the data). For the Cloze models the share of the float32
limit counts the work of each batch's own width, and `head ms` is the floor of the exact
full-softmax head at the batches' mean number of masked slots: the time of its three float32 matrix
products alone (logits, and the gradients of the hidden states and of the item table), which no
change around them can remove. With --validation, `validating` is the share of a budget that
validation takes when it runs every --eval_every steps: one validation as the trainer runs it (the
recipe's validation users and protocols, and the validation loss) over itself plus --eval_every
steps.
--profile adds where the step's time goes (bert4rec_tf.profiling), per model part.

Example:
    python run_scripts/benchmark.py
    python run_scripts/benchmark.py --real --datasets ml-1m,beauty --recipe cpu-1h --profile \\
        --source_files ml-1m=../shared/datasets/ml-1m/ml-1m.txt.gz,beauty=../shared/datasets/beauty/beauty.txt.gz
    python run_scripts/benchmark.py --real --model caser --validation --datasets beauty \\
        --source_files beauty=../shared/datasets/beauty/beauty.txt.gz
    python run_scripts/benchmark.py --steps 5 --warmup 2 --datasets ml-1m --precisions float32 \\
        --packing dynamic --xla off --recbole 64.4 --pipeline
"""

from __future__ import annotations

import argparse
import itertools
import os
import time

from bert4rec_tf import cli
from bert4rec_tf.experiments.calibration import float32_limit

# TensorFlow, Keras, NumPy and the model are imported by `_import_heavy` once the arguments are parsed,
# so that --help answers at once.
keras = np = tf = None


def _import_heavy() -> None:
    global keras, np, tf, preset, mask_id, vocab_size, make_windows, dynamic_training_dataset
    global get_spec, BERT4Rec, profile_table, training_flops
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from bert4rec_tf.console import import_tensorflow_quietly

    import_tensorflow_quietly()
    import keras
    import numpy as np
    import tensorflow as tf

    from bert4rec_tf.constants import mask_id, vocab_size
    from bert4rec_tf.data.instances import make_windows
    from bert4rec_tf.data.pipeline import dynamic_training_dataset
    from bert4rec_tf.data.registry import get_spec
    from bert4rec_tf.models import BERT4Rec
    from bert4rec_tf.scripts.step_costs import profile_table, training_flops
    from bert4rec_tf.tasks import preset


PACKING = ("off", "dynamic", "bucket")


def _comma_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _on_off(text: str) -> list[bool]:
    values = {"on": True, "off": False, "true": True, "false": False}
    return [values[item.lower()] for item in _comma_list(text)]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.argument_parser(__doc__)
    parser.add_argument("--datasets", type=_comma_list, default=["ml-1m", "beauty"],
                        help="presets to time (comma separated)")
    parser.add_argument("--packing", type=_comma_list, default=list(PACKING),
                        help="masked-slot packing modes: " + ",".join(PACKING))
    parser.add_argument("--bucket", type=int, default=512,
                        help="bucketed packing: capacity rounded up to a multiple of this")
    parser.add_argument("--dynamic_xla", action="store_true",
                        help="also time dynamic packing under XLA (slow)")
    parser.add_argument("--xla", type=_on_off, default=[False, True],
                        help="jit_compile settings: off,on")
    parser.add_argument("--precisions", type=_comma_list, default=["float32", "mixed_bfloat16"],
                        help="Keras dtype policies, e.g. float32,mixed_bfloat16,mixed_float16")
    parser.add_argument("--batch_size", type=int, default=None,
                        help="batch size (default: 256; --real: the recipe's)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps (compilation)")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per configuration")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--recbole", type=float, default=None,
                        help="RecBole's samples/s on ML-1m measured beside this run: print the ratio")
    parser.add_argument("--pipeline", action="store_true",
                        help="also time the dynamic-masking input pipeline alone")
    parser.add_argument("--real", action="store_true",
                        help="time the training step on real prepared batches (see --recipe, --source_files)")
    parser.add_argument("--model", default="bert4rec", help="--real: the model preset (bert4rec, sasrec, ...)")
    parser.add_argument("--recipe", default="cpu-1h", help="--real: the recipe whose settings the batches have")
    parser.add_argument("--source_files", type=_source_files, default=None,
                        help="--real: dataset=path pairs, comma separated, of the files to prepare")
    parser.add_argument("--data_dir", default=None, help="--real: the cache of prepared data")
    parser.add_argument("--loss", default=None, help="--real: the training loss (e.g. sampled_softmax; "
                        "default: the model's)")
    parser.add_argument("--config", action="append", default=[],
                        help="--real: a key=value override of the configuration, as train.py --config (repeatable)")
    parser.add_argument("--validation", action="store_true",
                        help="--real: also time one validation as the trainer runs it, for its share of a budget")
    parser.add_argument("--eval_every", type=int, default=500,
                        help="--real --validation: the steps between validations (train.py --eval_every)")
    parser.add_argument("--profile", action="store_true",
                        help="also print where the step's time goes, per model part (TensorFlow's profiler), "
                             "above each row")
    return parser.parse_args(argv)


def _source_files(text: str) -> dict[str, str]:
    pairs = {}
    for item in _comma_list(text):
        if "=" not in item:
            raise argparse.ArgumentTypeError(f"{item!r} is not dataset=path")
        dataset, path = item.split("=", 1)
        pairs[dataset.strip()] = path.strip()
    return pairs


def pipeline_rate(dataset: str, batch_size: int, seed: int, batches: int = 30) -> float:
    """Samples/s of the dynamic-masking pipeline alone, on synthetic histories like the data set's."""
    config = preset(dataset).data
    users, items = get_spec(dataset).paper_counts[:2]
    rng = np.random.default_rng(seed)
    if dataset.startswith("ml-"):
        lengths = np.clip(rng.lognormal(4.6, 0.9, users).astype(int), 18, 2300)
    else:
        lengths = np.minimum(400, 3 + rng.geometric(1 / 6, users))
    train = [rng.integers(1, items + 1, length) for length in lengths]
    windows = make_windows(train, np.arange(1, users + 1), config.max_len, config.prop_sliding_window)
    stream = iter(dynamic_training_dataset(windows, config, items, batch_size=batch_size))
    for _ in range(3):
        next(stream)
    start = time.perf_counter()
    for _ in range(batches):
        next(stream)
    return batches * batch_size / (time.perf_counter() - start)


def sequence_lengths(dataset: str, max_len: int, batch_size: int, rng: np.random.Generator):
    """Realistic history lengths: ML data mostly full windows, Amazon data short (mean ~8)."""
    if dataset.startswith("ml-"):
        full = rng.random(batch_size) < 0.85
        return np.where(full, max_len, rng.integers(20, max_len, batch_size))
    return np.minimum(max_len, 2 + rng.geometric(1 / 6.5, batch_size))


def synthetic_features(dataset: str, batch_size: int, seed: int) -> dict[str, np.ndarray]:
    """One batch shaped like the preset's training instances, with the original mask counts."""
    config = preset(dataset)
    max_len = config.data.max_len
    slots = config.data.max_predictions_per_seq
    num_items = get_spec(dataset).paper_counts[1]
    rng = np.random.default_rng(seed)
    lengths = sequence_lengths(dataset, max_len, batch_size, rng)
    features = {
        "input_ids": np.zeros((batch_size, max_len), np.int32),
        "input_mask": np.zeros((batch_size, max_len), np.int32),
        "masked_lm_positions": np.zeros((batch_size, slots), np.int32),
        "masked_lm_ids": np.zeros((batch_size, slots), np.int32),
        "masked_lm_weights": np.zeros((batch_size, slots), np.float32),
    }
    for row, length in enumerate(lengths):
        count = min(slots, max(1, round(length * config.data.masked_lm_prob)))
        items = rng.integers(1, num_items + 1, length)
        positions = np.sort(rng.choice(length, count, replace=False))
        features["masked_lm_ids"][row, :count] = items[positions]
        features["masked_lm_positions"][row, :count] = positions
        features["masked_lm_weights"][row, :count] = 1.0
        items[positions] = mask_id(num_items)
        features["input_ids"][row, :length] = items
        features["input_mask"][row, :length] = 1
    return features


def time_configuration(dataset: str, features: dict, packing: str, xla: bool, precision: str,
                       args: argparse.Namespace) -> float:
    """Seconds per training step of one configuration."""
    real = int((features["masked_lm_weights"] > 0).sum())
    capacity = min(-(-real // args.bucket) * args.bucket, features["masked_lm_weights"].size)
    keras.config.set_dtype_policy(precision)
    keras.utils.set_random_seed(args.seed)
    config = preset(dataset).model
    config.vocab_size = vocab_size(get_spec(dataset).paper_counts[1])
    model = BERT4Rec(config, packed=packing != "off",
                     packed_capacity=capacity if packing == "bucket" else None)
    model.compile(optimizer=keras.optimizers.AdamW(learning_rate=1e-4), jit_compile=xla)
    inputs = {name: keras.ops.convert_to_tensor(value) for name, value in features.items()}
    labels = inputs["masked_lm_ids"]
    for _ in range(args.warmup):
        model.train_on_batch(inputs, labels)
    start = time.perf_counter()
    for _ in range(args.steps):
        model.train_on_batch(inputs, labels)
    elapsed = (time.perf_counter() - start) / args.steps
    if args.profile:
        print(profile_table(lambda: model.train_on_batch(inputs, labels)), flush=True)
    keras.config.set_dtype_policy("float32")
    return elapsed


def onednn_enabled() -> bool:
    """Whether TensorFlow runs its oneDNN kernels in this process."""
    try:
        from tensorflow.python.util import _pywrap_util_port
        return bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):
        return False


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    _import_heavy()
    limit = float32_limit()
    if args.real:
        print(f"keras {keras.__version__}, tensorflow {tf.__version__}, oneDNN {'on' if onednn_enabled() else 'off'}, "
              f"{os.cpu_count()} CPUs; float32 limit: a 2048^3 matrix product runs at {limit / 1e9:.0f} GFLOP/s")
        from bert4rec_tf.scripts.benchmark_real import main_real

        main_real(args, limit)
        return 0
    args.batch_size = args.batch_size or 256
    header = (f"{'dataset':<8} {'packing':<8} {'xla':<4} {'precision':<15} {'real/slots':>10} "
              f"{'ms/step':>9} {'samples/s':>10} {'of limit':>9}")
    recbole = args.recbole is not None
    if recbole:
        header += f" {'x RecBole':>9}"
    print(f"batch {args.batch_size}, {args.warmup} warm-up + {args.steps} timed steps, "
          f"keras {keras.__version__} ({keras.backend.backend()}), tensorflow {tf.__version__}, "
          f"oneDNN {'on' if onednn_enabled() else 'off'}, {os.cpu_count()} CPUs")
    print(f"float32 limit: a 2048^3 matrix product runs at {limit / 1e9:.0f} GFLOP/s")
    print(header)
    print("-" * len(header))
    for dataset in args.datasets:
        features = synthetic_features(dataset, args.batch_size, args.seed)
        real = int((features["masked_lm_weights"] > 0).sum())
        slots = features["masked_lm_weights"].size
        config = preset(dataset).model
        config.vocab_size = vocab_size(get_spec(dataset).paper_counts[1])
        flops = training_flops(config, features["input_ids"].shape[1], real / args.batch_size)
        for packing, xla, precision in itertools.product(args.packing, args.xla, args.precisions):
            if packing == "dynamic" and xla and not args.dynamic_xla:
                continue
            seconds = time_configuration(dataset, features, packing, xla, precision, args)
            rate = args.batch_size / seconds
            line = (f"{dataset:<8} {packing:<8} {'on' if xla else 'off':<4} {precision:<15} "
                    f"{f'{real}/{slots}':>10} {seconds * 1000:>9.1f} {rate:>10.1f} "
                    f"{rate * flops / limit:>8.0%}")
            if recbole:
                line += f" {rate / args.recbole:>9.2f}" if dataset == "ml-1m" else f" {'':>9}"
            print(line, flush=True)
        print(f"{dataset:<8} {flops / 1e9:.3f} GFLOP per sample (forward and backward): the float32 limit is "
              f"{limit / flops:.0f} samples/s", flush=True)
        if args.pipeline:
            print(f"{dataset:<8} input pipeline alone (dynamic masking): "
                  f"{pipeline_rate(dataset, args.batch_size, args.seed):.0f} samples/s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
