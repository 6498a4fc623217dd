"""A checkpoint whose tensors contradict its config is refused before the store is touched: with --force on a
complete model that model is kept bit-equal, without it no 'not computed' row is left behind. Options that
cannot work are refused by ``run_profiles`` itself, not only by the CLI."""

from __future__ import annotations

import hashlib
import pathlib
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the pipeline tests need torch (pip install -e .[pipeline])")

from safetensors.numpy import load_file, save_file  # noqa: E402

from pipeline.families import ArchitectureError  # noqa: E402
from pipeline.run import ClusterError, UsageError, run_profiles  # noqa: E402


def snapshot(path) -> dict[str, str]:
    root = pathlib.Path(path)
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()} if root.exists() else {}


def run(models, store, **kw):
    return run_profiles([str(m) for m in models], str(store), progress=False, log=lambda *_: None, **kw)


def reshape_tensor(folder, name, shape):
    path = pathlib.Path(folder, "model.safetensors")
    tensors = load_file(str(path))
    tensors[name] = np.resize(tensors[name], shape)
    save_file(tensors, str(path), metadata={"format": "pt"})


@pytest.fixture(scope="module")
def complete_store(tmp_path_factory):
    """A store holding one complete model "m", made once: the tests only read it (and check it is unchanged)."""
    from tests.tiny_models import build_tiny, save

    root = tmp_path_factory.mktemp("complete")
    folder = save(build_tiny("opt-postnorm"), root / "m")  # 3 layers x 4 heads, width 24
    store = root / "s.zarr"
    run([folder], store)
    return store, folder


@pytest.mark.parametrize("layer", [0, 2])
def test_shape_mismatch_with_force_keeps_the_complete_model_bit_equal(complete_store, tiny_model, tmp_path, layer):
    store, _ = complete_store
    _, bad = tiny_model("opt-postnorm", name="m", seed=3)  # same name, other weights ...
    reshape_tensor(bad, f"model.decoder.layers.{layer}.self_attn.k_proj.weight", (20, 24))  # ... one bad shape
    before = snapshot(store)
    with pytest.raises(ArchitectureError, match=rf"layers.{layer}.self_attn.k_proj.weight.* \(20, 24\)"):
        run([bad], store, force=True)
    assert snapshot(store) == before


def test_shape_mismatch_without_force_leaves_no_row_behind(complete_store, tiny_model):
    store, _ = complete_store
    _, bad = tiny_model("opt-postnorm", name="other")
    reshape_tensor(bad, "model.decoder.layers.2.self_attn.q_proj.weight", (24, 16))
    before = snapshot(store)
    with pytest.raises(ArchitectureError, match=r"q_proj.weight"):
        run([bad], store)
    assert snapshot(store) == before
    import xarray as xr

    assert list(xr.open_zarr(str(store), group="profiles").model.values) == ["m"]


def test_every_model_is_validated_before_the_first_is_written(tiny_model, tmp_path):
    _, good = tiny_model("bert", name="fine")
    _, bad = tiny_model("bert", name="broken")
    reshape_tensor(bad, "encoder.layer.1.attention.self.key.weight", (24, 20))
    fresh = tmp_path / "fresh.zarr"
    with pytest.raises(ArchitectureError):
        run([good, bad], fresh)
    assert not fresh.exists()


def test_options_that_cannot_work_are_refused_before_the_store(complete_store, tmp_path):
    store, folder = complete_store
    before = snapshot(store)
    with pytest.raises(UsageError, match="--workers must be at least 1"):
        run([folder], store, force=True, workers=0)
    with pytest.raises(ClusterError, match=re.escape("is not a dask scheduler address")):
        run([folder], store, force=True, scheduler="localhost")
    with pytest.raises(UsageError, match="--name names one model"):
        run([folder, folder], store, name="x")
    assert snapshot(store) == before


def test_zero_layer_model_is_not_registered(tiny_model, tmp_path):
    import json

    _, folder = tiny_model("bert", name="empty")
    cfg = pathlib.Path(folder, "config.json")
    cfg.write_text(json.dumps(json.loads(cfg.read_text()) | {"num_hidden_layers": 0}))
    store = tmp_path / "s.zarr"
    with pytest.raises(ArchitectureError, match="0 layers"):
        run([folder], store)
    assert not store.exists()


def _cli(*argv):
    import os
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]
    return subprocess.Popen([sys.executable, "-m", "pipeline", "profiles", *map(str, argv), "--quiet"],
                            cwd=str(root), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=os.environ | {"OMP_NUM_THREADS": "1"})


@pytest.mark.parametrize("trial", range(3))
@pytest.mark.slow
def test_two_runs_of_different_models_at_once_both_land(tiny_model, tmp_path, trial):
    """Two CLI processes on one store, started together: both models registered and complete."""
    import xarray as xr

    _, a = tiny_model("bert", name="a", seed=trial)
    _, b = tiny_model("opt", name="b", seed=trial)
    store = tmp_path / "s.zarr"
    procs = [_cli(a, "--store", store), _cli(b, "--store", store)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    ds = xr.open_zarr(str(store), group="profiles")
    assert sorted(ds.model.values) == ["a", "b"] and bool(ds.complete.all())


@pytest.mark.slow
def test_the_same_model_twice_at_once_is_refused_with_a_clear_message(tiny_model, tmp_path):
    """The second run of one model either finds it complete or is refused naming the first; never both write."""
    _, a = tiny_model("opt-postnorm", name="a")
    store = tmp_path / "s.zarr"
    procs = [_cli(a, "--store", store), _cli(a, "--store", store)]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes in ([0, 0], [0, 2]), outs
    for p, (_, err) in zip(procs, outs, strict=True):
        if p.returncode == 2:
            assert "'a' is being written to" in err and "Traceback" not in err and err.count("\n") == 1, err
    import xarray as xr

    assert bool(xr.open_zarr(str(store), group="profiles").sel(model="a").complete)


def test_a_task_refuses_a_checkpoint_that_changed_after_planning(tiny_model, tmp_path):
    from pipeline.run import open_store, plan_model, run_task
    from pipeline.sources.base import CheckpointError

    _, folder = tiny_model("bert", name="moving")
    store = tmp_path / "s.zarr"
    plan = plan_model(folder, open_store(str(store)))
    tiny_model("bert", name="moving", seed=9)  # the same folder, other weights, saved after the plan
    with pytest.raises(CheckpointError, match="the checkpoint changed"):
        run_task(plan.tasks(str(store))[0])
    assert not store.exists()


def test_each_tasks_call_is_a_run_of_its_own_and_a_task_writes_its_layer(tiny_model, tmp_path):
    """The tasks of one tasks() call share one run token, another call's have another; a task run in this process
    writes its layer. No pipeline module reads a variable of the environment that only tests set."""
    import dataclasses
    import pathlib

    from pipeline.run import open_store, plan_model, run_task

    _, folder = tiny_model("bert", name="slow")
    store = tmp_path / "s.zarr"
    plan = plan_model(folder, open_store(str(store)))
    first, second = plan.tasks(str(store)), plan.tasks(str(store))
    assert len({t.run for t in first}) == 1 and first[0].run != second[0].run  # each call of tasks() is its own run
    assert [dataclasses.replace(t, run=first[0].run) for t in second] == first
    open_store(str(store)).register(plan.row)
    assert run_task(first[0]) == first[0].layer
    assert open_store(str(store)).layers_done(plan.name)[first[0].layer]
    sources = pathlib.Path(__file__).resolve().parents[2] / "pipeline"
    assert not [p for p in sources.rglob("*.py") if "HEADGEOMETRY_TEST_" in p.read_text()]
