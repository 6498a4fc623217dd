"""Every family against the real transformers forward pass.

For a tiny random model (biases non-zero, float64, eager attention, saved with save_pretrained), the
pre-softmax scores captured from the model must equal

    scale * (x_j^T L(i - j) x_i + b_K^T R(i - j) W_Q x_i + x_j^T W_K^T R(i - j) b_Q + b_K^T R(i - j) b_Q) (+ ALiBi)

with L(d) = W_K^T R(d) W_Q built from the W_Q, W_K that ``layer_weights`` reads from the saved files,
and x the hidden states that actually enter the Q/K projections (captured with hooks).
Rotary models: transformers computes the rotation angles in float32, so they compare at 1e-5 relative
(a wrong pairing or sign gives errors of order 1); everything else at 1e-10.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from pipeline.families import (
    ArchitectureError,
    Layout,
    layer_weights,
    layout_from_config,
    qk_tensor_names,
    rotations,
)
from pipeline.families.rotary import N_OFFSETS
from pipeline.registry.checkpoints import open_checkpoint
from tests.tiny_models import (
    VOCAB,
    attention_inputs,
    ln_gain,
    ln_module,
    qk_biases,
    random_model,
    record_attention,
    save,
    torch,
    transformers,
)

T = 9  # sequence length: offsets -8..8


def expected_scores(layout: Layout, W_Q, W_K, bq, bk, x, alibi_slopes=None):
    """(H, T, T) scores from the bilinear form, the bias terms and ALiBi; numpy float64 only."""
    H, n, N = W_Q.shape
    out = np.zeros((H, T, T))
    if layout.positional == "rope":
        R = rotations(layout, np.arange(-(T - 1), T))
    else:
        R = np.broadcast_to(np.eye(n), (2 * T - 1, n, n))
    for h in range(H):
        for i in range(T):
            for j in range(T):
                Rd = R[i - j + T - 1]
                L = W_K[h].T @ Rd @ W_Q[h]  # (N, N)
                s = x[j] @ L @ x[i] + bk[h] @ Rd @ W_Q[h] @ x[i] + x[j] @ W_K[h].T @ Rd @ bq[h] + bk[h] @ Rd @ bq[h]
                out[h, i, j] = layout.scale * s + (0.0 if alibi_slopes is None else alibi_slopes[h] * j)
    return out


CASES = {  # case -> (kind, save options, relative tolerance)
    "gpt2": ("gpt2", {}, 1e-10),
    "opt": ("opt", {}, 1e-10),
    "opt-postnorm": ("opt-postnorm", {}, 1e-10),
    "bloom": ("bloom", {}, 1e-10),
    "gpt_neox-rotary_pct-0.25": ("gpt_neox", {}, 1e-5),
    "mistral-gqa-head_dim-12": ("mistral", {}, 1e-5),
    "bert": ("bert", {}, 1e-10),
    "gpt2-sharded-bf16": ("gpt2", dict(dtype=torch.bfloat16, max_shard_size="4KB"), 1e-10),
    "opt-sharded-fp16": ("opt", dict(dtype=torch.float16, max_shard_size="4KB"), 1e-10),
}


@pytest.mark.parametrize("case", list(CASES))
def test_scores_equal_forward_pass(tiny_model, case):
    kind, save_kw, rtol = CASES[case]
    model, folder = tiny_model(kind, **save_kw)
    ckpt = open_checkpoint(folder)
    layout = layout_from_config(ckpt.config)
    if "sharded" in case:
        assert len({id(s) for s in ckpt.sources.values()}) > 1, "the checkpoint should be sharded"
    ids = torch.randint(0, 50, (1, T), generator=torch.Generator().manual_seed(1))
    xs, scores = attention_inputs(model, kind, ids)
    assert len(xs) == len(scores) == layout.n_layers
    causal = layout.family != "bert"
    allowed = np.tril(np.ones((T, T), bool)) if causal else np.ones((T, T), bool)
    slopes = None
    if layout.positional == "alibi":  # H = 4, a power of two: slope_h = 2^(-8 (h + 1) / H)
        slopes = 2.0 ** (-8.0 * (np.arange(layout.n_heads) + 1) / layout.n_heads)
    for layer in range(layout.n_layers):
        W_Q, W_K = layer_weights(ckpt, layout, layer)
        bq, bk = qk_biases(model, kind, layer)
        want = expected_scores(layout, W_Q, W_K, bq, bk, xs[layer], slopes)
        got = scores[layer]
        assert got.shape == want.shape
        err = np.abs(got - want)[:, allowed].max() / np.abs(got[:, allowed]).max()
        assert err < rtol, f"{case} layer {layer}: relative error {err:.2e}"
        if causal:  # the captured scores really are the masked pre-softmax scores
            assert (got[:, ~allowed] < -1e30).all()


# The Llama family and Qwen2: kind -> (config class, config kwargs, model class). Q/K biases where the
# family has them (Llama with attention_bias, Qwen2 always); scaled RoPE of both supported types.
_GQA = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=12, num_hidden_layers=2,
            intermediate_size=64, max_position_embeddings=64)
ROPE_KINDS = {
    "llama-gqa-biases": ("LlamaConfig", dict(_GQA, rope_theta=1000.0, attention_bias=True), "LlamaForCausalLM"),
    "llama-mha": ("LlamaConfig", dict(_GQA, num_key_value_heads=4, head_dim=None, hidden_size=24),
                  "LlamaForCausalLM"),
    "llama-linear-scaling": ("LlamaConfig", dict(_GQA, rope_theta=1000.0, rope_scaling={"rope_type": "linear",
                                                                                        "factor": 3.0}),
                             "LlamaForCausalLM"),
    "llama-llama3-scaling": ("LlamaConfig", dict(_GQA, num_key_value_heads=1, rope_theta=1000.0, rope_scaling={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64}), "LlamaForCausalLM"),
    "qwen2-gqa": ("Qwen2Config", dict(_GQA, rope_theta=500.0), "Qwen2ForCausalLM"),
}


def build_rope_model(kind: str, seed: int = 0):
    """A tiny random Llama / Qwen2 model (every parameter random, float64, eager attention)."""
    cfg_cls, kw, model_cls = ROPE_KINDS[kind]
    return random_model(cfg_cls, kw, model_cls, seed)


def rope_attention_inputs(model, ids):
    """Per layer: x (T, N) entering q_proj, scores (H, T, T) handed to softmax, and (b_Q, b_K) per query head."""
    xs, scores = record_attention(model, "self_attn.q_proj", ids)
    cfg = model.config
    H, kv, n = cfg.num_attention_heads, cfg.num_key_value_heads, model.model.layers[0].self_attn.head_dim
    biases = []
    for m in model.model.layers:
        a = m.self_attn
        bq = np.zeros((H, n)) if a.q_proj.bias is None else a.q_proj.bias.detach().numpy().reshape(H, n)
        bk = np.zeros((kv, n)) if a.k_proj.bias is None else a.k_proj.bias.detach().numpy().reshape(kv, n)
        biases.append((bq, bk[np.arange(H) // (H // kv)]))
    return xs, scores, biases


@pytest.mark.parametrize("kind", list(ROPE_KINDS))
def test_llama_and_qwen2_scores_equal_forward_pass(tmp_path, kind):
    model = build_rope_model(kind)
    ckpt = open_checkpoint(save(model, tmp_path / kind))
    layout = layout_from_config(ckpt.config)
    assert layout.family == kind.split("-")[0] and layout.positional == "rope"
    assert layout.n_kv_heads == model.config.num_key_value_heads
    ids = torch.randint(0, VOCAB, (1, T), generator=torch.Generator().manual_seed(1))
    xs, scores, biases = rope_attention_inputs(model, ids)
    allowed = np.tril(np.ones((T, T), bool))
    for layer in range(layout.n_layers):
        W_Q, W_K = layer_weights(ckpt, layout, layer)
        if "biases" in kind or kind.startswith("qwen2"):  # the bias terms really are in these scores
            assert np.abs(biases[layer][0]).max() > 0 and np.abs(biases[layer][1]).max() > 0
        want = expected_scores(layout, W_Q, W_K, *biases[layer], xs[layer])
        err = np.abs(scores[layer] - want)[:, allowed].max() / np.abs(scores[layer][:, allowed]).max()
        assert err < 1e-5, f"{kind} layer {layer}: relative error {err:.2e}"
        if "scaling" in kind:  # the scaling matters: plain RoPE frequencies give a wrong answer
            plain = Layout(**{**layout.__dict__, "rope_scaling": ()})
            wrong = expected_scores(plain, W_Q, W_K, *biases[layer], xs[layer])
            assert np.abs(scores[layer] - wrong)[:, allowed].max() / np.abs(scores[layer][:, allowed]).max() > 1e-3


@pytest.mark.parametrize("kind", ["llama-gqa-biases", "qwen2-gqa"])
def test_llama_and_qwen2_fold_the_input_layernorm(tmp_path, kind):
    model = build_rope_model(kind)
    ckpt = open_checkpoint(save(model, tmp_path / kind))
    layout = layout_from_config(ckpt.config)
    for layer in range(layout.n_layers):
        raw_q, raw_k = layer_weights(ckpt, layout, layer)
        fq, fk = layer_weights(ckpt, layout, layer, fold_ln=True)
        gain = model.model.layers[layer].input_layernorm.weight.detach().numpy()
        np.testing.assert_array_equal(fq, raw_q * gain)
        np.testing.assert_array_equal(fk, raw_k * gain)


def test_scaled_frequencies_equal_transformers():
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from pipeline.families import inverse_frequencies

    for kind in ("llama-linear-scaling", "llama-llama3-scaling"):
        cfg_cls, kw, _ = ROPE_KINDS[kind]
        config = getattr(transformers, cfg_cls)(vocab_size=VOCAB, **kw)
        layout = layout_from_config(config.to_dict())
        want, factor = ROPE_INIT_FUNCTIONS[kw["rope_scaling"]["rope_type"]](config, "cpu")
        assert factor == 1.0
        np.testing.assert_allclose(inverse_frequencies(layout), want.double().numpy(), rtol=1e-6)
        assert np.abs(inverse_frequencies(layout) - 1000.0 ** -(np.arange(0, 12, 2) / 12)).max() > 1e-3


def test_layouts_of_the_variants(tiny_model):
    _, folder = tiny_model("gpt_neox")
    neox = layout_from_config(open_checkpoint(folder).config)
    assert (neox.positional, neox.d_head, neox.rotary_dim, neox.rotary_style) == ("rope", 16, 4, "half")
    _, folder = tiny_model("mistral")
    mistral = layout_from_config(open_checkpoint(folder).config)
    assert (mistral.n_heads, mistral.n_kv_heads, mistral.d_head, mistral.d_model) == (4, 2, 12, 32)
    assert mistral.rope_theta == 1000.0 and mistral.scale == pytest.approx(12 ** -0.5, rel=1e-15)
    _, folder = tiny_model("opt-postnorm")
    assert not layout_from_config(open_checkpoint(folder).config).pre_norm


def test_grouped_query_heads_share_their_key_head(tiny_model):
    model, folder = tiny_model("mistral")
    ckpt = open_checkpoint(folder)
    layout = layout_from_config(ckpt.config)
    W_Q, W_K = layer_weights(ckpt, layout, 1)
    wk = model.model.layers[1].self_attn.k_proj.weight.detach().numpy().reshape(2, 12, 32)
    for h in range(4):  # 4 query heads over 2 key heads: 0, 0, 1, 1
        np.testing.assert_array_equal(W_K[h], wk[h // 2])
    assert W_Q.shape == W_K.shape == (4, 12, 32)


@pytest.mark.parametrize("kind", ["gpt2", "opt", "opt-postnorm", "bloom", "gpt_neox", "mistral", "bert"])
def test_fold_ln_scales_by_the_gain_entering_attention(tiny_model, kind):
    """Folded weights times the normalised input equal raw weights times the actual attention input."""
    model, folder = tiny_model(kind)
    ckpt = open_checkpoint(folder)
    layout = layout_from_config(ckpt.config)
    for layer in range(layout.n_layers):
        raw_q, raw_k = layer_weights(ckpt, layout, layer)
        fq, fk = layer_weights(ckpt, layout, layer, fold_ln=True)
        gain = ln_gain(model, kind, layer)
        if gain is None:  # post-norm OPT layer 0: embeddings + positions, no norm
            np.testing.assert_array_equal(fq, raw_q)
            continue
        np.testing.assert_allclose(fq, raw_q * gain, rtol=0, atol=0)
        np.testing.assert_allclose(fk, raw_k * gain, rtol=0, atol=0)


@pytest.mark.parametrize("kind", ["gpt2", "opt", "opt-postnorm", "bloom", "gpt_neox", "mistral", "bert"])
def test_the_folded_norm_is_the_one_that_produces_the_attention_input(tiny_model, kind):
    """The forward pass confirms the choice of norm: its output is exactly what enters the Q/K projection."""
    model, _ = tiny_model(kind)
    outs = {}

    def keep(layer):
        def hook(_module, _args, output):
            outs.setdefault(layer, output[0].detach().numpy().copy())  # returns None: output unchanged
        return hook

    n_layers = model.config.num_hidden_layers
    for layer in range(n_layers):
        if (m := ln_module(model, kind, layer)) is not None:
            m.register_forward_hook(keep(layer))
    ids = torch.randint(0, 50, (1, T), generator=torch.Generator().manual_seed(2))
    xs, _ = attention_inputs(model, kind, ids)
    for layer in range(n_layers):
        if kind == "opt-postnorm" and layer == 0:  # projected embeddings + positions, no norm
            assert layer not in outs
            continue
        np.testing.assert_array_equal(xs[layer], outs[layer])


def test_rotations_only_for_rope():
    base = dict(family="gpt_neox", n_layers=1, n_heads=2, n_kv_heads=2, d_model=16, d_head=8)
    assert rotations(Layout(positional="learned absolute", **base)) is None
    R = rotations(Layout(positional="rope", rotary_dim=4, rope_theta=100.0, rotary_style="half", **base))
    assert R.shape == (N_OFFSETS, 8, 8)
    np.testing.assert_allclose(R[5] @ R[3], R[8], atol=1e-12)  # R(a) R(b) = R(a + b)
    np.testing.assert_array_equal(R[7][4:, 4:], np.eye(4))  # partial rotary: the rest untouched


def test_unsupported_and_broken_configs_say_what_to_do():
    with pytest.raises(ArchitectureError, match="model_type 'mamba' is not supported; supported families"):
        layout_from_config({"model_type": "mamba"})
    with pytest.raises(ArchitectureError, match="not divisible"):
        layout_from_config({"model_type": "opt", "hidden_size": 10, "num_attention_heads": 3, "num_hidden_layers": 1})
    with pytest.raises(ArchitectureError, match="rope type 'llama3' needs low_freq_factor"):
        layout_from_config({"model_type": "llama", "hidden_size": 8, "num_attention_heads": 2,
                            "num_hidden_layers": 1, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}})
    with pytest.raises(ArchitectureError, match="rope type 'dynamic'.*supported: default, linear, llama3, yarn"):
        layout_from_config({"model_type": "mistral", "hidden_size": 8, "num_attention_heads": 2,
                            "num_hidden_layers": 1, "rope_scaling": {"rope_type": "dynamic", "factor": 4.0}})


def test_suffix_matching_ignores_mask_buffers_and_prefixes():
    layout = layout_from_config({"model_type": "gpt2", "n_embd": 8, "n_head": 2, "n_layer": 12})
    names = ["transformer.h.1.attn.bias", "transformer.h.1.attn.masked_bias", "transformer.h.11.attn.c_attn.weight",
             "transformer.h.1.attn.c_attn.bias", "transformer.h.1.attn.c_attn.weight", "transformer.h.1.ln_1.weight"]
    assert qk_tensor_names(layout, names, 1) == {"qkv": "transformer.h.1.attn.c_attn.weight"}
    assert qk_tensor_names(layout, names, 1, fold_ln=True)["ln"] == "transformer.h.1.ln_1.weight"
    with pytest.raises(ArchitectureError, match=r"no tensor named '\*h.1.attn.c_attn.weight'"):
        qk_tensor_names(layout, [n for n in names if n != "transformer.h.1.attn.c_attn.weight"], 1)


# ---------------------------------------------------------------------------------------- the family table


def test_an_unsupported_family_lists_the_supported_ones_and_the_docs_section():
    from pipeline.families import FAMILIES

    with pytest.raises(ArchitectureError) as err:
        layout_from_config({"model_type": "mamba"})
    message = str(err.value)
    assert all(name in message for name in FAMILIES) and len(FAMILIES) >= 30
    assert 'docs/architecture.md, section "Adding a family"' in message
    with pytest.raises(ArchitectureError, match=r"bert with position_embedding_type 'relative_key'.*not supported"):
        layout_from_config({"model_type": "bert", "hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 1,
                            "position_embedding_type": "relative_key"})


CLIP = {"model_type": "clip", "text_config": {"hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 2},
        "vision_config": {"hidden_size": 48, "num_attention_heads": 3, "num_hidden_layers": 5}}


def test_towers_are_models_of_their_own():
    from pipeline.families import towers

    assert towers(CLIP) == ("text", "vision") and towers({"model_type": "whisper"}) == ("encoder", "decoder")
    assert towers({"model_type": "llama"}) == ()
    text, vision = layout_from_config(CLIP, "text"), layout_from_config(CLIP, "vision")
    assert (text.tower, text.n_layers, text.n_heads, text.d_model, text.d_head) == ("text", 2, 4, 32, 8)
    assert (vision.tower, vision.n_layers, vision.n_heads, vision.d_model, vision.d_head) == ("vision", 5, 3, 48, 16)
    alone = layout_from_config({"model_type": "clip_vision_model"} | CLIP["vision_config"])
    assert alone.shape.mismatches(vision) == {"family": ("clip_vision_model", "clip")}
    whisper = {"model_type": "whisper", "d_model": 24, "encoder_attention_heads": 4, "decoder_attention_heads": 6,
               "encoder_layers": 3, "decoder_layers": 2}
    enc, dec = layout_from_config(whisper, "encoder"), layout_from_config(whisper, "decoder")
    assert (enc.n_layers, enc.n_heads, dec.n_layers, dec.n_heads) == (3, 4, 2, 6)
    with pytest.raises(ArchitectureError, match=r"clip is a model of 2 towers \(text, vision\): name one of them"):
        layout_from_config(CLIP)
    with pytest.raises(ArchitectureError, match="not 'audio'"):
        layout_from_config(CLIP, "audio")
    with pytest.raises(ArchitectureError, match="llama has no towers"):
        layout_from_config({"model_type": "llama"}, "text")


def _transformers_dict(cfg_cls: str, **kw) -> dict:
    return getattr(transformers, cfg_cls)(vocab_size=64, **kw).to_dict()


def test_old_config_keys_give_what_transformers_makes_of_them():
    """Configs on the Hub written before transformers 5 (flat rope keys, a sliding pattern, SmolLM3's interval) give
    the layout of the config transformers converts them to."""
    gemma3 = dict(model_type="gemma3_text", hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                  num_hidden_layers=7, query_pre_attn_scalar=16, rope_theta=5e5, rope_local_base_freq=300.0,
                  rope_scaling={"rope_type": "linear", "factor": 8.0}, sliding_window_pattern=3)
    old = layout_from_config(gemma3)
    assert old == layout_from_config(_transformers_dict("Gemma3TextConfig", **{k: v for k, v in gemma3.items()
                                                                                if k != "model_type"}))
    kinds = [(p.rope_theta, p.scaling) for p in old.layers]
    assert kinds[2] == (5e5, (("rope_type", "linear"), ("factor", 8.0))) and kinds[0] == kinds[1] == (300.0, ())
    modern = dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=5, global_rope_theta=5000.0,
                  local_rope_theta=50.0, global_attn_every_n_layers=2, pad_token_id=0, bos_token_id=1,
                  eos_token_id=2, cls_token_id=3, sep_token_id=4)
    old = layout_from_config({"model_type": "modernbert"} | modern)
    assert old == layout_from_config(_transformers_dict("ModernBertConfig", **modern))
    assert [p.rope_theta for p in old.layers] == [5000.0, 50.0, 5000.0, 50.0, 5000.0]
    smol = layout_from_config({"model_type": "smollm3", "hidden_size": 32, "num_attention_heads": 4,
                               "num_hidden_layers": 8, "no_rope_layer_interval": 4})
    assert [p.kind for p in smol.layers] == ["rope", "rope", "rope", "none"] * 2 and smol.positional == "rope"
    falcon = layout_from_config({"model_type": "falcon", "hidden_size": 64, "n_head": 8, "n_layer": 2,
                                 "new_decoder_architecture": True, "n_head_kv": 2})
    assert (falcon.n_heads, falcon.n_kv_heads, falcon.spec.split, falcon.spec.ln) == (8, 2, "groups",
                                                                                     "h.{l}.ln_attn.weight")


def test_rotations_of_a_model_whose_layers_differ_name_the_layer():
    smol = layout_from_config({"model_type": "smollm3", "hidden_size": 32, "num_attention_heads": 4,
                               "num_hidden_layers": 4})
    with pytest.raises(ValueError, match="pass layer="):
        rotations(smol)
    assert rotations(smol, layer=3) is None and rotations(smol, layer=0).shape == (N_OFFSETS, 8, 8)
    assert rotations(smol, layer=0) is rotations(smol, layer=2)  # one array per kind, shared (read-only)
    assert not rotations(smol, layer=0).flags.writeable


def test_a_fused_tensor_of_the_wrong_shape_is_named():
    from pipeline.families import check_layer

    layout = layout_from_config({"model_type": "phi3", "hidden_size": 16, "num_attention_heads": 4,
                                 "num_key_value_heads": 2, "num_hidden_layers": 1})

    class Shapes:
        def tensor_names(self):
            return ["model.layers.0.self_attn.qkv_proj.weight"]

        def shape(self, name):
            return (48, 16)  # [q | k | v] of 4 + 2 + 2 heads of 4 would be 32 rows

    with pytest.raises(ArchitectureError, match=r"qkv_proj.weight' has shape \(48, 16\), expected \(32, 16\)"):
        check_layer(Shapes(), layout, 0)


def test_the_docs_table_lists_every_family_of_the_table():
    from pathlib import Path

    from pipeline.families import FAMILIES

    doc = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    section = doc[doc.index("### Families"):doc.index("### Adding a family")]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    named = {n for cell in rows for n in re.findall(r"`([^`]+)`", cell)}
    assert set(FAMILIES) <= named, set(FAMILIES) - named
