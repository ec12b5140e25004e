"""The training-step profile: op names to model parts, and a real profiled step."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from bert4rec_tf.profiling import CATEGORIES, categorize, profile_steps


@pytest.mark.parametrize("name, category", [
    ("gradient_tape/bert4_rec_1/transformer_block_0_1/self_attention_1/query_1/Tensordot/MatMul:_MklMatMul",
     "projections"),
    ("bert4_rec_1/transformer_block_1_1/self_attention_1/MatMul_1:_MklBatchMatMulV2", "attention products"),
    ("bert4_rec_1/transformer_block_0_1/self_attention_1/add:AddV2", "attention softmax, mask, dropout"),
    ("gradient_tape/bert4_rec_1/transformer_block_1_1/feed_forward_1/Gelu/Exp:Exp", "FFN"),
    ("bert4_rec_1/transformer_block_0_1/feed_forward_dropout_1/SelectV2:SelectV2", "residual, LayerNorm, dropout"),
    ("bert4_rec_1/embedding_1/layer_norm_1/mul_1:Mul", "embedding"),
    ("bert4_rec_1/masked_item_head_1/add:_MklNativeFusedMatMul", "output head and loss"),
    ("ReduceLogSumExp/Exp:Exp", "output head and loss"),
    ("adam_w/AssignSubVariableOp:AssignSubVariableOp", "optimizer"),
    ("AddN_5:AddN", "gradient sums"),
    ("MatMul_1:_MklMatMul", "output head and loss"),  # the fused tied head, outside the model's scope
    ("xla:CpuExecutable::ExecuteAsyncOnStream", "FFN"),  # the XLA-compiled GELU
    ("stack:Pack", "other"),
])
def test_ops_are_put_in_the_model_part_their_name_says(name, category):
    assert categorize(name) == category


@pytest.mark.slow
def test_a_profiled_training_step_spends_time_in_the_transformer_and_the_head():
    from tests.models.test_relatives import build_model, config, training_batch

    model = build_model(config("bert4rec"))
    model.compile(optimizer=keras.optimizers.AdamW(1e-3))
    batch = training_batch("bert4rec")
    model.train_on_batch(batch)
    shares = profile_steps(lambda: model.train_on_batch(batch), steps=2)
    assert set(shares) == set(CATEGORIES) and all(np.isfinite(list(shares.values())))
    for part in ("attention products", "projections", "FFN", "output head and loss"):
        assert shares[part] > 0, shares
