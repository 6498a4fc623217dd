"""The exact circuit forwards against ordinary token-level attention, and the equivariance errors."""

import numpy as np
import pytest
import torch

from pipeline.orbits.equivariance import context_error2, triple_error2
from pipeline.orbits.fourier import shift_ov, shift_qk
from pipeline.orbits.model import circuits, context_forward, init_params, table_forward, token_forward


@pytest.fixture(scope="module")
def params():
    return init_params(n_heads=5, d_model=16, d_head=4, seed=3, init_scale=2.0, dtype=torch.float64)


def test_table_forward_equals_token_forward_at_every_position(params):
    M, R = circuits(params)
    G = table_forward(M, R)
    x = torch.randint(24, (200, 3), generator=torch.Generator().manual_seed(0))
    logits = token_forward(params, x)
    for i in range(3):
        a, b, c = x[:, i], x[:, (i + 1) % 3], x[:, (i + 2) % 3]
        torch.testing.assert_close(G[a, b, c], logits[:, i], rtol=1e-10, atol=1e-10)


def test_context_forward_equals_token_forward_on_longer_sequences(params):
    M, R = circuits(params)
    g = torch.Generator().manual_seed(1)
    for L in (2, 5, 9):
        x = torch.randint(24, (30, L), generator=g)
        logits = token_forward(params, x)
        counts = torch.zeros(30, 24, dtype=torch.float64)
        counts.scatter_add_(1, x[:, 1:], torch.ones(30, L - 1, dtype=torch.float64))
        F = context_forward(M, R, counts)
        torch.testing.assert_close(F[torch.arange(30), x[:, 0]], logits[:, 0], rtol=1e-10, atol=1e-10)


def _brute_force_error(params, p):
    """sqrt of sum_{x,s} |c(f(x+s)) - mean_s c(T_-2s f(x+s))|^2 / sum |c f|^2 from the token forward."""
    x = torch.tensor(np.indices((p, p, p)).reshape(3, -1).T)
    Y = []
    for s in range(p):
        f = token_forward(params, (x + s) % p)[:, 0]  # (n, p) at position 1
        f = f - f.mean(-1, keepdim=True)
        Y.append(torch.roll(f, -2 * s, dims=-1))
    Y = torch.stack(Y)
    return float(((Y - Y.mean(0)) ** 2).sum() / (Y**2).sum())


def test_triple_error_matches_brute_force_on_a_small_group():
    p = 6
    params = init_params(n_heads=3, d_model=8, d_head=4, p=p, seed=5, dtype=torch.float64)
    G = table_forward(*circuits(params))
    assert float(triple_error2(G)) == pytest.approx(_brute_force_error(params, p), rel=1e-9)


def _orbit_layer(k, rng):
    """Circuits of a full orbit of k heads (base head averaged over the stabiliser {0, k, 2k, ...})."""
    X, Y = rng.normal(size=(24, 24)), rng.normal(size=(24, 24))
    M0 = np.mean([shift_qk(X, j * k) for j in range(24 // k)], axis=0)
    R0 = np.mean([shift_ov(Y, j * k) for j in range(24 // k)], axis=0)
    return np.stack([shift_qk(M0, s) for s in range(k)]), np.stack([shift_ov(R0, s) for s in range(k)])


def test_orbits_are_equivariant_and_random_heads_are_not():
    rng = np.random.default_rng(0)
    M12, R12 = _orbit_layer(12, rng)
    M4, R4 = _orbit_layer(4, rng)
    M = torch.tensor(np.concatenate([M12, M4]))
    R = torch.tensor(np.concatenate([R12, R4]))
    counts = torch.tensor(rng.integers(0, 3, size=(6, 24)), dtype=torch.float64)
    assert float(triple_error2(table_forward(M, R))) < 1e-24
    assert float(context_error2(M, R, counts)) < 1e-24
    # break the orbit: drop one head of the 12-orbit
    assert float(triple_error2(table_forward(M[1:], R[1:]))) > 1e-4
    Mr, Rr = torch.tensor(rng.normal(size=(16, 24, 24))), torch.tensor(rng.normal(size=(16, 24, 24)))
    assert float(triple_error2(table_forward(Mr, Rr))) > 0.1
    assert float(context_error2(Mr, Rr, counts)) > 0.1
