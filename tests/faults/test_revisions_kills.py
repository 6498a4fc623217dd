"""A run of revisions killed anywhere, then run again: nothing written is lost, every layer marked done matches its
checksums, a plain xarray reader reads the run's last finished state before anything recovers, and the rerun
computes exactly the layers that were not written, ending with the frames an uninterrupted run writes.

Two kinds of kill: ``os._exit`` just before the n-th filesystem change of a run in a forked child, at points spread
over the whole run (the group's creation, its frames' layers, the repeats' record; tests.faults.kill_points), and a
real SIGKILL of ``python -m pipeline profiles ... --revisions all`` in the middle of a revision."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from pipeline.run import run_profiles
from pipeline.schema import SPECTRA
from pipeline.store import Store
from tests.faults import kill_points
from tests.faults.figures import record
from tests.pipeline.test_revisions_run import computations, make_run

pytestmark = pytest.mark.timeout(3600 if os.environ.get("HEADGEOMETRY_KILL_STRIDE") else 600)

VALUES = ("profile", "norm", "head_statistics", "spectrum", *SPECTRA, "layer_checksum", "qk_sha256", "layer_done")


def run(folder, store, **kw) -> None:
    run_profiles([str(folder)], str(store), revisions="all", progress=False, log=lambda *_: None, **kw)


def arrays(store, name: str) -> dict[str, np.ndarray]:
    ds = xr.open_zarr(str(store), group=f"runs/{name}", chunks=None).sortby("step")
    return {v: ds[v].values for v in (*VALUES, "step", "revision", "repeat_of")}


def plain_read(store: Path, name: str) -> xr.Dataset | None:
    """The run as a plain xarray reader finds it before anything recovers: None when the root's consolidated
    metadata does not hold it yet (the kill came before its first change finished)."""
    meta = store / "zarr.json"
    consolidated = json.loads(meta.read_text()).get("consolidated_metadata") if meta.exists() else None
    if not consolidated or f"runs/{name}" not in consolidated["metadata"]:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return xr.open_zarr(str(store), group=f"runs/{name}", chunks=None).load()


def check_written_layers(ds: xr.Dataset) -> None:
    """Every layer marked done holds values that match the checksum written with them."""
    from pipeline.schema import layer_checksum

    H = ds.sizes["head"]
    for i, layer in zip(*np.nonzero(ds.layer_done.values), strict=True):
        got = layer_checksum(ds.profile.values[i, layer, :H], ds.norm.values[i, layer, :H])
        assert got == str(ds.layer_checksum.values[i, layer]), (i, layer)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """Three revisions of 2 layers, the third a repeat of the first (its Q/K equal)."""
    root, _ = make_run(tmp_path_factory.mktemp("kills") / "run", steps=(10, 20, 30), seeds=(1, 2, 1))
    return root


@pytest.fixture(scope="module")
def reference(folder, tmp_path_factory) -> dict[str, np.ndarray]:
    store = tmp_path_factory.mktemp("reference") / "s.zarr"
    run(folder, store)
    return arrays(store, "run")


@pytest.mark.slow
def test_a_run_killed_at_any_change_loses_nothing_and_resumes(folder, reference, tmp_path):
    store = tmp_path / "s.zarr"

    def prepare():
        import shutil

        shutil.rmtree(store, ignore_errors=True)
        shutil.rmtree(store.parent / f".{store.name}.writer", ignore_errors=True)

    for n in kill_points(lambda: run(folder, store), prepare):
        before = plain_read(store, "run")  # the last finished state, read as a user reads it, before recovery
        if before is not None:
            check_written_layers(before)
        opened = Store.open(store)  # recovers what the kill left
        assert opened.verify() == [], f"kill point {n}"
        state = opened.run_state("run")
        todo = set() if state is None else {(i, layer) for i, layer in zip(*np.nonzero(~state.done), strict=True)}
        with computations() as calls:
            run(folder, store)
        if state is not None:  # the rerun computes exactly the layers not written (the repeat's are copied)
            repeat = state.steps.index(30) if 30 in state.steps else None
            assert {c for c in calls if c[0] != repeat} == {t for t in todo if t[0] != repeat}, f"kill point {n}"
        got = arrays(store, "run")
        for v in got:
            np.testing.assert_array_equal(got[v], reference[v], err_msg=f"kill point {n}: {v}")
        record("kill points survived", "run of revisions")


def layer_files(store: Path, name: str) -> dict[tuple[int, int], int]:
    """(frame index, layer) -> the inode of its profile chunk, for every layer written (zarr writes a chunk as a new
    file renamed into place, so a rewritten layer has a new inode)."""
    group = store / "runs" / name
    out = {}
    for f in (group / "layer_done" / "c").glob("*/*"):
        i, layer = int(f.parent.name), int(f.name)
        out[(i, layer)] = (group / "profile" / "c" / str(i) / str(layer) / "0" / "0" / "0").stat().st_ino
    return out


def test_sigkill_in_the_middle_of_a_revision_then_a_rerun(tmp_path):
    """``python -m pipeline profiles FOLDER --revisions all`` killed (SIGKILL) once a revision has some of its 4
    layers written and not all; a plain reader reads the run; the rerun writes only the layers not written (the
    chunks of those written are the same files) and ends with every frame an uninterrupted run writes."""
    folder, _ = make_run(tmp_path / "run", steps=(1, 2), num_hidden_layers=4)
    store = tmp_path / "s.zarr"
    argv = [sys.executable, "-m", "pipeline", "profiles", str(folder), "--revisions", "all", "--store", str(store),
            "--quiet"]
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    done = {}
    try:
        while time.monotonic() < deadline and child.poll() is None:
            done = layer_files(store, "run") if (store / "runs" / "run" / "layer_done" / "c").exists() else {}
            if len(done) % 4:
                break
            time.sleep(0.01)
        assert child.poll() is None, "the run ended before it could be killed mid-revision"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(30)
    assert child.returncode == -signal.SIGKILL
    before = plain_read(store, "run")
    assert before is not None and before.sizes["step"] == 2
    check_written_layers(before)
    written = layer_files(store, "run")
    assert len(written) % 4 and len(written) >= len(done)
    again = subprocess.run(argv, env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert {k: v for k, v in layer_files(store, "run").items() if k in written} == written  # not written again
    reference = tmp_path / "reference.zarr"
    run(folder, reference)
    got, want = arrays(store, "run"), arrays(reference, "run")
    for v in got:
        np.testing.assert_array_equal(got[v], want[v], err_msg=v)
    record("kill points survived", "SIGKILL mid-revision")
