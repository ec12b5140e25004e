"""The papers' experiments as plans of ordinary training runs, and the train.py flags they derive.

An experiment (`EXPERIMENTS`) is a list of `Run`s: a data set, a model (`--model`) and flags for
`run_scripts/train.py`. Each run is an ordinary model directory `<out>/runs/<name>`, so evaluate.py
and TensorBoard read it, and re-running train.py in it resumes it. A run's settings are its train.py
flags without local paths (`run_settings`), compared as the configuration they resolve to
(`resolved_settings`).
"""

from __future__ import annotations

import dataclasses
import math

from bert4rec_tf.config import PRESETS
from bert4rec_tf.experiments.published import TABLE4
from bert4rec_tf.tasks import preset
from bert4rec_tf.tasks.resolve import experiment_config


@dataclasses.dataclass(frozen=True)
class Run:
    """One training run of an experiment.

    `setting` names it within the data set (the key of `PUBLISHED`); `flags` are train.py flags
    beside --dataset, --model and the budget; `value` is the swept value (sweeps only). Two settings
    depend on what the command's recipe and flags resolve to (`derived_flags`): `rho`, the mask
    proportion (the share of a window's items chosen for prediction, `data.masked_lm_prob`), sizes the
    masked slots from the resolved maximum length N, and `max_learning_rate` caps the resolved rate.
    `against` names the setting (same data set) a run departs from: the report sets the two side by
    side. A `tuned` run trains its flags with the settings its study chose on validation
    (`<studies>/<dataset>-<against>/best.flags`, made by bert4rec-tune; `reproduce.tuned_plan`). A run
    that does not `share` trains in its experiment even when another experiment has a record of the
    same settings (its comparison wants every run of it trained on the same machine).
    """

    dataset: str
    setting: str
    model: str
    flags: tuple[str, ...] = ()
    value: float | None = None
    rho: float | None = None
    max_learning_rate: float | None = None
    against: str | None = None
    tuned: bool = False
    share: bool = True

    @property
    def name(self) -> str:
        return f"{self.dataset}-{self.setting}"


def _config(*pairs: str) -> tuple[str, ...]:
    return tuple(item for pair in pairs for item in ("--config", pair))


def _table2(dataset: str) -> list[Run]:
    return [Run(dataset, "pop", "pop"),
            Run(dataset, "bpr-mf", "bpr_mf"),
            Run(dataset, "ncf", "ncf"),
            Run(dataset, "fpmc", "fpmc"),
            Run(dataset, "gru4rec", "gru4rec"),
            Run(dataset, "gru4rec-plus", "gru4rec_plus"),
            Run(dataset, "caser", "caser"),
            # The BERT4Rec paper ran SASRec from its authors' code, whose network differs from the
            # SASRec paper's description (docs/models.md#sasrec); this row trains the code's network.
            Run(dataset, "sasrec-bce", "sasrec", ("--loss", "bce", *_config("code_network=true"))),
            Run(dataset, "sasrec-ce", "sasrec", ("--loss", "ce")),
            Run(dataset, "bert4rec-1mask", "bert4rec_1mask"),
            Run(dataset, "bert4rec", "bert4rec"),
            Run(dataset, "bert4rec-match", "bert4rec_match")]


# The learning-rate cap of the runs that stay at one output (or the popularity ranking) at the CPU
# recipes' 3e-3 and learn at 1e-3: the ablation's no-residual row and the d sweep's 256. The
# paper's 1e-4 is below it, so `--recipe paper` trains them as the paper did.
_CAPPED_LEARNING_RATE = 1e-3


def _ablation(dataset: str) -> list[Run]:
    runs = [Run(dataset, "ablation-default", "bert4rec"),
            Run(dataset, "ablation-no-pe", "bert4rec", _config("use_position_embedding=false")),
            Run(dataset, "ablation-no-ffn", "bert4rec", _config("use_ffn=false")),
            Run(dataset, "ablation-no-ln", "bert4rec", _config("use_layer_norm=false")),
            # Without residual paths the network collapses to one output for every user at the CPU
            # recipes' 3e-3 (docs/results/ablation/notes.md).
            Run(dataset, "ablation-no-residual", "bert4rec", _config("use_residual=false"),
                max_learning_rate=_CAPPED_LEARNING_RATE),
            Run(dataset, "ablation-no-dropout", "bert4rec", _config("hidden_dropout=0", "attention_dropout=0"))]
    runs += [Run(dataset, f"ablation-layers-{n}", "bert4rec", _config(f"num_layers={n}"), n) for n in (1, 3, 4)]
    runs += [Run(dataset, f"ablation-heads-{h}", "bert4rec", _config(f"num_heads={h}"), h) for h in (1, 4, 8)]
    # The matching paper's ablation: its BERT4Rec (d 32) with only the mask task, and only the matching task.
    runs += [Run(dataset, "ablation-only-mask", "bert4rec",
                 ("--hidden_size", "32") + _config("intermediate_size=128", "mask_runs=true")),
             Run(dataset, "ablation-only-matching", "bert4rec_match", _config("match_only_prob=1.0"))]
    return runs


def _mask_proportion(dataset: str) -> list[Run]:
    runs = []
    for rho in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
        runs.append(Run(dataset, f"mask-proportion-{rho:.1f}", "bert4rec", _config(f"masked_lm_prob={rho}"), rho,
                        rho=rho))
    return runs


def _slots(rho: float, max_len: int) -> int:
    """Masked slots for a mask proportion `rho` of `max_len` positions (as the preset's 40 of 200)."""
    return max(1, math.ceil(round(rho * max_len, 6)))


def derived_flags(run: Run, settings: list[str], extra: list[str] = ()) -> list[str]:
    """The train.py flags of `run` that depend on what its other `settings` (`run_settings`: the
    recipe, the run's flags) and `extra` (--extra's flags; left out when `resolved_settings` cannot
    read them, e.g. --debug) resolve to: for `rho`, the masked slots sized from the
    resolved maximum length (N 100 under cpu-30m on ML-1m: 20 slots at rho 0.2, not the preset N 200's
    40); for `max_learning_rate`, that rate when the resolved rate is above it (the recipe's 3e-3 on
    a CPU; the paper's 1e-4 stays). They go before --extra, which still overrides them.

    Raises:
        ValueError: when the settings cannot be resolved.
    """
    if run.rho is None and run.max_learning_rate is None:
        return []
    resolved = resolved_settings([*settings, *extra]) or resolved_settings(settings)
    if resolved is None:
        raise ValueError(f"run {run.name}: cannot resolve its train.py settings {' '.join(settings)}")
    config, flags = resolved["config"], []
    if run.rho is not None:
        flags += ["--config", f"max_predictions_per_seq={_slots(run.rho, config['data']['max_len'])}"]
    if run.max_learning_rate is not None and config["train"]["learning_rate"] > run.max_learning_rate:
        flags += ["--learning_rate", f"{run.max_learning_rate:g}"]
    return flags


def _max_len(dataset: str) -> list[Run]:
    lengths = sorted(TABLE4[dataset]) if dataset in TABLE4 else [10, 20, 50, 100, 200]
    rho = preset(dataset).data.masked_lm_prob
    return [Run(dataset, f"max-len-{n}", "bert4rec",
                ("--max_len", str(n)) + _config(f"max_predictions_per_seq={_slots(rho, n)}"), n)
            for n in lengths]


def _hidden_size(dataset: str) -> list[Run]:
    # At d 256 the network stays at the popularity ranking at the CPU recipes' 3e-3 (loss flat at the
    # items' frequency entropy for 841 steps: docs/results/hidden_size/notes.md); d 128 and below learn.
    return [Run(dataset, f"hidden-size-{d}", "bert4rec",
                ("--hidden_size", str(d)) + _config(f"intermediate_size={4 * d}"), d,
                max_learning_rate=_CAPPED_LEARNING_RATE if d >= 256 else None)
            for d in (16, 32, 64, 128, 256)]


def _sampled_softmax(dataset: str) -> list[Run]:
    # The sampled head (`--loss sampled_softmax`, not the papers' loss) beside the exact runs of
    # Table 2 it replaces (the same settings, so their records are shared), and sparse updates of the
    # item table beside the sampled head they speed up. The negatives are drawn in proportion to the
    # items' training counts (logQ-corrected): uniform ones, which rarely include the popular items,
    # trained far slower on Beauty (docs/speed.md).
    exact = {run.setting: run for run in _table2(dataset)}
    sampled = ("--loss", "sampled_softmax") + _config("model.negative_alpha=1.0")
    return [exact["bert4rec"],
            Run(dataset, "bert4rec-sampled", "bert4rec", sampled, against="bert4rec"),
            Run(dataset, "bert4rec-sampled-sparse", "bert4rec", sampled + _config("train.sparse_updates=true"),
                against="bert4rec-sampled"),
            exact["sasrec-ce"],
            Run(dataset, "sasrec-ce-sampled", "sasrec", sampled, against="sasrec-ce")]


def _table2_tuned(dataset: str) -> list[Run]:
    # Every trained row of Table 2 as it is (the same settings, so its record is shared with table2)
    # beside the same row trained with the settings its study chose on validation (bert4rec-tune
    # with the run's loss and overrides, the same recipe and seed). POP has no settings to tune: its
    # one row (Table 2's record) stands in both tables, so the orderings of the tuned rows and the
    # "not above POP" check have their floor.
    runs = []
    for run in _table2(dataset):
        runs.append(run)
        if run.model != "pop":
            runs.append(dataclasses.replace(run, setting=f"{run.setting}-tuned", against=run.setting, tuned=True))
    return runs


# The folder of the attribute files in a run's flags: `bert4rec-reproduce --attributes` puts the folder
# in its place in the command it runs, and the run's settings keep the token, so that they do not
# depend on where the files are (the prepared data's key binds their contents).
ATTRIBUTES_TOKEN = "{attributes}"


def _features(dataset: str) -> list[Run]:
    # SASRec (ce) and BERT4Rec of Table 2 with ids only, with the item attributes at the input and the
    # output, and with the user attributes as well; each beside the run it adds to. The id-only runs
    # are Table 2's, trained here again (`share` False) so that all three of a model train on the same
    # machine.
    exact = {run.setting: run for run in _table2(dataset)}
    items = _config(f"item_features={ATTRIBUTES_TOKEN}/item_features.csv", "attributes_at_output=true")
    users = _config(f"user_features={ATTRIBUTES_TOKEN}/user_features.csv")
    runs = []
    for base in ("sasrec-ce", "bert4rec"):
        run = exact[base]
        runs += [dataclasses.replace(run, setting=f"{base}-ids", share=False),
                 dataclasses.replace(run, setting=f"{base}-items", flags=run.flags + items, against=f"{base}-ids"),
                 dataclasses.replace(run, setting=f"{base}-items-users", flags=run.flags + items + users,
                                     against=f"{base}-items")]
    return runs


EXPERIMENTS = {"table2": _table2, "table2_tuned": _table2_tuned, "ablation": _ablation,
               "mask_proportion": _mask_proportion, "max_len": _max_len, "hidden_size": _hidden_size,
               "sampled_softmax": _sampled_softmax, "features": _features}
# Experiments whose report also shows the test by the targets' training occurrences (what attributes
# do for rare items).
SLICED = ("features",)
SWEEPS = {"mask_proportion": "mask proportion rho", "max_len": "maximum length N", "hidden_size": "hidden size d"}
# Experiments renamed, by their old name: `mask_prob` swept rho, not the config's `data.mask_prob`.
RENAMED = {"mask_prob": "mask_proportion"}


def plan(experiment: str, datasets: list[str]) -> list[Run]:
    """The runs of `experiment` on `datasets`, in the order they are trained.

    Raises:
        ValueError: for an unknown experiment (a renamed one named by its new name) or data set.
    """
    if experiment in RENAMED:
        raise ValueError(f"experiment {experiment!r} is now {RENAMED[experiment]!r}: it sweeps the mask proportion "
                         "rho (data.masked_lm_prob), not data.mask_prob")
    if experiment not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {experiment!r}; known: {', '.join(EXPERIMENTS)}")
    unknown = [d for d in datasets if d not in PRESETS]
    if unknown:
        raise ValueError(f"unknown dataset(s) {', '.join(unknown)}; known: {', '.join(sorted(PRESETS))}")
    return [run for dataset in datasets for run in EXPERIMENTS[experiment](dataset)]


# train.py flags whose values are local paths: not part of what a run's settings are.
_PATH_FLAGS = ("--model_dir", "--data_dir", "--source_file")


def run_settings(train_flags: list[str]) -> list[str]:
    """The train.py flags of a run without the local paths: two runs with equal settings on the same
    data are the same experiment (the data is bound by the record's `data`)."""
    settings, skip = [], False
    for flag in train_flags:
        if skip:
            skip = False
        elif flag in _PATH_FLAGS:
            skip = True
        else:
            settings.append(flag)
    return settings


# train.py flags outside the configuration that still decide how a run trains or which checkpoint it keeps.
_RUN_FLAGS = ("--dataset", "--model", "--recipe", "--seed", "--eval_every", "--patience", "--strategy",
              "--logical_cpus")


def resolved_settings(settings: list[str], strict: bool = False) -> dict | None:
    """What a run's train.py `settings` (`run_settings`) amount to: the configuration train.py builds
    from them (the preset, the recipe, then the overrides) and the flags outside it. Runs whose
    settings resolve alike train alike however their flags are written: in the sweeps, N 100 on ML-1m
    with its 20 slots and d 64 with its FFN of 256 are both the recipe's own BERT4Rec. None when the
    settings hold a flag this does not know or cannot be resolved (then only equal flags match).

    With `strict`, settings train.py would refuse (`experiment_config`'s one-line ValueError: an
    unknown key, a value out of range, a setting the model does not read) raise that error instead.
    """
    from bert4rec_tf import cli

    if len(settings) % 2:
        return None
    flags, config_overrides, values = {}, [], {}
    for flag, value in zip(settings[0::2], settings[1::2]):
        if flag == "--config":
            config_overrides.append(value)
        elif flag[2:] in (*cli.OVERRIDE_FLAGS, "time_budget"):
            values[flag[2:]] = value  # the last one given counts, as on train.py's command line
        elif flag in _RUN_FLAGS and flag not in flags:
            flags[flag] = value
        else:
            return None
    if "--dataset" not in flags:
        return None
    try:
        overrides = cli.flag_overrides(config_overrides, values)
    except ValueError:
        return None
    seed = flags.get("--seed")
    try:
        config = experiment_config(flags["--dataset"], overrides, int(seed) if seed is not None else None,
                                       flags.get("--model", "bert4rec"), flags.get("--recipe"))
    except ValueError:
        if strict:
            raise
        return None
    except (KeyError, TypeError):
        return None
    flags.pop("--seed", None)
    flags.pop("--recipe", None)  # both are in the configuration (data.seed, train.recipe)
    return {"config": config.to_dict(), "flags": flags}
