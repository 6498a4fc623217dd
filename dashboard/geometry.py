"""The numbers behind the profile views, in numpy: the tetrahedron, the camera, quantisation, bin counts.

A profile (a, b, c, d) is a point of the 3-simplex; it is drawn at a V_a + b V_b + c V_c + d V_d with V
the vertices of a regular tetrahedron centred at 0 with circumradius 1. The camera is orthographic,
turned by azimuth (about the vertical z axis) then elevation (about the screen's x axis). The browser
runs the same map (``dashboard/js/project.js``); ``project`` is its reference in the tests.
"""

from __future__ import annotations

import numpy as np

COORDS = ("a", "b", "c", "d")
# Vertices of the regular tetrahedron on the unit sphere, in the order of the coordinates a, b, c, d.
VERTICES = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], dtype=float) / np.sqrt(3)
VERTEX_LABELS = (
    "a = 1 antisymmetric",
    "b = 1 H: symmetric, spectrum symmetric about 0",
    "c = 1 positive semidefinite",
    "d = 1 negative semidefinite",
)
VERTEX_SHORT = ("a: antisymmetric", "b: H", "c: PSD", "d: NSD")
EDGES = ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3))
DEFAULT_AZIMUTH = 30.0
DEFAULT_ELEVATION = 20.0
# The view's half-width in data units: a vertex at distance 1 keeps 0.5 units (> half a label) to the edge.
VIEW_LIMIT = 1.5
LABEL_OFFSET_PX = 9.0

N_BINS = 40
NAN_CODE = 65535
SCALE = 65534


def to_3d(profile: np.ndarray) -> np.ndarray:
    """Barycentric (..., 4) -> Cartesian (..., 3): sum_k p_k V_k. NaN stays NaN."""
    return np.asarray(profile, dtype=float) @ VERTICES


def project(xyz: np.ndarray, azimuth_deg: float, elevation_deg: float) -> tuple[np.ndarray, np.ndarray]:
    """Orthographic projection of (..., 3) points to screen (x, y) for a camera at (azimuth, elevation).

    Turn by the azimuth about z, then look from the elevation: screen x = x', screen y =
    z cos(el) - y' sin(el), with (x', y') the turned horizontal coordinates.
    """
    az, el = np.radians(azimuth_deg), np.radians(elevation_deg)
    x, y, z = xyz[..., 0], xyz[..., 1], xyz[..., 2]
    xr = x * np.cos(az) - y * np.sin(az)
    yr = x * np.sin(az) + y * np.cos(az)
    return xr, z * np.cos(el) - yr * np.sin(el)


def label_offsets(y: np.ndarray) -> np.ndarray:
    """Vertical pixel offset of each vertex label: above a vertex in the upper half, below otherwise.

    Labels are centred on their vertex, so at any rotation they stay inside ``VIEW_LIMIT``.
    """
    return np.where(np.asarray(y) >= 0, LABEL_OFFSET_PX, -LABEL_OFFSET_PX)


def quantise(profile: np.ndarray) -> np.ndarray:
    """Values in [0, 1] (NaN allowed) -> uint16: round(v * 65534), NaN -> 65535. Shape kept."""
    p = np.asarray(profile, dtype=np.float64)
    q = np.rint(np.clip(np.nan_to_num(p, nan=0.0), 0.0, 1.0) * SCALE).astype(np.uint16)
    q[np.isnan(p)] = NAN_CODE
    return q


def dequantise(q: np.ndarray) -> np.ndarray:
    """The inverse of ``quantise`` up to 1 / 65534 (what the browser computes)."""
    q = np.asarray(q)
    out = q.astype(np.float64) / SCALE
    out[q == NAN_CODE] = np.nan
    return out


def bin_index(values: np.ndarray, n_bins: int = N_BINS) -> np.ndarray:
    """Bin of each value of [0, 1] among ``n_bins`` equal bins (1.0 falls in the last bin); NaN -> -1."""
    v = np.asarray(values, dtype=float)
    b = np.minimum(np.floor(np.nan_to_num(v, nan=0.0) * n_bins).astype(int), n_bins - 1)
    return np.where(np.isfinite(v), b, -1)


def histogram_counts(values: np.ndarray, n_bins: int = N_BINS) -> np.ndarray:
    """Counts of the finite values in [0, 1] in ``n_bins`` equal bins (1.0 falls in the last bin), like the JS."""
    b = bin_index(values, n_bins).ravel()
    return np.bincount(b[b >= 0], minlength=n_bins).astype(float)


def layer_counts(profile: np.ndarray, n_bins: int = N_BINS) -> np.ndarray:
    """(D, L, 4, n_bins) counts of heads per layer and value bin at every offset (NaN heads left out).

    profile : (L, H, D, 4).
    """
    L, H, D, _ = profile.shape
    b = bin_index(np.moveaxis(profile, 2, 0), n_bins)  # (D, L, H, 4)
    out = np.zeros((D, L, 4, n_bins))
    d_idx, l_idx, _, k_idx = np.meshgrid(np.arange(D), np.arange(L), np.arange(H), np.arange(4), indexing="ij")
    ok = b >= 0
    np.add.at(out, (d_idx[ok], l_idx[ok], k_idx[ok], b[ok]), 1)
    return out
