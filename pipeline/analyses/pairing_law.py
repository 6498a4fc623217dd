"""The pairing law of a model's heads: the law of the pairing score P, its bound through rho, and the balance.

With lambda_+ and lambda_- the sorted lobes of S (``pipeline.profile.statistics``), P = 1 - ||lambda_+ - lambda_-|| /
||S|| and rho = ||lambda_-|| / ||lambda_+||. At r = min(rho, 1/rho) the reverse triangle inequality gives

    P <= 1 - (1 - r) / sqrt(1 + r^2),

with equality exactly when the sorted lobes are proportional. This module summarises, over the heads of one model:

- a beta law fitted to P on [0, 1] by maximum likelihood (``scipy.stats.beta.fit`` with floc=0, fscale=1) and the
  Kolmogorov-Smirnov p of P against it. The beta density has no finite log-likelihood at P = 0 or 1 when a
  parameter is below one, so heads with P exactly 0 or 1 are left out of the fit and counted;
- the bound at each head's r: its correlation with P (Pearson), the share of heads where it holds (P <= bound +
  1e-12), and the quantiles of the gap bound - P;
- the histogram of rho on [0, ``RHO_MAX``] in equal bins, with the heads above it counted apart;
- the balance count: heads whose S has as many positive eigenvalues as negative ones (n_pos = n_neg), out of all.

Inputs are the stored statistics (``pipeline.schema.STATISTICS``); heads with a NaN are left out of each summary
that needs that value. Results are JSON-able dicts.
"""

from __future__ import annotations

import numpy as np

BOUND_SLACK = 1e-12  # the bound "holds" at P <= bound + BOUND_SLACK
QUANTILES = (0.1, 0.5, 0.9)
RHO_MAX = 2.0
RHO_BINS = 40


def pairing_bound(rho: np.ndarray) -> np.ndarray:
    """1 - (1 - r) / sqrt(1 + r^2) at r = min(rho, 1/rho); 0 at rho = 0 or inf, NaN at NaN."""
    rho = np.asarray(rho, dtype=float)
    with np.errstate(divide="ignore"):
        r = np.minimum(rho, 1.0 / rho)
    return 1.0 - (1.0 - r) / np.sqrt(1.0 + r * r)


def quantiles(values: np.ndarray, qs=QUANTILES) -> dict[str, float | None]:
    """{"q10": ..., "q50": ..., "q90": ...} of the finite values (None each when there are none)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return {f"q{round(100 * q)}": (float(np.quantile(v, q)) if len(v) else None) for q in qs}


def beta_fit(P: np.ndarray) -> dict:
    """The beta law of P on [0, 1] by maximum likelihood and its Kolmogorov-Smirnov p (module docstring).

    Returns ``{"a", "b", "ks_statistic", "ks_p", "heads", "left_out"}``: the heads fitted (finite, 0 < P < 1) and
    those left out; a, b and the KS values are None with fewer than 3 heads to fit, or when they are all equal.
    """
    from scipy import stats

    P = np.asarray(P, dtype=float).ravel()
    finite = P[np.isfinite(P)]
    inside = finite[(finite > 0) & (finite < 1)]
    out = {"a": None, "b": None, "ks_statistic": None, "ks_p": None, "heads": int(len(inside)),
           "left_out": int(len(finite) - len(inside))}
    if len(inside) < 3 or np.ptp(inside) == 0:
        return out
    a, b, _, _ = stats.beta.fit(inside, floc=0, fscale=1)
    ks = stats.kstest(inside, "beta", args=(a, b, 0, 1))
    return out | {"a": float(a), "b": float(b), "ks_statistic": float(ks.statistic), "ks_p": float(ks.pvalue)}


def rho_histogram(rho: np.ndarray, rho_max: float = RHO_MAX, bins: int = RHO_BINS) -> dict:
    """Counts of rho in ``bins`` equal bins of [0, rho_max] (rho_max in the last), and those above (inf included);
    NaN left out."""
    rho = np.asarray(rho, dtype=float).ravel()
    rho = rho[~np.isnan(rho)]
    edges = np.linspace(0.0, rho_max, bins + 1)
    counts, _ = np.histogram(rho[rho <= rho_max], bins=edges)
    return {"edges": edges.tolist(), "counts": counts.tolist(), "above": int(np.sum(rho > rho_max))}


def balance_count(n_pos: np.ndarray, n_neg: np.ndarray) -> dict:
    """Heads with n_pos = n_neg, out of the heads whose counts are finite."""
    n_pos, n_neg = np.asarray(n_pos, dtype=float).ravel(), np.asarray(n_neg, dtype=float).ravel()
    ok = np.isfinite(n_pos) & np.isfinite(n_neg)
    return {"balanced": int(np.sum(n_pos[ok] == n_neg[ok])), "heads": int(ok.sum())}


def bound_summary(P: np.ndarray, rho: np.ndarray) -> dict:
    """The bound at each head's rho against its P: heads compared (both finite), the Pearson correlation (None with
    fewer than 2 heads or a constant side), the share where the bound holds, and the gap's quantiles."""
    P, rho = np.asarray(P, dtype=float).ravel(), np.asarray(rho, dtype=float).ravel()
    bound = pairing_bound(rho)
    ok = np.isfinite(P) & np.isfinite(bound)
    P, bound = P[ok], bound[ok]
    corr = None
    if len(P) >= 2 and np.ptp(P) > 0 and np.ptp(bound) > 0:
        corr = float(np.corrcoef(P, bound)[0, 1])
    return {"heads": int(ok.sum()), "correlation": corr,
            "holds": float(np.mean(P <= bound + BOUND_SLACK)) if len(P) else None,
            "gap": quantiles(bound - P), "bound": quantiles(bound)}


def pairing_law(P: np.ndarray, rho: np.ndarray, n_pos: np.ndarray, n_neg: np.ndarray) -> dict:
    """Every summary of the module docstring for one model's heads (arrays of any shape, one value per head)."""
    return {"P": quantiles(P), "beta": beta_fit(P), "bound": bound_summary(P, rho), "rho": quantiles(rho),
            "rho_histogram": rho_histogram(rho), "balance": balance_count(n_pos, n_neg)}
