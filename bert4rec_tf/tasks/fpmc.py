"""FPMC (Rendle et al., 2010): a baseline of the BERT4Rec paper's Table 2, with a basket of one item.

Preset "fpmc": the BERT4Rec paper implemented FPMC itself and tuned d, the L2 regulariser and
dropout on its validation sets, without reporting the values; the preset takes d 64 (BERT4Rec's
default) for both factorisations, l2 0.01 (the middle of its grid; 0.001 on ML-1m, where one-hour
validation pop-100 HR@10 was 0.584 against 0.492 at 0.01, and two hours at 0.01 reached 0.496), one
sampled negative per positive (the paper's S-BPR draws one), Adam at 1e-3 in batches of 256 (the
paper: SGD on one quadruple at a time) and no weight decay. The `cpu-*` recipes set the batch as for
BPR-MF (`INTERACTION_CPU_RECIPES`).
"""

from __future__ import annotations

import dataclasses

from bert4rec_tf.tasks.bpr_mf import FACTOR_SPACE, INTERACTION_CPU_RECIPES, FactorConfig, InteractionTask, bpr_preset


@dataclasses.dataclass
class FPMCConfig(FactorConfig):
    """FPMC's model section: BPR-MF's settings, for both factorisations."""

    name: str = "fpmc"


class FPMCTask(InteractionTask):
    """FPMC: a vector per user and a first-order Markov chain over items, factorised."""

    name = "fpmc"
    presets = bpr_preset("fpmc")
    cpu_recipes = {"fpmc": INTERACTION_CPU_RECIPES}
    model_config = FPMCConfig
    space = FACTOR_SPACE
    sequential = True

    def model_class(self):
        from bert4rec_tf.models.fpmc import FPMC

        return FPMC
