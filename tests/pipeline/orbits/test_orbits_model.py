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


def test_init_scale_2_trains_the_full_layer_with_finite_gradients():
    """At init scale 2 the full layer's QK rows span over 100 (M's std is init_scale^4 = 16 times the default),
    so in some rows every key a query instance holds lies far below the row's best key. The gradients stay
    finite there (before the softmax's reference was bounded by the own key, the reciprocal's backward
    overflowed in float32 and every init-scale-2 run failed at epoch 1), and the float32 table still equals
    the token forward in float64."""
    import torch.nn.functional as F

    from pipeline.orbits.config import Config
    from pipeline.orbits.task import split_mask, targets
    from pipeline.orbits.train import initial_params, penalty, train

    torch.set_num_threads(1)
    cfg = Config(init_scale=2.0, seed=0)
    p = initial_params(cfg)
    M, R = circuits(p)
    own_gap = (M.amax(2) - torch.diagonal(M, dim1=1, dim2=2)).max()
    assert own_gap > 60  # rows where the own key lies far below the best key: the case that overflowed
    G = table_forward(M, R)
    mask = torch.from_numpy(split_mask(cfg.train_fraction, 0))
    tgt = torch.from_numpy(targets()).long()
    (F.cross_entropy(G[mask], tgt[mask]) + penalty(cfg, M, R, None, G)).backward()
    assert all(bool(torch.isfinite(v.grad).all()) for v in p.values())
    x = torch.randint(24, (300, 3), generator=torch.Generator().manual_seed(0))
    want = token_forward({k: v.detach().double() for k, v in p.items()}, x)[:, 0]
    got = G[x[:, 0], x[:, 1], x[:, 2]].detach().double()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4 * float(want.abs().max()))
    run = train(Config(init_scale=2.0, epochs=3, context_batch=1, frame_every=1), progress=False)
    assert np.isfinite(run["metrics"]["loss"]).all() and all(np.isfinite(v).all() for v in run["params"].values())
