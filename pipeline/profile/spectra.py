"""The profile (a, b, c, d) from a core's spectra, with the exact zeros at the vertices.

:func:`profile_of_top` takes cores in a work array and does the profile's own arithmetic on them (norm, the
antisymmetric part, the symmetric part handed to an eigensolver); :func:`profile_of_spectra` turns a = ||T||^2, the
eigenvalues of sym(C) / ||C|| and the norms into profiles, with every threshold applied. :func:`profile_of_cores`
profiles whole cores or dense forms (the test oracle's route, ``naive_profiles``, and the orbit experiment's).
"""

from __future__ import annotations

import numpy as np

from .eigen import eigen_route, eigvalsh_fn

DEFAULT_RTOL = 1e-10
CHUNK_BYTES = 24_000_000  # per float64 work array of profile_of_cores, and of the torch routes on the CPU
SPECTRA_BLOCK_BYTES = 1 << 16  # per temporary of profile_of_spectra: under glibc's 128 KiB mmap threshold


def thresholds(rtol: float, route: str, tol: float | None) -> float:
    """The threshold below which a quantity counts as exactly zero on ``route``: ``rtol``, or max(rtol, tol) for
    float32 eigenvalues (which need an explicit ``tol``)."""
    if route == "torch-float32":
        if tol is None:
            raise ValueError("eigvalsh='torch-float32' needs an explicit tol (e.g. tol=1e-5): its eigenvalues carry "
                             "float32 rounding, so thresholds become max(rtol, tol) and the coordinates agree with "
                             "the float64 route only to within tol")
        if not 1e-6 <= tol < 1:
            raise ValueError(f"tol for float32 eigenvalues must be in [1e-6, 1) (float32 rounding); got {tol}")
        return max(rtol, tol)
    return rtol


def profile_of_top(S: np.ndarray, m: int, rtol: float, eig,
                   scratch: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Profiles of cores ``C = [[A, B], [0, 0]]`` held in the work array ``S`` (batch, k, k), in place.

    On entry ``S[:, :m, :] = [A | B]`` (A (m, m), B (m, k - m)) and ``S[:, m:, :]`` is zero. On exit the
    upper triangle of ``S`` is that of sym(C) / ||C|| (its lower-left block is left as zeros; the eigen
    step reads the upper triangle only). ``eig`` maps (batch, k, k) to (batch, k) ascending eigenvalues, reading
    the upper triangle; ``scratch`` is (>= batch, m, m). Returns profile (batch, 4), norm (batch,) and the
    eigenvalues of S (batch, k), ascending, |lambda| <= rtol set to 0 (NaN where L = 0).
    """
    nb = S.shape[0]
    top = S[:, :m, :]
    norm = np.sqrt(np.einsum("bij,bij->b", top, top))
    alive = norm > 0
    top *= (0.5 / np.where(alive, norm, 1.0))[:, None, None]  # A' = A / (2 ||C||), B' = B / (2 ||C||)
    A, B = S[:, :m, :m], S[:, :m, m:]
    D = np.subtract(A, np.swapaxes(A, -1, -2), out=scratch[:nb])  # the top-left block of T = antisym(C)
    # ||T||^2 = ||(A - A^T) / 2||^2 + 2 ||B / 2||^2
    t = np.sqrt(np.einsum("bij,bij->b", D, D) + 2.0 * np.einsum("bij,bij->b", B, B))
    a = np.where(t <= rtol, 0.0, t * t)
    A *= 2.0
    A -= D  # (A + A^T) / 2 = 2 A' - (A' - A'^T); with B' above it, the upper triangle of sym(C)

    return profile_of_spectra(a, eig(S), norm, rtol)


def profile_of_spectra(a: np.ndarray, lam: np.ndarray, norm: np.ndarray,
                       rtol: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Profiles (batch, 4), norms and thresholded eigenvalues from a = ||T||^2 (already thresholded), the
    eigenvalues ``lam`` (batch, k) of sym(C) / ||C|| and the norms ||C|| (0 where L = 0).

    Worked in blocks of rows whose temporaries stay under SPECTRA_BLOCK_BYTES: every step is row by row, so the
    values are those of one pass, and ``malloc`` serves the temporaries from its heap (see
    ``pipeline.profile.span.span_work``: a rotary head's (129, k) temporaries were each faulted in afresh on a dask
    worker)."""
    rows = max(1, SPECTRA_BLOCK_BYTES // (8 * max(1, lam.shape[-1])))
    if lam.ndim != 2 or len(lam) <= rows:
        return _profile_of_spectra_block(a, lam, norm, rtol)
    parts = [_profile_of_spectra_block(a[i:i + rows], lam[i:i + rows], norm[i:i + rows], rtol)
             for i in range(0, len(lam), rows)]
    prof, _, lam_out = (np.concatenate(x) for x in zip(*parts, strict=True))
    return prof, norm, lam_out


def _profile_of_spectra_block(a: np.ndarray, lam: np.ndarray, norm: np.ndarray,
                              rtol: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    alive = norm > 0
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
    return prof, norm, np.where(alive[..., None], lam, np.nan)


def profile_of_cores(C: np.ndarray, rtol: float = DEFAULT_RTOL, *, eigvalsh: str = "numpy",
                     tol: float | None = None, device: str | None = None,
                     chunk_bytes: int = CHUNK_BYTES) -> tuple[np.ndarray, np.ndarray]:
    """Profiles of a batch of bilinear forms given by their cores (or by the dense matrices themselves).

    Parameters
    ----------
    C : (..., k, k) array
        Cores (see ``pipeline.profile``); a dense N x N form L is its own core. Not modified.
    rtol : float
        Relative threshold below which the antisymmetric part, eigenvalues of the symmetric part and
        differences lambda_+ - lambda_- count as exactly zero (relative to ||L||_F).
    eigvalsh, tol, device :
        Eigen route (``pipeline.profile.eigen``); "numpy" by default here.
    chunk_bytes : int
        Forms are processed in groups of about this many bytes of float64 work array.

    Returns
    -------
    profile : (..., 4) float64, coordinates (a, b, c, d) summing to 1; NaN where L = 0
    norm : (...) float64, ||L||_F before scaling
    """
    C = np.asarray(C)
    if C.ndim < 2 or C.shape[-1] != C.shape[-2]:
        raise ValueError(f"cores must have shape (..., k, k); got {C.shape}")
    route, device = eigen_route(eigvalsh, device)
    rtol = thresholds(rtol, route, tol)
    eig = eigvalsh_fn(route, device)
    batch, k = C.shape[:-2], C.shape[-1]
    flat = C.reshape((-1, k, k))
    count = flat.shape[0]
    step = max(1, min(count, chunk_bytes // max(1, k * k * 8)))
    S, scratch = np.empty((step, k, k)), np.empty((step, k, k))
    profs, norms = np.empty((count, 4)), np.empty(count)
    for start in range(0, count, step):
        part = flat[start:start + step]
        if not np.all(np.isfinite(part)):
            raise ValueError("the bilinear form has NaN or Inf entries; check the weights it was built from")
        work = S[:len(part)]
        work[...] = part  # a float64 copy: worked on in place
        profs[start:start + step], norms[start:start + step], _ = profile_of_top(work, k, rtol, eig, scratch)
    return profs.reshape(batch + (4,)), norms.reshape(batch)


def naive_profiles(L: np.ndarray, rtol: float = DEFAULT_RTOL) -> tuple[np.ndarray, np.ndarray]:
    """Test oracle and benchmark baseline: the profile from the dense N x N form(s) L (..., N, N)."""
    return profile_of_cores(L, rtol)
