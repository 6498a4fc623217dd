"""Per family: which tensors hold W_Q and W_K of layer l, how heads are grouped, which positional kind.

The public face of :mod:`pipeline.families`: a checkpoint's ``config.json`` (a plain dict) gives a
:class:`Layout` through its family's entry in the family table (``pipeline/families/table.py``, one entry per
``model_type``); :func:`layer_qk` / :func:`layer_weights` read one layer's W_Q, W_K through the same entry, and
:func:`rotations` gives each layer's R(d).

Weights come out in torch Linear layout, ``q = W_Q x``: :func:`layer_weights` gives W_Q, W_K of shape
(H, n, N) per *query* head, float64; grouped-query and multi-query models give query head h the key head
h // (H / kv_heads). :func:`layer_qk` gives the same without copies: key heads once, with ``kv_of_head``,
in the compact dtype of the stored one (float16 for fp16, float32 for bf16 / fp32 checkpoints:
``pipeline.sources.base.compact_dtype``), for the memory-bounded profile task.

Conventions every entry follows (docs/architecture.md, "Families", has the table and the reasons):

- **Positional kind per layer.** Rotary layers give L(d) = W_K^T R(d) W_Q (``pipeline.rotary``); a layer
  without rotary in a rotary model (SmolLM3's every fourth layer) has one form for every d; Gemma 3 and
  ModernBERT rotate their sliding and global layers with different bases.
- **QK-norm** (Qwen3, Gemma 3, OLMo 2, StableLM and Cohere optionally, Phi optionally): applied before the
  rotation, so q_i = R(i) G_q C W_Q x_i / r_q(i), with G the norm's gain (per head, or the head's slice of a
  gain over the whole projection), C the centring projection of a LayerNorm (the identity for RMS) and r_q(i)
  > 0 the norm's divisor. The score is then x_j^T L(d) x_i / (r_q(i) r_k(j)) with
  L(d) = W_K^T C G_k R(d) G_q C W_Q: the profile is that of the weights G C W, folded in when a layer is read.
- **Layer-norm folding** (``fold_ln=True``, L -> diag(g) L diag(g)) uses the gain g of the norm whose output
  is the attention input x: the pre-attention norm of pre-norm families, the previous layer's output norm of
  post-norm ones (BERT-style encoders, OPT with ``do_layer_norm_before = false``, DistilBERT), the embeddings'
  norm for their layer 0, and none where the attention reads no norm's output (OLMo 2; post-norm OPT's and a
  projected ELECTRA's layer 0). Gemma's norms multiply by 1 + weight, and so does the folded gain.
- **Scale** (``Layout.scale``): 1/sqrt(head_dim), or what the family's config says (``query_pre_attn_scalar``,
  ``attention_multiplier``, GPT-2's ``scale_attn_weights``); a positive factor, it changes no profile.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from pipeline.families.errors import ADDING_A_FAMILY, ArchitectureError  # noqa: F401 - the public names
from pipeline.families.layout import Layout, layout_from_config, supported, towers  # noqa: F401
from pipeline.families.spec import Positional
from pipeline.families.table import FAMILIES  # noqa: F401
from pipeline.families.tensors import (  # noqa: F401
    LayerQK,
    check_layer,
    fold_qk_norm,
    fused_rows,
    layer_qk,
    layer_weights,
    ln_gain_suffix,
    qk_tensor_names,
)


def _positional(layout: Layout, layer: int | None) -> Positional:
    if layer is None:
        if layout.layers and any(p != layout.layers[0] for p in layout.layers):
            raise ValueError(f"the layers of this {layout.family} model differ in their positional kind; pass layer=")
        layer = 0
    return layout.positional_of(layer)


def inverse_frequencies(layout: Layout, layer: int | None = None) -> np.ndarray:
    """The rotary inverse frequencies of a rope layout (of ``layer``, where layers differ), scaled as its
    ``rope_scaling`` says (float64)."""
    from pipeline.rotary import scaled_inverse_frequencies

    p = _positional(layout, layer)
    return scaled_inverse_frequencies(p.rotary_dim, p.rope_theta, dict(p.scaling))


@lru_cache(maxsize=8)
def _default_rotations(d_head: int, positional: Positional) -> np.ndarray:
    from pipeline.rotary import N_OFFSETS, rotation_matrices, scaled_inverse_frequencies

    R = rotation_matrices(d_head, positional.rotary_dim, positional.rope_theta, N_OFFSETS, style=positional.style,
                          inv_freq=scaled_inverse_frequencies(positional.rotary_dim, positional.rope_theta,
                                                              dict(positional.scaling)))
    R.flags.writeable = False  # shared by every layer of this kind
    return R


def rotations(layout: Layout, offsets=None, layer: int | None = None) -> np.ndarray | None:
    """R(d) for d = 0..128 (or the given ``offsets``), shape (D, n, n), for a rotary layer; None for a
    position-independent form. ``layer`` picks the layer where a model's layers differ (SmolLM3, Gemma 3,
    ModernBERT); without it, every layer must be alike. The default offsets' matrices are made once per kind
    and shared (read-only)."""
    p = _positional(layout, layer)
    if p.kind != "rope":
        return None
    if offsets is None:
        return _default_rotations(layout.d_head, p)
    from pipeline.rotary import rotation_matrices

    return rotation_matrices(layout.d_head, p.rotary_dim, p.rope_theta, offsets, style=p.style,
                             inv_freq=inverse_frequencies(layout, layer))
