"""Three spectra of a head at one offset, from the nonzero top rows of its core: the singular values of T, the
absolute eigenvalues of L and the singular values of L.

With Q an orthonormal basis of the span of [W_K^T | W_Q^T] (k = min(N, 2n) columns) the form is ``L = Q C Q^T``
with the k x k core C (``pipeline.profile``). Q has orthonormal columns, so L, S = sym(L) and T = antisym(L) have the
nonzero spectra of C, sym(C) and antisym(C), and the N x N form is never built:

- the eigenvalues of L are those of C and N - k zeros;
- the singular values of L are those of C and N - k zeros;
- the singular values of T are those of antisym(C) and N - k zeros (they come in equal pairs).

Only the top m = min(n, k) rows of a core are nonzero (``[[A, B], [0, 0]]``, A (m, m), B (m, k - m)), and the
profile route forms only those rows. So the eigenvalues of C are those of A and k - m zeros (an m x m nonsymmetric
eigenproblem: the n x n ``W_Q W_K^T`` in the span's coordinates), its singular values those of ``[A | B]`` and k - m
zeros, and antisym(C) = [[(A - A^T)/2, B/2], [-B^T/2, 0]].

**The route.** A singular value sigma of a matrix M is the square root of an eigenvalue of the symmetric M M^T,
which LAPACK's symmetric solver finds in about half the time of M's SVD (and ``[A | B] [A | B]^T`` is the Gram matrix
the head statistics solve anyway: ``energies``). Squaring costs accuracy only near zero: an eigenvalue of M M^T is
found within about eps ||M||^2, so sigma within about eps ||M||^2 / sigma. So a head takes the squared route when
every squared value is at least ``SQUARED_RCOND`` (1e-8) times the largest (sigma_min >= 1e-4 sigma_max: the error
is then below about 1e-12 with ||L||_F = 1), and the SVD otherwise (rank-deficient heads, T = 0, an odd k, whose
antisymmetric T always has a zero singular value). ``tests/pipeline/analyses/test_spectra.py`` checks both against
numpy's SVD and eigenvalues of the dense N x N form within 1e-10; ``benchmarks/analyses_spectra_cost.py`` times
them against the profile.

:func:`core_spectra` gives each spectrum scaled to ||L||_F = 1, decreasing, k values per head like the stored
``spectrum``, NaN-padded to ``width`` when asked. A zero core (L = 0) gives a row of NaN.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.schema import SPECTRA

SQUARED_RCOND = 1e-8  # a head's singular values come from the squared matrix when all squares are >= this x the largest


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
        """name -> (H, width), in the order of ``pipeline.schema.SPECTRA``."""
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


def singular_values(M: np.ndarray, squares: np.ndarray | None = None) -> np.ndarray:
    """The singular values (B, min(r, c)) of each matrix of M (B, r, c), any order (module docstring: the squared
    route where it is exact, else the SVD). ``squares``: the eigenvalues (B, min(r, c)) of each M M^T (or M^T M)
    when known already (any order); else computed from the smaller of the two products."""
    if squares is None:
        G = M @ np.swapaxes(M, -1, -2) if M.shape[-2] <= M.shape[-1] else np.swapaxes(M, -1, -2) @ M
        squares = np.linalg.eigvalsh(G) if len(M) else np.zeros(G.shape[:-1])
    squares = np.asarray(squares, dtype=np.float64)
    top = squares.max(axis=-1, initial=0.0)
    squared = (top > 0) & (squares.min(axis=-1, initial=np.inf) >= SQUARED_RCOND * top)
    out = np.sqrt(np.maximum(squares, 0.0))
    if not squared.all():
        out[~squared] = np.linalg.svd(M[~squared], compute_uv=False)
    return out


def antisymmetric_part(X: np.ndarray) -> np.ndarray:
    """antisym(C) (B, k, k) of cores given by their top rows X = [A | B] (B, m, k): [[(A - A^T)/2, B/2],
    [-B^T/2, 0]]."""
    n_b, m, k = X.shape
    T = np.zeros((n_b, k, k))
    A = X[:, :, :m]
    T[:, :m, :m] = (A - np.swapaxes(A, -1, -2)) / 2
    T[:, :m, m:] = X[:, :, m:] / 2
    T[:, m:, :m] = -np.swapaxes(T[:, :m, m:], -1, -2)
    return T


def core_spectra(top: np.ndarray, width: int | None = None, energies: np.ndarray | None = None) -> CoreSpectra:
    """The spectra of heads from the nonzero top rows of their cores (module docstring).

    Parameters
    ----------
    top : (m, k) or (H, m, k), m <= k
        The top rows ``[A | B]`` of each head's k x k core C, the rows below being zero (a full core: m = k), in
        any scale: the spectra are those of C / ||C||_F.
    width : int or None
        Pad each spectrum with NaN to this many values (at least k), e.g. the store's ``eigen`` extent.
    energies : (H, m) or None
        The squared singular values of each C / ||C||_F when known (the head statistics' Gram eigenvalues,
        ``pipeline.profile.statistics.singular_energies``), any order: the singular values of L are then their square
        roots where that is exact (:func:`singular_values`).

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
    if energies is not None and np.shape(energies) != (H, m):
        raise ValueError(f"energies must have shape ({H}, {m}); got {np.shape(energies)}")
    norm = np.sqrt(np.einsum("hij,hij->h", X, X))
    alive = norm > 0
    X = X[alive] / norm[alive, None, None]
    values = (singular_values(antisymmetric_part(X)),
              np.abs(np.linalg.eigvals(X[:, :, :m])) if len(X) else np.zeros((0, m)),
              singular_values(X, None if energies is None else np.asarray(energies)[alive]))
    out = []
    for v in values:
        full = np.full((H, k), np.nan)
        full[alive] = _decreasing(v, k)
        full = pad(full, width)
        out.append(full[0] if single else full)
    return CoreSpectra(*out)
