"""Random heads of a model's shape, one layer at a time: the i.i.d. Gaussian baseline.

**i.i.d. products** (``"iid"``): W_Q (H, n, N) and W_K (Hkv, n, N) with independent standard normal entries, key heads
shared by query heads as in the model (query head h uses key head h // (H / Hkv)): the ensemble of the paper's
corollary on random QK products. Layer l of seed s draws W_Q then W_K, in float32, from
``numpy.random.default_rng([s, l])``, so any layer can be drawn alone and gives the same values. The baseline keeps
the layout's positional kind: a rotary model's baseline is profiled at every offset with the model's own R(d).
"""

from __future__ import annotations

import numpy as np

from pipeline.families import LayerQK
from pipeline.schema import ModelShape


def check_seed(seed) -> int:
    """``seed`` as an int; ValueError unless it is a non-negative integer."""
    if isinstance(seed, bool) or int(seed) != seed or seed < 0:
        raise ValueError(f"a baseline's seed is a non-negative integer; got {seed!r}")
    return int(seed)


def kv_of_head(shape: ModelShape) -> np.ndarray:
    """The key head of each query head: h // (H / Hkv)."""
    return np.arange(shape.n_heads) // (shape.n_heads // shape.n_kv_heads)


class IidHeads:
    """The i.i.d. Gaussian baseline of one shape and seed (module docstring). ``layout`` is the shape given (a
    :class:`pipeline.families.Layout` for a rotary model, so that its R(d) are known); :meth:`layer` gives a
    layer's heads."""

    def __init__(self, layout: ModelShape, seed: int):
        self.layout, self.seed = layout, check_seed(seed)

    def layer(self, layer: int) -> LayerQK:
        """Layer ``layer``'s heads, W_Q and W_K in float32."""
        shape = self.layout
        if not 0 <= int(layer) < shape.n_layers:
            raise ValueError(f"layer {layer} out of range: the shape has {shape.n_layers} layers")
        rng = np.random.default_rng([self.seed, int(layer)])
        H, kv, n, N = shape.n_heads, shape.n_kv_heads, shape.d_head, shape.d_model
        W_Q = rng.standard_normal((H, n, N), dtype=np.float32)
        W_K = rng.standard_normal((kv, n, N), dtype=np.float32)
        return LayerQK(W_Q, W_K, kv_of_head(shape))
