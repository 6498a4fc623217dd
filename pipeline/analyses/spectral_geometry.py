"""How the antisymmetric spectrum of a head follows its symmetric one, and how many directions its form uses.

**sigma(T) against sqrt(lambda_+ lambda_-).** The singular values of T come in equal pairs; one of each pair,
decreasing, is sigma_1 >= sigma_2 >= ... (``distinct_sigma``). The lobes lambda_+ and lambda_- of S, each decreasing
and zero-padded, give the geometric means g_i = sqrt(lambda_+,i lambda_-,i) (``geometric_means``), paired with
sigma_i index by index. For a rank-one form the two lists coincide exactly. Per head:

- ``geometric_error`` = ||sigma - g|| / ||sigma|| (NaN where T = 0);
- ``sigma_lambda_correlation``: the Pearson correlation of the full decreasing lists sigma(T) (k values, pairs
  kept) and |lambda(S)| (k values), NaN where either is constant.

**Effective rank.** With h_i the singular values of L the stored ``participation_ratio`` (sum h^2)^2 / sum h^4 is 1
exactly for a rank-one form and n for a flat spectrum; :func:`effective_rank_counts` counts the heads below 2 and
below 5, and those whose ``stable_rank`` is below 2 (leading share above one half).

Plain numpy over NaN-padded (H, k) arrays (heads with NaN spectra give NaN); results of the summaries are JSON-able.
"""

from __future__ import annotations

import numpy as np

PR_CUTS = (2.0, 5.0)


def _rows(values: np.ndarray) -> np.ndarray:
    """(H, E) NaN-padded -> (H, E) decreasing, NaN turned to 0 (the padding past k is zeros after this)."""
    v = np.atleast_2d(np.asarray(values, dtype=float))
    return -np.sort(-np.nan_to_num(v, nan=0.0), axis=-1)


def distinct_sigma(antisym_spectrum: np.ndarray) -> np.ndarray:
    """One singular value of T from each equal pair: every second of the decreasing list, (H, ceil(E / 2))."""
    return _rows(antisym_spectrum)[:, ::2]


def geometric_means(spectrum: np.ndarray, width: int | None = None) -> np.ndarray:
    """sqrt(lambda_+,i lambda_-,i) of the decreasing zero-padded lobes of S, (H, width) (default: E // 2)."""
    lam = np.atleast_2d(np.asarray(spectrum, dtype=float))
    lam = np.nan_to_num(lam, nan=0.0)
    pos = -np.sort(-np.maximum(lam, 0.0), axis=-1)
    neg = -np.sort(-np.maximum(-lam, 0.0), axis=-1)
    width = lam.shape[-1] // 2 if width is None else width
    return np.sqrt(pos[:, :width] * neg[:, :width])


def _pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Row-wise Pearson correlation; NaN where a row is constant."""
    x = x - x.mean(axis=-1, keepdims=True)
    y = y - y.mean(axis=-1, keepdims=True)
    den = np.sqrt(np.sum(x * x, axis=-1) * np.sum(y * y, axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, np.sum(x * y, axis=-1) / np.where(den > 0, den, 1.0), np.nan)


def paired_spectra(spectrum: np.ndarray, antisym_spectrum: np.ndarray) -> dict[str, np.ndarray]:
    """Per head (module docstring): ``sigma`` (H, j) and ``geometric`` (H, j), j = ceil(k / 2), ``geometric_error``
    (H,) and ``sigma_lambda_correlation`` (H,). Heads whose spectra hold a NaN inside their first k values are NaN.

    spectrum : (H, E) eigenvalues of S; antisym_spectrum : (H, E) singular values of T; both NaN past k.
    """
    lam = np.atleast_2d(np.asarray(spectrum, dtype=float))
    sig = np.atleast_2d(np.asarray(antisym_spectrum, dtype=float))
    if lam.shape != sig.shape:
        raise ValueError(f"spectrum and antisym_spectrum must have one shape; got {lam.shape} and {sig.shape}")
    k = np.sum(np.isfinite(lam), axis=-1)
    dead = (k == 0) | (np.sum(np.isfinite(sig), axis=-1) != k)
    kmax = int(k.max(initial=0))
    sigma = distinct_sigma(sig[:, :kmax])
    geometric = geometric_means(lam[:, :kmax], sigma.shape[-1])
    norm = np.linalg.norm(sigma, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        error = np.where(norm > 0, np.linalg.norm(sigma - geometric, axis=-1) / np.where(norm > 0, norm, 1.0), np.nan)
    corr = _pearson(_rows(sig[:, :kmax]), _rows(np.abs(lam[:, :kmax])))
    error[dead], corr[dead] = np.nan, np.nan
    sigma[dead], geometric[dead] = np.nan, np.nan
    return {"sigma": sigma, "geometric": geometric, "geometric_error": error, "sigma_lambda_correlation": corr}


def _quantiles(v: np.ndarray) -> dict[str, float | None]:
    v = np.asarray(v, dtype=float)
    v = v[np.isfinite(v)]
    return {f"q{q}": (float(np.quantile(v, q / 100)) if len(v) else None) for q in (10, 50, 90)}


def spectral_geometry(spectrum: np.ndarray, antisym_spectrum: np.ndarray) -> dict:
    """The model's summary of :func:`paired_spectra`: heads, and the quantiles of the geometric-mean error and of
    the correlation."""
    paired = paired_spectra(spectrum, antisym_spectrum)
    return {"heads": int(np.isfinite(paired["geometric_error"]).sum()),
            "geometric_error": _quantiles(paired["geometric_error"]),
            "sigma_lambda_correlation": _quantiles(paired["sigma_lambda_correlation"])}


def effective_rank_counts(participation_ratio: np.ndarray, stable_rank: np.ndarray) -> dict:
    """Heads with participation ratio below 2 and below 5 and with stable rank below 2, out of the heads where
    both are finite, with the quantiles of each."""
    pr = np.asarray(participation_ratio, dtype=float).ravel()
    sr = np.asarray(stable_rank, dtype=float).ravel()
    ok = np.isfinite(pr) & np.isfinite(sr)
    pr, sr = pr[ok], sr[ok]
    return {"heads": int(ok.sum()),
            "participation_below": {f"{cut:g}": int(np.sum(pr < cut)) for cut in PR_CUTS},
            "stable_rank_below_2": int(np.sum(sr < 2.0)),
            "participation_ratio": _quantiles(pr), "stable_rank": _quantiles(sr)}
