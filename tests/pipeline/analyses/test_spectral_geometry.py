"""sigma(T) against sqrt(lambda_+ lambda_-) and the effective-rank counts against the dense form's spectra (numpy
eigvals of T, eigh of S, svd of L) and the rank-one closed form. (The real heads' spectra are checked in
test_spectra.py, against the stored participation ratio among others.)"""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.analyses import spectral_geometry as sg
from pipeline.analyses.spectra import head_spectra
from tests.pipeline.analyses.conftest import dense, lobes_of, random_head_data


def test_random_heads_against_the_dense_form():
    n = 6
    data, W_Q, W_K = random_head_data(np.random.default_rng(0), heads=12, n=n, N=40)
    got = sg.paired_spectra(data.spectrum, data.spectrum_of("antisym_spectrum"))
    for h in range(12):
        L = dense(W_Q[h], W_K[h])
        T = (L - L.T) / 2
        ev, pos, neg = lobes_of(L, n)
        sigma = np.sort(np.linalg.eigvals(T).imag)[::-1][:n]  # the positive imaginary parts: one per pair
        geometric = np.sqrt(pos[:n] * neg[:n])
        np.testing.assert_allclose(got["sigma"][h], sigma, atol=1e-10)
        np.testing.assert_allclose(got["geometric"][h], geometric, atol=1e-10)
        error = np.linalg.norm(sigma - geometric) / np.linalg.norm(sigma)
        assert got["geometric_error"][h] == pytest.approx(error, abs=1e-9)
        full_sigma = np.sort(np.linalg.svd(T, compute_uv=False))[::-1][:2 * n]
        corr = np.corrcoef(full_sigma, np.sort(np.abs(ev))[::-1])[0, 1]
        assert got["sigma_lambda_correlation"][h] == pytest.approx(corr, abs=1e-9)
    summary = sg.spectral_geometry(data.spectrum, data.spectrum_of("antisym_spectrum"))
    assert summary["heads"] == 12
    assert summary["geometric_error"]["q50"] == pytest.approx(np.median(got["geometric_error"]))


def test_rank_one_forms_pair_exactly():
    """Closed form: for L = u v^T the singular value of T is sqrt(lambda_+ lambda_-)."""
    rng = np.random.default_rng(1)
    u, v = rng.standard_normal((5, 1, 30)), rng.standard_normal((5, 1, 30))
    s = head_spectra(v, u)  # W_Q = v^T, W_K = u^T
    from pipeline.profile import head_profiles

    spectrum = head_profiles(v, u, eigvalsh="numpy", at_zero=True).at_zero.spectrum()
    got = sg.paired_spectra(spectrum, s.antisym_spectrum)
    np.testing.assert_allclose(got["geometric_error"], 0.0, atol=1e-12)
    np.testing.assert_allclose(got["sigma"][:, 0], got["geometric"][:, 0], rtol=1e-12)


def test_nan_heads_and_shapes():
    spec = np.array([[0.5, -0.5, np.nan], [np.nan] * 3])
    sig = np.array([[0.5, 0.5, np.nan], [np.nan] * 3])
    got = sg.paired_spectra(spec, sig)
    assert np.isfinite(got["geometric_error"][0]) and np.isnan(got["geometric_error"][1])
    with pytest.raises(ValueError, match="one shape"):
        sg.paired_spectra(spec, sig[:, :2])


def test_effective_rank_counts_from_svd():
    rng = np.random.default_rng(2)
    pr, sr = [], []
    for rank in (1, 1, 2, 3, 4, 8, 8):  # forms of known rank with random spectra
        L = rng.standard_normal((20, rank)) @ rng.standard_normal((rank, 20))
        e = np.linalg.svd(L, compute_uv=False) ** 2
        pr.append(e.sum() ** 2 / (e ** 2).sum())
        sr.append(e.sum() / e.max())
    got = sg.effective_rank_counts(np.array(pr + [np.nan]), np.array(sr + [1.0]))
    assert got["heads"] == 7
    assert got["participation_below"] == {"2": int(np.sum(np.array(pr) < 2)), "5": int(np.sum(np.array(pr) < 5))}
    assert got["participation_below"]["2"] >= 2  # the two rank-one forms have participation ratio 1
    assert got["stable_rank_below_2"] == int(np.sum(np.array(sr) < 2))
