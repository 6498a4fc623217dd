"""The settings behind the search's hypotheses: each changes what its help says, and each is a grid key."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from pipeline.orbits.cli import parse_grid
from pipeline.orbits.config import GRID_KEYS, Config, adamw_epochs, command_for, learning_rate, recipe_config
from pipeline.orbits.model import circuits, init_params, table_forward, token_forward
from pipeline.orbits.search import grid_recipes
from pipeline.orbits.task import P, heldout_covered, split_mask

SMALL = Config(n_heads=3, d_model=16, d_head=4, epochs=5, lr=3e-3, lr_final=1e-4, ramp_start=1, ramp_end=4,
               penalty_end=10.0, context_batch=1, frame_every=10**6)


def _spy_adamw(monkeypatch):
    """Record every AdamW step's learning rate and weight decay per parameter group."""
    steps = []
    orig = torch.optim.AdamW.step

    def step(self, *a, **k):
        steps.append([(g["lr"], g["weight_decay"], len(g["params"])) for g in self.param_groups])
        return orig(self, *a, **k)

    monkeypatch.setattr(torch.optim.AdamW, "step", step)
    return steps


def test_hold_epochs_run_at_the_constant_rate_with_decay_after_the_cosine(monkeypatch):
    torch.set_num_threads(1)
    from pipeline.orbits.train import train

    cfg = replace(SMALL, hold_epochs=3, hold_lr=2e-4, weight_decay=0.7)
    steps = _spy_adamw(monkeypatch)
    run = train(cfg, progress=False)
    assert adamw_epochs(cfg) == 8 and len(steps) == 8
    cosine = [learning_rate(SMALL, e) for e in range(5)]
    assert cosine[0] == pytest.approx(3e-3) and cosine[-1] < 3e-3
    assert [s[0][0] for s in steps] == pytest.approx(cosine + [2e-4] * 3)
    assert all(s[0][1] == 0.7 for s in steps)  # decay on throughout the hold
    assert list(run["epoch"])[-1] == 8  # the final frame counts the hold's epochs
    assert learning_rate(replace(cfg, hold_lr=None), 6) == 3e-3  # default: the peak rate
    steps.clear()
    base = train(SMALL, progress=False)
    assert len(steps) == 5 and not np.allclose(base["params"]["W_Q"], run["params"]["W_Q"])


def test_polish_decay_adds_half_lambda_times_the_squared_norm(monkeypatch):
    """The LBFGS objective with polish_decay = lam is the objective without it plus lam/2 ||theta||^2 over the
    trained weights (measured on the closure before any step), and polishing with it shrinks the weights."""
    torch.set_num_threads(1)
    from pipeline.orbits.train import initial_params, train

    start = {k: v.detach().numpy() for k, v in initial_params(replace(SMALL, seed=4)).items()}
    seen = []

    def first_closure(self, closure):
        seen.append(float(closure().detach()))
        raise StopIteration

    monkeypatch.setattr(torch.optim.LBFGS, "step", first_closure)
    for lam in (0.0, 0.3):
        with pytest.raises(StopIteration):
            train(replace(SMALL, seed=4, epochs=0, polish_steps=1, polish_decay=lam), progress=False, start=start)
    norm2 = sum(float((v.astype(np.float64) ** 2).sum()) for v in start.values())
    assert seen[1] - seen[0] == pytest.approx(0.15 * norm2, rel=1e-5)
    monkeypatch.undo()
    runs = {lam: train(replace(SMALL, seed=4, epochs=0, polish_steps=3, polish_decay=lam), progress=False,
                       start=start) for lam in (0.0, 1.0)}
    size = {lam: sum(float((v ** 2).sum()) for v in r["params"].values()) for lam, r in runs.items()}
    assert size[1.0] < 0.9 * size[0.0]


def test_qk_init_scale_scales_the_same_draws_of_w_q_and_w_k_alone():
    base = init_params(3, 16, 4, seed=2)
    small = init_params(3, 16, 4, seed=2, qk_init_scale=0.25)
    for k in base:
        want = 0.25 * base[k] if k in ("W_Q", "W_K") else base[k]
        torch.testing.assert_close(small[k], want, rtol=1e-6, atol=0)
    from pipeline.orbits.train import initial_params

    p = initial_params(replace(SMALL, qk_init_scale=3.0, init_scale=0.5))
    q = initial_params(replace(SMALL, init_scale=0.5))
    torch.testing.assert_close(p["W_Q"], 6.0 * q["W_Q"])
    torch.testing.assert_close(p["W_V"], q["W_V"])
    assert Config(qk_init_scale=0.0).problems()


def test_qk_biases_enter_the_circuits_and_are_trained_with_the_qk_decay(monkeypatch):
    torch.set_num_threads(1)
    p = init_params(3, 16, 4, seed=1, dtype=torch.float64, qk_bias=True)
    assert float(p["b_Q"].abs().sum()) == 0 and p["b_K"].shape == (3, 4)
    g = torch.Generator().manual_seed(0)
    p["b_Q"], p["b_K"] = torch.randn(3, 4, generator=g, dtype=torch.float64), torch.randn(3, 4, generator=g,
                                                                                        dtype=torch.float64)
    M, R = circuits(p)
    assert not torch.allclose(M, circuits({k: v for k, v in p.items() if not k.startswith("b_")})[0])
    x = torch.randint(24, (100, 3), generator=g)
    G = table_forward(M, R)
    torch.testing.assert_close(G[x[:, 0], x[:, 1], x[:, 2]], token_forward(p, x)[:, 0], rtol=1e-10, atol=1e-10)
    from pipeline.orbits.batch import train_batch
    from pipeline.orbits.train import train

    steps = _spy_adamw(monkeypatch)
    cfg = replace(SMALL, qk_bias=True, weight_decay_qk=0.2)
    run = train(cfg, progress=False)
    assert steps[0] == [(steps[0][0][0], 1.0, 4), (steps[0][0][0], 0.2, 4)]  # W_Q, W_K, b_Q, b_K decay 0.2
    assert np.abs(run["params"]["b_Q"]).max() > 1e-4  # trained away from 0
    (o,) = train_batch(cfg, [0])
    np.testing.assert_allclose(o["params"]["b_K"], run["params"]["b_K"], rtol=0, atol=3e-5)


def test_penalty_from_epoch_0_at_a_constant_weight_length_3_only(monkeypatch):
    """Hypothesis c: penalty_start = penalty_end with ramp 0-0 is a constant weight from epoch 0, and
    context_weight 0 draws no contexts (length 3 only)."""
    from pipeline.orbits import train as train_mod
    from pipeline.orbits.config import penalty_weight

    cfg = replace(SMALL, penalty_start=50.0, penalty_end=50.0, ramp_start=0, ramp_end=0, context_weight=0.0)
    assert [penalty_weight(cfg, e) for e in range(5)] == [50.0] * 5
    seen = []
    orig = train_mod.penalty
    monkeypatch.setattr(train_mod, "penalty",
                        lambda c, M, R, ctx=None, G=None: seen.append(ctx) or orig(c, M, R, ctx, G))
    train_mod.train(cfg, progress=False)
    assert len(seen) == 5 and all(c is None for c in seen)


def test_the_hypotheses_are_grid_keys_that_reach_the_config():
    for key in ("train_fraction", "split", "hold_epochs", "hold_lr", "polish_decay", "qk_init_scale", "qk_bias",
                "penalty_start", "context_weight", "d_head"):
        assert key in GRID_KEYS
    grid = parse_grid(["train_fraction=0.31,0.4", "split=random", "qk_bias=true,false", "hold_epochs=2000",
                       "qk_init_scale=0.5"])
    recipes = grid_recipes("long", recipe_config("long"), grid)
    assert len(recipes) == 4
    r = recipes[0]
    assert r.label == "long+train_fraction=0.31+split=random+qk_bias=True+hold_epochs=2000+qk_init_scale=0.5"
    assert (r.config.train_fraction, r.config.split, r.config.qk_bias, r.config.hold_epochs,
            r.config.qk_init_scale) == (0.31, "random", True, 2000, 0.5)
    assert recipes[-1].config.train_fraction == 0.4 and recipes[-1].config.qk_bias is False
    # the split a grid point trains on is the one its fraction and kind give
    m = split_mask(recipes[0].config.train_fraction, 3, recipes[0].config.split)
    assert abs(m.mean() - 0.31) < 0.01
    for bad in ("split=ordered", "qk_bias=maybe", "hold_epochs=1.5"):
        with pytest.raises(ValueError, match="do not parse"):
            parse_grid([bad])


def test_the_original_recipe_is_the_long_schedule_on_the_scans_orbit_split():
    cfg, long = recipe_config("original"), recipe_config("long")
    assert cfg.train_fraction == 0.25 and replace(cfg, train_fraction=long.train_fraction) == long
    for seed in (0, 9):
        m = split_mask(cfg.train_fraction, seed, cfg.split)
        assert heldout_covered(m) == 0.0  # whole orbits: no held-out triple has a trained orbit-mate
        assert 0 <= m.mean() - 0.25 < 144 / P**3  # orbits are drawn until the train share reaches 25%
    assert command_for(replace(cfg, seed=9)) == "python -m pipeline orbits --recipe original --seed 9"
