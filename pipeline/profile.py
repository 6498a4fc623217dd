"""The profile (a, b, c, d) of a bilinear form on the 3-simplex: low-rank, batched, exact at the vertices.

For a head with query and key weights ``W_Q, W_K`` of shape (n, N) (torch Linear layout, ``q = W_Q x``),
the bilinear form is ``L = W_K^T W_Q`` (N x N) and the attention score between query x_i and key x_j
is ``x_j^T L x_i`` (times the softmax scale). With rotary embeddings ``L(d) = W_K^T R(d) W_Q`` where
``d = i - j`` is query position minus key position.

Scale ``L`` to unit Frobenius norm, split ``L = S + T`` (symmetric + antisymmetric), and let lambda_+,
lambda_- be the positive eigenvalues of S and the absolute values of its negative ones, both sorted in
decreasing order and zero-padded to a common length. Then::

    a = ||T||^2,  b = 2 <lambda_+, lambda_->,  c = ||(lambda_+ - lambda_-)_+||^2,  d = ||(lambda_+ - lambda_-)_-||^2

The N x N matrix is never formed. The columns of W_K^T and W_Q^T span a subspace of dimension
k <= 2n that holds all of L's action: with a QR factorisation ``[W_K^T | W_Q^T] = Q [K | P]`` we have
``L(d) = Q C(d) Q^T`` with the k x k *core* ``C(d) = K R(d) P^T``. Q has orthonormal columns, so C has
the same Frobenius norm as L, sym(C) has the nonzero spectrum of S, and ||antisym(C)|| = ||T||.
One factorisation per head serves every offset d.

Exactness at the vertices: quantities below ``rtol`` relative to ||L|| (the antisymmetric part,
eigenvalues, and the differences lambda_+ - lambda_-) are set to exactly zero, and the four
coordinates are normalised by their own sum, so an antisymmetric, positive/negative semidefinite or
"H" form gives exactly 1 in its coordinate and exactly 0 in the others. ``L = 0`` has no profile:
NaN coordinates and norm 0, with no warning.

No I/O here; numpy only (float64).
"""

from __future__ import annotations

import numpy as np

COORDINATES = ("a", "b", "c", "d")
DEFAULT_RTOL = 1e-10


def span_cores(W_Q: np.ndarray, W_K: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Factor the span of the key and query directions once per head.

    Parameters
    ----------
    W_Q, W_K : (..., n, N) arrays
        Query and key weights of each head (for grouped-query attention pass the key head that the
        query head uses).

    Returns
    -------
    K, P : (..., k, n) arrays, k = min(N, 2n)
        Coordinates of the columns of W_K^T and W_Q^T in an orthonormal basis Q of their span,
        so that ``W_K^T = Q K`` and ``W_Q^T = Q P``; the core of ``L(d)`` is ``K R(d) P^T``.
    """
    W_Q = np.asarray(W_Q, dtype=np.float64)
    W_K = np.asarray(W_K, dtype=np.float64)
    if W_Q.shape != W_K.shape or W_Q.ndim < 2:
        raise ValueError(f"W_Q and W_K must both have shape (..., n, N); got {W_Q.shape} and {W_K.shape}")
    n = W_Q.shape[-2]
    A = np.concatenate([np.swapaxes(W_K, -1, -2), np.swapaxes(W_Q, -1, -2)], axis=-1)  # (..., N, 2n)
    # Householder QR on the tall (N, 2n) matrix: orthonormal Q even when the span is rank deficient,
    # and no squared conditioning (unlike a Cholesky of the Gram matrix).
    R = np.linalg.qr(A, mode="r")  # (..., k, 2n)
    return R[..., :n], R[..., n:]


def cores(K: np.ndarray, P: np.ndarray, rotations: np.ndarray | None = None) -> np.ndarray:
    """The k x k cores ``C = K R P^T``.

    K, P : (..., k, n); rotations : (D, n, n) or None (identity).
    Returns (..., k, k) without rotations, (..., D, k, k) with them.
    """
    if rotations is None:
        return K @ np.swapaxes(P, -1, -2)
    KR = np.einsum("...kn,dnm->...dkm", K, rotations)
    return KR @ np.swapaxes(P, -1, -2)[..., None, :, :]


def profile_of_cores(C: np.ndarray, rtol: float = DEFAULT_RTOL) -> tuple[np.ndarray, np.ndarray]:
    """Profiles of a batch of bilinear forms given by their cores (or by the dense matrices themselves).

    Parameters
    ----------
    C : (..., k, k) array
        Cores (see module docstring); a dense N x N form L is its own core.
    rtol : float
        Relative threshold below which the antisymmetric part, eigenvalues of the symmetric part and
        differences lambda_+ - lambda_- count as exactly zero (relative to ||L||_F).

    Returns
    -------
    profile : (..., 4) float64, coordinates (a, b, c, d) summing to 1; NaN where L = 0
    norm : (...) float64, ||L||_F before scaling
    """
    C = np.asarray(C, dtype=np.float64)
    if C.ndim < 2 or C.shape[-1] != C.shape[-2]:
        raise ValueError(f"cores must have shape (..., k, k); got {C.shape}")
    if not np.all(np.isfinite(C)):
        raise ValueError("the bilinear form has NaN or Inf entries; check the weights it was built from")
    norm = np.sqrt(np.sum(C * C, axis=(-1, -2)))
    alive = norm > 0
    scale = np.where(alive, norm, 1.0)[..., None, None]
    Cs = C / scale
    Ct = np.swapaxes(Cs, -1, -2)
    S = 0.5 * (Cs + Ct)
    T = 0.5 * (Cs - Ct)

    t = np.sqrt(np.sum(T * T, axis=(-1, -2)))
    a = np.where(t <= rtol, 0.0, t * t)

    lam = np.linalg.eigvalsh(S)
    lam = np.where(np.abs(lam) <= rtol, 0.0, lam)
    pos = -np.sort(-np.maximum(lam, 0.0), axis=-1)  # decreasing
    neg = -np.sort(-np.maximum(-lam, 0.0), axis=-1)
    diff = pos - neg
    diff = np.where(np.abs(diff) <= rtol, 0.0, diff)
    b = 2.0 * np.sum(pos * neg, axis=-1)
    c = np.sum(np.maximum(diff, 0.0) ** 2, axis=-1)
    d = np.sum(np.maximum(-diff, 0.0) ** 2, axis=-1)

    prof = np.stack([a, b, c, d], axis=-1)
    total = prof.sum(axis=-1, keepdims=True)
    prof = prof / np.where(alive[..., None], total, 1.0)
    prof = np.where(alive[..., None], prof, np.nan)
    return prof, norm


def head_profiles(
    W_Q: np.ndarray,
    W_K: np.ndarray,
    rotations: np.ndarray | None = None,
    rtol: float = DEFAULT_RTOL,
    heads_per_batch: int = 4,
) -> tuple[np.ndarray, np.ndarray]:
    """Profiles of the heads of one layer, through the low-rank route.

    Parameters
    ----------
    W_Q, W_K : (H, n, N)
        Per query head (grouped-query models pass each query head's key head).
    rotations : (D, n, n) or None
        R(d) for the offsets d = 0..D-1 (see ``pipeline.rotary``); None for position-independent forms.
    heads_per_batch : int
        Heads processed together when rotations are given (bounds memory at
        heads_per_batch * D * k * k floats).

    Returns
    -------
    profile : (H, 4) or (H, D, 4);  norm : (H,) or (H, D)
    """
    K, P = span_cores(W_Q, W_K)
    if rotations is None:
        return profile_of_cores(cores(K, P), rtol)
    H = K.shape[0]
    profs, norms = [], []
    for start in range(0, H, heads_per_batch):
        sl = slice(start, start + heads_per_batch)
        p, nrm = profile_of_cores(cores(K[sl], P[sl], rotations), rtol)
        profs.append(p)
        norms.append(nrm)
    return np.concatenate(profs), np.concatenate(norms)


def naive_profiles(L: np.ndarray, rtol: float = DEFAULT_RTOL) -> tuple[np.ndarray, np.ndarray]:
    """Test oracle and benchmark baseline: the profile from the dense N x N form(s) L (..., N, N)."""
    return profile_of_cores(L, rtol)
