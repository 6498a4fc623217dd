"""Each planar projection rotates by exactly its predicted angle under every shift."""

import numpy as np
import pytest

from pipeline.orbits.fourier import (
    Panel,
    frequency_energy,
    panel_positions,
    panels_for,
    polygon_frequencies,
    project,
    rotation,
    shift_ov,
    shift_qk,
)

THETA = 2 * np.pi / 24


@pytest.mark.parametrize("kind", ["QK", "OV"])
@pytest.mark.parametrize("fa,fb,eps", [(0, 10, 1), (10, 10, -1), (0, 6, 1), (6, 6, -1), (3, 5, 1), (7, 2, -1)])
def test_projection_rotates_by_the_predicted_angle_under_every_shift(kind, fa, fb, eps):
    rng = np.random.default_rng(fa * 100 + fb)
    X = rng.normal(size=(4, 24, 24))
    z = project(X, fa, fb, eps)
    r = rotation(kind, fa, fb, eps)
    shift = shift_qk if kind == "QK" else shift_ov
    for s in range(24):
        np.testing.assert_allclose(project(shift(X, s), fa, fb, eps), np.exp(1j * r * s * THETA) * z, atol=1e-12)


def test_projection_is_the_conjugate_convention_of_numpy_fft():
    X = np.random.default_rng(0).normal(size=(24, 24))
    F = np.fft.fft2(X)  # sum X exp(-i theta (u a + v b))
    for fa, fb, eps in [(0, 10, 1), (10, 10, -1), (5, 3, 1)]:
        expected = np.sqrt(2) / 24 * np.conj(F[fa % 24, (eps * fb) % 24])
        assert project(X, fa, fb, eps) == pytest.approx(expected)


def test_seed_panels_rotate_by_their_frequency():
    assert [p.rotation for p in panels_for(10, 6)] == [10, 10, 6, 6]
    assert [p.label for p in panels_for(10, 6)] == ["QK 0x10", "OV 10x10", "QK 0x6", "OV 6x6"]
    assert Panel("OV", 10, 10, 1).rotation == 30 % 24


def test_an_orbit_is_a_regular_polygon_in_its_panel():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(24, 24))
    M0 = (X + shift_qk(X, 12)) / 2  # stabiliser {0, 12}: a 12-orbit
    orbit = np.stack([shift_qk(M0, s) for s in range(12)])
    pos = panel_positions(orbit, orbit, [Panel("QK", 0, 10, 1)])[:, 0]
    z = pos[:, 0] + 1j * pos[:, 1]
    assert np.allclose(np.abs(z), np.abs(z[0]))  # equal radii
    angles = np.sort(np.mod(np.angle(z / z[0]), 2 * np.pi))
    np.testing.assert_allclose(angles, np.arange(12) * 2 * np.pi / 12, atol=1e-9)
    # the stabiliser forces it to the origin where 12 does not divide rotation * 12, e.g. at frequency 3
    assert np.abs(project(orbit, 0, 3, 1)).max() < 1e-12
    assert polygon_frequencies(12) == [2, 10] and polygon_frequencies(4) == [6] and polygon_frequencies(5) == []


def test_frequency_energy_finds_a_planted_frequency():
    a = np.arange(24)
    M = np.cos(THETA * 7 * (a[None, :] + 3))[None].repeat(24, axis=1)  # key frequency 7 only
    e = frequency_energy(M, np.zeros_like(M))
    assert int(np.argmax(e)) == 7 and e[7] > 0 and np.allclose(np.delete(e, 7), 0)
