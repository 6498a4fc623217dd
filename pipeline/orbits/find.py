"""The orbit finder and verifier: do the heads of a layer form orbits of C_p?

Recipe (all on gauge-centred heads, see ``fourier.centre``):

1. **Dead heads** are dropped: ||R_h||_F below ``dead_tol`` times the largest head's.
2. **Equal QK** heads are merged (relative Frobenius distance of M below ``merge_tol``): they attend
   identically, so only the sum of their R counts.
3. For every shift s, the shifted merged heads (T_s M T_s^-1, T_2s R T_s^-1) are assigned to merged heads
   by the Hungarian algorithm on the *matching error*

       err(s, h, g) = ||(s.M_h - M_g, s.R_h - R_g)||_F / ||(M_h, R_h)||_F

   (the pair (M, R) as one vector), giving the image pi_s(h) and its error.
4. A set of heads is an **orbit** when it is closed (pi_s maps it to itself with error <= tol for
   all p shifts), connected, and every head h in it has |set| * |{s : pi_s(h) = h}| = p.

The worst error of an orbit is the largest err(s, h, pi_s(h)) over its heads and all p shifts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linear_sum_assignment

from .fourier import centre, shift_ov, shift_qk
from .task import P


@dataclass
class Orbits:
    """Result of ``find_orbits`` for H heads (original numbering throughout)."""

    orbit: np.ndarray  # (H,) int: orbit id, -1 none (dead heads: -1)
    shift_image: np.ndarray  # (p, H) int: the head that s.h matched (a representative of its merged group); -1 dead
    shift_error: np.ndarray  # (p, H) float: matching error of that match; NaN dead
    alive: np.ndarray  # (H,) bool
    group: np.ndarray  # (H,) int: merged-group id (heads with equal M share one), -1 dead
    sizes: list[int] = field(default_factory=list)  # per orbit id: number of merged heads
    worst_error: list[float] = field(default_factory=list)  # per orbit id
    members: list[np.ndarray] = field(default_factory=list)  # per orbit id: original heads

    @property
    def median_error(self) -> float:
        """Median over alive heads and shifts s != 0 of the matching error (how near the layer is to orbits)."""
        e = self.shift_error[1:][:, self.alive]
        return float(np.median(e)) if e.size else float("nan")


def _pair_norm(M, R):
    return np.sqrt((M * M).sum(axis=(-1, -2)) + (R * R).sum(axis=(-1, -2)))


def merge_groups(M: np.ndarray, alive: np.ndarray, merge_tol: float) -> np.ndarray:
    """(H,) group id per head: alive heads whose centred M lie within merge_tol (relative) share a group."""
    H = M.shape[0]
    group = -np.ones(H, dtype=int)
    norms = np.sqrt((M * M).sum(axis=(1, 2)))
    n = 0
    for h in np.flatnonzero(alive):
        for g in range(n):
            rep = np.flatnonzero(group == g)[0]
            scale = max(norms[h], norms[rep], 1e-12)
            if np.sqrt(((M[h] - M[rep]) ** 2).sum()) / scale <= merge_tol:
                group[h] = g
                break
        else:
            group[h] = n
            n += 1
    return group


def matching(Mg: np.ndarray, Rg: np.ndarray, p: int = P) -> tuple[np.ndarray, np.ndarray]:
    """For merged heads (G, p, p): image (p, G) and error (p, G) of the Hungarian assignment per shift."""
    G = Mg.shape[0]
    norm = np.maximum(_pair_norm(Mg, Rg), 1e-30)
    image = np.zeros((p, G), dtype=int)
    error = np.zeros((p, G))
    for s in range(p):
        Ms, Rs = shift_qk(Mg, s), shift_ov(Rg, s)
        d2 = (((Ms[:, None] - Mg[None]) ** 2).sum(axis=(2, 3)) + ((Rs[:, None] - Rg[None]) ** 2).sum(axis=(2, 3)))
        cost = np.sqrt(d2) / norm[:, None]
        rows, cols = linear_sum_assignment(cost)
        image[s, rows] = cols
        error[s, rows] = cost[rows, cols]
    return image, error


def orbits_of(image: np.ndarray, error: np.ndarray, tol: float) -> list[np.ndarray]:
    """Closed, connected sets of merged heads with orbit-stabiliser consistency (see module docstring)."""
    p, G = image.shape
    parent = list(range(G))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for s in range(p):
        for h in range(G):
            if error[s, h] <= tol:
                parent[root(h)] = root(image[s, h])
    comps: dict[int, list[int]] = {}
    for h in range(G):
        comps.setdefault(root(h), []).append(h)
    found = []
    for heads in comps.values():
        hs = np.array(heads)
        if not np.isin(image[:, hs], hs).all() or (error[:, hs] > tol).any():
            continue
        stab = (image[:, hs] == hs[None, :]).sum(axis=0)
        if np.all(len(hs) * stab == p):
            found.append(hs)
    return found


def find_orbits(M: np.ndarray, R: np.ndarray, tol: float = 0.02, dead_tol: float = 0.02,
                merge_tol: float = 0.02) -> Orbits:
    """Find and verify orbits among heads M, R (H, p, p). See the module docstring for the definitions."""
    M = np.asarray(M, dtype=np.float64)
    R = np.asarray(R, dtype=np.float64)
    if M.shape != R.shape or M.ndim != 3 or M.shape[1] != M.shape[2]:
        raise ValueError(f"M and R must both be (heads, p, p); got {M.shape} and {R.shape}")
    H, p, _ = M.shape
    Mc, Rc = centre(M, R)
    rn = np.sqrt((Rc * Rc).sum(axis=(1, 2)))
    alive = rn > dead_tol * max(rn.max(), 1e-30)
    group = merge_groups(Mc, alive, merge_tol)
    n_groups = int(group.max()) + 1
    reps = np.array([np.flatnonzero(group == g)[0] for g in range(n_groups)], dtype=int)
    Mg = Mc[reps]
    Rg = np.stack([Rc[group == g].sum(axis=0) for g in range(n_groups)]) if n_groups else Rc[:0]
    image, error = (matching(Mg, Rg, p) if n_groups else (np.zeros((p, 0), int), np.zeros((p, 0))))
    found = sorted(orbits_of(image, error, tol), key=len, reverse=True)
    orbit = -np.ones(H, dtype=int)
    shift_image = -np.ones((p, H), dtype=int)
    shift_error = np.full((p, H), np.nan)
    for h in np.flatnonzero(alive):
        shift_image[:, h] = reps[image[:, group[h]]]
        shift_error[:, h] = error[:, group[h]]
    sizes, worst, members = [], [], []
    for i, hs in enumerate(found):
        heads = np.flatnonzero(np.isin(group, hs))
        orbit[heads] = i
        sizes.append(len(hs))
        worst.append(float(error[:, hs].max()))
        members.append(heads)
    return Orbits(orbit, shift_image, shift_error, alive, group, sizes, worst, members)


def split_errors(M: np.ndarray, R: np.ndarray, found: Orbits) -> list[tuple[float, float]]:
    """Per orbit of ``found``: the worst relative error of M alone and of R alone over its heads and all shifts.

    The matching error weighs the pair (M, R) as one vector, where the larger of the two dominates (trained R
    are 10-400x larger than M); these say how well each circuit matches on its own scale:
    ||T_s M_h T_s^-1 - M_g|| / ||M_h|| and ||T_2s R_h T_s^-1 - R_g|| / ||R_h|| (gauge-centred, merged R summed).
    """
    Mc, Rc = centre(np.asarray(M, np.float64), np.asarray(R, np.float64))
    out = []
    for heads in found.members:
        groups = sorted(set(found.group[heads]))
        rep = {g: np.flatnonzero(found.group == g)[0] for g in groups}
        Rsum = {g: Rc[found.group == g].sum(axis=0) for g in groups}
        em = er = 0.0
        for g in groups:
            h = rep[g]
            for s in range(Mc.shape[-1]):
                t = found.group[found.shift_image[s, h]]
                em = max(em, np.linalg.norm(shift_qk(Mc[h], s) - Mc[rep[t]]) / max(np.linalg.norm(Mc[h]), 1e-30))
                er = max(er, np.linalg.norm(shift_ov(Rsum[g], s) - Rsum[t]) / max(np.linalg.norm(Rsum[g]), 1e-30))
        out.append((float(em), float(er)))
    return out
