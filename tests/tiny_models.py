"""Tiny random transformers models of every supported family, and what the tests read from their forward pass.

``build_tiny(kind, ...)`` builds a small model whose every parameter (biases and layer-norm gains included) is
random and non-trivial, in float64 with eager attention; ``tiny_factory(folder)`` is the ``tiny_model`` fixture's
factory, which also saves it with save_pretrained. ``attention_inputs(model, kind, input_ids)`` runs the real
forward pass and captures, per layer, the hidden states entering the Q/K projections and the pre-softmax scores
(the input of ``torch.nn.functional.softmax``, which every eager attention here calls).

Only the test modules that build models import this module (and so torch): pytest-xdist's controller, which loads
``tests/conftest.py`` but runs no test, starts its workers without importing torch.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the pipeline tests need torch (pip install -e .[pipeline])")
transformers = pytest.importorskip("transformers", reason="the pipeline tests need transformers")

# kind -> (family, config class name, config kwargs, model class name, name of the Q projection module)
KINDS = {
    "gpt2": ("gpt2", "GPT2Config", dict(n_embd=24, n_head=4, n_layer=2, n_positions=32),
             "GPT2LMHeadModel", "attn.c_attn"),
    "opt": ("opt", "OPTConfig", dict(hidden_size=24, num_attention_heads=4, num_hidden_layers=2, ffn_dim=48,
                                     max_position_embeddings=32, word_embed_proj_dim=24),
            "OPTForCausalLM", "self_attn.q_proj"),
    "opt-postnorm": ("opt", "OPTConfig", dict(hidden_size=24, num_attention_heads=4, num_hidden_layers=3, ffn_dim=48,
                                              max_position_embeddings=32, word_embed_proj_dim=16,
                                              do_layer_norm_before=False),
                     "OPTForCausalLM", "self_attn.q_proj"),
    "bloom": ("bloom", "BloomConfig", dict(hidden_size=24, n_head=4, n_layer=2), "BloomForCausalLM",
              "self_attention.query_key_value"),
    "gpt_neox": ("gpt_neox", "GPTNeoXConfig", dict(hidden_size=64, num_attention_heads=4, num_hidden_layers=2,
                                                   intermediate_size=64, rotary_pct=0.25, max_position_embeddings=64),
                 "GPTNeoXForCausalLM", "attention.query_key_value"),
    "mistral": ("mistral", "MistralConfig", dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                                                 head_dim=12, num_hidden_layers=2, intermediate_size=64,
                                                 rope_theta=1000.0, max_position_embeddings=64),
                "MistralForCausalLM", "self_attn.q_proj"),
    "bert": ("bert", "BertConfig", dict(hidden_size=24, num_attention_heads=4, num_hidden_layers=2,
                                        intermediate_size=48, max_position_embeddings=32),
             "BertModel", "attention.self.query"),
}
VOCAB = 50


def build_tiny(kind: str, seed: int = 0, dtype=torch.float64, **overrides):
    """A tiny random model of ``kind`` (see KINDS), eval mode, eager attention, all parameters random."""
    _family, cfg_cls, cfg_kw, model_cls, _ = KINDS[kind]
    return random_model(cfg_cls, cfg_kw | overrides, model_cls, seed, dtype)


def random_model(cfg_cls: str, cfg_kw: dict, model_cls: str, seed: int = 0, dtype=torch.float64):
    """transformers' ``model_cls`` of config ``cfg_cls(**cfg_kw)``, eval mode, eager attention, every parameter
    drawn from ``seed``: biases N(0, 0.5^2), 1-d gains U(0.5, 2), matrices N(0, 1 / fan_in)."""
    config = getattr(transformers, cfg_cls)(vocab_size=VOCAB, **cfg_kw)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = getattr(transformers, model_cls)(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0.0, 0.5)
            elif p.ndim == 1:  # norm gains: far from 1 so that folding matters
                p.uniform_(0.5, 2.0)
            else:
                p.normal_(0.0, 1.0 / math.sqrt(p.shape[-1]))
    return model.to(dtype)


def save(model, folder, dtype=None, max_shard_size=None) -> str:
    """save_pretrained (optionally cast to ``dtype``, optionally sharded); returns the folder."""
    out = model if dtype is None else model.to(dtype)
    kw = {} if max_shard_size is None else {"max_shard_size": max_shard_size}
    out.save_pretrained(str(folder), **kw)
    if dtype is not None:
        model.to(torch.float64)
    return str(folder)



def tiny_factory(root: Path):
    """``make(kind, dtype=None, max_shard_size=None, seed=0, name=None, **config) -> (model, folder)``: a
    :func:`build_tiny` model saved into a new folder under ``root``.

    With a save ``dtype`` (e.g. bfloat16) the float64 model is rounded to that dtype first, so the
    float64 forward pass and the saved low-precision weights describe the same numbers.
    """

    def make(kind, dtype=None, max_shard_size=None, seed=0, name=None, **overrides):
        model = build_tiny(kind, seed=seed, **overrides)
        if dtype is not None:
            with torch.no_grad():
                for p in model.parameters():
                    p.copy_(p.to(dtype).to(torch.float64))
        folder = root / (name or f"{kind}-{seed}")
        save(model, folder, dtype=dtype, max_shard_size=max_shard_size)
        return model, str(folder)

    return make

def attention_inputs(model, kind: str, input_ids: torch.Tensor) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Run the model; per layer: x (T, N) entering the Q/K projections, scores (H, T, T) before softmax.

    Scores include the softmax scale, biases, ALiBi and the additive mask exactly as transformers
    computes them; masked entries hold the mask's huge negative value.
    """
    return record_attention(model, KINDS[kind][4], input_ids)


def record_attention(model, proj: str, input_ids: torch.Tensor) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """:func:`attention_inputs` for any model: x is what enters each module whose name ends with ``proj``."""
    xs, scores = [], []
    hooks = [m.register_forward_pre_hook(lambda _m, args: xs.append(args[0][0].detach().numpy().copy()))
             for name, m in model.named_modules() if name.endswith(proj)]
    real_softmax = torch.nn.functional.softmax

    def recording_softmax(x, *args, **kwargs):
        scores.append(x.detach().to(torch.float64).numpy()[0].copy())
        return real_softmax(x, *args, **kwargs)

    torch.nn.functional.softmax = recording_softmax
    try:
        with torch.no_grad():
            model(input_ids=input_ids)
    finally:
        torch.nn.functional.softmax = real_softmax
        for h in hooks:
            h.remove()
    return xs, scores


def qk_biases(model, kind: str, layer: int) -> tuple[np.ndarray, np.ndarray]:
    """(b_Q, b_K) of one layer, each (H, n) per query head, read from the live transformers modules."""
    family = KINDS[kind][0]
    cfg = model.config
    if family == "gpt2":
        attn = model.transformer.h[layer].attn
        H, N = cfg.n_head, cfg.n_embd
        b = attn.c_attn.bias.detach().numpy()
        return b[:N].reshape(H, -1), b[N: 2 * N].reshape(H, -1)
    if family == "opt":
        a = model.model.decoder.layers[layer].self_attn
        H = cfg.num_attention_heads
        return a.q_proj.bias.detach().numpy().reshape(H, -1), a.k_proj.bias.detach().numpy().reshape(H, -1)
    if family in ("bloom", "gpt_neox"):
        mod = (model.transformer.h[layer].self_attention if family == "bloom"
               else model.gpt_neox.layers[layer].attention).query_key_value
        H = cfg.num_attention_heads
        b = mod.bias.detach().numpy().reshape(H, 3, -1)
        return b[:, 0], b[:, 1]
    if family == "mistral":
        a = model.model.layers[layer].self_attn
        assert a.q_proj.bias is None and a.k_proj.bias is None  # Mistral attention has no biases
        return np.zeros((cfg.num_attention_heads, cfg.head_dim)), np.zeros((cfg.num_attention_heads, cfg.head_dim))
    a = model.encoder.layer[layer].attention.self
    H = cfg.num_attention_heads
    return a.query.bias.detach().numpy().reshape(H, -1), a.key.bias.detach().numpy().reshape(H, -1)


def ln_module(model, kind: str, layer: int):
    """The norm module whose output is layer ``layer``'s attention input (None: no norm), from the module graph."""
    return {
        "gpt2": lambda: model.transformer.h[layer].ln_1,
        "opt": lambda: model.model.decoder.layers[layer].self_attn_layer_norm,
        "opt-postnorm": lambda: None if layer == 0 else model.model.decoder.layers[layer - 1].final_layer_norm,
        "bloom": lambda: model.transformer.h[layer].input_layernorm,
        "gpt_neox": lambda: model.gpt_neox.layers[layer].input_layernorm,
        "mistral": lambda: model.model.layers[layer].input_layernorm,
        "bert": lambda: model.embeddings.LayerNorm if layer == 0 else model.encoder.layer[layer - 1].output.LayerNorm,
    }[kind]()


def ln_gain(model, kind: str, layer: int):
    """The gain (N,) of :func:`ln_module`, or None."""
    m = ln_module(model, kind, layer)
    return None if m is None else m.weight.detach().numpy()
