"""Each rotary layer's rotations R(d) and inverse frequencies, from its :class:`~pipeline.families.layout.Layout`
(the positional kind of the layer, its rotary dimension, base and scaling; ``pipeline.families.rotary`` makes the
matrices)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from pipeline.families.layout import Layout
from pipeline.families.rotary import N_OFFSETS, rotation_matrices, scaled_inverse_frequencies
from pipeline.families.spec import Positional


def _positional(layout: Layout, layer: int | None) -> Positional:
    if layer is None:
        if layout.layers and any(p != layout.layers[0] for p in layout.layers):
            raise ValueError(f"the layers of this {layout.family} model differ in their positional kind; pass layer=")
        layer = 0
    return layout.positional_of(layer)


def inverse_frequencies(layout: Layout, layer: int | None = None) -> np.ndarray:
    """The rotary inverse frequencies of a rope layout (of ``layer``, where layers differ), scaled as its
    ``rope_scaling`` says (float64)."""
    p = _positional(layout, layer)
    return scaled_inverse_frequencies(p.rotary_dim, p.rope_theta, dict(p.scaling))


@lru_cache(maxsize=8)
def _default_rotations(d_head: int, positional: Positional) -> np.ndarray:
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
    return rotation_matrices(layout.d_head, p.rotary_dim, p.rope_theta, offsets, style=p.style,
                             inv_freq=inverse_frequencies(layout, layer))
