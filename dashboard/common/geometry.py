"""The numbers behind the profile views, in numpy: the tetrahedron, the camera, quantisation, bin counts,
spectral types, the rank-one curve, the a = 0 face and the extreme heads of each type.

A profile (a, b, c, d) is a point of the 3-simplex; it is drawn at a V_a + b V_b + c V_c + d V_d with V
the vertices of a regular tetrahedron centred at 0 with circumradius 1. The camera is orthographic,
turned by azimuth (about the vertical z axis) then elevation (about the screen's x axis). The browser
runs the same map (``dashboard/profiles/js/project.js``); ``project`` is its reference in the tests.
"""

from __future__ import annotations

import numpy as np

from pipeline.analyses.types import (  # noqa: F401 - the type rule, re-exported for the views and the JS twins' tests
    CD_FLOOR,
    IMBALANCE_CUT,
    TYPE_I_MINUS,
    TYPE_I_PLUS,
    TYPE_II,
    TYPE_NAMES,
    spectral_types,
)

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
SELECTED = "#ff5a1f"  # the selected heads, and the second of two compared models
ALL = "#8a93a3"  # every head, and the first of two compared models
COORD_TITLES = ("a · antisymmetric", "b · H (±spectrum)", "c · positive semidef.", "d · negative semidef.")
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


# ------------------------------------------------------------------------------------- spectral types

# The spectral type of a head from its profile: the rule's one home is pipeline.analyses.types (numpy only);
# codes index TYPE_NAMES and TYPE_COLORS. The browser recomputes it at every d with the same rule.
TYPE_COLORS = ("#d62728", "#7f7f7f", "#1f77b4")  # red (c > d), grey, blue (d > c)
TYPE_MARKERS = ("triangle", "circle", "inverted_triangle")
# the k-means clusters of the heads' unit S spectra (pipeline.analyses.clusters, K = 3): clusters 0, 1, 2; the heads
# left out in grey
CLUSTER_COLORS = ("#e6550d", "#31a354", "#756bb1", "#bdbdbd")


def type_counts(types: np.ndarray) -> np.ndarray:
    """(3,) number of heads of each type code."""
    t = np.asarray(types).ravel()
    return np.bincount(t[(t >= 0) & (t < 3)].astype(int), minlength=3)


def type_labels(types: np.ndarray) -> list[str]:
    """The legend labels with live counts: 'Type I₊ (n=K)', 'Type II (n=K)', 'Type I₋ (n=K)'."""
    return [f"{name} (n={int(k)})" for name, k in zip(TYPE_NAMES, type_counts(types), strict=True)]


def layer_type_fractions(profile_at_d: np.ndarray) -> np.ndarray:
    """(L, 3): the fraction of each layer's heads (those with a finite profile) in each type; rows of a layer
    without heads are NaN. profile_at_d: (L, H, 4)."""
    p = np.asarray(profile_at_d, dtype=float)
    finite = np.isfinite(p).all(axis=-1)
    types = spectral_types(p)
    counts = np.stack([((types == k) & finite).sum(axis=1) for k in range(3)], axis=1).astype(float)
    total = counts.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        return np.where(total > 0, counts / np.where(total > 0, total, 1.0), np.nan)


# ----------------------------------------------------------------------------------- the rank-one curve


def rank_one_rho(n_log: int = 241) -> np.ndarray:
    """The curve's parameter: 0, then ``n_log`` log-spaced values from 1e-3 to 1e3, then inf."""
    return np.concatenate([[0.0], np.logspace(-3, 3, n_log), [np.inf]])


def rank_one_curve(rho: np.ndarray | None = None) -> np.ndarray:
    """(len(rho), 4) points (rho, rho, (1 - rho)_+^2, (rho - 1)_+^2) / (1 + rho^2); rho = inf -> (0, 0, 0, 1).

    The profiles of the rank-one forms L = u v^T: with unit u, v and t = <u, v> a rank-one form has the profile
    ((1 - t^2)/2, (1 - t^2)/2, t_+^2, t_-^2); the point at rho is the one with t = (1 - rho) / sqrt(1 + rho^2),
    e.g. u = e1, v = ((1 - rho) e1 + sqrt(2 rho) e2) / sqrt(1 + rho^2) (``rank_one_cosine``). It runs from the c
    vertex (rho = 0) through (1/2, 1/2, 0, 0) (rho = 1) to the d vertex (rho = inf). Default rho:
    ``rank_one_rho()``. Here rho is the curve's parameter: that form's own statistic ``rho`` (||lambda_-|| /
    ||lambda_+||) is (1 - t) / (1 + t).
    """
    r = rank_one_rho() if rho is None else np.asarray(rho, dtype=float)
    out = np.zeros(r.shape + (4,))
    fin = np.isfinite(r)
    rf = r[fin]
    den = 1.0 + rf**2
    out[fin] = np.stack([rf / den, rf / den, np.clip(1 - rf, 0, None) ** 2 / den,
                         np.clip(rf - 1, 0, None) ** 2 / den], axis=-1)
    out[~fin] = (0.0, 0.0, 0.0, 1.0)
    return out


def rank_one_cosine(rho: np.ndarray) -> np.ndarray:
    """t = <u, v> of the unit rank-one form u v^T at the curve's parameter rho: (1 - rho) / sqrt(1 + rho^2),
    -1 at rho = inf."""
    r = np.asarray(rho, dtype=float)
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(r), (1 - r) / np.sqrt(1 + np.where(np.isfinite(r), r, 0.0) ** 2), -1.0)


# ------------------------------------------------------------------------------------------ the a = 0 face

# The face a = 0 of the simplex (where the symmetric part of a form lands, at (b, c, d) / (1 - a)) as an
# equilateral triangle: b at the top, c bottom left, d bottom right. No form reaches the inside of the c-d edge
# (b = 0 makes one lobe vanish, so c = 1 or d = 1): the views draw that edge dashed.
FACE_VERTICES = np.array([[0.0, np.sqrt(3) / 2], [-0.5, 0.0], [0.5, 0.0]])  # b, c, d
FACE_LABELS = ("b = 1 (H)", "c = 1 (PSD)", "d = 1 (NSD)")


def face_coordinates(profile: np.ndarray) -> np.ndarray:
    """(..., 4) profiles -> (..., 2) points of the a = 0 triangle at (b, c, d) / (1 - a); NaN where a = 1."""
    p = np.asarray(profile, dtype=float)
    rest = 1.0 - p[..., 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        bcd = p[..., 1:] / np.where(rest > 0, rest, np.nan)[..., None]
    return bcd @ FACE_VERTICES


# ------------------------------------------------------------------------------------------ parity spectra

N_EXTREME = 30


def extreme_heads(types: np.ndarray, profile: np.ndarray, c_sym: np.ndarray, d_sym: np.ndarray,
                  n: int = N_EXTREME) -> list[np.ndarray]:
    """For each type code, the flat indices of its ``n`` most extreme heads, most extreme first (ties: lower index).

    Type I₊: smallest d_sym; Type II: smallest c + d (of ``profile``); Type I₋: smallest c_sym. Heads whose key
    is NaN are left out. types: (heads,), profile: (heads, 4), c_sym, d_sym: (heads,).
    """
    t = np.asarray(types).ravel()
    p = np.asarray(profile, dtype=float).reshape(-1, 4)
    keys = (np.asarray(d_sym, dtype=float).ravel(), p[:, 2] + p[:, 3], np.asarray(c_sym, dtype=float).ravel())
    out = []
    for code, key in enumerate(keys):
        idx = np.flatnonzero((t == code) & np.isfinite(key))
        out.append(idx[np.argsort(key[idx], kind="stable")][:n])
    return out


def mean_unit_spectrum(spectra: np.ndarray) -> np.ndarray:
    """The average of sorted (decreasing) unit-norm eigenvalue vectors. spectra: (heads, E), NaN-padded; the
    columns NaN in every row are dropped, rows with another NaN or a zero vector are left out. (0,) when none."""
    s = np.asarray(spectra, dtype=float)
    if s.ndim != 2 or s.shape[0] == 0:
        return np.zeros(0)
    s = s[:, ~np.isnan(s).all(axis=0)]
    norms = np.linalg.norm(s, axis=1)
    ok = np.isfinite(s).all(axis=1) & (norms > 0)
    if not ok.any():
        return np.zeros(0)
    unit = -np.sort(-(s[ok] / norms[ok, None]), axis=1)
    return unit.mean(axis=0)
