"""The orbit finder recovers planted orbits, verifies them under every shift, and finds none in random heads."""

import numpy as np
import pytest

from pipeline.orbits.find import find_orbits
from pipeline.orbits.fourier import choose_frequencies, shift_ov, shift_qk


def planted(rng, k):
    """k heads forming one orbit: a random head averaged over the stabiliser {0, k, 2k, ...}, then shifted."""
    X, Y = rng.normal(size=(24, 24)), rng.normal(size=(24, 24))
    M0 = np.mean([shift_qk(X, j * k) for j in range(24 // k)], axis=0)
    R0 = np.mean([shift_ov(Y, j * k) for j in range(24 // k)], axis=0)
    return np.stack([shift_qk(M0, s) for s in range(k)]), np.stack([shift_ov(R0, s) for s in range(k)])


@pytest.fixture(scope="module")
def layer():
    rng = np.random.default_rng(0)
    M12, R12 = planted(rng, 12)
    M4, R4 = planted(rng, 4)
    M = np.concatenate([M12, M4, rng.normal(size=(16, 24, 24))])
    R = np.concatenate([R12, R4, rng.normal(size=(16, 24, 24))])
    perm = rng.permutation(32)
    noise = 0.003
    M = M[perm] + noise * rng.normal(size=M.shape) + rng.normal(size=(32, 24, 1))  # + a gauge shift of M's rows
    R = R[perm] + noise * rng.normal(size=R.shape)
    truth = np.concatenate([np.zeros(12, int), np.ones(4, int), -np.ones(16, int)])[perm]
    return M, R, truth


def test_finder_recovers_a_planted_12_orbit_and_4_orbit(layer):
    M, R, truth = layer
    f = find_orbits(M, R, tol=0.02)
    assert f.sizes == [12, 4]
    assert np.array_equal(f.orbit, truth)
    assert max(f.worst_error) < 0.02
    # verification per shift: inside an orbit, s.h lands on the head planted as s.h
    heads12 = np.flatnonzero(truth == 0)
    for s in range(24):
        assert set(f.shift_image[s, heads12]) == set(heads12)
        assert (f.shift_error[s, heads12] < 0.02).all()
    # the 12-orbit's stabiliser is {0, 12}; the 4-orbit's is {0, 4, ..., 20}
    h = heads12[0]
    assert [s for s in range(24) if f.shift_image[s, h] == h] == [0, 12]
    h4 = np.flatnonzero(truth == 1)[0]
    assert [s for s in range(24) if f.shift_image[s, h4] == h4] == [0, 4, 8, 12, 16, 20]


def test_panels_follow_the_planted_orbits(layer):
    M, R, _ = layer
    f = find_orbits(M, R)
    A, B = choose_frequencies(M, R, list(zip(f.members, f.sizes, strict=True)))
    assert A in (2, 10) and B == 6  # the 12-gon frequencies, and the square's


def test_random_heads_have_no_orbits_even_at_a_loose_tolerance():
    rng = np.random.default_rng(1)
    for tol in (0.02, 0.2):
        f = find_orbits(rng.normal(size=(32, 24, 24)), rng.normal(size=(32, 24, 24)), tol=tol)
        assert f.sizes == [] and (f.orbit == -1).all()
        assert f.median_error > 0.5


def test_duplicate_heads_merge_and_dead_heads_drop():
    rng = np.random.default_rng(2)
    M4, R4 = planted(rng, 4)
    # head 0 of the orbit split into two heads with equal M whose R sum to the original; one dead head
    M = np.concatenate([M4, M4[:1], rng.normal(size=(1, 24, 24))])
    R = np.concatenate([R4, R4[:1], 1e-6 * rng.normal(size=(1, 24, 24))])
    R[0], R[4] = 0.3 * R4[0], 0.7 * R4[0]
    f = find_orbits(M, R)
    assert f.sizes == [4] and f.orbit[0] == f.orbit[4] == 0 and f.group[0] == f.group[4]
    assert len(f.members[0]) == 5  # five heads, four after merging
    assert choose_frequencies(M, R, list(zip(f.members, f.sizes, strict=True)))[0] == 6  # the square's frequency
    assert not f.alive[5] and f.orbit[5] == -1 and (f.shift_image[:, 5] == -1).all()


def test_noise_above_tolerance_breaks_the_orbit():
    rng = np.random.default_rng(3)
    M, R = planted(rng, 12)
    f = find_orbits(M + 0.1 * rng.normal(size=M.shape), R + 0.1 * rng.normal(size=R.shape), tol=0.02)
    assert f.sizes == []


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="heads, p, p"):
        find_orbits(np.zeros((2, 24, 24)), np.zeros((3, 24, 24)))


def test_frame_metrics_see_the_orbits_form(layer):
    from pipeline.orbits.store_io import frame_orbit_metrics

    M, R, _ = layer
    rng = np.random.default_rng(4)
    frames_M = np.stack([rng.normal(size=M.shape), M])  # a random frame, then the planted layer
    frames_R = np.stack([rng.normal(size=R.shape), R])
    m = frame_orbit_metrics(frames_M, frames_R, {"tol": 0.02})
    assert list(m["largest_orbit"][1]) == [0, 12] and list(m["heads_in_orbits"][1]) == [0, 16]
    assert m["matching_error"][1][0] > 0.5


def test_planted_orbits_stay_equivariant_at_every_qk_scale(layer):
    """Heads in exact orbits are equivariant at any QK scale (the structure theorem's 'if'); the metric
    ``sharpened_error`` is then 0, while random heads are far from it at every scale."""
    from pipeline.orbits.store_io import sharpened_error

    M, R, truth = layer
    rng = np.random.default_rng(5)
    keep = truth >= 0
    # exact orbits (no noise): rebuild from the planted ones without the layer's noise
    M12, R12 = planted(rng, 12)
    M4, R4 = planted(rng, 4)
    Mo, Ro = np.concatenate([M12, M4]), np.concatenate([R12, R4])
    for beta in (0.5, 2.0, 5.0):
        assert sharpened_error(Mo, Ro, beta) < 1e-12
    assert sharpened_error(M[~keep], R[~keep]) > 0.3


def test_the_cross_head_gauge_of_r_is_removed(layer):
    """Adding v_h to every column of R_h, with sum_h v_h = 0, leaves the layer's function unchanged (checked on
    the exact length-3 table) but breaks head-by-head equality; the finder must see the same orbits."""
    import torch

    from pipeline.orbits.model import table_forward

    M, R, truth = layer
    rng = np.random.default_rng(11)
    v = rng.normal(size=(32, 24)) * 3.0
    v -= v.mean(axis=0)
    R2 = R + v[:, :, None]
    G1 = table_forward(torch.as_tensor(M), torch.as_tensor(R)).numpy()
    G2 = table_forward(torch.as_tensor(M), torch.as_tensor(R2)).numpy()
    np.testing.assert_allclose(G2, G1, atol=1e-9 * np.abs(G1).max())
    f = find_orbits(M, R2)
    assert sorted(f.sizes) == [4, 12] and max(f.worst_error) < 0.02
    for o in range(2):
        assert len(set(truth[f.members[o]])) == 1


def test_split_errors_measure_m_and_r_on_their_own_scales(layer):
    """Noise on M alone shows in the M error and not in R's, whatever the scale of R."""
    from pipeline.orbits.find import split_errors

    rng = np.random.default_rng(2)
    M12, R12 = planted(rng, 12)
    R12 = 300 * R12  # R much larger than M, as in trained layers
    M = M12 + 0.01 * np.linalg.norm(M12[0]) / 24 * rng.normal(size=M12.shape)
    f = find_orbits(M, R12)
    assert f.sizes == [12] and f.worst_error[0] < 1e-3  # the pair error hardly sees M's 1% noise
    (em, er), = split_errors(M, R12, f)
    assert 0.01 < em < 0.05 and er < 1e-12


def test_inspect_reports_the_planted_orbits_and_the_error_by_scale(layer):
    """``sweep inspect``'s text: the finder's orbits, and E3 at each QK scale equal to the table's own error."""
    import torch

    from pipeline.orbits.equivariance import layer_error
    from pipeline.orbits.summary import inspect

    M, R, truth = layer
    text = inspect({"name": "planted", "epoch": np.array([7]), "M": M[None], "R": R[None]}, scales=(1.0, 3.0))
    assert text.startswith("planted: epoch 7, 32 live heads")
    assert text.count("\norbit ") == 2 and "heads [" in text
    for beta in (1.0, 3.0):
        want = layer_error(beta * torch.as_tensor(M), torch.as_tensor(R))
        assert f"{beta:g}x {want:.2e}" in text
