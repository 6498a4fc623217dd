"""Per family: which tensors hold W_Q and W_K of layer l, how heads are grouped, which positional kind.

A checkpoint's ``config.json`` (a plain dict) gives a :class:`Layout`; tensors are then found by the
*suffix* of their names (``h.3.attn.c_attn.weight`` matches ``transformer.h.3.attn.c_attn.weight``),
because prefixes vary with the head class a checkpoint was saved from. A suffix only matches at a
``.`` boundary and names the weight tensor itself, so GPT-2's causal-mask buffers ``h.3.attn.bias`` /
``h.3.attn.masked_bias`` are never picked up.

Weights come out in torch Linear layout, ``q = W_Q x``: :func:`layer_weights` gives W_Q, W_K of shape
(H, n, N) per *query* head, float64; grouped-query models (Mistral) give query head h the key head
h // (H / kv_heads). :func:`layer_qk` gives the same without copies: key heads once, with ``kv_of_head``,
in float32 where that is exact (bf16 / fp16 / fp32 checkpoints), for the memory-bounded profile task.

Families
--------
====================  ==========================================  ========================  ===========
family (model_type)   Q/K tensor(s) of layer l (suffix)            split                     positional
====================  ==========================================  ========================  ===========
gpt2                  h.l.attn.c_attn.weight (N, 3N), Conv1D       columns [q | k | v]       learned abs.
opt                   layers.l.self_attn.{q,k}_proj.weight         rows per head             learned abs.
bloom                 h.l.self_attention.query_key_value.weight    per head [q, k, v] rows   alibi
gpt_neox              layers.l.attention.query_key_value.weight    per head [q, k, v] rows   rope (half)
mistral               layers.l.self_attn.{q,k}_proj.weight         rows per head, GQA        rope (half)
llama                 layers.l.self_attn.{q,k}_proj.weight         rows per head, GQA        rope (half)
qwen2                 layers.l.self_attn.{q,k}_proj.weight (+bias) rows per head, GQA        rope (half)
bert                  layer.l.attention.self.{query,key}.weight    rows per head             learned abs.
====================  ==========================================  ========================  ===========

Llama (SmolLM, TinyLlama, Llama 2 / 3) and Qwen2 (the same layout with q/k/v biases, which profiles ignore
like every other bias) may carry a ``rope_scaling`` (``rope_parameters`` in transformers 5) of type
``linear`` or ``llama3``; the scaled frequencies come from :func:`pipeline.rotary.scaled_inverse_frequencies`
and are kept in ``Layout.rope_scaling``.

Layer-norm folding (``fold_ln=True``, L -> diag(g) L diag(g)) uses the gain g of the norm whose output
is the attention input x. Pre-norm families (GPT-2, pre-norm OPT, BLOOM, GPT-NeoX, Mistral, Llama, Qwen2): the norm
in front of attention (``ln_1``, ``self_attn_layer_norm``, ``input_layernorm``). Post-norm families
(OPT with ``do_layer_norm_before = false`` such as opt-350m, BERT): the previous layer's output norm
(OPT ``layers.(l-1).final_layer_norm``, BERT ``layer.(l-1).output.LayerNorm``); for layer 0 BERT uses
``embeddings.LayerNorm`` and post-norm OPT uses no gain at all (its first layer sees the projected
embeddings plus positions, no norm), so layer 0 of opt-350m is the same folded or not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pipeline.schema import ModelShape

FAMILIES = ("gpt2", "opt", "bloom", "gpt_neox", "mistral", "llama", "qwen2", "bert")
_GQA = ("mistral", "llama", "qwen2")  # separate q_proj / k_proj, grouped key heads, optional head_dim


class ArchitectureError(ValueError):
    """The checkpoint's config or tensors do not fit a supported family; the message says what to do."""


@dataclass(frozen=True)
class Layout(ModelShape):
    """Shape (the :class:`pipeline.schema.ModelShape` fields) and conventions of one checkpoint's attention.

    ``scale`` is the softmax scale of the scores (score = scale * k^T q); GPT-2's optional
    ``scale_attn_by_inverse_layer_idx`` divides it further by (layer + 1), which does not change profiles.
    ``rotary_dim`` / ``rope_theta`` / ``rotary_style`` are set for rotary models only; ``rope_scaling`` holds
    the (key, value) pairs of a scaled RoPE's parameters (``rope_type`` among them), empty for plain RoPE.
    """

    rope_theta: float = 0.0
    rotary_style: str = ""
    rope_scaling: tuple = ()
    scale: float = 1.0
    pre_norm: bool = True

    def __post_init__(self):
        super().__post_init__()
        if self.n_heads % self.n_kv_heads:
            raise ArchitectureError(f"{self.n_heads} attention heads cannot be grouped over {self.n_kv_heads} "
                                    "key/value heads; the config is inconsistent")


def _get(config: dict, *keys, default=None):
    for k in keys:
        if config.get(k) is not None:
            return config[k]
    if default is not None:
        return default
    raise ArchitectureError(f"config.json of this {config.get('model_type')!r} checkpoint has none of the keys "
                            f"{keys}; is it a complete Hugging Face config?")


_SCALING_KEYS = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")


def _rope(config: dict) -> tuple[float, float, tuple]:
    """(theta, partial_rotary_factor, scaling pairs) from the old flat keys or transformers 5 ``rope_parameters``."""
    from pipeline.rotary import SCALED_ROPE_TYPES

    params = config.get("rope_parameters") or {}
    scaling = config.get("rope_scaling") or {}
    kind = params.get("rope_type") or scaling.get("rope_type") or scaling.get("type") or "default"
    if kind not in SCALED_ROPE_TYPES:
        raise ArchitectureError(f"rope type {kind!r} (scaled rotary embeddings) is not supported; supported: "
                                f"{', '.join(SCALED_ROPE_TYPES)}. Open an issue with the model id if you need it.")
    theta = params.get("rope_theta", _get(config, "rope_theta", "rotary_emb_base", default=10000.0))
    factor = params.get("partial_rotary_factor", _get(config, "partial_rotary_factor", "rotary_pct", default=1.0))
    pairs = ()
    if kind != "default":
        given = params | scaling
        if "original_max_position_embeddings" not in given and config.get("max_position_embeddings"):
            given = given | {"original_max_position_embeddings": config["max_position_embeddings"]}
        need = _SCALING_KEYS[:1] if kind == "linear" else _SCALING_KEYS
        missing = [k for k in need if given.get(k) is None]
        if missing:
            raise ArchitectureError(f"rope type {kind!r} needs {', '.join(missing)} in rope_scaling; config.json is "
                                    "incomplete")
        pairs = (("rope_type", kind),) + tuple((k, float(given[k])) for k in need)
    return float(theta), float(factor), pairs


def layout_from_config(config: dict) -> Layout:
    """The :class:`Layout` of a checkpoint from its ``config.json`` dict.

    Raises ArchitectureError for an unsupported ``model_type`` or an inconsistent config.
    """
    family = config.get("model_type")
    if family not in FAMILIES:
        raise ArchitectureError(
            f"model_type {family!r} is not supported; supported families: {', '.join(FAMILIES)}. "
            "Use a checkpoint of one of these, or add the family to pipeline/architectures.py."
        )
    if family == "gpt2":
        N, H, L = _get(config, "n_embd", "hidden_size"), _get(config, "n_head"), _get(config, "n_layer")
        kw = dict(positional="learned absolute")
        scaled = config.get("scale_attn_weights", True)
    elif family == "opt":
        N, H, L = (_get(config, "hidden_size"), _get(config, "num_attention_heads"),
                   _get(config, "num_hidden_layers"))
        kw = dict(positional="learned absolute", pre_norm=bool(config.get("do_layer_norm_before", True)))
        scaled = True
    elif family == "bloom":
        N, H, L = (_get(config, "hidden_size", "n_embed"), _get(config, "n_head", "num_attention_heads"),
                   _get(config, "n_layer", "num_hidden_layers"))
        kw = dict(positional="alibi")
        scaled = True
    elif family == "bert":
        kind = config.get("position_embedding_type", "absolute")
        if kind != "absolute":
            raise ArchitectureError(f"BERT with position_embedding_type={kind!r} is not supported (only 'absolute')")
        N, H, L = (_get(config, "hidden_size"), _get(config, "num_attention_heads"),
                   _get(config, "num_hidden_layers"))
        kw = dict(positional="learned absolute", pre_norm=False)
        scaled = True
    else:  # gpt_neox, mistral, llama, qwen2: rotary
        N, H, L = (_get(config, "hidden_size"), _get(config, "num_attention_heads"),
                   _get(config, "num_hidden_layers"))
        theta, factor, scaling = _rope(config)
        kw = dict(positional="rope", rope_theta=theta, rotary_style="half", rope_scaling=scaling)
        scaled = True
    N, H, L = int(N), int(H), int(L)
    kv = int(config.get("num_key_value_heads") or H) if family in _GQA else H
    d_head = int(config.get("head_dim") or 0) if family in _GQA else 0
    if not d_head:
        if N % H:
            raise ArchitectureError(f"hidden size {N} is not divisible by {H} heads; the config is inconsistent")
        d_head = N // H
    if family == "gpt_neox":
        kw["rotary_dim"] = int(d_head * factor)
    elif family in _GQA:
        kw["rotary_dim"] = int(d_head * factor)
    if kw.get("rotary_dim", 2) <= 0 or kw.get("rotary_dim", 2) % 2:
        raise ArchitectureError(f"rotary dimension {kw['rotary_dim']} of head size {d_head} is not a positive even "
                                "number; check rotary_pct / partial_rotary_factor in config.json")
    return Layout(family=family, n_layers=L, n_heads=H, n_kv_heads=kv, d_model=N, d_head=d_head,
                  scale=1.0 / math.sqrt(d_head) if scaled else 1.0, **kw)


# ------------------------------------------------------------------------------------------ tensors


def _suffixes(layout: Layout, layer: int) -> dict[str, str]:
    """Role -> name suffix of the Q/K weights of one layer ('qkv' for fused, or 'q' and 'k')."""
    f, l = layout.family, layer
    if f == "gpt2":
        return {"qkv": f"h.{l}.attn.c_attn.weight"}
    if f == "bloom":
        return {"qkv": f"h.{l}.self_attention.query_key_value.weight"}
    if f == "gpt_neox":
        return {"qkv": f"layers.{l}.attention.query_key_value.weight"}
    if f in ("opt",) + _GQA:
        return {"q": f"layers.{l}.self_attn.q_proj.weight", "k": f"layers.{l}.self_attn.k_proj.weight"}
    return {"q": f"layer.{l}.attention.self.query.weight", "k": f"layer.{l}.attention.self.key.weight"}


def ln_gain_suffix(layout: Layout, layer: int) -> str | None:
    """Suffix of the gain of the norm whose output enters layer ``layer``'s attention (None: no norm)."""
    f, l = layout.family, layer
    if f == "gpt2":
        return f"h.{l}.ln_1.weight"
    if f == "opt":
        if layout.pre_norm:
            return f"layers.{l}.self_attn_layer_norm.weight"
        return None if l == 0 else f"layers.{l - 1}.final_layer_norm.weight"
    if f == "bert":
        return "embeddings.LayerNorm.weight" if l == 0 else f"layer.{l - 1}.output.LayerNorm.weight"
    return f"{'h' if f == 'bloom' else 'layers'}.{l}.input_layernorm.weight"


def _match(suffix: str, tensor_names) -> str | None:
    hits = [t for t in tensor_names if t == suffix or t.endswith("." + suffix)]
    if len(hits) > 1:
        raise ArchitectureError(f"several tensors end with {suffix!r}: {hits}; the checkpoint holds more than one "
                                "model. Point at a folder with a single model.")
    return hits[0] if hits else None


def qk_tensor_names(layout: Layout, tensor_names, layer: int, fold_ln: bool = False) -> dict[str, str]:
    """Full names of the tensors that hold W_Q, W_K of ``layer`` (and ``'ln'``, the gain, when folding).

    Returns ``{'qkv': name}`` for fused families, ``{'q': name, 'k': name}`` otherwise.
    Raises ArchitectureError naming the missing tensor.
    """
    if not 0 <= layer < layout.n_layers:
        raise ArchitectureError(f"layer {layer} out of range: the model has {layout.n_layers} layers")
    names = list(tensor_names)
    wanted = _suffixes(layout, layer)
    if fold_ln and (g := ln_gain_suffix(layout, layer)) is not None:
        wanted["ln"] = g
    out = {}
    for role, suffix in wanted.items():
        hit = _match(suffix, names)
        if hit is None:
            raise ArchitectureError(
                f"no tensor named '*{suffix}' in this {layout.family} checkpoint (layer {layer}); it has "
                f"{len(names)} tensors, e.g. {names[:3]}. The checkpoint is incomplete or not a plain "
                f"{layout.family} model; re-save it with save_pretrained."
            )
        out[role] = hit
    return out


def _expect(name: str, w: np.ndarray, shape: tuple[int, ...]) -> None:
    if w.shape != shape:
        raise ArchitectureError(f"tensor {name!r} has shape {w.shape}, expected {shape} from config.json; "
                                "the config does not describe these weights")


@dataclass(frozen=True)
class LayerQK:
    """The Q/K weights of one layer in their compact form (what :func:`pipeline.profile.head_profiles` takes).

    W_Q : (H, n, N) per query head;  W_K : (Hkv, n, N) per key head;  kv_of_head : (H,) the key head of
    each query head;  gain : (N,) float64 layer-norm gain to fold on both sides, or None. W_Q and W_K keep
    a compact dtype: float32 for checkpoints stored in bf16 / fp16 / fp32 (exact), float64 otherwise.
    """

    W_Q: np.ndarray
    W_K: np.ndarray
    kv_of_head: np.ndarray
    gain: np.ndarray | None = None


def _read_compact(checkpoint, name: str) -> np.ndarray:
    """A tensor in float32 when that is exact (checkpoints with ``read_compact``), else as ``read`` gives it."""
    reader = getattr(checkpoint, "read_compact", None)
    return reader(name) if reader is not None else checkpoint.read(name)


def layer_qk(checkpoint, layout: Layout, layer: int, fold_ln: bool = False) -> LayerQK:
    """W_Q, W_K of one layer without expanding grouped key heads or widening the dtype (see :class:`LayerQK`).

    ``checkpoint`` needs ``tensor_names()`` and ``read(name) -> array`` (and, optionally,
    ``read_compact(name)``; see ``pipeline.checkpoints.Checkpoint``). With ``fold_ln`` the layer-norm gain is
    returned for ``head_profiles(..., gain=...)``, which multiplies each head by it in float64, so that
    W_K^T W_Q becomes diag(g) W_K^T W_Q diag(g) exactly as :func:`layer_weights` gives it.
    """
    H, kv, n, N = layout.n_heads, layout.n_kv_heads, layout.d_head, layout.d_model
    names = qk_tensor_names(layout, checkpoint.tensor_names(), layer, fold_ln)
    kv_of_head = np.arange(H)
    if "qkv" in names:
        w = _read_compact(checkpoint, names["qkv"])
        if layout.family == "gpt2":  # Conv1D: (in, out), out = [q | k | v]
            _expect(names["qkv"], w, (N, 3 * N))
            W_Q = np.ascontiguousarray(w[:, :N].T).reshape(H, n, N)
            W_K = np.ascontiguousarray(w[:, N: 2 * N].T).reshape(H, n, N)
        else:  # (3 H n, N), rows per head [q, k, v]
            _expect(names["qkv"], w, (3 * H * n, N))
            w = w.reshape(H, 3, n, N)
            W_Q, W_K = w[:, 0], w[:, 1]  # views: the fused tensor is kept once
    else:
        W_Q = _read_compact(checkpoint, names["q"])
        _expect(names["q"], W_Q, (H * n, N))
        W_Q = W_Q.reshape(H, n, N)
        W_K = _read_compact(checkpoint, names["k"])
        _expect(names["k"], W_K, (kv * n, N))
        W_K = W_K.reshape(kv, n, N)
        kv_of_head = np.arange(H) // (H // kv)
    gain = None
    if "ln" in names:
        gain = np.asarray(checkpoint.read(names["ln"]), dtype=np.float64)
        _expect(names["ln"], gain, (N,))
    return LayerQK(W_Q, W_K, kv_of_head, gain)


def layer_weights(checkpoint, layout: Layout, layer: int, fold_ln: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """W_Q, W_K of one layer, each (H, n, N) float64, per query head (q = W_Q x).

    ``checkpoint`` needs ``tensor_names()`` and ``read(name) -> float64 array``
    (see ``pipeline.checkpoints.Checkpoint``). With ``fold_ln`` both are multiplied on the right by
    the layer-norm gain (module docstring), so that W_K^T W_Q becomes diag(g) W_K^T W_Q diag(g).
    Grouped key heads are repeated per query head; the profile task uses the compact :func:`layer_qk`.
    """
    qk = layer_qk(checkpoint, layout, layer, fold_ln)
    W_Q = np.asarray(qk.W_Q, dtype=np.float64)
    W_K = np.asarray(qk.W_K, dtype=np.float64)[qk.kv_of_head]
    if qk.gain is not None:
        W_Q, W_K = W_Q * qk.gain, W_K * qk.gain
    return np.ascontiguousarray(W_Q), np.ascontiguousarray(W_K)


def inverse_frequencies(layout: Layout) -> np.ndarray:
    """The rotary inverse frequencies of a rope layout, scaled as its ``rope_scaling`` says (float64)."""
    from pipeline.rotary import scaled_inverse_frequencies

    return scaled_inverse_frequencies(layout.rotary_dim, layout.rope_theta, dict(layout.rope_scaling))


def rotations(layout: Layout, offsets=None) -> np.ndarray | None:
    """R(d) for d = 0..128 (or the given ``offsets``), shape (D, n, n), for rotary layouts; None for
    position-independent forms."""
    if layout.positional != "rope":
        return None
    from pipeline.rotary import N_OFFSETS, rotation_matrices

    return rotation_matrices(layout.d_head, layout.rotary_dim, layout.rope_theta,
                             N_OFFSETS if offsets is None else offsets, style=layout.rotary_style,
                             inv_freq=inverse_frequencies(layout))
