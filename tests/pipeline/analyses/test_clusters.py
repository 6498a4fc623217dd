"""k-means, the silhouette and the adjusted Rand index against closed forms and scikit-learn (where installed: it is
not a dependency of the project), the clusters' numbering, reproducibility by seed, and one real model."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.analyses import clusters as cl
from pipeline.analyses.types import spectral_types
from tests.pipeline.analyses.conftest import computed_models, random_head_data


def sklearn():
    try:
        from sklearn import metrics
    except ImportError:
        pytest.skip("scikit-learn is not installed (it is only the tests' second opinion, not a dependency)")
    return metrics


def test_silhouette_closed_form():
    # Points 0, 1 | 10, 12 on a line. Point 0: a = 1, b = (10 + 12) / 2 = 11 -> 10/11. Point 1: a = 1, b = 10 ->
    # 9/10. Point 10: a = 2, b = (10 + 9) / 2 = 9.5 -> 7.5/9.5. Point 12: a = 2, b = 11.5 -> 9.5/11.5.
    X = np.array([[0.0], [1.0], [10.0], [12.0]])
    want = np.mean([10 / 11, 9 / 10, 7.5 / 9.5, 9.5 / 11.5])
    assert cl.silhouette(X, np.array([0, 0, 1, 1])) == pytest.approx(want, abs=1e-14)
    # 0, 1 | 10 | 30: point 0 has a = 1, b = 10 -> 0.9; point 1 a = 1, b = 9 -> 8/9; a point alone scores 0
    got = cl.silhouette(np.array([[0.0], [1.0], [10.0], [30.0]]), np.array([0, 0, 1, 2]))
    assert got == pytest.approx((0.9 + 8 / 9) / 4, abs=1e-14)
    assert np.isnan(cl.silhouette(X, np.zeros(4)))


def test_silhouette_and_ari_match_scikit_learn(monkeypatch):
    metrics = sklearn()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 7))
    labels = rng.integers(0, 4, 300)
    labels[0] = 9  # a singleton cluster
    assert cl.silhouette(X, labels) == pytest.approx(metrics.silhouette_score(X, labels), abs=1e-9)
    monkeypatch.setattr(cl, "DISTANCE_BLOCK", 1000)  # the blocked path (rows in blocks of 3) gives the same value
    assert cl.silhouette(X, labels) == pytest.approx(metrics.silhouette_score(X, labels), abs=1e-9)
    for a, b in ((rng.integers(0, 3, 500), rng.integers(0, 5, 500)), (labels, labels % 2), (labels, labels)):
        assert cl.adjusted_rand_index(a, b) == pytest.approx(metrics.adjusted_rand_score(a, b), abs=1e-12)


def test_ari_closed_forms():
    assert cl.adjusted_rand_index([0, 0, 1, 1], [5, 5, 7, 7]) == 1.0  # the same partition, other names
    assert cl.adjusted_rand_index([0, 0, 0], [1, 1, 1]) == 1.0
    # a = [0,0,1,1], b = [0,1,0,1]: index 0, expected (2 * 2) / 6 = 2/3, max 2 -> (0 - 2/3) / (2 - 2/3) = -1/2
    assert cl.adjusted_rand_index([0, 0, 1, 1], [0, 1, 0, 1]) == pytest.approx(-0.5)
    with pytest.raises(ValueError, match="label"):
        cl.adjusted_rand_index([0, 1], [0, 1, 2])


def blobs(rng, k=3, per=40, dim=5, spread=0.05):
    centres = rng.standard_normal((k, dim)) * 3
    truth = np.repeat(np.arange(k), per)
    return centres[truth] + spread * rng.standard_normal((k * per, dim)), truth


def test_kmeans_finds_separated_blobs_and_is_a_lloyd_fixed_point():
    rng = np.random.default_rng(1)
    X, truth = blobs(rng)
    labels, inertia = cl.kmeans(X, 3, seed=4)
    assert cl.adjusted_rand_index(labels, truth) == 1.0
    centres = np.array([X[labels == c].mean(axis=0) for c in range(3)])
    d2 = ((X[:, None, :] - centres[None]) ** 2).sum(-1)
    np.testing.assert_array_equal(labels, d2.argmin(axis=1))  # each point is with its nearest mean
    assert inertia == pytest.approx(d2.min(axis=1).sum())
    X2, _ = blobs(np.random.default_rng(2), k=4, spread=0.8)
    best = min(cl.kmeans(X2, 4, seed=s, restarts=1)[1] for s in range(20))
    assert cl.kmeans(X2, 4, seed=0, restarts=20)[1] <= best + 1e-9  # the restarts keep the least inertia
    with pytest.raises(ValueError, match="cannot form"):
        cl.kmeans(X[:2], 3)


def test_kmeans_inertia_against_scikit_learn():
    metrics = sklearn()  # noqa: F841 - the skip when scikit-learn is missing
    from sklearn.cluster import KMeans

    data, _, _ = random_head_data(np.random.default_rng(3), heads=120, n=8, N=40)
    X, _ = cl.unit_spectra(data.spectrum)
    for k in (2, 3, 4):
        ours = cl.kmeans(X, k)[1]
        theirs = KMeans(k, n_init=20, random_state=0).fit(X).inertia_
        assert ours <= theirs * 1.01  # a local optimum within 1% of scikit-learn's best of 20 runs


def test_numbering_and_reproducibility():
    data, _, _ = random_head_data(np.random.default_rng(4), heads=90, n=6, N=30)
    types = spectral_types(data.profile)
    a = cl.clusters(data.spectrum, types, seed=7, k_range=(2, 3))
    b = cl.clusters(data.spectrum, types, seed=7, k_range=(2, 3))
    assert a == b
    X, kept = cl.unit_spectra(data.spectrum)
    labels = np.asarray(a["labels"])[kept]
    energy = [cl.signed_energy(X)[labels == c].mean() for c in range(3)]
    assert energy == sorted(energy, reverse=True)  # cluster 0 the positive-dominant one
    table = np.zeros((3, 3), int)
    np.add.at(table, (labels, types[kept]), 1)
    assert a["contingency"] == table.tolist()
    assert a["ari"] == pytest.approx(cl.adjusted_rand_index(labels, types[kept]))
    assert a["silhouette"]["2"] == pytest.approx(cl.silhouette(X, cl.kmeans(X, 2, seed=7)[0]))


def test_unit_spectra():
    s = np.array([[3.0, -4.0, np.nan], [np.nan] * 3, [0.0, 0.0, np.nan], [1.0, np.nan, np.nan]])
    X, kept = cl.unit_spectra(s)
    np.testing.assert_array_equal(kept, [0])
    np.testing.assert_allclose(X, [[0.6, -0.8]])  # decreasing, unit norm, the all-NaN column dropped


@pytest.mark.parametrize("name", computed_models())
def test_one_real_model(committed, name):
    """A real model's unit spectra are its stored spectra over their norms, and its clusters number as stated."""
    data = committed[name]
    X, kept = cl.unit_spectra(data.spectrum)
    h = kept[0]
    row = data.spectrum[h][np.isfinite(data.spectrum[h])]
    np.testing.assert_allclose(X[0], np.sort(row / np.linalg.norm(row))[::-1], atol=1e-15)
    if len(X) > 3:
        labels = cl.kmeans(X, 3, restarts=5)[0]
        energy = [cl.signed_energy(X)[labels == c].mean() for c in range(3)]
        assert energy == sorted(energy, reverse=True)
