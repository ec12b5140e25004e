"""Helpers shared by the command-line tools (bert4rec_tf/scripts/): flags, configuration, errors, printing.

Nothing here imports TensorFlow: a command parses its flags (and answers `--help`) before it loads
TensorFlow.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from typing import Callable

from absl import app, flags
from absl import logging as absl_logging

from bert4rec_tf.config import RECIPES, ExperimentConfig
from bert4rec_tf.console import import_tensorflow_quietly
from bert4rec_tf.data.errors import DataError
from bert4rec_tf.data.registry import DATASETS
from bert4rec_tf.files import read_json
from bert4rec_tf.tasks import TASKS, preset, preset_names
# The commands resolve their flags through the package's one resolver (`cli.experiment_config`).
from bert4rec_tf.tasks.resolve import config_from_file, experiment_config

def define_common_flags(values: flags.FlagValues = flags.FLAGS) -> None:
    """The flags every absl command has: --debug and --verbose."""
    flags.DEFINE_bool("debug", False, "Show the full traceback of an error instead of one line (and the "
                      "libraries' logs, as --verbose).", flag_values=values)
    flags.DEFINE_bool("verbose", False, "Also show the libraries' INFO logs (TensorFlow's, TFDS's), hidden by "
                      "default.", flag_values=values)


define_common_flags()


def define_data_flags(values: flags.FlagValues = flags.FLAGS, require_dataset: bool = True) -> None:
    """The flags every data-reading command shares: data set, cache, source file, seed, overrides
    (`require_dataset` False: a command that can take the data set from elsewhere checks it itself)."""
    flags.DEFINE_string("dataset", None, f"Data set: {', '.join(DATASETS)}.", flag_values=values)
    flags.DEFINE_string("model", "bert4rec", f"Model preset: {', '.join(preset_names())}.", flag_values=values)
    flags.DEFINE_string("data_dir", None, "Cache root for downloads, the TFDS build and prepared data "
                        "(default: $BERT4REC_TF_DATA_DIR, else the checkout's datasets/, else "
                        "~/.cache/bert4rec_tf).", flag_values=values)
    flags.DEFINE_string("source_file", None, "A local raw or preprocessed file to read instead of downloading.",
                        flag_values=values)
    flags.DEFINE_integer("seed", None, "Seed of every random choice (default: the preset's).", flag_values=values)
    flags.DEFINE_string("encoding", None, "Text encoding of --source_file (default utf-8, with or without "
                        "byte-order mark), e.g. latin-1 or cp1252. Bytes it cannot decode are an error naming the "
                        "line and byte offset; they are never replaced.", flag_values=values)
    flags.DEFINE_multi_string("config", [], "Override a preset field, e.g. --config dupe_factor=5 "
                              "--config model.num_layers=3.", flag_values=values)
    if require_dataset:
        flags.mark_flag_as_required("dataset", flag_values=values)


def define_train_flags(values: flags.FlagValues = flags.FLAGS) -> None:
    """The flags of `bert4rec-train`: the data flags, then the run's folder, length, overrides and
    strategy; `--dataset` or `--config_file`."""
    define_data_flags(values, require_dataset=False)
    flags.DEFINE_string("config_file", None, "A configuration to train as it is: a tuning study's best_config.json, "
                        "or a run's config.json. It names the data set, the model and the recipe (--dataset, --model "
                        "and --recipe, if given, must be its own); the other flags override it.", flag_values=values)
    flags.register_multi_flags_validator(
        ["dataset", "config_file"], lambda given: bool(given["dataset"] or given["config_file"]),
        message="--dataset is required (or --config_file, a configuration that names it)", flag_values=values)
    flags.DEFINE_string("model_dir", None, "The run's folder (default: runs/<dataset>, or runs/<dataset>-<model> "
                        "for another --model).", flag_values=values)
    flags.DEFINE_integer("train_steps", None, "Override train.train_steps.", flag_values=values)
    flags.DEFINE_integer("batch_size", None, "Override train.batch_size.", flag_values=values)
    flags.DEFINE_float("learning_rate", None, "Override train.learning_rate.", flag_values=values)
    flags.DEFINE_integer("max_len", None, "Override the sequence length (data and model).", flag_values=values)
    flags.DEFINE_integer("hidden_size", None, "Override model.hidden_size.", flag_values=values)
    flags.DEFINE_enum("loss", None, list(dict.fromkeys(loss for task in TASKS.values() for loss in task.losses)),
                      "Override model.loss, among those of the --model (the first is its preset's): SASRec bce (the "
                      "paper's, one negative per position) or ce (softmax over all items); GRU4Rec top1, bpr or ce; "
                      "GRU4Rec+ bpr_max or top1_max; BPR-MF and FPMC bpr; NCF and Caser bce; the Cloze models ce.",
                      flag_values=values)
    flags.DEFINE_string("time_budget", None, "Train until this much wall-clock time has passed (e.g. 2h, 30m, "
                        "1h30m), the learning rate decaying to 0 at the deadline; --train_steps then caps the steps.",
                        flag_values=values)
    flags.DEFINE_enum("recipe", None, list(RECIPES), "Settings applied to the preset before the other flags: "
                      "cpu-30m, cpu-1h and cpu-2h (a time budget with the batch, rate, masking, dropout, warm-up and "
                      "length chosen for each data set and model), paper (the preset as it is). Default: the recipe "
                      f"the run's config.json records when it resumes, else {GPU_DEFAULT_RECIPE} with a GPU and "
                      f"{CPU_DEFAULT_RECIPE} without. See docs/training.md.", flag_values=values)
    flags.DEFINE_integer("eval_every", 1000, "Steps between validation and checkpoint.", flag_values=values)
    flags.DEFINE_integer("patience", None, "Stop after this many validations without improvement.",
                         flag_values=values)
    flags.DEFINE_enum("strategy", "default", ["default", "mirrored", "multi_worker"], "tf.distribute strategy.",
                      flag_values=values)
    flags.DEFINE_integer("logical_cpus", None, "Split the CPU into this many logical devices (to try a strategy "
                         "without GPUs).", flag_values=values)


def check_train_flags(arguments: list[str]) -> None:
    """Parses a train command's `arguments` as `bert4rec-train` would, without running it (nor
    touching the process's own flags).

    Raises:
        ValueError: train.py's own message for a flag it does not have or a value it refuses.
    """
    values = flags.FlagValues()
    define_common_flags(values)
    define_train_flags(values)
    try:
        values(["train.py", *arguments])
    except flags.Error as error:
        raise ValueError(f"train.py refuses its flags: {error}") from None


# absl's help flags, spelled as on the command line without dashes and value.
_HELP_FLAGS = ("help", "h", "?", "helpshort", "helpfull", "helpxml")


def run_absl_command(run: Callable[[], None], module: str) -> None:
    """Parses the flags with absl, runs `run` through `guarded` and exits with its status.

    `--help` prints the docstring of the command's module `module` with its own flags and the shared
    ones (data flags, --debug), and exits with status 0 (absl's help flags exit with 1).

    Args:
        run: the command's work, reading `flags.FLAGS`.
        module: the `__name__` of the module that defines the command's flags.
    """
    sys.modules["__main__"].__doc__ = sys.modules[module].__doc__
    for name in (module, __name__):
        for flag in flags.FLAGS.get_flags_for_module(name):
            flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
    try:
        app.run(lambda argv: _exit_at_once_on_error(guarded(run, loads_tensorflow=True)))
    except SystemExit as exit:
        if exit.code == 1 and _asks_for_help(sys.argv[1:]):
            sys.exit(0)
        raise


def _exit_at_once_on_error(status: int) -> int:
    """Returns `status` 0; ends the process at once with any other status, after flushing its output.

    After a failed write (a full disk, a file-size limit) native libraries (HDF5) can crash while the
    interpreter shuts down, after the one-line error; nothing is left to do by then.
    """
    if status:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return status


def _asks_for_help(argv: list[str]) -> bool:
    """Whether the command line (before any `--`) holds one of absl's help flags."""
    arguments = argv[:argv.index("--")] if "--" in argv else argv
    return any(argument.startswith("-") and argument.lstrip("-").split("=")[0] in _HELP_FLAGS
               for argument in arguments)


def argument_parser(doc: str) -> argparse.ArgumentParser:
    """An argparse parser whose `--help` shows `doc` (the command's docstring, with its examples) as
    written; `--helpfull` is an alias of `--help`, as in the absl commands."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--helpfull", action="help", help=argparse.SUPPRESS)
    return parser


def train_experiment(values: flags.FlagValues) -> tuple[ExperimentConfig, str, str, str]:
    """The configuration of a `bert4rec-train` command (`values`: its parsed flags), its model preset,
    why its recipe was chosen, and its run folder: resolved from `--dataset`, `--model` and `--recipe`
    (`experiment_config`), or read from `--config_file` (`tasks.resolve.read_config_file`), with the
    flags that set configuration fields, the seed and the encoding over it.

    Raises:
        ValueError: as `experiment_config`, or for a `--dataset`, `--model` or `--recipe` that is not the
            configuration file's own.
    """
    overrides = flag_overrides(values.config, {name: getattr(values, name)
                                               for name in (*OVERRIDE_FLAGS, "time_budget")})
    if values.config_file:
        model, config = config_from_file(values.config_file, overrides, values.seed, values.encoding)
        recorded = {"--dataset": config.data.dataset, "--model": model, "--recipe": config.train.recipe}
        for flag, given in (("--dataset", values.dataset), ("--model", values["model"].present and values.model),
                            ("--recipe", values.recipe)):
            if given and given != recorded[flag]:
                raise ValueError(f"{flag} {given} is not the one of --config_file {values.config_file} "
                                 f"({recorded[flag]}): leave {flag} out")
        dataset, reason = config.data.dataset, f"recorded in {values.config_file}"
    else:
        dataset, model = values.dataset, values.model
    model_dir = values.model_dir or os.path.join("runs", dataset if model == "bert4rec" else f"{dataset}-{model}")
    if not values.config_file:
        recipe, reason = (values.recipe, "given") if values.recipe else default_recipe(dataset, model, model_dir)
        config = experiment_config(dataset, overrides, values.seed, model, recipe, values.encoding)
    return config, model, reason, model_dir


# train.py flags that set a configuration field: each given one becomes the override `name=value`.
OVERRIDE_FLAGS = ("train_steps", "batch_size", "learning_rate", "max_len", "hidden_size", "loss")


def flag_overrides(config: list[str], values: dict[str, object]) -> list[str]:
    """The configuration overrides of a train.py command, in the order train.py applies them: its
    `--config` ones, then those of the `OVERRIDE_FLAGS` given in `values` ({flag name: value, None
    for not given}), then `--time_budget`'s, in seconds.

    Raises:
        ValueError: for a `--time_budget` that is not a duration, or a flag and a `--config` item that
            set the same field to different values (the flag would win without a word).
    """
    overrides = list(config)
    for name in OVERRIDE_FLAGS:
        if values.get(name) is None:
            continue
        for item in config:
            key, _, value = item.partition("=")
            if key.strip().split(".")[-1] == name and not _same_value(value, values[name]):
                raise ValueError(f"--{name} {values[name]} and --config {item.strip()} set {name} to different "
                                 "values: give one of them")
    overrides += [f"{name}={values[name]}" for name in OVERRIDE_FLAGS if values.get(name) is not None]
    if values.get("time_budget") is not None:
        overrides.append(f"time_budget={parse_duration(str(values['time_budget']))}")
    return overrides


def _same_value(text: str, value: object) -> bool:
    """Whether a `--config` value `text` is the flag's `value` (numbers compared as numbers)."""
    try:
        return float(text) == float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return text.strip() == str(value)


# The recipe of a training command that names none: with a GPU the paper's settings; without one,
# a run that ends within about an hour on a 2-core machine, preparation, test and export included
# (the budget counts training and validation only).
GPU_DEFAULT_RECIPE = "paper"
CPU_DEFAULT_RECIPE = "cpu-30m"


def gpu_available() -> bool:
    """Whether TensorFlow sees a GPU (this imports TensorFlow)."""
    import tensorflow as tf

    return bool(tf.config.list_physical_devices("GPU"))


def default_recipe(dataset: str, model: str, model_dir: str) -> tuple[str, str]:
    """The recipe of a training command without `--recipe`, and why, for the line that says so.

    A run folder that has trained keeps the recipe its config.json records (a resumed run does not
    change recipe); otherwise `GPU_DEFAULT_RECIPE` when TensorFlow sees a GPU, else
    `CPU_DEFAULT_RECIPE`.

    Raises:
        ValueError: for an unknown data set or model (before TensorFlow is imported).
    """
    preset(dataset, model)  # an unknown name fails here, before TensorFlow loads
    config_file = os.path.join(model_dir, "config.json")
    if os.path.isfile(os.path.join(model_dir, "checkpoints", "state.json")) and os.path.isfile(config_file):
        recorded = read_json(config_file, "run configuration").get("train", {}).get("recipe")
        if recorded:
            return recorded, f"recorded in {config_file}: the run goes on as it started"
    if gpu_available():
        return GPU_DEFAULT_RECIPE, "the default with a GPU"
    return CPU_DEFAULT_RECIPE, "the default without a GPU"


def recipe_notice(config: ExperimentConfig, model: str, reason: str) -> str:
    """One line: the run's recipe, `reason` it was chosen, how long it trains, and the other choice."""
    train = config.train
    if not TASKS[config.model.name].trains:
        return (f"recipe {train.recipe} ({reason}): {model} has nothing to train; it counts the training items, "
                "then tests and exports")
    paper = preset(config.data.dataset, model).train
    cap = f" or {train.train_steps:,} steps, whichever ends first" if train.train_steps < paper.train_steps else ""
    length = (f"trains for {format_duration(train.time_budget)}{cap}, then tests and exports" if train.time_budget
              else f"trains {train.train_steps:,} steps at learning rate {_rate(train.learning_rate)}")
    other = (f"--recipe {CPU_DEFAULT_RECIPE} for {format_duration(RECIPES[CPU_DEFAULT_RECIPE]['*']['time_budget'])} "
             "on a CPU" if train.recipe == "paper" else
             f"--recipe paper for the paper's setup ({paper.train_steps:,} steps at learning rate "
             f"{_rate(paper.learning_rate)}: days on a CPU)")
    return f"recipe {train.recipe} ({reason}): {length}; {other}"


def _rate(value: float) -> str:
    """A learning rate as written in the papers: 1e-4, 3e-3, 1.5e-3."""
    mantissa, exponent = f"{value:e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def format_duration(seconds: float) -> str:
    """`seconds` as "30 minutes", "1 hour", "1h30m" or "45 seconds"."""
    minutes, rest = divmod(round(seconds), 60)
    if rest or not minutes:
        return f"{round(seconds)} seconds"
    hours, minutes = divmod(minutes, 60)
    if hours and minutes:
        return f"{hours}h{minutes:02d}m"
    return f"{hours} hour{'s' * (hours > 1)}" if hours else f"{minutes} minute{'s' * (minutes > 1)}"


def parse_duration(text: str, flag: str = "--time_budget") -> float:
    """Seconds in a duration such as "2h", "30m", "1h30m", "45s" or "5400" (seconds).

    Raises:
        ValueError: naming `flag` when the text is not such a duration.
    """
    match = re.fullmatch(r"\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*", text)
    if not text.strip() or match is None:
        raise ValueError(f"{flag} {text!r} is not a duration such as 2h, 30m, 1h30m, 45s or 5400")
    hours, minutes, seconds = (float(group) if group else 0.0 for group in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def debugging() -> bool:
    """Whether --debug was given (False before the flags are parsed)."""
    return flags.FLAGS.is_parsed() and flags.FLAGS.debug


def quiet_libraries() -> None:
    """Hides the libraries' INFO logs, which tell a user of the package nothing: TensorFlow's native
    ones once it loads (which this must precede: it reads the variable when imported), TensorFlow's
    Python ones (the SavedModel's signatures, its writer) and TFDS's (the build's paths and counts,
    its custom-configuration notice). Their warnings and errors still show; the package's own log
    lines are untouched."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    logging.getLogger("tensorflow").setLevel(logging.WARNING)
    # TensorFlow's SavedModel code and TFDS log through absl's logger (TFDS's notices as warnings).
    absl_logging.set_verbosity(absl_logging.ERROR)


def guarded(run: Callable[[], int | None], loads_tensorflow: bool = False) -> int:
    """Runs `run` and returns its exit status (0 when it returns None); bad input, a fault or a missing
    TensorFlow ends in a one-line error on stderr and exit status 1, and Ctrl-C in one line (the
    `KeyboardInterrupt`'s message, if any) and exit status 130.

    Errors the package raises for bad input (`ValueError`, `DataError`) and operating-system errors
    (missing, unreadable or damaged files) are shown as `error: <message>`; `--debug` shows the
    traceback instead. With `loads_tensorflow` (a command whose work runs TensorFlow) TensorFlow is
    imported first, its native INFO lines held back (`bert4rec_tf.console.quiet_native_import`).
    """
    logging.getLogger("bert4rec_tf").setLevel(logging.INFO)
    quiet = not (debugging() or (flags.FLAGS.is_parsed() and flags.FLAGS.verbose))
    if quiet:
        quiet_libraries()
    try:
        if loads_tensorflow and quiet:
            import_tensorflow_quietly()
        status = run()
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] != "tensorflow" or debugging():
            raise
        print(f"error: TensorFlow is not installed ({error}): install the package with one of its TensorFlow "
              "extras, pip install -e \".[cpu]\" or, with an NVIDIA GPU, pip install -e \".[gpu]\"", file=sys.stderr)
        return 1
    except (DataError, ValueError, OSError) as error:
        if debugging():
            raise
        message = " ".join(str(error).split()) or type(error).__name__
        print(f"error: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as interruption:
        if debugging():
            raise
        print(f"\n{interruption.args[0] if interruption.args else 'interrupted'}", file=sys.stderr)
        return 130
    return status or 0


def print_stats(dataset: str, stats: dict, dropped: dict) -> None:
    """Prints a data set's statistics, what preprocessing dropped on purpose, the duplicate rows it
    kept and the ids that are not positive integers."""
    print(f"{dataset}: users {stats['users']:,} | items {stats['items']:,} | actions {stats['actions']:,} | "
          f"avg length {stats['avg_length']:.2f} | min length {stats['min_length']}")
    if dropped:
        print(f"preprocessing dropped: {dropped.get('users_dropped_short', 0):,} users with too few "
              f"interactions ({dropped.get('interactions_dropped_short_users', 0):,} interactions), "
              f"{dropped.get('items_dropped_rare', 0):,} rare items "
              f"({dropped.get('interactions_dropped_rare_items', 0):,} interactions), "
              f"of {dropped.get('interactions_read', 0):,} interactions read")
        print(f"preprocessing kept: {dropped.get('duplicate_rows', 0):,} duplicate rows (the user, item and "
              "timestamp, if any, of an earlier row; every interaction counts)")
        others = (dropped.get("user_ids_not_positive_integers", 0), dropped.get("item_ids_not_positive_integers", 0))
        if any(others):
            print(f"ids that are not positive integers: {others[0]:,} users, {others[1]:,} items; they are numbered "
                  "after the positive integers, in order of first appearance")
