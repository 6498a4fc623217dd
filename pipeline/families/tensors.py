"""The Q/K weights of one layer, read through the family's table entry (``Layout.spec``).

Tensors are found by the *suffix* of their names (``h.3.attn.c_attn.weight`` matches
``transformer.h.3.attn.c_attn.weight``), because prefixes vary with the head class a checkpoint was saved from. A
suffix only matches at a ``.`` boundary and names the weight tensor itself, so GPT-2's causal-mask buffers
``h.3.attn.bias`` are never picked up.

A fused tensor is read by its q and k rows only (``Checkpoint.read_rows``: the v rows are never read, from disk or
the Hub), except GPT-2's Conv1D, whose every row holds q, k and v side by side and is read whole. A QK-norm
applied before the rotation is folded into the weights here (:func:`fold_qk_norm`), so the profile code sees one
W_Q, W_K per head whatever the family.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.families import latent as mla
from pipeline.families.errors import ArchitectureError


def _error(message: str) -> ArchitectureError:
    return ArchitectureError(message)


def ln_gain_suffix(layout, layer: int) -> str | None:
    """Suffix of the gain of the norm whose output enters layer ``layer``'s attention (None: no norm)."""
    spec = layout.spec
    template = spec.ln_first if layer == 0 and spec.ln_first is not None else spec.ln
    return template.format(l=layer, p=layer - 1) if template else None


def _norm_roles(layout, layer: int) -> dict[str, str]:
    norm = layout.spec.qk_norm
    if norm is None or norm.gain == "none":  # none, or weightless (Llama 4): no tensors
        return {}
    if norm.gain != "each_head":
        return {"q_norm": norm.q.format(l=layer), "k_norm": norm.k.format(l=layer)}
    out = {f"q_norm.{h}": norm.q.format(l=layer, h=h) for h in range(layout.n_heads)}
    return out | {f"k_norm.{h}": norm.k.format(l=layer, h=h) for h in range(layout.n_kv_heads)}


def _match(suffix: str, tensor_names) -> str | None:
    hits = [t for t in tensor_names if t == suffix or t.endswith("." + suffix)]
    if len(hits) > 1:
        raise _error(f"several tensors end with {suffix!r}: {hits}; the checkpoint holds more than one model. "
                     "Point at a folder with a single model.")
    return hits[0] if hits else None


def qk_tensor_names(layout, tensor_names, layer: int, fold_ln: bool = False) -> dict[str, str]:
    """Full names of the tensors that ``layer_qk`` reads for ``layer``, by role.

    ``{'qkv': name}`` for fused families, ``{'q': name, 'k': name}`` otherwise; with a QK-norm its gains
    (``q_norm``, ``k_norm``, or ``q_norm.h`` / ``k_norm.h`` for one tensor per head); with ``fold_ln`` the
    layer-norm gain as ``ln``; {} for a hybrid model's layer without a form (no softmax attention, nothing to read).
    Raises ArchitectureError naming the missing tensor.
    """
    if not 0 <= layer < layout.n_layers:
        raise _error(f"layer {layer} out of range: the model has {layout.n_layers} layers")
    if layout.positional_of(layer).kind == "no form":
        return {}
    spec = layout.spec
    names = [t for t in tensor_names if not spec.within or any(w in t for w in spec.within)]
    fill = {"l": layer, "p": layer - 1}
    if spec.split == "latent":  # multi-head latent attention: its latent tensors (``pipeline.families.latent``)
        wanted = mla.roles(spec.latent, layer)
    elif spec.split != "separate":
        wanted = {"qkv": spec.q.format(**fill)}
    else:
        wanted = {"q": spec.q.format(**fill), "k": spec.k.format(**fill)}
    wanted |= _norm_roles(layout, layer)
    if fold_ln and (g := ln_gain_suffix(layout, layer)) is not None:
        wanted["ln"] = g
    out = {}
    for role, suffix in wanted.items():
        hit = _match(suffix, names)
        if hit is None:
            raise _error(f"no tensor named '*{suffix}' in this {layout.family} checkpoint (layer {layer}); it has "
                         f"{len(names)} tensors, e.g. {names[:3]}. The checkpoint is incomplete or not a plain "
                         f"{layout.family} model; re-save it with save_pretrained.")
        out[role] = hit
    return out


def _expect(name: str, shape: tuple, want: tuple[int, ...]) -> None:
    if tuple(shape) != want:
        raise _error(f"tensor {name!r} has shape {tuple(shape)}, expected {want} from config.json; the config does "
                     "not describe these weights")


def _wanted_shape(layout, role: str) -> tuple[int, ...]:
    H, kv, n, N = layout.n_heads, layout.n_kv_heads, layout.d_head, layout.d_model
    if layout.spec.split == "latent" and role in mla.ROLES:
        return mla.shape(layout, role)
    if role in ("q", "k"):
        return ((H * (2 if layout.spec.gated_query else 1) if role == "q" else kv) * n, N)
    if role == "qkv":
        return (N, 3 * N) if layout.spec.split == "columns" else ((H + 2 * kv) * n, N)
    if role == "ln":
        return (N,)
    heads = H if role.startswith("q") else kv
    return {"shared": (n,), "per_head": (heads, n), "projection": (heads * n,), "each_head": (n,)}[
        layout.spec.qk_norm.gain]


def check_layer(checkpoint, layout, layer: int, fold_ln: bool = False) -> dict[str, str]:
    """The names of what :func:`layer_qk` reads for ``layer`` (:func:`qk_tensor_names`), each checked to have the
    shape the config gives, from the files' headers (``checkpoint.shape``) without reading values where the
    checkpoint can tell. Raises ArchitectureError naming the tensor."""
    names = qk_tensor_names(layout, checkpoint.tensor_names(), layer, fold_ln)
    shape = getattr(checkpoint, "shape", None)
    for role, name in names.items():
        _expect(name, shape(name) if shape is not None else np.shape(_read_compact(checkpoint, name)),
                _wanted_shape(layout, role))
    return names


@dataclass(frozen=True)
class LayerQK:
    """The Q/K weights of one layer in their compact form (what :func:`pipeline.profile.head_profiles` takes).

    W_Q : (H, n, N) per query head;  W_K : (Hkv, n, N) per key head;  kv_of_head : (H,) the key head of
    each query head;  gain : (N,) float64 layer-norm gain to fold on both sides, or None. W_Q and W_K keep
    a compact dtype: float16 for fp16 checkpoints, float32 for bf16 / fp32 (``pipeline.sources.base.compact_dtype``:
    exact), float64 otherwise and
    for families with a QK-norm (its gain and centring folded in: :func:`fold_qk_norm`). Latent attention's are
    stacks of heads formed one at a time from their stored factors (``pipeline.families.latent.LatentHeads``).
    """

    W_Q: np.ndarray
    W_K: np.ndarray
    kv_of_head: np.ndarray
    gain: np.ndarray | None = None

    def head(self, h: int) -> tuple[np.ndarray, np.ndarray]:
        """Query head h's W_Q and its key head's W_K, each (n, N) in float64, with the gain folded in (W diag(g)):
        one head's form L = W_K^T W_Q made from the compact layer, a head at a time."""
        w_q = np.asarray(self.W_Q[h], dtype=np.float64)
        w_k = np.asarray(self.W_K[self.kv_of_head[h]], dtype=np.float64)
        if self.gain is not None:
            w_q, w_k = w_q * self.gain, w_k * self.gain
        return w_q, w_k


def _read_compact(checkpoint, name: str) -> np.ndarray:
    """A tensor in its compact dtype (checkpoints with ``read_compact``), else as ``read`` gives it."""
    reader = getattr(checkpoint, "read_compact", None)
    return reader(name) if reader is not None else checkpoint.read(name)


def _read_rows(checkpoint, name: str, ranges: list[tuple[int, int]]) -> np.ndarray:
    """Rows of a 2-d tensor, stacked: by ``read_rows`` where the checkpoint has it, else of the whole tensor."""
    reader = getattr(checkpoint, "read_rows", None)
    if reader is not None:
        return reader(name, ranges)
    w = _read_compact(checkpoint, name)
    return np.concatenate([w[a:b] for a, b in ranges])


def fused_rows(layout) -> list[tuple[int, int]]:
    """The row ranges of a row-fused tensor that hold the queries, then those that hold the keys: read in this
    order and stacked they give (H n + Hkv n, N), queries first."""
    spec, H, kv, n = layout.spec, layout.n_heads, layout.n_kv_heads, layout.d_head
    if spec.split == "rows":
        return [(0, (H + kv) * n)]
    r = H // kv  # groups: per key head, r query heads, its key, its value
    step = (r + 2) * n
    return [(g * step, g * step + r * n) for g in range(kv)] + \
        [(g * step + r * n, g * step + (r + 1) * n) for g in range(kv)]


def _fused(checkpoint, layout, name: str) -> tuple[np.ndarray, np.ndarray]:
    """W_Q (H, n, N), W_K (Hkv, n, N) of a fused tensor, compact, reading only their rows where it can."""
    H, kv, n, N = layout.n_heads, layout.n_kv_heads, layout.d_head, layout.d_model
    split = layout.spec.split
    if split == "columns":  # Conv1D: (in, out), out = [q | k | v]; every row holds all three
        w = _read_compact(checkpoint, name)
        return (np.ascontiguousarray(w[:, :N].T).reshape(H, n, N),
                np.ascontiguousarray(w[:, N: 2 * N].T).reshape(H, n, N))
    reader = getattr(checkpoint, "read_rows", None)
    if reader is None:  # a checkpoint that reads whole tensors: views of it, as far as the split allows
        w = _read_compact(checkpoint, name)
        if split == "rows":
            return w[:H * n].reshape(H, n, N), w[H * n:(H + kv) * n].reshape(kv, n, N)
        g = w.reshape(kv, H // kv + 2, n, N)
        return g[:, :H // kv].reshape(H, n, N), g[:, H // kv]
    w = reader(name, fused_rows(layout))
    return w[:H * n].reshape(H, n, N), w[H * n:].reshape(kv, n, N)


def _norm_gains(checkpoint, layout, names: dict[str, str], side: str) -> np.ndarray:
    """The QK-norm gain of the queries (``side`` 'q') or keys ('k'), (heads, n) float64, offset included."""
    norm, n = layout.spec.qk_norm, layout.d_head
    heads = layout.n_heads if side == "q" else layout.n_kv_heads
    if norm.gain == "each_head":
        g = np.stack([np.asarray(checkpoint.read(names[f"{side}_norm.{h}"]), dtype=np.float64) for h in range(heads)])
    else:
        g = np.asarray(checkpoint.read(names[f"{side}_norm"]), dtype=np.float64)
        g = np.broadcast_to(g.reshape(-1, n), (heads, n))
    return layout.spec.gain_offset + g


def fold_qk_norm(W: np.ndarray, gain: np.ndarray, centre: bool) -> np.ndarray:
    """G C W per head, float64: ``gain`` (heads, n) the norm's gain G, ``centre`` whether it is a LayerNorm (C =
    I - 11^T / n on each head's n values; RMS norms have C = I). With q_i = R(i) G C W_Q x_i / r_q(i), the score
    is x_j^T (G_k C W_K)^T R(d) (G_q C W_Q) x_i / (r_q(i) r_k(j)): the form of these weights up to the
    positive per-token divisors r of the norms."""
    out = np.empty(W.shape, dtype=np.float64)
    for h in range(W.shape[0]):  # one head at a time: no float64 temporary of the whole layer
        w = out[h]
        w[...] = W[h]
        if centre:
            w -= w.mean(axis=0)
        w *= gain[h][:, None]
    return out


def layer_qk(checkpoint, layout, layer: int, fold_ln: bool = False) -> LayerQK:
    """W_Q, W_K of one layer without expanding grouped key heads or widening the dtype (see :class:`LayerQK`).

    ``checkpoint`` needs ``tensor_names()`` and ``read(name) -> array`` (and, optionally, ``read_compact(name)``,
    ``read_rows(name, ranges)`` and ``shape(name)``; see ``pipeline.sources.base.Checkpoint``). With ``fold_ln``
    the layer-norm gain is returned for ``head_profiles(..., gain=...)``, which multiplies each head by it in
    float64, so that W_K^T W_Q becomes diag(g) W_K^T W_Q diag(g) exactly as :func:`layer_weights` gives it.
    """
    H, kv, n, N = layout.n_heads, layout.n_kv_heads, layout.d_head, layout.d_model
    names = check_layer(checkpoint, layout, layer, fold_ln)
    if layout.spec.split == "latent":
        W_Q, W_K = mla.latent_qk(layout, names, lambda name: _read_compact(checkpoint, name),
                                 lambda name, ranges: _read_rows(checkpoint, name, ranges),
                                 whole=getattr(checkpoint, "read_rows", None) is None)
    elif "qkv" in names:
        W_Q, W_K = _fused(checkpoint, layout, names["qkv"])
    else:
        if layout.spec.gated_query:  # per head [query | gate]: the query rows alone
            W_Q = _read_rows(checkpoint, names["q"], [(2 * h * n, (2 * h + 1) * n) for h in range(H)]).reshape(H, n, N)
        else:
            W_Q = _read_compact(checkpoint, names["q"]).reshape(H, n, N)
        W_K = _read_compact(checkpoint, names["k"]).reshape(kv, n, N)
    if (norm := layout.spec.qk_norm) is not None and norm.gain != "none" and norm.after_rotation:
        # gains after the rotation (one shared by every head): both on the key side, the form of the key at
        # position 0 (``spec.QKNorm``)
        W_K = fold_qk_norm(W_K, _norm_gains(checkpoint, layout, names, "q")[:kv] *
                           _norm_gains(checkpoint, layout, names, "k"), centre=False)
    elif norm is not None and norm.gain != "none":
        centre = norm.kind == "layernorm"
        W_Q = fold_qk_norm(W_Q, _norm_gains(checkpoint, layout, names, "q"), centre)
        W_K = fold_qk_norm(W_K, _norm_gains(checkpoint, layout, names, "k"), centre)
    gain = None
    if "ln" in names:
        gain = layout.spec.gain_offset + np.asarray(checkpoint.read(names["ln"]), dtype=np.float64)
    return LayerQK(W_Q, W_K, np.arange(H) // (H // kv), gain)


def layer_weights(checkpoint, layout, layer: int, fold_ln: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """W_Q, W_K of one layer, each (H, n, N) float64, per query head (q = W_Q x), QK-norm folded in.

    With ``fold_ln`` both are multiplied on the right by the layer-norm gain, so that W_K^T W_Q becomes
    diag(g) W_K^T W_Q diag(g). Grouped key heads are repeated per query head; the profile task uses the
    compact :func:`layer_qk`.
    """
    qk = layer_qk(checkpoint, layout, layer, fold_ln)
    heads = [qk.head(h) for h in range(len(qk.kv_of_head))]
    return np.stack([w_q for w_q, _ in heads]), np.stack([w_k for _, w_k in heads])
