"""The spectral type of a head, by the project's rule and by the paper's, and how the counts move with the thresholds.

**The project's rule** (the one the tetrahedron colours by): from a head's profile (a, b, c, d) at an offset,
imbalance = (c - d) / (c + d) (0 where c + d = 0); Type I₊ when imbalance > ``imbalance_cut`` (0.20) and
c + d > ``cd_floor`` (0.01), Type I₋ when imbalance < -``imbalance_cut`` and c + d > ``cd_floor``, Type II otherwise
(near the a-b edge, or c and d balanced). A profile with a NaN is Type II.

**The paper's rule** works on the symmetric profile (0, b, c, d) / (1 - a), i.e. the statistics ``c_sym``,
``d_sym``: Type II when c_sym + d_sym <= ``radius`` (0.02: a neighbourhood of the b = 1 vertex, since
1 - b_sym = c_sym + d_sym), else Type I₊ when c_sym > d_sym and Type I₋ otherwise (ties included). A head with a
NaN is Type II here too, so both rules give every head a code; counts leave such heads out (:func:`type_counts`).

Codes index ``TYPE_NAMES``. Plain numpy, no I/O: the dashboard draws the same rule.
"""

from __future__ import annotations

import numpy as np

TYPE_NAMES = ("Type I₊", "Type II", "Type I₋")
TYPE_I_PLUS, TYPE_II, TYPE_I_MINUS = 0, 1, 2
IMBALANCE_CUT = 0.20
CD_FLOOR = 0.01
PAPER_RADIUS = 0.02

# The sensitivity grid of the project's rule, and the radii of the paper's rule shown beside it.
IMBALANCE_CUTS = (0.10, 0.15, 0.20, 0.25, 0.30)
CD_FLOORS = (0.005, 0.01, 0.015, 0.02)
PAPER_RADII = (0.01, 0.02, 0.03, 0.05, 0.10)


def spectral_types(profile: np.ndarray, imbalance_cut: float = IMBALANCE_CUT,
                   cd_floor: float = CD_FLOOR) -> np.ndarray:
    """(..., 4) profiles -> (...) int8 type codes by the project's rule (module docstring); NaN -> Type II."""
    p = np.asarray(profile, dtype=float)
    c, d = p[..., 2], p[..., 3]
    s = c + d
    with np.errstate(invalid="ignore", divide="ignore"):
        imbalance = np.where(s > 0, (c - d) / np.where(s > 0, s, 1.0), 0.0)
    big = s > cd_floor
    out = np.full(s.shape, TYPE_II, dtype=np.int8)
    out[big & (imbalance > imbalance_cut)] = TYPE_I_PLUS
    out[big & (imbalance < -imbalance_cut)] = TYPE_I_MINUS
    return out


def paper_types(c_sym: np.ndarray, d_sym: np.ndarray, radius: float = PAPER_RADIUS) -> np.ndarray:
    """Type codes by the paper's rule (module docstring) from the statistics ``c_sym``, ``d_sym``; NaN -> Type II."""
    c, d = np.asarray(c_sym, dtype=float), np.asarray(d_sym, dtype=float)
    finite = np.isfinite(c) & np.isfinite(d)
    out = np.where(c > d, TYPE_I_PLUS, TYPE_I_MINUS).astype(np.int8)
    out[~finite | (c + d <= radius)] = TYPE_II
    return out


def type_counts(types: np.ndarray, keep: np.ndarray | None = None) -> np.ndarray:
    """(3,) number of heads of each code, among those where ``keep`` (default: all) is true."""
    t = np.asarray(types).ravel()
    if keep is not None:
        t = t[np.asarray(keep, dtype=bool).ravel()]
    return np.bincount(t[(t >= 0) & (t < 3)].astype(int), minlength=3)


def sensitivity(profile: np.ndarray, c_sym: np.ndarray, d_sym: np.ndarray,
                imbalance_cuts=IMBALANCE_CUTS, cd_floors=CD_FLOORS, radii=PAPER_RADII) -> dict:
    """How the type counts move with the thresholds, over the heads whose profile and c_sym, d_sym are finite.

    profile : (H, 4) at one offset (the analyses take d = 0); c_sym, d_sym : (H,).

    Returns a JSON-able dict: ``heads`` (the heads counted), ``imbalance_cuts``, ``cd_floors``, ``counts``
    (cuts x floors x 3 counts of I₊ / II / I₋ by the project's rule), ``radii`` and ``paper_counts`` (radii x 3, by
    the paper's rule), and ``default`` / ``paper_default``: the counts at the rules' own thresholds.
    """
    p = np.asarray(profile, dtype=float).reshape(-1, 4)
    c, d = np.asarray(c_sym, dtype=float).ravel(), np.asarray(d_sym, dtype=float).ravel()
    keep = np.isfinite(p).all(axis=-1) & np.isfinite(c) & np.isfinite(d)
    p, c, d = p[keep], c[keep], d[keep]
    counts = [[type_counts(spectral_types(p, cut, floor)).tolist() for floor in cd_floors] for cut in imbalance_cuts]
    return {
        "heads": int(keep.sum()),
        "names": list(TYPE_NAMES),
        "imbalance_cuts": [float(x) for x in imbalance_cuts],
        "cd_floors": [float(x) for x in cd_floors],
        "counts": counts,
        "radii": [float(r) for r in radii],
        "paper_counts": [type_counts(paper_types(c, d, r)).tolist() for r in radii],
        "default": type_counts(spectral_types(p)).tolist(),
        "paper_default": type_counts(paper_types(c, d)).tolist(),
    }
