"""Bad stores and failing disks: each gives one clear StoreError, and nothing already written is lost.

No store, a file, a folder that is not a store, a Zarr v2 store, a read-only store (real permissions: the
write runs as an unprivileged user), ENOSPC in the middle of a layer, a registration and a group
replacement, a model with 0 layers, a group of another schema version, and a group that does not follow
the schema.
"""

from __future__ import annotations

import errno
import json
import os
import select
import shutil
import signal
import stat
import tempfile
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

from pipeline import store as st
from pipeline.__main__ import main
from tests.factories import random_layers, write_model
from tests.faults import tree_digest
from tests.faults.figures import record

pytestmark = pytest.mark.timeout(300)  # a hung child fails the test instead of the run

A = st.ModelRow("A", 2, 3, 16, 4, "learned absolute", source="here", command="python -m pipeline profiles A")
B = st.ModelRow("B", 4, 3, 16, 4, "rope", source="there", rotary_dim=4, command="python -m pipeline profiles B")
RNG = np.random.default_rng(0)
A_VALUES = random_layers(RNG, 2, 3)
B_VALUES = random_layers(RNG, 4, 3, rotary=True)
ORBITS = xr.Dataset({"position": (("frame", "head", "panel", "xy"), RNG.normal(size=(5, 2, 2, 2)))},
                    attrs={"seed": 1})


def good_store(path: Path) -> Path:
    write_model(path, A, A_VALUES)
    st.Store.open(path).replace_group("orbits", ORBITS)
    return path


def assert_a_intact(path: Path) -> None:
    ds = st.Store.open(path, mode="r").dataset("profiles")
    assert bool(ds.complete.sel(model="A"))
    for layer, (p, n) in enumerate(A_VALUES):
        np.testing.assert_array_equal(ds.profile.sel(model="A").values[layer, :3, 0], p)
        np.testing.assert_array_equal(ds.norm.sel(model="A").values[layer, :3, 0], n)
    np.testing.assert_array_equal(st.Store.open(path, mode="r").dataset("orbits").position.values,
                                  ORBITS.position.values)
    assert st.Store.open(path).verify() == []


def refused(fn, match: str, *trees: Path) -> str:
    """fn raises a one-line StoreError matching ``match`` and leaves every tree byte-identical."""
    before = [tree_digest(t) for t in trees]
    with pytest.raises(st.StoreError, match=match) as info:
        fn()
    assert [tree_digest(t) for t in trees] == before
    assert "\n" not in str(info.value)
    record("bad inputs tried", match)
    return str(info.value)


# ------------------------------------------------------------------------------ what the path holds


def test_no_store_file_and_folder_that_is_not_a_store(tmp_path):
    refused(lambda: st.Store.open(tmp_path / "missing.zarr", mode="r").dataset("profiles"),
            "no store at .*Create it with", tmp_path)
    f = tmp_path / "notes.txt"
    f.write_text("hello")
    refused(lambda: st.Store.open(f).register(A), "is a file, not a Zarr store", tmp_path)
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "file.txt").write_text("not zarr")
    refused(lambda: st.Store.open(junk).register(A), "not a Zarr store", tmp_path)
    refused(lambda: st.Store.open(junk).replace_group("orbits", ORBITS), "not a Zarr store", tmp_path)


def test_zarr_v2_store_is_refused_untouched(tmp_path):
    path = tmp_path / "v2.zarr"
    g = zarr.open_group(str(path), mode="w", zarr_format=2)
    g.create_array("x", shape=(3,), dtype="float64")[:] = 1.0
    for fn in (lambda: st.Store.open(path, mode="r").dataset("profiles"), lambda: st.Store.open(path).register(A),
               lambda: st.Store.open(path).replace_group("orbits", ORBITS)):
        msg = refused(fn, "is a Zarr v2 store; this pipeline reads and writes Zarr v3 only", path)
    assert "--store NEW.zarr" in msg
    assert verify_exit(path) == 2


def verify_exit(path, *extra) -> int:
    return main(["verify", "--store", str(path), *extra])


# ----------------------------------------------------------------------------------- read-only store


def as_nobody(fn) -> tuple[int, str]:
    """Run fn() in a forked child as user nobody (real permission checks, even when the tests run as root)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code, msg = 0, ""
        try:
            if os.getuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            fn()
        except st.StoreError as exc:
            code, msg = 5, str(exc)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            code, msg = 6, f"{type(exc).__name__}: {exc}"
        os.write(w, msg.encode())
        os._exit(code)
    os.close(w)
    exited = os.pidfd_open(pid)  # readable once the child has exited
    try:
        if not select.select([exited], [], [], 120)[0]:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError("the unprivileged child hung")
    finally:
        os.close(exited)
    done = os.waitpid(pid, 0)
    with os.fdopen(r) as f:
        msg = f.read()
    return os.waitstatus_to_exitcode(done[1]), msg


@pytest.fixture
def readonly_store():
    home = Path(tempfile.mkdtemp(prefix="headgeometry-ro-", dir="/tmp"))  # reachable by an unprivileged user
    os.chmod(home, 0o755)
    path = good_store(home / "s.zarr")
    for p in [home, *home.rglob("*")]:
        mode = stat.S_IMODE(p.stat().st_mode)
        os.chmod(p, mode & ~0o222 | (0o555 if p.is_dir() else 0o444))
    yield path
    for p in [home, *home.rglob("*")]:
        os.chmod(p, 0o755)
    shutil.rmtree(home)


def test_read_only_store_reads_and_refuses_writes_clearly(readonly_store):
    path = readonly_store
    before = tree_digest(path.parent)

    def read():
        names = [r.name for r in st.Store.open(path, mode="r").models()]
        assert names == ["A"], names
        assert st.Store.open(path, mode="r").dataset("orbits").position.shape == (5, 2, 2, 2)

    assert as_nobody(read) == (0, "")
    for fn in (lambda: st.Store.open(path).register(B), lambda: st.Store.open(path).write_layer("A", 0, *A_VALUES[0]),
               lambda: st.Store.open(path).replace_group("orbits", ORBITS), lambda: st.Store.open(path).reset("A")):
        code, msg = as_nobody(fn)
        assert code == 5, msg
        assert "is read-only" in msg and "nothing was changed" in msg and "--store PATH" in msg
        record("bad inputs tried", "read-only store")
    assert tree_digest(path.parent) == before
    assert_a_intact(path)


# --------------------------------------------------------------------------------------------- ENOSPC


def full_disk_after(monkeypatch, n: int) -> None:
    """Every file write after the first n fails with ENOSPC (zarr writes a temporary file, then renames it)."""
    real = os.replace
    count = [0]

    def replace(src, dst, *a, **kw):
        count[0] += 1
        if count[0] > n:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(src, dst, *a, **kw)

    monkeypatch.setattr(os, "replace", replace)


def test_enospc_inside_a_layer_keeps_the_layers_written(tmp_path, monkeypatch):
    path = good_store(tmp_path / "s.zarr")
    st.Store.open(path).register(B)
    for layer in (0, 1):
        st.Store.open(path).write_layer("B", layer, *B_VALUES[layer])
    for n in range(3):  # the disk fills before the profile, the norm, or the checksum of layer 2
        with monkeypatch.context() as m:
            full_disk_after(m, n)
            msg = refused(lambda: st.Store.open(path).write_layer("B", 2, *B_VALUES[2]), "no space left on the device")
        assert "layer 2 of 'B'" in msg and "Nothing already written was lost (the other layers kept)" in msg
        assert "run the same command again: it resumes" in msg
        assert st.Store.open(path, mode="r").layers_done("B").tolist() == [True, True, False, False]
        assert st.Store.open(path).verify() == []
        assert_a_intact(path)
    st.Store.open(path).write_layer("B", 2, *B_VALUES[2])  # space again: the run resumes
    st.Store.open(path).write_layer("B", 3, *B_VALUES[3])
    st.Store.open(path).mark_complete("B")
    got = st.Store.open(path, mode="r").dataset("profiles").profile.sel(model="B").values
    np.testing.assert_array_equal(got[2, :3], B_VALUES[2][0])


@pytest.mark.slow
def test_enospc_during_registration_and_group_replacement(tmp_path, monkeypatch):
    base = good_store(tmp_path / "base.zarr")
    outcomes = set()
    for n in range(0, 60, 3):
        path = tmp_path / f"s{n}.zarr"
        shutil.copytree(base, path)
        with monkeypatch.context() as m:
            full_disk_after(m, n)
            try:
                st.Store.open(path).register(B)
                outcomes.add("registered")
            except st.StoreError as exc:
                assert "no space left on the device" in str(exc) and "'B'" in str(exc)
                assert "every other model kept" in str(exc)
                outcomes.add("refused")
        names = st.Store.open(path, mode="r").names()  # space again: the next open finishes a journalled registration
        assert names in (["A"], ["A", "B"])
        if "B" in names:
            s = st.Store.open(path, mode="r")
            assert s.row("B").source == "there" and not s.is_complete("B")
        assert_a_intact(path)
        record("bad inputs tried", "ENOSPC in a registration")
    assert outcomes == {"registered", "refused"}

    path = tmp_path / "s0.zarr"
    new = ORBITS.assign(position=ORBITS.position * 2)
    for n in range(0, 12):
        with monkeypatch.context() as m:
            full_disk_after(m, n)
            try:
                st.Store.open(path).replace_group("orbits", new)
            except st.StoreError as exc:
                assert "no space left on the device" in str(exc)
                assert "the old 'orbits' group and every other group kept" in str(exc)
        # the old group, or the new one once its swap began
        got = st.Store.open(path, mode="r").dataset("orbits").position.values
        assert np.array_equal(got, ORBITS.position.values) or np.array_equal(got, new.position.values)
        staging = path.parent / f".{path.name}.writer" / "staging"
        assert not staging.exists() or list(staging.iterdir()) == []
        st.Store.open(path).replace_group("orbits", ORBITS)
        assert_a_intact(path)
        record("bad inputs tried", "ENOSPC in a group replacement")


# ------------------------------------------------------------------------------------- bad contents


def test_model_with_zero_layers_is_refused(tmp_path):
    path = good_store(tmp_path / "s.zarr")
    for bad, what in [(dict(n_layers=0), "n_layers = 0"), (dict(n_heads=0), "n_heads = 0"),
                      (dict(n_heads=6, n_kv_heads=4), "not a multiple")]:
        row = st.ModelRow(**(dict(name="Z", n_layers=2, n_heads=2, d_model=8, d_head=4, positional="none") | bad))
        refused(lambda row=row: st.Store.open(path).register(row), f"cannot register 'Z': .*{what}", path)
    assert st.Store.open(path, mode="r").names() == ["A"]
    with pytest.raises(ValueError, match="non-empty name"):
        st.ModelRow(" ", 1, 1, 8, 4, "none")


def set_version(path: Path, group: str, version) -> None:
    meta = json.loads((path / group / "zarr.json").read_text())
    meta["attributes"]["schema_version"] = version
    (path / group / "zarr.json").write_text(json.dumps(meta))
    st.Store(str(path), "a").journal.consolidate()


def test_schema_version_mismatch_says_how_to_upgrade(tmp_path, capsys):
    path = good_store(tmp_path / "s.zarr")
    set_version(path, "profiles", 1)
    msg = refused(lambda: st.Store.open(path, mode="r").dataset("profiles"),
                  "schema version 1; this code reads version 2", path)
    assert f"python -m pipeline verify --upgrade --store {path}" in msg
    refused(lambda: st.Store.open(path).register(B), "verify --upgrade", path)
    assert main(["verify", "--store", str(path), "--upgrade"]) == 0
    assert "profiles: schema version 1 -> 2" in capsys.readouterr().out
    assert_a_intact(path)

    set_version(path, "orbits", 99)
    msg = refused(lambda: st.Store.open(path, mode="r").dataset("orbits"), "schema version 99", path)
    assert "Use the version of the pipeline that wrote it" in msg
    before = tree_digest(path)
    assert main(["verify", "--store", str(path), "--upgrade"]) == 2
    assert "not from an older version" in capsys.readouterr().err
    assert tree_digest(path) == before


def test_group_that_does_not_follow_the_schema(tmp_path):
    path = good_store(tmp_path / "s.zarr")
    no_position = xr.Dataset({"x": (("frame",), np.arange(3.0))})
    refused(lambda: st.Store.open(path).replace_group("orbits", no_position), "no 'position' variable", path)
    wrong_dims = xr.Dataset({"position": (("frame", "head", "xy"), np.zeros((3, 2, 2)))})
    refused(lambda: st.Store.open(path).replace_group("orbits", wrong_dims),
            "expected \\('frame', 'head', 'panel', 'xy'\\)", path)
    refused(lambda: st.Store.open(path).replace_group("orbits_sweep", xr.Dataset({"e": (("seed",), [1.0])})),
            "expected \\('run',\\)", path)
    refused(lambda: st.Store.open(path).replace_group("profiles", ORBITS), "written layer by layer", path)
    assert_a_intact(path)
