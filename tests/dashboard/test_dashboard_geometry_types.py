"""The numpy rules behind the profile views' new layers (dashboard/common/geometry.py): spectral types, the rank-one
curve, the a = 0 face, the extreme heads of each type, checked against direct computations."""

from __future__ import annotations

import numpy as np

from dashboard.common import geometry as g


def naive_profile(L: np.ndarray) -> np.ndarray:
    """(a, b, c, d) of one N x N form from its full symmetric eigendecomposition."""
    L = L / np.linalg.norm(L)
    S, T = (L + L.T) / 2, (L - L.T) / 2
    lam = np.linalg.eigvalsh(S)
    lp = np.sort(np.clip(lam, 0, None))[::-1]
    lm = np.sort(np.clip(-lam, 0, None))[::-1]
    u = lp - lm
    return np.array([(T**2).sum(), 2 * lp @ lm, (u[u > 0] ** 2).sum(), (u[u < 0] ** 2).sum()])


def rule(p) -> int:
    """The spectral type of one profile, written out from its definition."""
    a, b, c, d = p
    if not c + d > 0.01:
        return 1
    imbalance = (c - d) / (c + d)
    return 0 if imbalance > 0.20 else (2 if imbalance < -0.20 else 1)


def test_spectral_types_follow_the_rule_on_random_and_boundary_profiles():
    rng = np.random.default_rng(0)
    random = rng.dirichlet(np.ones(4) * 0.5, 400)
    boundary = np.array([
        [0.5, 0.49, 0.006, 0.004],      # imbalance exactly 0.2: Type II
        [0.5, 0.49, 0.004, 0.006],      # exactly -0.2: Type II
        [0.0, 0.99, 0.01, 0.0],         # c + d = 0.01, not above: Type II
        [0.0, 0.989, 0.011, 0.0],       # just above: Type I+
        [0.0, 0.989, 0.0, 0.011],       # Type I-
        [0.0, 0.0, 0.61, 0.39],         # imbalance 0.22: Type I+
        [1.0, 0.0, 0.0, 0.0],           # c + d = 0: Type II
        [0.0, 0.0, 0.0, 1.0],
    ])
    p = np.vstack([random, boundary])
    expected = np.array([rule(x) for x in p])
    got = g.spectral_types(p)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got[-8:], [1, 1, 1, 0, 2, 0, 1, 2])
    assert set(expected[:400]) == {0, 1, 2}  # every type occurs among the random ones
    np.testing.assert_array_equal(g.spectral_types(p.reshape(2, -1, 4)), expected.reshape(2, -1))
    assert g.spectral_types(np.full((1, 4), np.nan))[0] == 1
    counts = g.type_counts(got)
    assert counts.tolist() == [int((expected == k).sum()) for k in range(3)]
    assert g.type_labels(got) == [f"Type I₊ (n={counts[0]})", f"Type II (n={counts[1]})", f"Type I₋ (n={counts[2]})"]
    assert len(set(g.TYPE_COLORS)) == 3


def test_layer_type_fractions_count_each_layers_heads_and_sum_to_one():
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.ones(4) * 0.4, (5, 7))
    p[4] = np.nan  # a layer without heads
    p[2, 3] = np.nan  # padding inside a layer is left out
    frac = g.layer_type_fractions(p)
    for layer in range(4):
        heads = [rule(x) for x in p[layer] if np.isfinite(x).all()]
        np.testing.assert_allclose(frac[layer], [heads.count(k) / len(heads) for k in range(3)])
    np.testing.assert_allclose(frac[:4].sum(axis=1), 1.0)
    assert np.isnan(frac[4]).all()


def test_rank_one_curve_lies_on_the_simplex_and_is_the_profile_of_rank_one_forms():
    rho = g.rank_one_rho()
    assert rho[0] == 0 and np.isinf(rho[-1]) and np.isclose(rho[1], 1e-3) and np.isclose(rho[-2], 1e3)
    assert np.all(np.diff(rho) > 0)
    curve = g.rank_one_curve()
    assert curve.shape == (rho.size, 4)
    assert (curve >= 0).all()
    np.testing.assert_allclose(curve.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(curve[0], [0, 0, 1, 0])
    np.testing.assert_allclose(curve[-1], [0, 0, 0, 1])
    rng = np.random.default_rng(2)
    N = 7
    for r in (0.0, 1e-3, 0.3, 1.0, 2.5, 1e3):
        # a unit pair with <u, v> = (1 - r) / sqrt(1 + r^2), turned by a random rotation and scaled
        e1, e2 = np.eye(N)[0], np.eye(N)[1]
        u = e1
        v = ((1 - r) * e1 + np.sqrt(2 * r) * e2) / np.sqrt(1 + r**2)
        assert np.isclose(u @ v, g.rank_one_cosine(r))
        Q, _ = np.linalg.qr(rng.standard_normal((N, N)))
        L = 3.7 * np.outer(Q @ u, Q @ v)
        assert np.linalg.matrix_rank(L) == 1
        np.testing.assert_allclose(g.rank_one_curve(np.array([r]))[0], naive_profile(L), atol=1e-10)
    # and every point of the curve has a = b and c d = 0 (the rank-one locus)
    np.testing.assert_allclose(curve[:, 0], curve[:, 1])
    np.testing.assert_allclose(curve[:, 2] * curve[:, 3], 0)
    t = g.rank_one_cosine(rho)  # and the profile ((1 - t^2)/2, (1 - t^2)/2, t_+^2, t_-^2) of u v^T at <u, v> = t
    np.testing.assert_allclose(curve, np.c_[(1 - t**2) / 2, (1 - t**2) / 2, np.clip(t, 0, None) ** 2,
                                            np.clip(-t, 0, None) ** 2], atol=1e-12)


def test_face_coordinates_place_b_c_d_over_one_minus_a_in_the_triangle():
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(4), 50)
    xy = g.face_coordinates(p)
    bcd = p[:, 1:] / (1 - p[:, :1])
    np.testing.assert_allclose(xy, bcd @ g.FACE_VERTICES)
    np.testing.assert_allclose(g.face_coordinates(np.array([0, 0, 1.0, 0])), g.FACE_VERTICES[1])
    assert np.isnan(g.face_coordinates(np.array([1.0, 0, 0, 0]))).all()


def test_extreme_heads_are_the_smallest_keys_of_each_type():
    rng = np.random.default_rng(4)
    p = rng.dirichlet(np.ones(4) * 0.5, 200)
    types = g.spectral_types(p)
    c_sym, d_sym = rng.random(200), rng.random(200)
    d_sym[5] = np.nan
    got = g.extreme_heads(types, p, c_sym, d_sym, n=7)
    keys = {0: d_sym, 1: p[:, 2] + p[:, 3], 2: c_sym}
    for k in range(3):
        members = [i for i in range(200) if types[i] == k and np.isfinite(keys[k][i])]
        expected = sorted(members, key=lambda i: (keys[k][i], i))[:7]
        assert got[k].tolist() == expected


def test_mean_unit_spectrum_averages_sorted_unit_vectors():
    s = np.array([[3.0, -4.0, np.nan], [1.0, 0.0, np.nan], [np.nan, np.nan, np.nan]])
    np.testing.assert_allclose(g.mean_unit_spectrum(s), [(0.6 + 1.0) / 2, (-0.8 + 0.0) / 2])
    assert g.mean_unit_spectrum(np.zeros((0, 4))).size == 0
