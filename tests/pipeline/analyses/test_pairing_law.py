"""The pairing law's numbers against direct computations: P and rho from numpy's eigh of the dense S, the beta
law against its likelihood equations and scipy, the bound against its formula and the stored one, the histogram and
the counts by hand; on random heads and on one real head of each committed model."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

from pipeline.analyses import pairing_law as pl
from tests.pipeline.analyses.conftest import computed_models, dense, lobes_of, random_head_data


def direct(L: np.ndarray, n: int) -> tuple[float, float]:
    """(P, rho) of one dense form from its definitions."""
    ev, pos, neg = lobes_of(L, n)
    return 1 - np.linalg.norm(pos - neg) / np.linalg.norm(ev), np.linalg.norm(neg) / np.linalg.norm(pos)


def test_random_heads_p_and_rho_and_the_bound():
    data, W_Q, W_K = random_head_data(np.random.default_rng(0), heads=30)
    P, rho = np.array([direct(dense(W_Q[h], W_K[h]), 6) for h in range(30)]).T
    np.testing.assert_allclose(data.stat("pairing"), P, atol=1e-10)
    np.testing.assert_allclose(data.stat("rho"), rho, rtol=1e-9)
    r = np.minimum(rho, 1 / rho)
    bound = 1 - (1 - r) / np.sqrt(1 + r * r)
    np.testing.assert_allclose(pl.pairing_bound(rho), bound, atol=1e-12)
    np.testing.assert_allclose(pl.pairing_bound(data.stat("rho")), data.stat("pairing_bound"), atol=1e-12)
    got = pl.bound_summary(P, rho)
    assert got["correlation"] == pytest.approx(np.corrcoef(P, bound)[0, 1], abs=1e-12)
    assert got["holds"] == np.mean(P <= bound + 1e-12) == 1.0  # the lemma: P never exceeds the bound
    assert got["gap"]["q50"] == pytest.approx(np.quantile(bound - P, 0.5), abs=1e-12)


def test_bound_at_the_ends():
    np.testing.assert_array_equal(pl.pairing_bound(np.array([0.0, np.inf, 1.0])), [0.0, 0.0, 1.0])
    assert np.isnan(pl.pairing_bound(np.nan))
    np.testing.assert_allclose(pl.pairing_bound(np.array([0.5, 2.0])), 1 - 0.5 / np.sqrt(1.25))  # rho and 1/rho


def test_beta_fit_solves_the_likelihood_equations_and_matches_scipy():
    rng = np.random.default_rng(1)
    P = rng.beta(5.0, 2.0, size=400)
    P[:3] = [0.0, 1.0, np.nan]
    got = pl.beta_fit(P)
    inside = P[3:]
    assert (got["heads"], got["left_out"]) == (397, 2)
    a, b = got["a"], got["b"]
    # d/da and d/db of the beta log-likelihood vanish at the maximum
    assert special.digamma(a) - special.digamma(a + b) == pytest.approx(np.mean(np.log(inside)), abs=1e-4)
    assert special.digamma(b) - special.digamma(a + b) == pytest.approx(np.mean(np.log1p(-inside)), abs=1e-4)
    want = stats.beta.fit(inside, floc=0, fscale=1)
    assert (a, b) == pytest.approx(want[:2], rel=1e-9)
    ks = stats.kstest(inside, stats.beta(a, b).cdf)
    assert (got["ks_statistic"], got["ks_p"]) == pytest.approx((ks.statistic, ks.pvalue), rel=1e-9)
    assert abs(a - 5.0) < 1.0 and abs(b - 2.0) < 0.5  # 400 draws recover the law
    assert pl.beta_fit(np.array([0.5, 0.5, 0.5]))["a"] is None  # nothing to fit


def test_histogram_and_balance_by_hand():
    rho = np.array([0.0, 0.05, 0.99, 1.0, 2.0, 2.5, np.inf, np.nan])
    h = pl.rho_histogram(rho, rho_max=2.0, bins=4)
    assert h["edges"] == [0.0, 0.5, 1.0, 1.5, 2.0]
    assert h["counts"] == [2, 1, 1, 1] and h["above"] == 2
    got = pl.balance_count(np.array([3, 4, 5, np.nan]), np.array([3, 5, 5, 1]))
    assert got == {"balanced": 2, "heads": 3}


@pytest.mark.parametrize("name", computed_models())
def test_one_real_head_per_committed_model(committed, name):
    """The stored statistics of a real head agree with P, rho and the bound computed from its stored spectrum."""
    data = committed[name]
    h = int(np.nanargmax(data.stat("pairing_gap")))  # the head farthest from its bound
    lam = data.spectrum[h][np.isfinite(data.spectrum[h])]
    pos = np.sort(np.clip(lam, 0, None))[::-1]
    neg = np.sort(np.clip(-lam, 0, None))[::-1]
    P = 1 - np.linalg.norm(pos - neg) / np.linalg.norm(lam)
    rho = np.linalg.norm(neg) / np.linalg.norm(pos)
    assert data.stat("pairing")[h] == pytest.approx(P, abs=1e-9)
    assert data.stat("rho")[h] == pytest.approx(rho, rel=1e-9)
    assert pl.pairing_bound(data.stat("rho"))[h] == pytest.approx(1 - abs(1 - rho) / np.sqrt(1 + rho * rho), abs=1e-9)
    law = pl.pairing_law(data.stat("pairing"), data.stat("rho"), data.stat("n_pos"), data.stat("n_neg"))
    assert law["bound"]["holds"] == 1.0
    assert law["balance"]["balanced"] == int(np.sum(data.stat("n_pos") == data.stat("n_neg")))
    assert law["balance"]["heads"] == data.heads
