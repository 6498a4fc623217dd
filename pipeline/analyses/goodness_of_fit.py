"""Which law fits a head's spectrum: the generalised gamma against the lognormal, by maximum likelihood, with AIC and
the Kolmogorov-Smirnov distance, on four positive samples per head.

The samples of a head (:func:`samples`), each its values above ``ZERO_EIGENVALUE`` x its largest:

- ``eig_L``: the absolute eigenvalues of L (n of them for a head of full rank n);
- ``lambda_plus`` and ``lambda_minus``: the positive eigenvalues of S and the absolute values of its negative ones;
- ``sigma_T``: one singular value of T from each equal pair (every second of the decreasing list).

Both laws have their location held at 0 (as ``scipy.stats`` ``fit(..., floc=0)``). The lognormal's likelihood has its
maximum in closed form (the mean and the standard deviation, ddof 0, of log x). The generalised gamma
(``scipy.stats.gengamma``: density |c| x^(ca-1) exp(-(x/s)^c) / (s^(ca) Gamma(a))) is fitted by its profile likelihood:
for a fixed c, y = x^c is gamma distributed with shape a and scale s^c, whose likelihood is maximal at the a solving log
a - digamma(a) = log mean(y) - mean(log y) (Newton's method), so the log-likelihood is a function of c alone; that is
searched on a grid of |c| from 0.01 to 10^4 of both signs and refined by golden section around the best grid point. A
spectrum with a sharp upper edge has its supremum in the limit c -> inf, a -> 0 (a power law x^(ac - 1) on [0, s]); its
fit stops at the grid's end, and ``c_limit`` counts those heads. All heads are fitted at once (NaN-padded samples,
vectorised over heads, every grid point of every head in one pass) rather than one ``scipy.stats.gengamma.fit`` per
head; the tests check the fits against scipy's.
AIC = 2 p - 2 log-likelihood with p = 3 (a, c, s) and 2 (sigma, s). The KS distances are descriptive: the eigenvalues of
a head are not independent and the parameters come from the same values.
"""

from __future__ import annotations

import numpy as np

ZERO_EIGENVALUE = 1e-9  # as pipeline.profile.statistics: values at or below this x the largest are zeros
COMPONENTS = ("eig_L", "lambda_plus", "lambda_minus", "sigma_T")
MIN_SAMPLE = 3
C_GRID = np.logspace(-2, 4, 73)
GOLDEN_STEPS = 40
NEWTON_STEPS = 8
TRIGAMMA_SHIFT = 8


def _positive(values: np.ndarray) -> np.ndarray:
    """(H, k) -> (H, k): the values above ZERO_EIGENVALUE x each row's largest, decreasing, NaN after them."""
    v = np.where(np.isfinite(values), values, 0.0)
    top = np.max(v, axis=-1, initial=0.0)
    v = np.where(v > ZERO_EIGENVALUE * top[:, None], v, np.nan)
    return -np.sort(-v, axis=-1)  # NaN sorts last


def samples(spectrum: np.ndarray, eig_abs: np.ndarray | None = None,
            antisym_spectrum: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The four samples (module docstring) of H heads, each (H, k) NaN-padded, from the stored ``spectrum``
    (eigenvalues of S) and, when given, ``eig_abs`` and ``antisym_spectrum``; a component whose spectrum is not
    given is left out."""
    lam = np.atleast_2d(np.asarray(spectrum, dtype=float))
    scale = np.max(np.abs(np.where(np.isfinite(lam), lam, 0.0)), axis=-1, initial=0.0)[:, None]
    out = {"lambda_plus": _positive(np.where(lam > ZERO_EIGENVALUE * scale, lam, 0.0)),
           "lambda_minus": _positive(np.where(-lam > ZERO_EIGENVALUE * scale, -lam, 0.0))}
    if eig_abs is not None:
        out["eig_L"] = _positive(np.atleast_2d(np.asarray(eig_abs, dtype=float)))
    if antisym_spectrum is not None:
        sigma = -np.sort(-np.nan_to_num(np.atleast_2d(np.asarray(antisym_spectrum, dtype=float)), nan=0.0), axis=-1)
        out["sigma_T"] = _positive(sigma[:, ::2])
    return {name: out[name] for name in COMPONENTS if name in out}


def _usable(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mask of values, count per head, heads with at least MIN_SAMPLE values that are not all equal)."""
    mask = np.isfinite(x) & (x > 0)
    n = mask.sum(axis=-1)
    lo = np.min(np.where(mask, x, np.inf), axis=-1)
    hi = np.max(np.where(mask, x, -np.inf), axis=-1)
    return mask, n, (n >= MIN_SAMPLE) & (hi > lo)


def _ks(cdf: np.ndarray, mask: np.ndarray, n: np.ndarray) -> np.ndarray:
    """KS distance per head from the law's cdf at the head's values (ascending, NaN after them)."""
    i = np.arange(1, cdf.shape[-1] + 1)[None, :]
    nn = np.maximum(n, 1)[:, None]
    d = np.maximum(i / nn - cdf, cdf - (i - 1) / nn)
    return np.max(np.where(mask, d, -np.inf), axis=-1)


def lognormal_fit(x: np.ndarray) -> dict[str, np.ndarray]:
    """The lognormal with location 0 by maximum likelihood, per head of x (H, k) NaN-padded: ``sigma`` and ``scale``
    (scipy's s and scale), ``loglik``, ``aic``, ``ks`` and the sample size ``n``; NaN for heads without a sample."""
    from scipy import special

    x = np.sort(np.atleast_2d(np.asarray(x, dtype=float)), axis=-1)
    mask, n, ok = _usable(x)
    lx = np.log(np.where(mask, x, 1.0))
    nn = np.maximum(n, 1)
    mu = np.sum(np.where(mask, lx, 0.0), axis=-1) / nn
    sigma = np.sqrt(np.sum(np.where(mask, (lx - mu[:, None]) ** 2, 0.0), axis=-1) / nn)
    sig = np.where(ok, sigma, 1.0)
    loglik = -np.sum(np.where(mask, lx, 0.0), axis=-1) - n * (np.log(sig) + 0.5 * np.log(2 * np.pi) + 0.5)
    ks = _ks(special.ndtr((lx - mu[:, None]) / sig[:, None]), mask, n)
    bad = lambda v: np.where(ok, v, np.nan)  # noqa: E731
    return {"sigma": bad(sigma), "scale": bad(np.exp(mu)), "loglik": bad(loglik), "aic": bad(4.0 - 2.0 * loglik),
            "ks": bad(ks), "n": n}


def _stirling_gap(a: np.ndarray) -> np.ndarray:
    """a log a - a - lgamma(a), without the cancellation of its terms at large a."""
    from scipy import special

    big = a > 10.0
    ab = np.where(big, a, 10.0)
    series = 0.5 * np.log(ab) - 0.5 * np.log(2 * np.pi) - (1 / (12 * ab) - 1 / (360 * ab ** 3) + 1 / (1260 * ab ** 5))
    small = np.where(big, 1.0, a)
    return np.where(big, series, small * np.log(small) - small - special.gammaln(small))


def _trigamma(a: np.ndarray) -> np.ndarray:
    """psi'(a) = ``scipy.special.polygamma(1, a)`` for a > 0 without scipy's Hurwitz zeta, the Newton steps' main
    cost: the recurrence
    psi'(a) = psi'(a + 1) + 1 / a^2 up to a >= TRIGAMMA_SHIFT (or that many steps), then the asymptotic series
    1/x + 1/(2 x^2) + sum B_2k / x^(2k+1) to the x^-15 term (relative error below 1e-12 there)."""
    x, shift = np.asarray(a, dtype=float), 0.0
    for _ in range(TRIGAMMA_SHIFT):
        small = x < TRIGAMMA_SHIFT
        shift = shift + np.where(small, 1.0 / (x * x), 0.0)
        x = np.where(small, x + 1.0, x)
    ix = 1.0 / x
    ix2 = ix * ix
    tail = ix2 * (1 / 30 - ix2 * (1 / 42 - ix2 * (1 / 30 - ix2 * (5 / 66 - ix2 * (691 / 2730 - ix2 * 7 / 6)))))
    return shift + ix + ix2 / 2 + ix * ix2 * (1 / 6 - tail)


def _gamma_shape(t: np.ndarray) -> np.ndarray:
    """The a > 0 solving log a - digamma(a) = t (t > 0), by Newton's method from Minka's approximation."""
    from scipy import special

    t = np.maximum(t, 1e-300)
    a = (3.0 - t + np.sqrt((t - 3.0) ** 2 + 24.0 * t)) / (12.0 * t)
    for _ in range(NEWTON_STEPS):
        f = np.log(a) - special.digamma(a) - t
        step = f / (1.0 / a - _trigamma(a))
        a = np.maximum(a - step, a / 10.0)
    return a


class _Logs:
    """The centred logs lx (H, k) of H heads (``mask`` the values, ``n`` their count), kept as the two arrays that
    give log mean(x^c) = log mean(exp(c lx)) with one pass over the values and no overflow: ``below`` = lx - max
    (at most 0; padding -inf) for c > 0, ``above`` = lx - min (at least 0; padding +inf) for c < 0: exp(c times
    the array of c's sign) is at most 1 on the values and 0 on the padding."""

    def __init__(self, lx: np.ndarray, mask: np.ndarray, n: np.ndarray):
        self.hi = np.max(np.where(mask, lx, -np.inf), axis=-1)
        self.lo = np.min(np.where(mask, lx, np.inf), axis=-1)
        self.below = np.where(mask, lx - self.hi[:, None], -np.inf)
        self.above = np.where(mask, lx - self.lo[:, None], np.inf)
        self.log_n = np.log(np.maximum(n, 1))

    def log_mean_power(self, c: np.ndarray) -> np.ndarray:
        """log mean(y), y = x^c, per head at its own c (H,), c != 0."""
        up = c > 0
        spread = np.where(up[:, None], self.below, self.above)
        total = np.sum(np.exp(c[:, None] * spread), axis=-1)
        return np.where(up, self.hi, self.lo) * c + np.log(total) - self.log_n

    def log_mean_powers(self, c: np.ndarray) -> np.ndarray:
        """log mean(y), y = x^c, of every head at every c of one sign (J,): (J, H), in blocks of about a million
        values."""
        spread, edge = (self.below, self.hi) if c[0] > 0 else (self.above, self.lo)
        step = max(1, 1_000_000 // max(spread.size, 1))
        total = np.concatenate([np.sum(np.exp(np.multiply.outer(c[i:i + step], spread)), axis=-1)
                                for i in range(0, len(c), step)])
        return c[:, None] * edge[None, :] + np.log(total) - self.log_n


def _profile(c: np.ndarray, t: np.ndarray):
    """The log-likelihood / n of the best (a, s) at power c with t = log mean(x^c) (centred logs, so mean(log y)
    = 0), elementwise, and that a."""
    a = _gamma_shape(t)
    return np.log(np.abs(c)) - a * t + _stirling_gap(a), a


def _golden(f, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The maximiser of f (vectorised over heads) on [lo, hi] per head, by golden-section search."""
    g = (np.sqrt(5.0) - 1.0) / 2.0
    x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
    f1, f2 = f(x1), f(x2)
    for _ in range(GOLDEN_STEPS):
        left = f1 >= f2  # the maximum lies in [lo, x2]: x1 becomes the new x2
        lo, hi = np.where(left, lo, x1), np.where(left, x2, hi)
        new = np.where(left, hi - g * (hi - lo), lo + g * (hi - lo))
        fn = f(new)
        x1, x2, f1, f2 = (np.where(left, new, x2), np.where(left, x1, new),
                          np.where(left, fn, f2), np.where(left, f1, fn))
    return (lo + hi) / 2


def _fit_centred(logs: _Logs) -> np.ndarray:
    """The best c per head for centred logs: the grid of both signs (every grid point of every head at once; the
    first best point wins, the positive powers first), then golden section between the best grid point's
    neighbours."""
    grid = np.log(C_GRID)
    vals = []
    for sign in (1.0, -1.0):
        c = sign * C_GRID
        vals.append(_profile(c[:, None], logs.log_mean_powers(c))[0])
    vals = np.concatenate(vals)  # (2 J, H): the positive powers, then the negative ones
    best = np.argmax(np.where(np.isnan(vals), -np.inf, vals), axis=0)
    best_j, best_sign = best % len(grid), np.where(best < len(grid), 1.0, -1.0)
    lo, hi = grid[np.maximum(best_j - 1, 0)], grid[np.minimum(best_j + 1, len(grid) - 1)]

    def at(v):
        c = best_sign * np.exp(v)
        return _profile(c, logs.log_mean_power(c))[0]

    return best_sign * np.exp(_golden(at, lo, hi))


def gengamma_fit(x: np.ndarray) -> dict[str, np.ndarray]:
    """The generalised gamma with location 0 by maximum likelihood, per head of x (H, k) NaN-padded (module
    docstring): ``a``, ``c``, ``scale`` (scipy's parameters), ``loglik``, ``aic``, ``ks`` and ``n``; NaN for heads
    without a sample."""
    from scipy import special

    x = np.sort(np.atleast_2d(np.asarray(x, dtype=float)), axis=-1)
    mask, n, ok = _usable(x)
    out = {name: np.full(len(x), np.nan) for name in ("a", "c", "scale", "loglik", "aic", "ks")} | {"n": n}
    if not ok.any():
        return out
    mask, m = mask[ok], n[ok]
    lx = np.log(np.where(mask, x[ok], 1.0))
    g = np.sum(np.where(mask, lx, 0.0), axis=-1) / m
    lx = np.where(mask, lx - g[:, None], 0.0)  # centred: x / its geometric mean
    logs = _Logs(lx, mask, m)
    c = _fit_centred(logs)
    t = logs.log_mean_power(c)
    ll, a = _profile(c, t)
    loglik = m * ll - m * g
    log_theta = t - np.log(a)  # theta = mean(y) / a = s'^c for the centred scale s'
    with np.errstate(over="ignore"):  # z = inf above the scale at a large c: the cdf is 1 there
        z = np.exp(c[:, None] * lx - log_theta[:, None])
    cdf = np.where(c[:, None] > 0, special.gammainc(a[:, None], z), special.gammaincc(a[:, None], z))
    with np.errstate(over="ignore"):  # a fit near the lognormal limit (|c| small) may put the scale past float range
        scale = np.exp(g + log_theta / c)
    values = {"a": a, "c": c, "scale": scale, "loglik": loglik, "aic": 6.0 - 2.0 * loglik,
              "ks": _ks(cdf, mask, m)}
    for name, v in values.items():
        out[name][ok] = v
    return out


def _quantiles(v: np.ndarray) -> dict[str, float | None]:
    v = v[np.isfinite(v)]
    return {f"q{q}": (float(np.quantile(v, q / 100)) if len(v) else None) for q in (10, 50, 90)}


def _table_row(gg: dict, ln: dict) -> dict:
    """One component's row of :func:`goodness_of_fit` from the two fits of its heads."""
    ok = np.isfinite(gg["aic"]) & np.isfinite(ln["aic"])
    heads = int(ok.sum())

    def share(mask: np.ndarray) -> float | None:
        return float(np.mean(mask[ok])) if heads else None

    return {
        "heads": heads, "sample_size": float(np.median(gg["n"][ok])) if heads else None,
        "gengamma": {"aic_share": share(gg["aic"] < ln["aic"]), "loglik_share": share(gg["loglik"] >= ln["loglik"]),
                     "ks": _quantiles(gg["ks"])},
        "lognormal": {"aic_share": share(ln["aic"] <= gg["aic"]), "loglik_share": share(ln["loglik"] > gg["loglik"]),
                      "ks": _quantiles(ln["ks"])},
        "delta_aic": _quantiles(ln["aic"] - gg["aic"]),
        "c_limit": int(np.sum(np.abs(gg["c"][ok]) >= C_GRID[-1] * (1 - 1e-6))),
    }


def goodness_of_fit(samples_by_component: dict[str, np.ndarray]) -> dict:
    """The per-model table: for each component, the heads fitted, the median sample size, the share of heads whose
    AIC (and whose likelihood alone) prefers each law, the quantiles of AIC(lognormal) - AIC(gengamma), each law's
    KS distance quantiles, and ``c_limit``: the heads whose generalised gamma went to the power-law limit (module
    docstring). JSON-able."""
    return {name: _table_row(gengamma_fit(x), lognormal_fit(x)) for name, x in samples_by_component.items()}
