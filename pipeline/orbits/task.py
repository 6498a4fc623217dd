"""The task: (x1, x2, x3) -> (x2 + x3, x3 + x1, x1 + x2) mod p, and its train / held-out splits.

With no positional information the layer sees, at each query position, its own token ``a`` and the
unordered pair of the other two tokens ``{b, c}``; the target there is ``(b + c) mod p``. A *query
instance* is the ordered triple ``(a, b, c)``: position 1 of the input triple ``(a, b, c)``. Positions 2
and 3 of a triple are position 1 of a permutation of it, so a split that is closed under permutations
trains on all three positions of a triple exactly when it trains on its position-1 instance.

Splits
------
``orbit`` (the default): the 24^3 triples are grouped into orbits of shifts (x -> x + s for all three)
and permutations, and whole orbits go to train or to held-out. Nothing about a held-out triple is then
reachable from a train triple by a symmetry the layer has for free (permutations: no positions) or is
penalised toward (shifts: the equivariance penalty covers every input, labelled or not).
``random``: triples drawn independently; leaks through permutations and shifts (reported only for
comparison).
"""

from __future__ import annotations

import numpy as np

P = 24


def all_triples(p: int = P) -> np.ndarray:
    """(p^3, 3) int array of every ordered triple, in C order of (a, b, c)."""
    g = np.indices((p, p, p)).reshape(3, -1).T
    return g.astype(np.int64)


def targets(p: int = P) -> np.ndarray:
    """(p, p, p) int: the target at a query with own token a and other tokens b, c, i.e. (b + c) mod p."""
    a, b, c = np.indices((p, p, p))
    return (b + c) % p


def orbit_labels(p: int = P) -> np.ndarray:
    """(p, p, p) int: an orbit id per triple, orbits of shifts and permutations (ids 0..n_orbits-1)."""
    t = all_triples(p)
    canon = None
    for s in range(p):
        key = np.sort((t + s) % p, axis=1)
        code = (key[:, 0] * p + key[:, 1]) * p + key[:, 2]
        canon = code if canon is None else np.minimum(canon, code)
    _, ids = np.unique(canon, return_inverse=True)
    return ids.reshape(p, p, p)


def split_mask(train_fraction: float, seed: int, kind: str = "orbit", p: int = P) -> np.ndarray:
    """(p, p, p) bool, True where the triple (and so its query instance) is in the train set.

    ``orbit``: whole orbits of shifts and permutations are drawn in a random order (from ``seed``)
    until the train set holds at least ``train_fraction`` of the triples. ``random``: every triple
    independently with probability ``train_fraction`` (leaky; for comparison only).
    """
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must lie strictly between 0 and 1; got {train_fraction}")
    rng = np.random.default_rng(seed)
    if kind == "random":
        return rng.random((p, p, p)) < train_fraction
    if kind != "orbit":
        raise ValueError(f"split kind must be 'orbit' or 'random'; got {kind!r}")
    ids = orbit_labels(p)
    sizes = np.bincount(ids.ravel())
    order = rng.permutation(len(sizes))
    cum = np.cumsum(sizes[order])
    n_take = int(np.searchsorted(cum, train_fraction * p**3) + 1)
    chosen = np.zeros(len(sizes), dtype=bool)
    chosen[order[:n_take]] = True
    return chosen[ids]


def heldout_covered(mask: np.ndarray, p: int = P) -> float:
    """Share of the held-out triples (``~mask``) with a train triple in their orbit of shifts and permutations.

    A layer without positions gives a triple and its permutations the same three query instances, and an
    exactly shift-equivariant layer gives every shift of a triple the shifted answers; so with 100% train
    accuracy such a layer is right on every covered held-out triple, and this share is its least held-out
    accuracy. The orbit split covers none; a random split covers almost all (``random_split_covered``).
    """
    ids = orbit_labels(p)
    touched = np.zeros(ids.max() + 1, dtype=bool)
    touched[ids[mask]] = True
    held = ~mask
    return float(touched[ids[held]].mean()) if held.any() else float("nan")


def random_split_covered(train_fraction: float, p: int = P) -> float:
    """``heldout_covered`` expected of a random split at this fraction (the ratio of expectations): a held-out
    triple in an orbit of s triples is uncovered when its s - 1 orbit-mates are all held out, (1 - f)^(s - 1)."""
    s = np.bincount(orbit_labels(p).ravel()).astype(np.float64)
    return float((s * (1 - (1 - train_fraction) ** (s - 1))).sum() / s.sum())
