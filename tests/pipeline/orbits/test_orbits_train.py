"""A short training run learns and its equivariance error falls; the CLI writes a store that round-trips."""

import json

import numpy as np
import pytest
import torch
import xarray as xr

from pipeline import store
from pipeline.orbits.config import Config, learning_rate, penalty_weight
from pipeline.orbits.find import find_orbits
from pipeline.orbits.store_io import load_run, orbits_dataset, sweep_dataset, write_orbits, write_profiles_model
from pipeline.orbits.sweep import save_run
from pipeline.orbits.train import train


@pytest.fixture(scope="module")
def short_run():
    torch.set_num_threads(1)
    cfg = Config(epochs=100, lr=3e-3, lr_final=1e-3, ramp_start=50, ramp_end=80, penalty_end=30.0, context_batch=2,
                 frame_every=20, polish_steps=2)
    return train(cfg, progress=False)


def test_schedules():
    cfg = Config(penalty_start=1.0, penalty_end=100.0, ramp_start=10, ramp_end=30, epochs=100, lr=1e-3, lr_final=1e-5)
    assert penalty_weight(cfg, 0) == 1.0 and penalty_weight(cfg, 30) == 100.0
    assert penalty_weight(cfg, 20) == pytest.approx(10.0)  # geometric midpoint
    assert learning_rate(cfg, 0) == pytest.approx(1e-3) and learning_rate(cfg, 100) == pytest.approx(1e-5)


@pytest.mark.slow
def test_short_run_learns_and_the_penalty_falls(short_run):
    m = short_run["metrics"]
    assert list(short_run["epoch"]) == [0, 20, 40, 60, 80, 100, 102]  # 102: after 2 LBFGS steps
    assert m["train_accuracy"][0] < 0.1 and m["train_accuracy"][-1] > 0.5
    assert m["loss"][-1] < m["loss"][0] / 2
    assert m["equivariance_error"][0] > 0.9  # a random layer is far from equivariant
    assert m["equivariance_error"][-1] < m["equivariance_error"][0] / 4
    assert m["context_error"][-1] < m["context_error"][0] / 4
    assert short_run["M"].shape == (7, 32, 24, 24) and short_run["R"].shape == (7, 32, 24, 24)


@pytest.mark.slow
def test_store_round_trip(short_run, tmp_path):
    path = tmp_path / "run.npz"
    save_run(str(path), "short", short_run)
    run = load_run(str(path))
    np.testing.assert_array_equal(run["M"], short_run["M"])
    M, R = run["M"][-1].astype(float), run["R"][-1].astype(float)
    found = find_orbits(M, R)
    st = str(tmp_path / "store.zarr")
    ds = orbits_dataset(run, found, 10, 6, {"tol": 0.02})
    write_orbits(st, ds)
    back = store.Store.open(st, mode="r").dataset("orbits").load()
    strings = ["panel", "xy", "panel_kind", "panel_role"]
    xr.testing.assert_allclose(back.drop_vars(strings), ds.drop_vars(strings))
    assert list(back.panel.values) == ["QK 0x10", "OV 10x10", "QK 0x6", "OV 6x6"]
    assert list(back.rotation.values) == [10, 10, 6, 6] and list(back.eps.values) == [1, -1, 1, -1]
    assert back.sizes["panel"] == 4  # the run's frequencies are the seed's: no extra panels
    assert back.attrs["trail_epochs"] == 250 and back.attrs["seed"] == 0
    other = orbits_dataset(run, found, 8, 2, {"tol": 0.02})
    assert list(other.panel.values) == ["QK 0x8", "OV 8x8", "QK 0x2", "OV 2x2", "QK 0x10", "OV 10x10", "QK 0x6",
                                        "OV 6x6"]
    assert list(other.panel_role.values) == ["run"] * 4 + ["seed"] * 4
    shared = orbits_dataset(run, found, 6, 12, {"tol": 0.02})  # frequency 6 is the seed's too: its panels once
    assert list(shared.panel.values) == ["QK 0x6", "OV 6x6", "QK 0x12", "OV 12x12", "QK 0x10", "OV 10x10"]
    assert list(shared.panel_role.values) == ["run"] * 4 + ["seed"] * 2
    assert json.loads(back.attrs["config"])["epochs"] == 100
    assert back.position.dims == ("frame", "head", "panel", "xy") and back.epoch.dims == ("frame",)
    # positions are the projections of the stored frames: the last frame's equal those of M, R
    z = np.sqrt(2) / 24 * np.einsum("hab,ab->h", back.M.values,
                                    np.exp(1j * 2 * np.pi / 24 * 10 * np.arange(24))[None, :].repeat(24, 0))
    np.testing.assert_allclose(back.position.values[-1, :, 0, 0], z.real, atol=1e-5)
    # the layer in the profiles group; the sweep table
    write_profiles_model(st, run_params(run))
    prof = store.Store.open(st, mode="r").dataset("profiles")
    assert bool(prof.complete.sel(model="orbits-c24")) and str(prof.positional.sel(model="orbits-c24").values) == "none"
    p = prof.profile.sel(model="orbits-c24").isel(layer=0, d=0).values
    np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-9)
    store.Store.open(st).replace_group("orbits_sweep",
                                       sweep_dataset([{"name": "a", "x": 1.0}, {"name": "b", "x": 2.0}]))
    sw = xr.open_zarr(st, group="orbits_sweep")
    assert list(sw.name.values) == ["a", "b"] and list(sw.x.values) == [1.0, 2.0]


@pytest.mark.slow
def test_frames_record_residual_profiles(short_run, tmp_path):
    """Each frame's head_profile is the naive N x N profile of W_K^T W_Q; the last frame's is the final layer's,
    as the profiles group stores it for orbits-c24; the profile survives save, load and the store."""
    from pipeline.profile import naive_profiles

    prof = short_run["profile"]
    assert prof.shape == (7, 32, 4)
    W_Q, W_K = short_run["params"]["W_Q"].astype(np.float64), short_run["params"]["W_K"].astype(np.float64)
    naive = np.stack([naive_profiles(W_K[h].T @ W_Q[h])[0] for h in range(32)])
    np.testing.assert_allclose(prof[-1], naive, atol=1e-9)
    np.testing.assert_allclose(prof.sum(-1), 1.0, atol=1e-9)
    assert np.abs(prof[0] - prof[-1]).max() > 1e-3  # training moves the heads: frames differ
    path = tmp_path / "run.npz"
    save_run(str(path), "short", short_run)
    run = load_run(str(path))
    st = str(tmp_path / "store.zarr")
    write_orbits(st, orbits_dataset(run, find_orbits(run["M"][-1].astype(float), run["R"][-1].astype(float)), 10, 6,
                                    {"tol": 0.02}))
    write_profiles_model(st, run_params(run))
    back = store.Store.open(st, mode="r").dataset("orbits")
    assert back.head_profile.dims == ("frame", "head", "coordinate")
    assert list(back.coordinate.values) == ["a", "b", "c", "d"]
    np.testing.assert_array_equal(back.head_profile.values, prof)
    stored = store.Store.open(st, mode="r").dataset("profiles").profile.sel(model="orbits-c24").isel(layer=0, d=0)
    np.testing.assert_allclose(back.head_profile.values[-1], stored.values, atol=1e-12)


def run_params(run):
    return {k[6:]: v for k, v in run.items() if k.startswith("param_")}


@pytest.mark.slow
def test_cli_stores_a_saved_run_and_explains_bad_input(short_run, tmp_path, capsys):
    from pipeline.__main__ import main

    path = str(tmp_path / "run.npz")
    save_run(path, "short", short_run)
    st = str(tmp_path / "cli.zarr")
    assert main(["orbits", "--from-run", path, "--store", st]) == 0
    out = capsys.readouterr().out
    assert "orbits within 2%" in out and "wrote the orbits group" in out
    ds = store.Store.open(st, mode="r").dataset("orbits")
    assert ds.sizes["frame"] == 7 and ds.sizes["head"] == 32 and ds.sizes["shift"] == 24
    for argv, message in ((["--from-run", str(tmp_path / "missing.npz"), "--store", st], "does not exist"),
                          (["--train-fraction", "1.5", "--no-store"], "strictly between 0 and 1")):
        with pytest.raises(SystemExit) as exc:
            main(["orbits", *argv])
        assert exc.value.code == 2 and message in capsys.readouterr().err  # a usage error, no traceback


def test_penalty_scales_float64_and_qk_decay_group():
    """The penalty at several QK scales is the mean of the per-scale squared errors (against the errors
    computed one by one), float64 trains in float64, and W_Q, W_K get their own weight decay."""
    from pipeline.orbits import train as train_mod
    from pipeline.orbits.equivariance import context_error2, random_contexts, triple_error2
    from pipeline.orbits.model import circuits, init_params, table_forward

    torch.set_num_threads(1)
    p = {k: v.double() for k, v in init_params(3, 16, 4, seed=0).items()}
    M, R = circuits(p)
    ctx = random_contexts(2, (4, 6), 24, torch.Generator().manual_seed(0)).double()
    e = {b: float(triple_error2(table_forward(b * M, R))) for b in (1.0, 0.5, 3.0)}
    c = {b: float(context_error2(b * M, R, ctx)) for b in (1.0, 0.5, 3.0)}
    assert max(e.values()) - min(e.values()) > 1e-3  # the scales see different errors: the mean is a real check
    cfg = Config(penalty_scales=(1.0, 0.5, 3.0), context_weight=0.7)
    want = sum(e[b] + 0.7 * c[b] for b in e) / 3
    assert float(train_mod.penalty(cfg, M, R, ctx)) == pytest.approx(want, rel=1e-12)
    assert float(train_mod.penalty(Config(context_weight=0.0), M, R, ctx)) == pytest.approx(e[1.0], rel=1e-12)

    cfg = Config(n_heads=3, d_model=16, d_head=4, epochs=2, context_weight=0.0, lr=0.0, lr_final=0.0,
                 dtype="float64", weight_decay_qk=0.0, weight_decay=0.5)
    captured = {}
    orig = torch.optim.AdamW.step

    def spy(self, *a, **k):
        captured["groups"] = [(len(g["params"]), g["weight_decay"]) for g in self.param_groups]
        return orig(self, *a, **k)

    torch.optim.AdamW.step = spy
    try:
        run = train_mod.train(cfg, progress=False)
    finally:
        torch.optim.AdamW.step = orig
    assert captured["groups"] == [(4, 0.5), (2, 0.0)]  # W_E, W_V, W_O, W_U decay 0.5; W_Q, W_K none
    assert run["params"]["W_Q"].dtype == np.float64
    np.testing.assert_array_equal(run["params"]["W_Q"], p["W_Q"].numpy())  # lr 0: nothing moved
    assert run["metrics"]["sharpened_error"][0] == pytest.approx(float(triple_error2(table_forward(2 * M, R))) ** 0.5,
                                                                  rel=1e-9)
    with pytest.raises(ValueError, match="dtype"):
        train_mod.train(Config(n_heads=2, d_model=8, d_head=2, epochs=1, dtype="float16"), progress=False)


def test_polishing_that_overflows_keeps_the_last_finite_weights(monkeypatch):
    """When an LBFGS step leaves non-finite weights, polishing stops and keeps the weights from before it."""
    from pipeline.orbits import train as train_mod

    torch.set_num_threads(1)
    orig = torch.optim.LBFGS.step
    calls = {"n": 0, "before": None}

    def step(self, closure):
        calls["n"] += 1
        if calls["n"] == 3:
            calls["before"] = [p.detach().clone() for p in self.param_groups[0]["params"]]
            self.param_groups[0]["params"][0].data.fill_(float("nan"))
            return None
        return orig(self, closure)

    monkeypatch.setattr(torch.optim.LBFGS, "step", step)
    cfg = Config(n_heads=3, d_model=16, d_head=4, epochs=4, polish_steps=6, frame_every=1, context_weight=0.0)
    run = train_mod.train(cfg, progress=False)
    assert run["config"]["extra"]["polish_stopped_at"] == 2
    assert list(run["epoch"]) == [0, 1, 2, 3, 4, 5, 6]  # steps 0 and 1 done; the frame at step 2 recorded once
    for k, before in zip(("W_E", "W_Q", "W_K", "W_V", "W_O", "W_U"), calls["before"], strict=True):
        np.testing.assert_array_equal(run["params"][k], before.numpy())
    assert all(np.isfinite(v).all() for v in run["metrics"].values())
