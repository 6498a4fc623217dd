"""Three spectra of a head at one offset, from its weights: the singular values of T, the absolute eigenvalues of L
and the singular values of L.

The spectra of a core's top rows are :func:`pipeline.profile.core_spectra.core_spectra` (re-exported here with
:class:`CoreSpectra`, :func:`pad` and ``SPECTRA``): the profile route computes them at d = 0 for the store, and
:func:`head_spectra` builds the cores from W_Q, W_K (and R(d)) for any offset and calls it.
"""

from __future__ import annotations

import numpy as np

from pipeline.profile import span_cores
from pipeline.profile.core_spectra import CoreSpectra, core_spectra, pad
from pipeline.schema import SPECTRA

__all__ = ["SPECTRA", "CoreSpectra", "core_spectra", "head_spectra", "pad"]


def head_spectra(W_Q: np.ndarray, W_K: np.ndarray, rotation: np.ndarray | None = None, *,
                 kv_of_head: np.ndarray | None = None, gain: np.ndarray | None = None,
                 width: int | None = None) -> CoreSpectra:
    """The spectra of the heads of one layer at one offset, from their weights.

    W_Q : (H, n, N); W_K : (H, n, N), or (Hkv, n, N) with ``kv_of_head`` (the key head of each query head);
    rotation : (n, n) R(d) between them (L = W_K^T R W_Q), None for the identity (d = 0); gain : (N,) layer-norm gain
    folded on both sides (W_Q diag(g), W_K diag(g)) or None. The cores come from the profile's own factorisation
    (:func:`pipeline.profile.span_cores`), one head at a time.
    """
    W_Q, W_K = np.asarray(W_Q), np.asarray(W_K)
    if W_Q.ndim != 3 or W_K.ndim != 3 or W_Q.shape[1:] != W_K.shape[1:]:
        raise ValueError(f"W_Q and W_K must both have shape (heads, n, N); got {W_Q.shape} and {W_K.shape}")
    H, n, N = W_Q.shape
    kv = np.arange(H) if kv_of_head is None else np.asarray(kv_of_head)
    if kv.shape != (H,) or (H and (kv.min() < 0 or kv.max() >= len(W_K))):
        raise ValueError(f"kv_of_head must give one key head in 0..{len(W_K) - 1} per query head ({H})")
    if gain is not None and np.shape(gain) != (N,):
        raise ValueError(f"gain must have shape ({N},); got {np.shape(gain)}")
    g = 1.0 if gain is None else np.asarray(gain, dtype=np.float64)
    if rotation is not None and np.shape(rotation) != (n, n):
        raise ValueError(f"rotation must have shape ({n}, {n}); got {np.shape(rotation)}")
    k = min(N, 2 * n)
    m = min(n, k)
    tops = np.empty((H, m, k))
    for h in range(H):
        K, P = span_cores(np.asarray(W_Q[h], np.float64) * g, np.asarray(W_K[kv[h]], np.float64) * g)
        KR = K[:m] if rotation is None else K[:m] @ np.asarray(rotation, dtype=np.float64)
        tops[h] = KR @ P.T
    return core_spectra(tops, width)
