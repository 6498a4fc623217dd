"""Three spectra of a head at one offset, from the reduced problem: the singular values of T, the absolute
eigenvalues of L and the singular values of L.

With Q an orthonormal basis of the span of [W_K^T | W_Q^T] (k = min(N, 2n) columns) the form is
``L = Q C Q^T`` with the k x k core C (``pipeline.profile``). Q has orthonormal columns, so L, S = sym(L) and
T = antisym(L) have the nonzero spectra of C, sym(C) and antisym(C), and the N x N form is never built:

- the eigenvalues of L are those of C and N - k zeros;
- the singular values of L are those of C and N - k zeros;
- the singular values of T are those of antisym(C) and N - k zeros (they come in equal pairs).

Only the top m = min(n, k) rows of a core are nonzero (``[[A, B], [0, 0]]``, A (m, m), B (m, k - m)), and the
profile route forms only those rows. So the eigenvalues of C are those of A and k - m zeros, its singular values
those of ``[A | B]`` and k - m zeros, and antisym(C) = [[(A - A^T)/2, B/2], [-B^T/2, 0]]. :func:`core_spectra`
takes these top rows (a full core is the case m = k) and gives each spectrum scaled to ||L||_F = 1, decreasing,
k values per head like the stored ``spectrum``, NaN-padded to ``width`` when asked. A zero core (L = 0) gives a row
of NaN. :func:`head_spectra` builds the cores from W_Q, W_K (and R(d)) and calls it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SPECTRA = ("antisym_spectrum", "eig_abs", "singular_values")


@dataclass(frozen=True)
class CoreSpectra:
    """The three spectra of H heads, each (H, width), decreasing, with ||L||_F = 1; NaN past a head's k values and
    in the rows of heads with L = 0.

    antisym_spectrum : singular values of T = (L - L^T) / 2 (in equal pairs);
    eig_abs : |eigenvalues| of L;  singular_values : singular values of L.
    """

    antisym_spectrum: np.ndarray
    eig_abs: np.ndarray
    singular_values: np.ndarray

    def as_dict(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in SPECTRA}


def _decreasing(values: np.ndarray, k: int) -> np.ndarray:
    """(..., j) values, j <= k -> (..., k) sorted decreasing, zero-padded."""
    out = np.zeros(values.shape[:-1] + (k,))
    out[..., :values.shape[-1]] = -np.sort(-values, axis=-1)
    return out


def pad(values: np.ndarray, width: int | None) -> np.ndarray:
    """(..., k) -> (..., width) with NaN past k (``width`` None or k: unchanged)."""
    k = values.shape[-1]
    if width is None or width == k:
        return values
    if width < k:
        raise ValueError(f"width {width} is narrower than the {k} values per head")
    out = np.full(values.shape[:-1] + (width,), np.nan)
    out[..., :k] = values
    return out


def core_spectra(top: np.ndarray, width: int | None = None) -> CoreSpectra:
    """The spectra of heads from the nonzero top rows of their cores (module docstring).

    Parameters
    ----------
    top : (m, k) or (H, m, k), m <= k
        The top rows ``[A | B]`` of each head's k x k core C, the rows below being zero (a full core: m = k), in
        any scale: the spectra are those of C / ||C||_F.
    width : int or None
        Pad each spectrum with NaN to this many values (at least k), e.g. the store's ``eigen`` extent.

    Returns
    -------
    CoreSpectra with arrays (H, width or k), or (width or k,) for a single (m, k) head.
    """
    top = np.asarray(top, dtype=np.float64)
    if top.ndim not in (2, 3) or top.shape[-2] > top.shape[-1]:
        raise ValueError(f"top must be (m, k) or (heads, m, k) with m <= k; got shape {top.shape}")
    if not np.isfinite(top).all():
        raise ValueError("the cores hold NaN or Inf; the head's weights are not finite")
    single = top.ndim == 2
    X = top[None] if single else top
    H, m, k = X.shape
    norm = np.sqrt(np.einsum("hij,hij->h", X, X))
    alive = norm > 0
    X = X[alive] / norm[alive, None, None]
    A = X[:, :, :m]
    T = np.zeros((len(X), k, k))
    T[:, :m, :m] = (A - np.swapaxes(A, -1, -2)) / 2
    T[:, :m, m:] = X[:, :, m:] / 2
    T[:, m:, :m] = -np.swapaxes(T[:, :m, m:], -1, -2)
    values = (np.linalg.svd(T, compute_uv=False) if len(X) else np.zeros((0, k)),
              np.abs(np.linalg.eigvals(A)) if len(X) else np.zeros((0, m)),
              np.linalg.svd(X, compute_uv=False) if len(X) else np.zeros((0, m)))
    out = []
    for v in values:
        full = np.full((H, k), np.nan)
        full[alive] = _decreasing(v, k)
        full = pad(full, width)
        out.append(full[0] if single else full)
    return CoreSpectra(*out)


def head_spectra(W_Q: np.ndarray, W_K: np.ndarray, rotation: np.ndarray | None = None, *,
                 kv_of_head: np.ndarray | None = None, gain: np.ndarray | None = None,
                 width: int | None = None) -> CoreSpectra:
    """The spectra of the heads of one layer at one offset, from their weights.

    W_Q : (H, n, N); W_K : (H, n, N), or (Hkv, n, N) with ``kv_of_head`` (the key head of each query head);
    rotation : (n, n) R(d) between them (L = W_K^T R W_Q), None for the identity (d = 0); gain : (N,) layer-norm gain
    folded on both sides (W_Q diag(g), W_K diag(g)) or None. The cores come from the profile's own factorisation
    (:func:`pipeline.profile.span_cores`), one head at a time.
    """
    from pipeline.profile import span_cores

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
