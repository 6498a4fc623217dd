"""What the analyses tests share: random heads with their statistics from the profile route, the naive N x N
quantities of one head, and the committed store's computed models."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from pipeline.analyses.head_data import HeadData, from_dataset
from pipeline.analyses.spectra import head_spectra
from pipeline.profile import head_profiles
from pipeline.store import Store, default_store_path


def random_head_data(rng: np.random.Generator, heads: int = 24, n: int = 6, N: int = 40, name: str = "random",
                     skew: bool = True) -> tuple[HeadData, np.ndarray, np.ndarray]:
    """HeadData of ``heads`` random heads (one layer) through the profile route, with the weights (W_Q, W_K).

    With ``skew`` the keys are mixed with the queries by a random amount per head, so the heads spread over the
    types (Gaussian heads alone all sit near the a-b edge)."""
    W_Q = rng.standard_normal((heads, n, N))
    W_K = rng.standard_normal((heads, n, N))
    if skew:
        t = rng.uniform(-1.0, 1.0, size=(heads, 1, 1))
        W_K = np.sign(t) * np.abs(t) ** 0.5 * W_Q + (1 - np.abs(t)) * W_K
    profile, _, statistics, spectrum, _ = head_profiles(W_Q, W_K, eigvalsh="numpy", at_zero=True).layer_values()
    spectra = head_spectra(W_Q, W_K).as_dict()
    data = HeadData(name, N, n, np.zeros(heads, int), np.arange(heads), profile, statistics, spectrum, spectra)
    return data, W_Q, W_K


def dense(W_q: np.ndarray, W_k: np.ndarray) -> np.ndarray:
    """L = W_K^T W_Q / ||.||_F."""
    L = W_k.T @ W_q
    return L / np.linalg.norm(L)


def lobes_of(L: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(eigenvalues of S on the span (k of them, decreasing), lambda_+, lambda_-), each lobe decreasing and
    zero-padded to k, straight from numpy's eigh of the dense S."""
    N = L.shape[0]
    k = min(N, 2 * n)
    ev = np.linalg.eigh((L + L.T) / 2)[0]
    ev = np.sort(ev[np.argsort(np.abs(ev))[N - k:]])[::-1]
    pos, neg = np.zeros(k), np.zeros(k)
    p, m = np.sort(ev[ev > 0])[::-1], np.sort(-ev[ev < 0])[::-1]
    pos[:len(p)], neg[:len(m)] = p, m
    return ev, pos, neg


@functools.cache  # read once per process: each analyses module parametrizes its tests with it at collection
def computed_models() -> tuple[str, ...]:
    store = Store.open(default_store_path(), "r")
    return tuple(r.name for r in store.models() if r.complete and r.statistics_computed)


@pytest.fixture(scope="session")
def committed():
    """name -> HeadData of every computed model of the committed store (read-only)."""
    store = Store.open(default_store_path(), "r")
    ds = store.dataset("profiles")
    return {name: from_dataset(ds, name) for name in computed_models()}
