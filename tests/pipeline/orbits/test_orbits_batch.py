"""The batched trainer: K seeds trained together equal each seed trained alone by ``train``."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from pipeline.orbits.batch import resolve_device, train_batch
from pipeline.orbits.config import Config
from pipeline.orbits.train import train

TINY = Config(n_heads=4, d_model=16, d_head=4, epochs=25, lr=3e-3, ramp_start=5, ramp_end=20, penalty_end=30.0,
              context_batch=2, weight_decay_qk=0.3, penalty_scales=(1.0, 2.0), frame_every=10**6)


@pytest.mark.parametrize("cfg", [TINY, replace(TINY, dtype="float64", context_kind="dirichlet", learn_embed=False)],
                         ids=["float32", "float64-dirichlet-fixedE"])
@pytest.mark.slow
def test_k_seeds_together_equal_each_seed_alone(cfg):
    """The stacked contractions, the masked-mean cross-entropy and the stacked AdamW (two weight-decay
    groups, no clipping) reproduce every seed's own ``train`` run to float rounding: the batched
    contractions may sum in another order (with torch 2.13 on one CPU thread, 25 epochs differ by at most
    2.4e-7 in float32 and 2.8e-16 in float64, against weights of order 1), so the test allows 100 times that."""
    torch.set_num_threads(1)
    seeds = [0, 3, 7]
    out = train_batch(cfg, seeds, device="cpu")
    assert [o["seed"] for o in out] == seeds
    tol = 3e-5 if cfg.dtype == "float32" else 3e-14
    for o in out:
        alone = train(replace(cfg, seed=o["seed"]), progress=False)
        for k, v in alone["params"].items():
            assert v.dtype == o["params"][k].dtype
            np.testing.assert_allclose(o["params"][k], v, rtol=0, atol=tol, err_msg=f"seed {o['seed']} {k}")
        assert o["final"] == pytest.approx(alone["final"], rel=1e-3 if cfg.dtype == "float32" else 1e-10)
        np.testing.assert_array_equal(o["train_mask"], alone["train_mask"])
        assert o["failed_at"] is None
    # the seeds really differ (the batch does not train one seed K times)
    assert not np.array_equal(out[0]["params"]["W_Q"], out[1]["params"]["W_Q"])


@pytest.mark.slow
def test_polishing_a_batched_seed_continues_its_train_run():
    """train() from the batch's weights and context-generator state, with epochs=0, polishes as train() does."""
    torch.set_num_threads(1)
    cfg = replace(TINY, epochs=12, polish_steps=2)
    (o,) = train_batch(cfg, [5])
    polished = train(replace(cfg, seed=5, epochs=0), progress=False, start=o["params"],
                     context_state=o["context_state"])
    whole = train(replace(cfg, seed=5), progress=False)
    for k in whole["params"]:
        np.testing.assert_array_equal(polished["params"][k], whole["params"][k])


def test_a_seed_whose_loss_overflows_is_reported_and_the_others_go_on(monkeypatch):
    """train() raises at a non-finite loss; the batch marks that seed failed and trains the others as train()."""
    from pipeline.orbits import batch

    torch.set_num_threads(1)
    cfg = replace(TINY, epochs=6)
    orig = batch.initial_params

    def blown(c, start=None):
        p = orig(c, start)
        if c.seed == 1:  # logits far beyond float32: the loss is inf or NaN at epoch 0
            with torch.no_grad():
                p["W_V"].mul_(1e25)
                p["W_O"].mul_(1e25)
        return p

    monkeypatch.setattr(batch, "initial_params", blown)
    out = batch.train_batch(cfg, [0, 1])
    assert [o["failed_at"] for o in out] == [None, 0]
    alone = train(replace(cfg, seed=0), progress=False)
    for k, v in alone["params"].items():  # to float rounding, as in the test above
        np.testing.assert_allclose(out[0]["params"][k], v, rtol=0, atol=3e-5)
    assert not np.allclose(out[0]["params"]["W_Q"], orig(replace(cfg, seed=0))["W_Q"].detach().numpy(), atol=1e-3)


def test_device_choice():
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="auto, cpu or cuda"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            resolve_device("cuda")
    with pytest.raises(ValueError, match="distinct"):
        train_batch(TINY, [1, 1])


def test_freed_memory_is_kept_once_per_process():
    """The orbit experiment's entry points ask glibc to keep freed memory (no mmap, no trim); the choice is made once
    and reported the same afterwards. Where glibc is the C library, it is taken."""
    import platform

    from pipeline.orbits.malloc import keep_freed_memory

    first = keep_freed_memory()
    assert first in ("kept", "unavailable")
    assert keep_freed_memory() == first
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert first == "kept"


def test_the_trainers_leave_malloc_alone(monkeypatch):
    """train() and train_batch() change no process-wide setting: they neither call keep_freed_memory nor load a C
    library through ctypes (which is how malloc's settings are changed)."""
    import ctypes

    from pipeline.orbits import malloc

    torch.set_num_threads(1)
    calls, real = [], ctypes.CDLL
    monkeypatch.setattr(ctypes, "CDLL", lambda *a, **k: calls.append(("CDLL", a)) or real(*a, **k))
    monkeypatch.setattr(malloc, "keep_freed_memory", lambda: calls.append("keep_freed_memory") or "kept")
    train(replace(TINY, epochs=2), progress=False)
    train_batch(replace(TINY, epochs=2), [0, 1])
    assert calls == []


def test_the_entry_points_keep_freed_memory(monkeypatch, tmp_path):
    """``python -m pipeline orbits`` (training), ``orbits search`` and the search's dask worker function set it."""
    from pipeline.__main__ import main
    from pipeline.orbits import cli, malloc, search

    torch.set_num_threads(1)
    calls = []
    monkeypatch.setattr(cli, "keep_freed_memory", lambda: calls.append("cli") or "kept")
    monkeypatch.setattr(malloc, "keep_freed_memory", lambda: calls.append("worker") or "kept")
    small = ["--n-heads", "4", "--d-model", "16", "--d-head", "4", "--epochs", "2"]
    assert main(["orbits", *small, "--no-store"]) == 0
    assert calls == ["cli"]
    assert main(["orbits", "search", "--store", str(tmp_path / "s.zarr"), "--seeds", "0", *small, "--device", "cpu",
                 "--polish-top", "0", "--no-store-best"]) == 0
    assert calls == ["cli", "cli"]
    rows = search.batch_on_worker(replace(TINY, epochs=2), "tiny", [0], "cpu", 0)
    assert calls == ["cli", "cli", "worker"] and [r["run"] for r in rows] == ["tiny-s0"]
