"""Every family's Q/K, read from its saved files, against the model's own forward pass.

For each case (``cases.py``: a tiny random model per family variant, biases zero), the pre-softmax scores
captured from transformers' eager attention must satisfy

    scores[h, i, j] * r_q(i, h) * r_k(j, h) = c * x_j^T L_h(i - j) x_i,    L_h(d) = W_K[h]^T R(d) W_Q[h]

with W_Q, W_K from ``layer_weights`` (QK-norm gain and centring folded in), R(d) from ``rotations(layout,
offsets, layer)`` (the identity for layers without rotary), x the hidden states entering the Q projection and
r the divisors the QK-norms applied, computed from the norms' captured inputs (1 without a QK-norm), and c the
layer's ``score_scale`` (the softmax scale, times YaRN's attention factor squared on a YaRN layer). A tanh
soft-cap is undone first (Gemma 2), and Llama 4's attention temperature on the queries of its layers without
rotary (Ministral 3's on every layer) divided out, as a QK-norm's divisors are multiplied in (Llama 4's weightless
QK norm runs on the rotary layers alone, after the rotation, which keeps a head's RMS); gpt-oss's softmax takes
each query's scores with the head's sink appended, shifted by their maximum: the sink column is dropped and the
shift (known from it) added back, so what is compared is the scores without the sink. Rotary and QK-norm families
compare at 1e-5 relative (transformers computes rotation angles and these norms in float32), the rest at 1e-10.

With ``fold_ln``, the same scores equal the form of the folded weights on the normalised residual: the norm
declared by the case is checked to be the one whose output is x, and n = its input normalised (no gain).
"""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.families import layer_weights, layout_from_config, qk_tensor_names, rotations
from pipeline.registry.checkpoints import open_checkpoint
from tests.pipeline.families.cases import CASES, divisors, normalised


def form_scores(layout, layer: int, W_Q, W_K, xq, xk) -> np.ndarray:
    """(H, T, T): c * xk_j^T W_K^T R(i - j) W_Q xq_i, c the layer's score scale (the softmax scale, and YaRN's
    attention factor squared)."""
    T = len(xq)
    R = rotations(layout, np.arange(-(T - 1), T), layer)
    Q = np.einsum("hnm,im->hin", W_Q, xq)
    K = np.einsum("hnm,jm->hjn", W_K, xk)
    out = np.empty((W_Q.shape[0], T, T))
    for i in range(T):
        for j in range(T):
            q = Q[:, i] if R is None else Q[:, i] @ R[i - j + T - 1].T
            out[:, i, j] = np.einsum("hn,hn->h", K[:, j], q)
    return layout.score_scale(layer) * out


def scores_of(layout, layer: int, W_Q, W_K, x, r_kv=None) -> np.ndarray:
    """The form's scores on x (``form_scores``); for latent attention (``r_kv``: the key latent's divisor per token)
    c (x_j^T A_h x_i / r_kv(j) + x_j^T B_h(i - j) x_i), A_h and B_h the form's non-rotary and rotary blocks: the
    heads' [rope | nope] rows of W_Q, W_K split, R(d) rotating the rope rows alone. At r_kv = 1 it is the form's."""
    if r_kv is None:
        return form_scores(layout, layer, W_Q, W_K, x, x)
    rope = np.arange(layout.d_head)[:, None] < layout.positional_of(layer).rotary_dim
    rotary = form_scores(layout, layer, W_Q * rope, W_K * rope, x, x)
    plain = form_scores(layout, layer, W_Q * ~rope, W_K * ~rope, x, x)
    np.testing.assert_allclose(rotary + plain, form_scores(layout, layer, W_Q, W_K, x, x), rtol=1e-10, atol=1e-12)
    return rotary + plain / r_kv[None, None, :]


def alibi_bias(case, layout, T: int) -> np.ndarray:
    """(H, 1, T): the ALiBi bias the model adds to every query's scores, from its own build_alibi_tensor."""
    import importlib
    import math

    from tests.tiny_models import torch

    module = importlib.import_module(f"transformers.models.{case.alibi}.modeling_{case.alibi}")
    bias = module.build_alibi_tensor(torch.ones(1, T, dtype=torch.long), layout.n_heads, torch.float64)
    assert layout.positional == "alibi" and case.alibi == "falcon"
    return bias.numpy().reshape(layout.n_heads, 1, T) / math.sqrt(layout.d_head)


def relative_bias(model, case, layer: int, T: int) -> np.ndarray:
    """(H, T, T): the relative position bias T5 adds to the scores of ``layer`` (its own table in UMT5, block 0's in
    T5 and mT5), from the tower's own ``compute_bias``."""
    import functools

    from tests.tiny_models import torch

    stack = functools.reduce(getattr, case.submodel.split("."), model)
    attn = stack.block[layer].layer[0].SelfAttention
    source = attn if attn.has_relative_attention_bias else stack.block[0].layer[0].SelfAttention
    assert source.has_relative_attention_bias
    with torch.no_grad():
        return source.compute_bias(T, T)[0].numpy()


def llama4_temperature(model, T: int) -> np.ndarray:
    """(T,): Llama 4's factor on the queries of its layers without rotary, from its modelling file:
    1 + attn_scale * log(1 + floor((i + 1) / floor_scale)) at position i."""
    config = getattr(model.config, "text_config", model.config)
    assert config.attn_temperature_tuning
    return 1.0 + config.attn_scale * np.log1p(np.floor((np.arange(T) + 1.0) / config.floor_scale))


def ministral3_temperature(model, T: int) -> np.ndarray:
    """(T,): Ministral 3's factor on the queries of every layer, from its modelling file:
    1 + llama_4_scaling_beta * log(1 + floor(i / original_max_position_embeddings)) at position i."""
    rope = getattr(model.config, "text_config", model.config).rope_parameters
    context = rope["original_max_position_embeddings"]
    return 1.0 + rope["llama_4_scaling_beta"] * np.log1p(np.floor(np.arange(T) / context))


def checked(name: str, family_model):
    case = CASES[name]
    model, folder, probed = family_model(name)
    ckpt = open_checkpoint(folder)
    layout = layout_from_config(ckpt.config, case.tower)
    formed = [layer for layer in range(layout.n_layers) if layout.positional_of(layer).kind != "no form"]
    assert sorted(probed) == formed, "every layer's softmax attention ran once, and no other layer's (hybrids)"
    return case, ckpt, layout, probed


def relative(got: np.ndarray, want: np.ndarray, allowed: np.ndarray) -> float:
    return float(np.abs(got - want)[:, allowed].max() / np.abs(got[:, allowed]).max())


@pytest.mark.parametrize("name", list(CASES))
def test_scores_equal_the_forward_pass(family_model, name):
    case, ckpt, layout, probed = checked(name, family_model)
    H, kv = layout.n_heads, layout.n_kv_heads
    for layer in sorted(probed):  # a hybrid's layers of softmax attention; every layer of the others
        p = probed[layer]
        T = len(p["x"])  # text: cases.T tokens; vision: patches and the class token
        allowed = np.tril(np.ones((T, T), bool)) if case.causal else np.ones((T, T), bool)
        got = p["scores"].copy()
        if "sinks" in p:  # softmax([scores | sink] - m) per query: the sink column and the shift m taken off
            assert got.shape == (H, T, T + 1) and (p["sinks"] != 0).all()
            got = got[..., :-1] + (p["sinks"][:, None, None] - got[..., -1:])
        assert got.shape == (H, T, T)
        if case.causal:  # the captured scores really are the masked pre-softmax scores
            assert (got[:, ~allowed] < -1e30).all()
        if layout.softcap:
            got[:, allowed] = layout.softcap * np.arctanh(got[:, allowed] / layout.softcap)
        norm, latent = layout.spec.qk_norm, layout.spec.latent
        normed = bool(case.q_norm) and latent is None and not (
            norm.rotary_only and layout.positional_of(layer).kind != "rope")
        r_kv = None
        if latent is not None:  # the query latent's divisor times the scores; the key latent's divides a part
            assert "k" in p and ("q" in p) == bool(latent.size("q_lora_rank")), "the latents' norms ran"
            if "q" in p:
                got = np.where(allowed, got * np.where(allowed, divisors(p["q"], 1)[None, :, :1], 1.0), got)
            r_kv = divisors(p["k"], 1)[:, 0]
        else:
            assert ("q" in p) == ("k" in p) == normed, "the QK-norm ran on this layer's queries and keys, or neither"
        if normed:  # scores times the divisors (masked entries left as they are)
            r = divisors(p["q"], H).T[:, :, None] * divisors(p["k"], kv)[:, np.arange(H) // (H // kv)].T[:, None, :]
            got = np.where(allowed, got * np.where(allowed, r, 1.0), got)
        if case.temperature == "llama4" and layout.positional_of(layer).kind == "none":  # query i times t(i) > 0
            got = np.where(allowed, got / llama4_temperature(family_model(name)[0], T)[None, :, None], got)
        if case.temperature == "ministral3":  # every layer's query i times t(i) > 0
            t = ministral3_temperature(family_model(name)[0], T)
            assert t.min() == 1.0 and len(set(t)) == 3, "the case's temperature varies over the positions"
            got = np.where(allowed, got / t[None, :, None], got)
        W_Q, W_K = layer_weights(ckpt, layout, layer)
        if case.alibi:  # the position bias, as the model's own code builds it (Falcon: over sqrt(n))
            got = got - alibi_bias(case, layout, T)
        if case.relative_bias:  # T5's bias per relative position, from the model's own compute_bias
            bias = relative_bias(family_model(name)[0], case, layer, T)
            assert np.abs(bias).max() > 0.1, "the case's bias changes the scores"
            got = got - bias
        want = scores_of(layout, layer, W_Q, W_K, p["x"], r_kv)
        if case.key_at_zero:  # gains after the rotation: the form is the scores' with the key at position 0 ...
            later = allowed & (np.arange(T) > 0)[None, :]
            assert relative(got, want, later) > 1e-3, "... and the scores of later keys are no function of i - j"
            allowed = allowed & (np.arange(T) == 0)[None, :]
        err = relative(got, want, allowed)
        assert err < case.rtol, f"{name} layer {layer}: relative error {err:.2e}"
        if "ln_in" in p:  # --fold-ln: the declared norm produces x, and folding its gain gives the same scores
            np.testing.assert_array_equal(p["ln_out"], p["x"])
            u, eps, kind = p["ln_in"]
            n = normalised(u, eps, kind)[0]
            fq, fk = layer_weights(ckpt, layout, layer, fold_ln=True)
            err = relative(got, scores_of(layout, layer, fq, fk, n, r_kv), allowed)
            assert err < max(case.rtol, 1e-9), f"{name} layer {layer} folded: relative error {err:.2e}"
        else:  # no norm's output enters this layer: nothing to fold
            assert "ln" not in qk_tensor_names(layout, ckpt.tensor_names(), layer, fold_ln=True)


def test_every_entry_of_the_table_is_proved():
    """Every family of the table has a case here, or in test_architectures.py (the first eight); the standalone CLIP,
    Qwen2-VL and Qwen2.5-VL towers are those entries' towers under their own model_type."""
    from dataclasses import replace

    from pipeline.families import FAMILIES
    from tests.tiny_models import transformers

    proved = {getattr(transformers, case.config).model_type for case in CASES.values()}
    first_eight = {"gpt2", "opt", "bloom", "gpt_neox", "mistral", "llama", "qwen2", "bert"}
    standalone = {"clip_text_model": ("clip", "text"), "clip_vision_model": ("clip", "vision"),
                  "qwen2_vl_text": ("qwen2_vl", "text"), "qwen2_5_vl_text": ("qwen2_5_vl", "text"),
                  "siglip_text_model": ("siglip", "text"), "siglip_vision_model": ("siglip", "vision")}
    for name, (family, tower) in standalone.items():
        assert FAMILIES[name] == replace(FAMILIES[family].tower(tower), name=name, sub_config="")
    assert set(FAMILIES) == proved | first_eight | set(standalone)
    assert len(proved | first_eight) >= 30


def test_a_config_that_clips_queries_and_keys_is_refused_with_its_reason():
    """OLMoE's ``clip_qkv`` clamps every query and key value: where one is clipped the score is no bilinear form, so
    such a checkpoint is refused, naming the key; without it (``null``, as OLMoE-1B-7B ships) it is profiled."""
    from pipeline.families import ArchitectureError
    from tests.tiny_models import transformers

    config = getattr(transformers, CASES["olmoe"].config)(**CASES["olmoe"].kw).to_dict()
    assert config["clip_qkv"] is None and layout_from_config(config).qk_norm == "rms over the projection"
    with pytest.raises(ArchitectureError, match=r"olmoe with clip_qkv \(queries and keys clamped"):
        layout_from_config(config | {"clip_qkv": 8.0})


def test_hub_configs_of_the_image_text_towers():
    """Qwen2-VL's Hub configs are flat (the text keys at the top, ``rope_scaling`` of type ``mrope``): the same text
    tower as the nested config transformers writes. Mistral 3's text tower is the family of its text_config's
    model_type: one the table lacks is refused, naming it."""
    from pipeline.families import ArchitectureError
    from tests.tiny_models import transformers

    case = CASES["qwen2_vl/text"]
    nested = getattr(transformers, case.config)(**case.kw).to_dict()
    text = {k: v for k, v in nested["text_config"].items() if k not in ("rope_parameters", "model_type")}
    rope = nested["text_config"]["rope_parameters"]
    flat = text | {"model_type": "qwen2_vl", "vision_config": nested["vision_config"], "rope_theta": rope["rope_theta"],
                   "rope_scaling": {"type": "mrope", "mrope_section": rope["mrope_section"]}}
    want = layout_from_config(nested, "text")
    assert layout_from_config(flat, "text") == want and want.positional == "rope" and not want.rope_scaling
    mistral3 = getattr(transformers, CASES["mistral3/text"].config)(**CASES["mistral3/text"].kw).to_dict()
    assert layout_from_config(mistral3, "text").family == "mistral"
    mistral3["text_config"]["model_type"] = "mamba"
    with pytest.raises(ArchitectureError, match="text tower of this mistral3 checkpoint is a 'mamba' model, which is "
                                                "not supported"):
        layout_from_config(mistral3, "text")


def test_exaone4_sliding_pattern_of_letters():
    """An EXAONE 4 config without layer_types may give its pattern as letters repeated from layer 0 (L sliding and
    rotary, G global without rotary): the layers of the list transformers would write."""
    from tests.tiny_models import transformers

    config = getattr(transformers, CASES["exaone4"].config)(**CASES["exaone4"].kw).to_dict()
    assert config["layer_types"] == ["sliding_attention", "full_attention", "sliding_attention"]
    letters = {k: v for k, v in config.items() if k != "layer_types"} | {"sliding_window_pattern": "LG"}
    assert [p.kind for p in layout_from_config(letters).layers] == ["rope", "none", "rope"]
    assert layout_from_config(letters) == layout_from_config(config)


def test_latent_attention_configs_the_form_does_not_state_are_refused():
    """A YaRN attention factor other than 1 multiplies the rotary part of a latent attention's score alone (DeepSeek's
    mscale = mscale_all_dim gives 1), which no constant beside the form gives: refused with its reason; a config
    without q_lora_rank does not say whether the queries have a latent: refused, naming the key."""
    from pipeline.families import ArchitectureError
    from tests.tiny_models import transformers

    config = transformers.DeepseekV3Config(**CASES["deepseek_v3"].kw).to_dict()
    assert layout_from_config(config).qk_norm.startswith("rms of the query and key latents")
    with pytest.raises(ArchitectureError, match=r"YaRN attention factor 1\.03699 \(it scales the rotary part"):
        layout_from_config(config | {"rope_parameters": config["rope_parameters"] | {"mscale": 1.0}})
    with pytest.raises(ArchitectureError, match="has no q_lora_rank"):
        layout_from_config({k: v for k, v in config.items() if k != "q_lora_rank"})


def test_falcon_h1_attention_input_multiplier_is_a_positive_constant_beside_the_folded_form(tmp_path):
    """Falcon-H1's attention reads its pre-norm's output times attention_in_multiplier (0.7 here): the form of the
    attention input x is unchanged, and --fold-ln's form of the normalised residual gives the scores times
    0.7 ** 2, a positive constant that changes no profile (the case of ``CASES`` sets 1, so that its fold-ln check
    compares the norm's output with x)."""
    from dataclasses import replace

    from tests.pipeline.families.cases import build, probe, save

    case = replace(CASES["falcon_h1"], kw=CASES["falcon_h1"].kw | dict(attention_in_multiplier=0.7))
    model = build(case)
    ckpt = open_checkpoint(save(model, case, tmp_path / "tiny-falcon_h1"))
    layout = layout_from_config(ckpt.config)
    probed = probe(model, case)
    T = len(probed[0]["x"])
    allowed = np.tril(np.ones((T, T), bool))
    for layer in range(layout.n_layers):
        p = probed[layer]
        np.testing.assert_allclose(p["x"], 0.7 * p["ln_out"], rtol=1e-14)
        want = scores_of(layout, layer, *layer_weights(ckpt, layout, layer), p["x"])
        assert relative(p["scores"], want, allowed) < case.rtol
        u, eps, kind = p["ln_in"]
        n = normalised(u, eps, kind)[0]
        folded = scores_of(layout, layer, *layer_weights(ckpt, layout, layer, fold_ln=True), n)
        assert relative(p["scores"], 0.7 ** 2 * folded, allowed) < case.rtol
        assert relative(p["scores"], folded, allowed) > 0.5  # without the constant they differ
