"""Per-head statistics at d = 0 beyond the profile: the spectrum of S and the numbers read off it and off L.

The names, their order and their definitions are ``pipeline.schema.STATISTICS`` and the schema's
``head_statistics`` attribute. Everything here works from the reduced problem ``pipeline.profile`` builds,
never from the N x N form: with ``L = Q C Q^T`` (Q orthonormal columns, C the k x k core, k = min(N, 2n))

- the eigenvalues of sym(C) / ||C|| are those of S on the span of W_K^T and W_Q^T (``lam``);
- the nonzero singular values of L are those of C, whose only nonzero rows are its top m (``[A | B]``),
  so their squares are the eigenvalues of the m x m Gram matrix ``[A | B] [A | B]^T`` (``h2``);
- tr L = tr C = tr A.

:func:`pipeline.profile.head_profiles` (``at_zero=True``) gathers these per head (``pipeline.profile.at_zero``),
and its result computes :func:`head_statistics` and :func:`spectrum` from them. Plain numpy functions, vectorised
over heads; no I/O.
"""

from __future__ import annotations

import numpy as np

ZERO_EIGENVALUE = 1e-9  # |lambda| <= ZERO_EIGENVALUE * max |lambda| counts as zero in n_pos / n_neg / n_zero


def lobes(lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """lambda_+ and lambda_- of eigenvalues ``lam`` (..., k): positive parts and absolute negative parts, each
    decreasing and zero-padded to k."""
    pos = -np.sort(-np.maximum(lam, 0.0), axis=-1)
    neg = -np.sort(-np.maximum(-lam, 0.0), axis=-1)
    return pos, neg


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, NaN where den is 0 (or NaN)."""
    ok = den > 0
    return np.where(ok, num / np.where(ok, den, 1.0), np.nan)


def head_statistics(lam: np.ndarray, h2: np.ndarray, trace: np.ndarray, profile: np.ndarray) -> np.ndarray:
    """The statistics (H, 17) of H heads, in the order of ``pipeline.schema.STATISTICS``.

    Parameters
    ----------
    lam : (H, k)
        Eigenvalues of S with ||L||_F = 1 (any order; the profile's exact zeros kept); a row of NaN for L = 0.
    h2 : (H, m)
        Squared singular values of L with ||L||_F = 1 (any order, zeros allowed).
    trace : (H,)
        tr L / ||L||_F.
    profile : (H, 4)
        The head's (a, b, c, d) at the same offset.
    """
    lam, h2 = np.asarray(lam, np.float64), np.asarray(h2, np.float64)
    trace, profile = np.asarray(trace, np.float64), np.asarray(profile, np.float64)
    alive = np.all(np.isfinite(lam), axis=-1)
    lam = np.where(alive[:, None], lam, 0.0)
    k = lam.shape[-1]

    energy = np.sum(lam * lam, axis=-1)  # ||S||^2
    cut = ZERO_EIGENVALUE * np.max(np.abs(lam), axis=-1, initial=0.0)
    n_pos = np.sum(lam > cut[:, None], axis=-1).astype(np.float64)
    n_neg = np.sum(lam < -cut[:, None], axis=-1).astype(np.float64)
    n_zero = k - n_pos - n_neg
    balance = 1.0 - _ratio(np.abs(n_pos - n_neg), n_pos + n_neg)

    pos, neg = lobes(lam)
    norm_pos, norm_neg = np.linalg.norm(pos, axis=-1), np.linalg.norm(neg, axis=-1)
    pairing = 1.0 - _ratio(np.linalg.norm(pos - neg, axis=-1), np.sqrt(energy))
    rho = _ratio(norm_neg, norm_pos)
    bound = 1.0 - np.abs(1.0 - rho) / np.sqrt(1.0 + rho * rho)
    lobe = _ratio(np.linalg.norm(neg - rho[:, None] * pos, axis=-1), norm_neg)  # NaN with rho

    sym = profile[:, 1:]
    sym = sym / np.where(sym.sum(axis=-1) > 0, sym.sum(axis=-1), np.nan)[:, None]

    total = np.sum(h2, axis=-1)
    top = np.max(h2, axis=-1, initial=0.0)
    participation = _ratio(total * total, np.sum(h2 * h2, axis=-1))
    stable_rank = _ratio(total, top)
    leading = _ratio(top, total)

    out = np.stack([energy, n_pos, n_neg, n_zero, balance, pairing, rho, bound, bound - pairing, lobe,
                    sym[:, 0], sym[:, 1], sym[:, 2], np.abs(trace), participation, stable_rank, leading], axis=-1)
    out[~alive] = np.nan
    return out


def spectrum(lam: np.ndarray) -> np.ndarray:
    """Eigenvalues (H, k) sorted decreasing (NaN rows stay NaN)."""
    return -np.sort(-np.asarray(lam, np.float64), axis=-1)


def singular_energies(gram_eigenvalues: np.ndarray, trace: np.ndarray,
                      norm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Squared singular values (H, m) of L / ||L|| and tr L / ||L|| (H,), from the eigenvalues (H, m) of the unscaled
    cores' Gram matrices ``[A | B] [A | B]^T`` (``Kernels.gram_eigenvalues``), traces tr A (H,) and norms ||C||_F
    (H,); zeros where the norm is 0."""
    scale = np.where(norm > 0, norm, 1.0)
    return np.maximum(gram_eigenvalues, 0.0) / (scale * scale)[:, None], trace / scale
