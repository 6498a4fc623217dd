"""The fits against scipy: the lognormal against ``scipy.stats.lognorm.fit(floc=0)``, the generalised gamma's
likelihood against ``scipy.stats.gengamma`` (its logpdf at our parameters, and at least as high as scipy's own fit),
the KS distances against ``scipy.stats.kstest``; the samples against numpy's spectra of the dense form; on random
heads and on one real head of each committed model."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pipeline.analyses import goodness_of_fit as gof
from tests.pipeline.analyses.conftest import computed_models, dense, lobes_of, random_head_data


def padded(*rows: np.ndarray) -> np.ndarray:
    out = np.full((len(rows), max(len(r) for r in rows)), np.nan)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out


def check_against_scipy(x: np.ndarray, gg: dict, ln: dict, i: int) -> None:
    a, c, s = gg["a"][i], gg["c"][i], gg["scale"][i]
    assert gg["loglik"][i] == pytest.approx(np.sum(stats.gengamma.logpdf(x, a, c, 0, s)), rel=1e-9, abs=1e-9)
    scipy_fit = stats.gengamma.fit(x, floc=0)
    assert gg["loglik"][i] >= np.sum(stats.gengamma.logpdf(x, *scipy_fit)) - 1e-6  # ours is a maximum at least as high
    assert gg["ks"][i] == pytest.approx(stats.kstest(x, stats.gengamma(a, c, 0, s).cdf).statistic, abs=1e-10)
    assert gg["aic"][i] == pytest.approx(6 - 2 * gg["loglik"][i])
    sigma, _, scale = stats.lognorm.fit(x, floc=0)
    assert (ln["sigma"][i], ln["scale"][i]) == pytest.approx((sigma, scale), rel=1e-9)
    assert ln["loglik"][i] == pytest.approx(np.sum(stats.lognorm.logpdf(x, sigma, 0, scale)), rel=1e-10)
    assert ln["ks"][i] == pytest.approx(stats.kstest(x, stats.lognorm(sigma, 0, scale).cdf).statistic, abs=1e-10)
    assert gg["n"][i] == ln["n"][i] == len(x)


def test_fits_match_scipy_on_samples_of_several_laws():
    rng = np.random.default_rng(0)
    xs = [5.0 * stats.gengamma(2.0, 1.5).rvs(60, random_state=rng), stats.lognorm(0.8).rvs(40, random_state=rng),
          rng.gamma(0.7, size=30), np.abs(rng.standard_normal(128)), 1.0 / rng.gamma(3.0, size=50)]  # last: c < 0
    x = padded(*xs)
    gg, ln = gof.gengamma_fit(x), gof.lognormal_fit(x)
    for i, xi in enumerate(xs):
        check_against_scipy(xi, gg, ln, i)
    assert gg["c"][4] < 0  # an inverse-gamma sample is fitted with a negative power


def test_large_sample_recovers_the_law():
    rng = np.random.default_rng(1)
    x = 3.0 * stats.gengamma(2.0, 1.5).rvs(20000, random_state=rng)
    gg = gof.gengamma_fit(x[None])
    assert gg["a"][0] == pytest.approx(2.0, rel=0.15) and gg["c"][0] == pytest.approx(1.5, rel=0.1)
    assert gg["scale"][0] == pytest.approx(3.0, rel=0.15)


def test_heads_without_a_sample_are_nan():
    x = padded(np.array([1.0, 2.0]), np.array([2.0, 2.0, 2.0]), np.array([1.0, 2.0, 4.0]))
    gg, ln = gof.gengamma_fit(x), gof.lognormal_fit(x)
    assert np.isnan(gg["loglik"][:2]).all() and np.isnan(ln["aic"][:2]).all()
    assert np.isfinite(gg["loglik"][2]) and np.isfinite(ln["aic"][2])


def test_samples_are_the_dense_forms_spectra():
    n = 6
    data, W_Q, W_K = random_head_data(np.random.default_rng(2), heads=8, n=n, N=30)
    got = gof.samples(data.spectrum, data.spectrum_of("eig_abs"), data.spectrum_of("antisym_spectrum"))
    assert list(got) == list(gof.COMPONENTS)
    for h in range(8):
        L = dense(W_Q[h], W_K[h])
        _, pos, neg = lobes_of(L, n)
        T = (L - L.T) / 2
        eig = np.sort(np.abs(np.linalg.eigvals(L)))[::-1][:n]  # rank n: n nonzero eigenvalues
        sigma = np.sort(np.abs(np.linalg.eigvals(T).imag))[::-1][: 2 * n][::2]  # one of each conjugate pair
        for name, want in (("eig_L", eig), ("lambda_plus", pos[pos > 1e-9]), ("lambda_minus", neg[neg > 1e-9]),
                           ("sigma_T", sigma)):
            row = got[name][h]
            np.testing.assert_allclose(row[np.isfinite(row)], want, rtol=1e-8, atol=1e-12, err_msg=name)


def test_table_shares_and_quantiles():
    data, _, _ = random_head_data(np.random.default_rng(3), heads=20, n=8, N=40)
    x = gof.samples(data.spectrum, data.spectrum_of("eig_abs"), data.spectrum_of("antisym_spectrum"))
    table = gof.goodness_of_fit(x)
    for name, sample in x.items():
        gg, ln = gof.gengamma_fit(sample), gof.lognormal_fit(sample)
        row = table[name]
        assert row["heads"] == 20 and row["sample_size"] == np.median(gg["n"])
        assert row["gengamma"]["aic_share"] == np.mean(gg["aic"] < ln["aic"])
        assert row["gengamma"]["aic_share"] + row["lognormal"]["aic_share"] == pytest.approx(1.0)
        assert row["gengamma"]["loglik_share"] == 1.0  # the lognormal is a limit of the generalised gamma
        assert row["delta_aic"]["q50"] == pytest.approx(np.median(ln["aic"] - gg["aic"]))
        assert row["lognormal"]["ks"]["q90"] == pytest.approx(np.quantile(ln["ks"], 0.9))


@pytest.mark.parametrize("name", computed_models())
def test_one_real_head_per_committed_model(committed, name):
    data = committed[name]
    h = data.heads // 2
    x = gof.samples(data.spectrum[h:h + 1])
    lam = data.spectrum[h][np.isfinite(data.spectrum[h])]
    cut = 1e-9 * np.abs(lam).max()
    for comp, want in (("lambda_plus", np.sort(lam[lam > cut])), ("lambda_minus", np.sort(-lam[lam < -cut]))):
        row = x[comp][0]
        np.testing.assert_array_equal(np.sort(row[np.isfinite(row)]), want)
        check_against_scipy(want, gof.gengamma_fit(x[comp]), gof.lognormal_fit(x[comp]), 0)


def test_the_trigamma_of_newtons_steps_is_scipys():
    """The gamma shape's Newton steps take psi' from ``_trigamma`` (a recurrence and a series), not from scipy's
    Hurwitz zeta: it equals ``scipy.special.polygamma(1, a)`` from a = 1e-8 to 1e8, across the series' threshold."""
    from scipy import special

    a = np.concatenate([np.logspace(-8, 8, 4001), np.linspace(0.01, 20, 4001), [gof.TRIGAMMA_SHIFT]])
    np.testing.assert_allclose(gof._trigamma(a), special.polygamma(1, a), rtol=1e-12, atol=0)
