"""Concurrent writers on one store, in real processes started together at a barrier.

Different models at once: every registration and every value is kept (the registration was a
read-modify-write without a lock, and lost a model in about 3 of 10 trials). The same model twice: the
second run is refused with a message naming the first (or waits for it with ``wait=True``), and the store
is left as the first run made it.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from pipeline import store as st
from pipeline.store import backend
from tests.factories import random_layers
from tests.faults import tree_digest
from tests.faults.figures import record

pytestmark = pytest.mark.timeout(300)  # a hung child fails the test instead of the run

CTX = multiprocessing.get_context("fork")
TRIALS = int(os.environ.get("HEADGEOMETRY_CONCURRENT_TRIALS", 10))
WRITERS = 3


def row(k: int) -> st.ModelRow:
    # growing shapes: each registration may also grow the store's layer/head dimensions
    return st.ModelRow(f"model-{k}", 1 + k, 2 + k, 16, 4, "learned absolute", source=f"src-{k}",
                       command=f"python -m pipeline profiles model-{k}")


def values(k: int, trial: int):
    r = row(k)
    return random_layers(np.random.default_rng(1000 * trial + k), r.n_layers, r.n_heads)


def run_model(path, k: int, trial: int, barrier, hold_s: float = 0.0, wait: bool = False, use_lock=False,
              release=None):
    """One `profiles` run, as a process: register, write every layer, mark complete (holding the model's writer
    lock with ``use_lock``, and with ``release`` first waiting, lock held, until the event is set)."""
    barrier.wait(timeout=60)
    r = row(k)
    try:
        if use_lock:
            with st.Store.open(path).writer(r.name, wait=wait):
                if release is not None:
                    release.wait(60)
                write_all(path, r, values(k, trial), hold_s)
        else:
            write_all(path, r, values(k, trial), hold_s)
    except st.StoreError as exc:
        print(f"STOREERROR {exc}", flush=True)
        os._exit(5)
    os._exit(0)


def write_all(path, r, vals, hold_s=0.0):
    st.Store.open(path).register(r)
    for layer, (p, n) in enumerate(vals):
        st.Store.open(path).write_layer(r.name, layer, p, n)
        time.sleep(hold_s / max(len(vals), 1))  # the time a layer takes to compute
    st.Store.open(path).mark_complete(r.name)


def start(path, jobs, release=None, **kw):
    """Run ``jobs`` ((model, trial) each) as processes started together at a barrier; their exit codes. With
    ``release`` (an event the processes get), it is set as soon as the first process has exited."""
    barrier = CTX.Barrier(len(jobs))
    procs = [CTX.Process(target=run_model, args=(str(path), k, t, barrier), kwargs=kw | {"release": release})
             for k, t in jobs]
    for p in procs:
        p.start()
    if release is not None:
        multiprocessing.connection.wait([p.sentinel for p in procs], timeout=120)
        release.set()
    for p in procs:
        p.join(120)
    return [p.exitcode for p in procs]


@pytest.mark.parametrize("preexisting", [False, True], ids=["empty-store", "store-with-a-model"])
@pytest.mark.slow
def test_concurrent_runs_of_different_models_keep_every_registration(tmp_path, preexisting):
    held = 0
    template = tmp_path / "with-a-model.zarr"
    if preexisting:
        write_all(template, row(9), values(9, 0))  # written once, copied into each trial's store
    for trial in range(TRIALS):
        path = tmp_path / f"t{trial}.zarr"
        if preexisting:
            shutil.copytree(template, path)
        codes = start(path, [(k, trial) for k in range(WRITERS)])
        assert codes == [0] * WRITERS, f"trial {trial}: exit codes {codes}"
        ds = st.Store.open(path, mode="r").dataset("profiles")
        names = [str(m) for m in ds.model.values]
        want = ([row(9).name] if preexisting else []) + [row(k).name for k in range(WRITERS)]
        assert sorted(names) == sorted(want), f"trial {trial}: registrations lost: {sorted(want)} -> {names}"
        assert ds.complete.values.all()
        for k in range(WRITERS):
            r = row(k)
            assert st.Store.open(path, mode="r").row(r.name).source == r.source
            got = ds.profile.sel(model=r.name).values
            for layer, (p, n) in enumerate(values(k, trial)):
                np.testing.assert_array_equal(got[layer, : r.n_heads, 0], p)
                np.testing.assert_array_equal(ds.norm.sel(model=r.name).values[layer, : r.n_heads, 7], n)
        assert st.Store.open(path).verify() == []
        held += 1
    record("concurrent trials held", f"different models, {'store with a model' if preexisting else 'empty store'}",
           held)
    print(f"\n{held} of {TRIALS} trials of {WRITERS} concurrent writers held every registration and value")


@pytest.mark.slow
def test_same_model_twice_the_second_is_refused_and_the_first_kept(tmp_path, capfd):
    path = tmp_path / "s.zarr"
    write_all(path, row(5), values(5, 0))  # something already in the store
    refused = 0
    for trial in range(TRIALS):
        # both at once; the one that gets the lock holds it until the other has exited (refused)
        codes = start(path, [(1, trial), (1, trial)], use_lock=True, release=CTX.Event())
        assert sorted(codes) == [0, 5], f"trial {trial}: exit codes {codes}"
        out = capfd.readouterr().out
        assert "'model-1' is being written to" in out and "--name" in out
        assert "by process" in out or "by another process" in out  # (the holder may not have signed yet)
        refused += 1
        ds = st.Store.open(path, mode="r").dataset("profiles")
        assert [str(m) for m in ds.model.values] == ["model-5", "model-1"]
        assert bool(ds.complete.sel(model="model-1"))
        np.testing.assert_array_equal(ds.profile.sel(model="model-1").values[0, :3, 0], values(1, trial)[0][0])
        st.Store.open(path).reset("model-1")
    record("concurrent trials held", "same model twice, refused", refused)


def test_same_model_refused_while_a_run_holds_it_and_the_store_unchanged(tmp_path):
    path = tmp_path / "s.zarr"
    write_all(path, row(1), values(1, 0))
    ready, release = CTX.Event(), CTX.Event()

    def holder():
        with st.Store.open(str(path)).writer("model-1"):
            ready.set()
            release.wait(60)
        os._exit(0)

    p = CTX.Process(target=holder)
    p.start()
    assert ready.wait(60)
    before = tree_digest(path)
    with pytest.raises(st.StoreError, match=rf"'model-1' is being written to .* by process {p.pid} on "):
        st.Store.open(path).register(row(1))
    with pytest.raises(st.StoreError, match="being written"):
        st.Store.open(path).reset("model-1")  # --force cannot wipe it under the running writer either
    assert tree_digest(path) == before  # nothing touched
    st.Store.open(path).register(row(2))  # another model goes ahead meanwhile
    release.set()
    p.join(60)
    st.Store.open(path).register(row(1))  # free again
    assert st.Store.open(path, mode="r").names() == ["model-1", "model-2"]


def test_same_model_with_wait_runs_one_after_the_other(tmp_path):
    path = tmp_path / "s.zarr"
    t0 = time.time()
    codes = start(path, [(3, 0), (3, 0)], hold_s=0.5, use_lock=True, wait=True)
    assert codes == [0, 0]
    assert time.time() - t0 >= 1.0  # serialised: two holds of 0.5 s each
    ds = st.Store.open(path, mode="r").dataset("profiles")
    assert [str(m) for m in ds.model.values] == ["model-3"] and bool(ds.complete.values[0])
    assert st.Store.open(path).verify() == []


def test_a_store_another_writer_creates_between_the_two_looks_is_opened(tmp_path, monkeypatch):
    """Another writer creates the store (its first registration) after this one found no zarr.json and before it
    lists the folder: the interleaving in which one of three writers on an empty store was refused as "not a Zarr
    store". Made certain here by running that writer from inside the listing."""
    path = tmp_path / "s.zarr"
    path.mkdir()
    real_listdir, created = os.listdir, []

    def listdir_while_another_writer_creates(p):
        if not created and Path(p) == path:
            created.append(True)
            write_all(path, row(7), values(7, 0))  # the other writer's whole run
        return real_listdir(p)

    monkeypatch.setattr(backend.os, "listdir", listdir_while_another_writer_creates)
    write_all(path, row(8), values(8, 0))
    assert created
    assert st.Store.open(path, mode="r").names() == ["model-7", "model-8"]
    assert st.Store.open(path).verify() == []


def test_temporary_files_are_left_to_their_writer_and_a_dead_writers_removed_under_the_lock(tmp_path):
    """A folder holding only zarr's temporary file of the root's metadata: another writer's creation in flight, or
    a killed one's. The look outside the store lock leaves it (removing it made the live writer's rename fail); the
    recovery that the next open runs under the lock removes it, since no live writer holds the lock."""
    path = tmp_path / "s.zarr"
    path.mkdir()
    partial = path / "zarr.0123456789abcdef.partial"
    partial.write_bytes(b'{"zarr_format": 3')
    backend.Local(str(path)).check_kind("a")
    assert partial.exists()
    write_all(path, row(1), values(1, 0))
    assert not partial.exists()
    assert st.Store.open(path, mode="r").names() == ["model-1"]
