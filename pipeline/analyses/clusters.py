"""Clusters of heads by the shape of their symmetric spectrum, how well k clusters separate, and how they agree with the
spectral types.

Each head is the decreasing vector of the eigenvalues of its S (the stored ``spectrum``, k values) scaled to unit norm
(:func:`unit_spectra`); heads with a NaN in it or a zero spectrum are left out. k-means is greedy k-means++ seeding
(Arthur and Vassilvitskii 2007, with scikit-learn's 2 + log k candidates per centre) then Lloyd's steps until no label
changes, restarted ``RESTARTS`` times; the restart with the least within-cluster sum of squares and no empty cluster is
kept (scipy's ``kmeans2`` runs a fixed number of steps, with no stopping rule). Restart i of a search with seed s draws
from ``numpy.random.default_rng([s, k, i])``, so a result depends on the seed alone. Clusters are numbered by decreasing
mean signed energy (sum of lambda^2 over positive minus over negative eigenvalues): with k = 3, 0 is the
positive-dominant cluster (like Type I₊), 2 the negative-dominant one (like Type I₋).

The silhouette (Rousseeuw 1987; 0 for a point alone in its cluster) and the adjusted Rand index (Hubert and Arabie 1985;
1.0 for two partitions into a single cluster) are computed here in numpy; the tests check them against scikit-learn's
and closed forms.
"""

from __future__ import annotations

import numpy as np

K = 3
K_RANGE = (2, 3, 4, 5, 6)
RESTARTS = 20
MAX_STEPS = 300
SEED = 0
DISTANCE_BLOCK = 1 << 22  # distance matrix entries per block of the silhouette


def unit_spectra(spectrum: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(X, kept): the rows of ``spectrum`` (H, E) usable as points, decreasing and unit-norm, with the columns NaN
    in every row dropped, and the indices of the rows kept."""
    s = np.atleast_2d(np.asarray(spectrum, dtype=float))
    s = s[:, ~np.isnan(s).all(axis=0)] if s.size else s
    norms = np.linalg.norm(s, axis=1)
    kept = np.flatnonzero(np.isfinite(s).all(axis=1) & (norms > 0))
    return -np.sort(-(s[kept] / norms[kept, None]), axis=1), kept


def signed_energy(X: np.ndarray) -> np.ndarray:
    """sum of lambda^2 over the positive entries minus over the negative ones, per row."""
    return np.sum(np.sign(X) * X * X, axis=1)


def _squared_distances(X: np.ndarray, centres: np.ndarray, xx: np.ndarray | None = None) -> np.ndarray:
    """(n, c) squared Euclidean distances of the points to the centres (BLAS; clipped at 0); ``xx``: the points'
    squared norms, when known."""
    xx = np.einsum("ij,ij->i", X, X) if xx is None else xx
    d2 = xx[:, None] - 2.0 * X @ centres.T + np.einsum("ij,ij->i", centres, centres)[None, :]
    return np.maximum(d2, 0.0)


def _seed_centres(X: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Greedy k-means++ seeding: the first centre uniformly; each next one the best (least total squared distance
    to the nearest centre) of 2 + floor(log k) points drawn with probability proportional to that squared distance."""
    xx = np.einsum("ij,ij->i", X, X)
    centres = [X[rng.integers(len(X))]]
    d2 = _squared_distances(X, centres[0][None], xx)[:, 0]
    trials = 2 + int(np.log(k))
    for _ in range(1, k):
        total = d2.sum()
        picks = rng.choice(len(X), size=trials, p=d2 / total) if total > 0 else rng.integers(len(X), size=trials)
        candidates = np.minimum(d2[:, None], _squared_distances(X, X[picks], xx))  # (n, trials)
        best = int(np.argmin(candidates.sum(axis=0)))
        centres.append(X[picks[best]])
        d2 = candidates[:, best]
    return np.array(centres)


def _lloyd(X: np.ndarray, centres: np.ndarray) -> tuple[np.ndarray, float] | None:
    """Lloyd's steps from ``centres`` until no label changes (at most MAX_STEPS): (labels, within-cluster sum of
    squares), or None when a cluster empties."""
    k, xx = len(centres), np.einsum("ij,ij->i", X, X)
    labels = np.argmin(_squared_distances(X, centres, xx), axis=1)
    for _ in range(MAX_STEPS):
        counts = np.bincount(labels, minlength=k)
        if (counts == 0).any():
            return None
        onehot = np.zeros((len(X), k))
        onehot[np.arange(len(X)), labels] = 1.0
        centres = (onehot.T @ X) / counts[:, None]
        new = np.argmin(_squared_distances(X, centres, xx), axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
    if len(np.unique(labels)) < k:
        return None
    return labels, float(np.sum((X - centres[labels]) ** 2))


def kmeans(X: np.ndarray, k: int, seed: int = SEED, restarts: int = RESTARTS) -> tuple[np.ndarray, float]:
    """(labels, within-cluster sum of squares) of the best of ``restarts`` seeded k-means runs (module docstring),
    labels numbered by decreasing mean signed energy. ValueError when every restart leaves a cluster empty or there
    are fewer points than k."""
    X = np.asarray(X, dtype=float)
    if len(X) < k:
        raise ValueError(f"{len(X)} heads cannot form {k} clusters")
    best = None
    for i in range(restarts):
        found = _lloyd(X, _seed_centres(X, k, np.random.default_rng([seed, k, i])))
        if found is not None and (best is None or found[1] < best[1]):
            best = found
    if best is None:
        raise ValueError(f"every k-means restart for k = {k} left a cluster empty")
    labels = best[0]
    energy = signed_energy(X)
    order = np.argsort([-energy[labels == c].mean() for c in range(k)], kind="stable")
    renumber = np.empty(k, dtype=int)
    renumber[order] = np.arange(k)
    return renumber[labels], best[1]


def _distances(X: np.ndarray, rows: slice) -> np.ndarray:
    sq = np.sum(X * X, axis=1)
    d2 = sq[rows, None] + sq[None, :] - 2.0 * X[rows] @ X.T
    return np.sqrt(np.maximum(d2, 0.0))


def silhouette(X: np.ndarray, labels: np.ndarray) -> float:
    """The mean silhouette coefficient of the points X (n, E) with Euclidean distances; NaN with fewer than 2
    clusters or as many clusters as points."""
    X, labels = np.asarray(X, dtype=float), np.asarray(labels)
    codes, labels = np.unique(labels, return_inverse=True)
    n, c = len(X), len(codes)
    if c < 2 or c >= n:
        return float("nan")
    sizes = np.bincount(labels, minlength=c).astype(float)
    onehot = np.zeros((n, c))
    onehot[np.arange(n), labels] = 1.0
    step = max(1, DISTANCE_BLOCK // max(1, n))
    s = np.empty(n)
    for start in range(0, n, step):
        rows = slice(start, min(n, start + step))
        sums = _distances(X, rows) @ onehot  # (rows, c): distance sums to each cluster
        own = labels[rows]
        idx = np.arange(len(own))
        own_size = sizes[own] - 1.0
        with np.errstate(invalid="ignore", divide="ignore"):
            a = np.where(own_size > 0, sums[idx, own] / np.where(own_size > 0, own_size, 1.0), 0.0)
            means = sums / sizes[None, :]
        means[idx, own] = np.inf
        b = means.min(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            s[rows] = np.where(own_size > 0, (b - a) / np.maximum(a, b), 0.0)
    return float(np.mean(np.nan_to_num(s, nan=0.0)))


def _pairs(x: np.ndarray) -> float:
    return float(np.sum(x * (x - 1.0) / 2.0))


def contingency(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The table of counts of each (label of a, label of b), rows and columns in the order of the sorted labels."""
    _, ia = np.unique(np.asarray(a), return_inverse=True)
    _, ib = np.unique(np.asarray(b), return_inverse=True)
    table = np.zeros((ia.max(initial=-1) + 1, ib.max(initial=-1) + 1), dtype=np.int64)
    np.add.at(table, (ia, ib), 1)
    return table


def adjusted_rand_index(a: np.ndarray, b: np.ndarray) -> float:
    """The adjusted Rand index of two partitions of the same points (labels of any kind)."""
    a, b = np.asarray(a).ravel(), np.asarray(b).ravel()
    if a.shape != b.shape:
        raise ValueError(f"the partitions label {len(a)} and {len(b)} points")
    table = contingency(a, b).astype(float)
    index = _pairs(table)
    rows, cols, total = _pairs(table.sum(axis=1)), _pairs(table.sum(axis=0)), _pairs(np.array([len(a)]))
    expected = rows * cols / total if total > 0 else 0.0
    top = (rows + cols) / 2.0
    if top == expected:  # both partitions trivial in the same way (one cluster, or all singletons)
        return 1.0
    return float((index - expected) / (top - expected))


def clusters(spectrum: np.ndarray, types: np.ndarray | None = None, k: int = K, k_range=K_RANGE,
             seed: int = SEED, restarts: int = RESTARTS) -> dict:
    """The clustering summary of one model: heads clustered, the chosen k's cluster sizes, the silhouette for each
    k of ``k_range`` (with its sizes), and, given each head's type code (``types``, (H,) or any shape of H values),
    the adjusted Rand index between the k clusters and the types and their contingency table (clusters x types).
    Also ``labels``: the cluster of each head, -1 for heads left out (a list, one per head of ``spectrum``)."""
    spectrum = np.atleast_2d(np.asarray(spectrum, dtype=float))
    X, kept = unit_spectra(spectrum)
    out = {"heads": int(len(kept)), "k": k, "seed": seed, "restarts": restarts, "silhouette": {}, "sizes": {}}
    found = {}
    for kk in sorted(set(k_range) | {k}):
        if len(X) <= kk:
            continue
        found[kk] = kmeans(X, kk, seed, restarts)[0]
        if kk in k_range:
            out["silhouette"][str(kk)] = silhouette(X, found[kk])
            out["sizes"][str(kk)] = np.bincount(found[kk], minlength=kk).tolist()
    all_labels = np.full(len(spectrum), -1)
    if k in found:
        all_labels[kept] = found[k]
        if types is not None:
            t = np.asarray(types).ravel()[kept]
            out["ari"] = adjusted_rand_index(found[k], t)
            table = np.zeros((k, 3), dtype=int)
            np.add.at(table, (found[k], t.astype(int)), 1)
            out["contingency"] = table.tolist()
    out["labels"] = all_labels.tolist()
    return out
