"""SIGKILL at every filesystem change of every structural write: the next open finds the old or the new state.

Each scenario copies a small store, runs one operation in a forked child killed (``os._exit``) just before
its n-th file write, rename or removal, for every n until the operation finishes, and checks after each
kill what the next user of the store sees: every model whole (no row without a name, no partial row),
the untouched model's values and checksums intact, a replaced group equal to the old or the new one
(never stale metadata over new arrays), nothing left half written, and the operation run again succeeds.
A replaced group is also read with plain ``xr.open_zarr`` before anything recovers: it is the old or the new
one at every kill point where the filesystem exchanges directories in one step.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

from pipeline import store as st
from pipeline.schema import STR_FIELDS, model_rows
from pipeline.store import groups
from pipeline.store.migrate import narrow_arrays
from tests.factories import narrow_chunks, random_layers, write_model
from tests.faults import kill_points, tree_digest
from tests.faults.figures import record

# a hung child fails the test instead of the run; every kill point (HEADGEOMETRY_KILL_STRIDE=1) takes longer
pytestmark = pytest.mark.timeout(3600 if os.environ.get("HEADGEOMETRY_KILL_STRIDE") else 300)

A = st.ModelRow("A", 2, 3, 16, 4, "learned absolute", source="here", command="python -m pipeline profiles A")
B = st.ModelRow("B", 4, 5, 20, 4, "rope", source="there", family="llama", command="python -m pipeline profiles B",
                rotary_dim=4, format="gguf", quantization="Q4_1", note="a bigger model: the store grows")


A_LAYERS = random_layers(np.random.default_rng(0), 2, 3)
B_LAYERS = random_layers(np.random.default_rng(1), 4, 5, rotary=True)


def orbits_ds(frames: int, seed: int) -> xr.Dataset:
    rng = np.random.default_rng(seed)
    return xr.Dataset({"position": (("frame", "head", "panel", "xy"), rng.normal(size=(frames, 4, 2, 2))),
                       "panel_kind": (("panel",), np.array(["QK", "OV"], dtype=object)),
                       "train_accuracy": (("frame",), rng.uniform(size=frames))},
                      coords={"epoch": (("frame",), np.arange(frames) * 25)}, attrs={"seed": seed})


def sweep_ds(rows: int, seed: int) -> xr.Dataset:
    rng = np.random.default_rng(seed)
    return xr.Dataset({"name": (("run",), np.array([f"run-{i}" for i in range(rows)], dtype=object)),
                       "e3": (("run",), rng.uniform(size=rows))}, coords={"run": np.arange(rows)})


OLD_ORBITS, NEW_ORBITS = orbits_ds(7, 1), orbits_ds(4, 2)  # fewer frames: stale metadata would read NaN frames
OLD_SWEEP, NEW_SWEEP = sweep_ds(5, 3), sweep_ds(8, 4)


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A store with model A complete, an orbits and an orbits_sweep group; byte-identical at the end (the copies
    share its files)."""
    path = tmp_path_factory.mktemp("template") / "s.zarr"
    write_model(path, A, A_LAYERS, revision="r1")
    st.Store.open(path).replace_group("orbits", OLD_ORBITS)
    st.Store.open(path).replace_group("orbits_sweep", OLD_SWEEP)
    digest = tree_digest(path)
    yield path
    assert tree_digest(path) == digest, "a write changed a file of the template in place through a copy's link"


def copier(template: Path, path: Path):
    """A fresh copy of ``template`` at ``path`` (none: no store), its files hard links to the template's: every
    write of the store and of zarr replaces a file whole (a new file renamed over the old), so a copy's writes
    never reach the template (the template fixture checks it)."""
    def prepare():
        shutil.rmtree(path, ignore_errors=True)
        shutil.rmtree(path.parent / f".{path.name}.writer", ignore_errors=True)
        if template is not None:
            shutil.copytree(template, path, copy_function=os.link)
    return prepare


# --------------------------------------------------------------------------------------------- checks


def assert_whole(path: Path, expect_a: bool = True) -> list[str]:
    """What every reader relies on after a kill; returns the model names."""
    ds = st.Store.open(path, mode="r").dataset("profiles")  # opening repairs what the killed writer left
    names = [str(m) for m in ds.model.values]
    assert "" not in names, f"a model row without a name: {names}"
    raw = zarr.open_group(str(path), path="profiles", mode="r")
    lengths = {n: a.shape[0] for n, a in raw.arrays() if a.metadata.dimension_names[0] == "model"}
    assert set(lengths.values()) == {len(names)}, f"per-model arrays of different lengths: {lengths}"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # plain xarray, as users open it
        plain = xr.open_zarr(path, group="profiles")
    assert [str(m) for m in plain.model.values] == names
    rows = {r.name: r for r in model_rows(plain)}  # what `pipeline list` shows
    if expect_a:
        assert "A" in rows and rows["A"].complete and rows["A"].layers_done == 2
        for layer, (p, n) in enumerate(A_LAYERS):
            np.testing.assert_array_equal(plain.profile.sel(model="A").values[layer, :3, 0], p)
            np.testing.assert_array_equal(plain.norm.sel(model="A").values[layer, :3, 0], n)
    assert st.Store.open(path).verify() == []  # every written layer matches its checksum
    assert_clean(path)
    return names


def assert_row(row: st.ModelRow, want: st.ModelRow) -> None:
    for f in ("n_layers", "n_heads", "d_model", "d_head", "positional", "source", "family", "command",
              "rotary_dim") + tuple(f for f in STR_FIELDS if f not in ("revision", "damaged")):
        assert getattr(row, f) == getattr(want, f), f"{f}: {getattr(row, f)!r} != {getattr(want, f)!r}"


def assert_clean(path: Path) -> None:
    """Nothing half written is left: only the store's own nodes, an empty staging, no journal."""
    extra = sorted(p.name for p in path.iterdir() if not (p / "zarr.json").exists() and p.name != "zarr.json")
    assert extra == [], f"leftovers in the store: {extra}"
    writer = path.parent / f".{path.name}.writer"
    assert not (writer / "journal.json").exists()
    assert not (writer / "staging").exists() or list((writer / "staging").iterdir()) == []


def assert_group(path: Path, group: str, options: list[xr.Dataset]) -> int:
    got = st.Store.open(path, mode="r").dataset(group).load()
    for k, want in enumerate(options):
        if got.sizes == want.sizes and all(np.array_equal(got[v].values, want[v].values) for v in want.data_vars):
            assert got.attrs.get("seed") == want.attrs.get("seed")
            return k
    raise AssertionError(f"the {group} group after the kill is neither the old nor the new one: {got}")


def count(name: str, n: int) -> None:
    """One more kill point ``n`` of the operation ``name`` survived (the fault tests' summary)."""
    record("kill points survived", name)


# ------------------------------------------------------------------------------------------ scenarios


@pytest.mark.slow
def test_kill_inside_registration_leaves_no_partial_row(template, tmp_path):
    path = tmp_path / "s.zarr"
    seen = set()
    for n in kill_points(lambda: st.Store.open(path).register(B), copier(template, path)):
        names = assert_whole(path)
        assert names in (["A"], ["A", "B"])
        if "B" in names:
            assert_row(st.Store.open(path, mode="r").row("B"), B)
            s = st.Store.open(path, mode="r")
            assert not s.is_complete("B") and not s.layers_done("B").any()
        seen.add(tuple(names))
        st.Store.open(path).register(B)  # the same registration run again succeeds
        assert_whole(path)
        count("registration (growing the store)", n)
    assert seen == {("A",), ("A", "B")}  # kills before and after the row became visible were both tried
    assert assert_whole(path) == ["A", "B"]


@pytest.mark.slow
def test_kill_during_a_whole_run_resumes_to_the_same_values(template, tmp_path):
    path = tmp_path / "s.zarr"
    for n in kill_points(lambda: write_model(path, B, B_LAYERS, revision="r1"), copier(template, path)):
        names = assert_whole(path)
        if "B" in names:
            done = st.Store.open(path, mode="r").layers_done("B")
            got = st.Store.open(path, mode="r").dataset("profiles").profile.sel(model="B").values
            for layer in np.flatnonzero(done):  # a layer marked done holds exactly its values
                np.testing.assert_array_equal(got[layer, :5], B_LAYERS[layer][0])
        # resume as a run does: register again, write the layers not done, mark complete
        st.Store.open(path).register(B)
        for layer in np.flatnonzero(~st.Store.open(path, mode="r").layers_done("B")):
            st.Store.open(path).write_layer("B", int(layer), *B_LAYERS[layer])
        st.Store.open(path).mark_complete("B", revision="r1")
        ds = st.Store.open(path, mode="r").dataset("profiles")
        for layer, (p, nrm) in enumerate(B_LAYERS):
            np.testing.assert_array_equal(ds.profile.sel(model="B").values[layer, :5], p)
            np.testing.assert_array_equal(ds.norm.sel(model="B").values[layer, :5], nrm)
        assert_whole(path)
        count("a whole run (register, 4 layers, complete)", n)


@pytest.mark.slow
def test_kill_during_first_registration_of_an_empty_store(tmp_path):
    path = tmp_path / "s.zarr"
    for n in kill_points(lambda: st.Store.open(path).register(A), copier(None, path)):
        if (path / "zarr.json").exists() and "profiles" in zarr.open_group(str(path), mode="r"):
            assert assert_whole(path, expect_a=False) in ([], ["A"])
        st.Store.open(path).register(A)
        assert assert_whole(path, expect_a=False) == ["A"]
        count("first registration (creating the group)", n)


@pytest.mark.slow
def test_kill_during_reset_leaves_the_model_resumable(template, tmp_path):
    path = tmp_path / "s.zarr"
    for n in kill_points(lambda: st.Store.open(path).reset("A"), copier(template, path)):
        ds = st.Store.open(path, mode="r").dataset("profiles")
        assert [str(m) for m in ds.model.values] == ["A"]
        if st.Store.open(path, mode="r").is_complete("A"):
            assert_whole(path)  # untouched: complete with its values
        assert st.Store.open(path).verify() == []  # layers still marked done keep their values
        st.Store.open(path).reset("A")
        write_model(path, A, A_LAYERS, revision="r1")
        assert_whole(path)
        count("reset (--force)", n)


@pytest.mark.parametrize("group, old, new", [("orbits", OLD_ORBITS, NEW_ORBITS),
                                             ("orbits_sweep", OLD_SWEEP, NEW_SWEEP)])
@pytest.mark.slow
def test_kill_during_group_replacement_leaves_old_or_new(template, tmp_path, group, old, new):
    path = tmp_path / "s.zarr"
    seen = set()
    for n in kill_points(lambda: st.Store.open(path).replace_group(group, new), copier(template, path)):
        seen.add(assert_group(path, group, [old, new]))
        other = "orbits_sweep" if group == "orbits" else "orbits"
        assert_group(path, other, [OLD_SWEEP if other == "orbits_sweep" else OLD_ORBITS])
        assert_whole(path)
        st.Store.open(path).replace_group(group, new)  # no 'Directory not empty', no leftover in the way
        assert assert_group(path, group, [old, new]) == 1
        assert_whole(path)
        count(f"replacing the {group} group", n)
    assert seen == {0, 1}


def plain_group(path: Path, group: str, options: list[xr.Dataset]) -> int | None:
    """What plain xarray reads of ``group`` (nothing recovered first): the index of the option it equals, None
    when the group is missing; anything else (unreadable, stale metadata over new arrays) fails."""
    if not (path / group / "zarr.json").exists():
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # xarray's note on a group without consolidated metadata
        got = xr.open_zarr(path, group=group).load()
    for k, want in enumerate(options):
        if got.sizes == want.sizes and all(np.array_equal(got[v].values, want[v].values) for v in want.data_vars):
            return k
    raise AssertionError(f"plain xarray reads the {group} group as neither the old nor the new one: {got}")


def exchange_as_a_kill_point(real):
    """``store.groups.exchange``, preceded by a counted no-op rename (a directory onto itself) so that the kill
    machinery, which counts os calls, also kills just before the exchange."""
    def counted(a, b):
        os.replace(a, a)
        return real(a, b)
    return counted


@pytest.mark.parametrize("how", ["exchange", "fallback"])
@pytest.mark.slow
def test_plain_xarray_sees_the_old_or_new_group_at_every_kill(template, tmp_path, monkeypatch, how):
    """Every kill point of a group replacement (stride 1), read by plain ``xr.open_zarr`` before anything
    recovers: with the exchange always the old or the new group; with the fallback (two renames, the
    exchange made unavailable) the group is missing at exactly the kill point between the renames, and the
    next open of the store restores it."""
    if how == "exchange" and groups.renameat2() is None:
        pytest.skip("renameat2 is not available on this system (not Linux, or a libc without it)")
    monkeypatch.setattr(groups, "exchange", exchange_as_a_kill_point(groups.exchange) if how == "exchange"
                        else lambda a, b: False)
    path = tmp_path / "s.zarr"
    seen, missing, points = set(), [], 0
    for n in kill_points(lambda: st.Store.open(path).replace_group("orbits", NEW_ORBITS), copier(template, path),
                         stride=1):
        got = plain_group(path, "orbits", [OLD_ORBITS, NEW_ORBITS])
        if got is None:
            missing.append(n)
        else:
            seen.add(got)
        assert plain_group(path, "orbits_sweep", [OLD_SWEEP]) == 0
        seen_after = assert_group(path, "orbits", [OLD_ORBITS, NEW_ORBITS])  # the next open finishes it
        assert got is None or seen_after == got or seen_after == 1
        assert_clean(path)
        points += 1
        count(f"replacing a group, read by plain xarray ({how})", n)
    assert seen == {0, 1} and points > 20  # kills before and after the swap, at every one of its many changes
    assert len(missing) == (0 if how == "exchange" else 1), missing


@pytest.mark.slow
def test_kill_during_verify_marking(template, tmp_path):
    """verify clears a damaged layer and marks the model; a kill there leaves it found again or marked."""
    damaged = tmp_path / "damaged.zarr"
    shutil.copytree(template, damaged)
    shutil.rmtree(damaged / "profiles" / "profile" / "c" / "0" / "1")  # layer 1 of A: its chunk deleted
    path = tmp_path / "s.zarr"
    for n in kill_points(lambda: st.Store.open(path).verify(), copier(damaged, path)):
        s = st.Store.open(path)
        found = s.verify()  # finishes the marking if the kill stopped it
        row = s.row("A")
        assert not row.complete and "layers [1]" in row.damaged and "python -m pipeline profiles A" in row.damaged
        assert s.layers_done("A").tolist() == [True, False]
        repair = f"python -m pipeline profiles A --store {path}"
        assert len(found) == 1 and found[0].model == "A" and found[0].repair == repair
        assert found[0].layer == 1 or (found[0].layer is None and "layers [1]" in found[0].problem)
        again = s.verify()
        assert [(d.model, d.layer) for d in again] == [("A", None)] and "marked damaged" in again[0].problem
        count("verify marking a damaged model", n)


@pytest.mark.slow
def test_kill_during_upgrade_keeps_every_value(template, tmp_path):
    old = tmp_path / "v1.zarr"
    shutil.copytree(template, old)
    downgrade_to_v1(old)
    path = tmp_path / "s.zarr"
    for n in kill_points(lambda: st.Store.open(path).upgrade(), copier(old, path)):
        st.Store.open(path).upgrade()  # after a kill, the upgrade run again (or the next open) finishes it
        assert_whole(path)
        assert_group(path, "orbits", [OLD_ORBITS])
        count("upgrade from schema version 1", n)


@pytest.mark.slow
def test_kill_while_the_per_model_variables_are_rewritten_keeps_every_value(template, tmp_path):
    """``upgrade`` rewrites a chunk-per-row layout's per-model variables one by one (each deleted, then written
    again): after a kill at any point, the next open finishes it from the values its journal entry holds."""
    old = tmp_path / "narrow.zarr"
    shutil.copytree(template, old)
    narrow_chunks(old)
    want = st.Store.open(old, "r").checked_models()
    path = tmp_path / "s.zarr"
    for n in kill_points(lambda: st.Store.open(path).upgrade(), copier(old, path)):
        assert_whole(path)
        assert st.Store.open(path, "r").checked_models() == want
        st.Store.open(path).upgrade()
        assert not narrow_arrays(zarr.open_group(str(path), path="profiles", mode="r"))
        assert st.Store.open(path, "r").checked_models() == want
        count("rewriting the per-model variables", n)


def downgrade_to_v1(path: Path) -> None:
    """The layout version 1 wrote: no provenance/damage fields, no checksums, version 1 everywhere."""
    for name in ("damaged", "format", "quantization", "package", "file", "sha256", "note", "layer_checksum"):
        shutil.rmtree(path / "profiles" / name)
    for g in ("profiles", "orbits", "orbits_sweep"):
        meta = json.loads((path / g / "zarr.json").read_text())
        meta["attributes"]["schema_version"] = 1
        (path / g / "zarr.json").write_text(json.dumps(meta))
    st.Store(str(path), "a").journal.consolidate()
