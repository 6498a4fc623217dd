"""Where the store is (``pipeline.store.location``), the demo shown in place of an empty default store
(``pipeline.store.demo``), the writer's version in the root attributes (``pipeline.store.written_by``) and the
commands that print them (``list``, ``demo``, ``--version``).

Every test here runs in a temporary current folder with ``$HEADGEOMETRY_STORE`` unset and the user data folder
moved into the test's temporary folder (``XDG_DATA_HOME``), so the rule is seen from outside any clone.
"""

from __future__ import annotations

import json
import os
import re
import stat
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import zarr

import pipeline
from pipeline import store as st
from pipeline.__main__ import main as pipeline_main
from pipeline.store import demo, location, written_by
from tests.factories import random_layers, write_model

REPO = Path(pipeline.__file__).resolve().parents[1]


@pytest.fixture
def outside(tmp_path, monkeypatch) -> Path:
    """A current folder outside the clone, no $HEADGEOMETRY_STORE, the user data folder under tmp_path."""
    monkeypatch.delenv(location.ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def computed_store(path: Path, name: str = "m") -> Path:
    rows = st.ModelRow(name, 2, 3, 16, 4, "learned absolute", source="test", family="gpt2")
    write_model(path, rows, random_layers(np.random.default_rng(0), 2, 3))
    return path


def registered_store(path: Path) -> Path:
    st.Store.open(path).register(st.ModelRow("r", 2, 3, 16, 4, "learned absolute", source="test", family="gpt2"))
    return path


# ------------------------------------------------------------------------------------------ the rule


def test_the_default_store_rule_in_order(outside, tmp_path, monkeypatch):
    user = tmp_path / "data" / "headgeometry" / "store.zarr"
    assert location.default_store() == location.StoreChoice(str(user), "user store")
    assert st.default_store_path() == str(user)  # the Store's default is the same rule
    assert not user.parent.exists()  # choosing creates nothing

    (outside / "store.zarr").mkdir()
    assert location.default_store() == location.StoreChoice(str(outside / "store.zarr"), "in the current folder")

    monkeypatch.setenv(location.ENV_VAR, "~/elsewhere.zarr")
    assert location.default_store() == location.StoreChoice(str(Path("~/elsewhere.zarr").expanduser()),
                                                            "from $HEADGEOMETRY_STORE")
    monkeypatch.setenv(location.ENV_VAR, "s3://bucket/s.zarr")
    assert st.default_store_path() == "s3://bucket/s.zarr"
    monkeypatch.setenv(location.ENV_VAR, "/x/y.zarr")
    assert st.Store.open(None).location == "/x/y.zarr"  # opening creates nothing until the first write


def test_the_user_store_follows_home_without_xdg(outside, tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert location.default_store().location == str(tmp_path / "home" / ".local" / "share" / "headgeometry"
                                                     / "store.zarr")


def test_a_clone_run_from_its_root_uses_its_committed_store(monkeypatch):
    """Tests that mean "the committed store" run from the repository root and find it through the rule."""
    monkeypatch.delenv(location.ENV_VAR, raising=False)
    monkeypatch.chdir(REPO)
    assert location.default_store() == location.StoreChoice(str(REPO / "store.zarr"), "in the current folder")
    assert demo.shown_store().location == str(REPO / "store.zarr") and not demo.shown_store().demo


def test_nothing_writes_inside_the_installed_package(tmp_path, monkeypatch):
    inside = location.PACKAGE / "store" / "scratch.zarr"
    with pytest.raises(st.StoreError, match=r"inside the installed headgeometry package .*`headgeometry demo PATH`"):
        st.Store.open(inside)
    assert not inside.exists()
    monkeypatch.setenv(location.ENV_VAR, str(inside))  # the rule's own first step is refused the same way
    with pytest.raises(st.StoreError, match="inside the installed headgeometry package"):
        st.Store.open(None)
    assert not location.inside_package(str(tmp_path / "s.zarr")) and not location.inside_package("s3://b/s.zarr")


# ------------------------------------------------------------------------------------------ the demo


def test_the_demo_takes_the_place_of_a_missing_or_empty_default_store(outside, tmp_path):
    the_demo = location.demo_store()
    assert the_demo == REPO / "store.zarr"  # a checkout: its committed store (a wheel: the bundled copy)
    user = Path(location.default_store().location)

    shown = demo.shown_store()
    assert (shown.location, shown.demo, shown.state) == (str(the_demo), True, "does not exist yet")
    assert shown.note().startswith(f"Showing the demo store (this checkout's committed store): the default store "
                                   f"{user} (user store) does not exist yet. Compute a model with `headgeometry "
                                   "profiles gpt2`")
    registered_store(user)  # models registered, none computed: still the demo
    assert demo.shown_store().state == "holds no computed model yet" and demo.shown_store().demo
    computed_store(user)
    assert demo.shown_store() == demo.Shown(location.StoreChoice(str(user), "user store"), str(user))
    assert demo.shown_store().note() == f"Store: {user} (user store)"


def test_a_store_named_by_the_option_or_the_environment_is_shown_as_it_is(outside, tmp_path, monkeypatch):
    """A named store that is missing is an error saying how to create it: the demo in its place would hide a typo."""
    missing = tmp_path / "missing.zarr"
    shown = demo.shown_store(str(missing))
    assert (shown.location, shown.demo, shown.chosen.reason) == (str(missing), False, "from --store")
    monkeypatch.setenv(location.ENV_VAR, str(missing))
    shown = demo.shown_store()
    assert (shown.location, shown.demo, shown.chosen.reason) == (str(missing), False, "from $HEADGEOMETRY_STORE")
    monkeypatch.delenv(location.ENV_VAR)
    bundled = location.PACKAGE / "store" / "demo.zarr"  # the option may name the demo itself: it is said so
    assert demo.shown_store(str(bundled)).demo


def test_a_reader_handed_a_path_says_why(outside, tmp_path):
    """``python -m dashboard`` hands the app its store as --store PATH: the app finds the reason again."""
    user = location.default_store().location
    assert demo.describe(location.demo_store()).demo  # the demo, in place of the missing user store
    assert demo.describe(location.demo_store()).state == "does not exist yet"
    assert demo.describe(user) == demo.Shown(location.StoreChoice(user, "user store"), user)
    other = str(tmp_path / "other.zarr")
    assert demo.describe(other).chosen.reason == "from --store" and not demo.describe(other).demo


def test_demo_copies_the_demo_out_as_a_writable_store(outside, tmp_path, capsys):
    out = tmp_path / "mine.zarr"
    assert pipeline_main(["demo", str(out)]) == 0
    assert f"to {out}" in capsys.readouterr().out
    src = location.demo_store()
    files = sorted(p.relative_to(src) for p in src.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert all((src / f).read_bytes() == (out / f).read_bytes() for f in files)
    assert all(os.stat(out / f).st_mode & stat.S_IWUSR for f in files)
    copied = st.Store.open(out, "r").models()
    assert [r.name for r in copied] == [r.name for r in st.Store.open(src, "r").models()]

    assert pipeline_main(["demo", str(out)]) == 2  # nothing is overwritten
    assert re.fullmatch(r"error: .* already exists; choose a new folder for the copy of the demo\.\n",
                        capsys.readouterr().err)
    st.Store.open(out).register(st.ModelRow("x", 1, 1, 8, 4, "learned absolute", source="t", family="gpt2"))
    assert "x" in st.Store.open(out, "r").names()  # the copy is writable


# ------------------------------------------------------------------------------------------ versions


def test_version_has_one_source_the_package_metadata(capsys):
    with pytest.raises(SystemExit) as exit_:
        pipeline_main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"python -m pipeline (headgeometry {metadata.version('headgeometry')})\n"
    from dashboard import cli

    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out == f"headgeometry-dashboard (headgeometry {metadata.version('headgeometry')})\n"


def test_every_structural_write_records_the_writers_version(tmp_path, monkeypatch):
    path = tmp_path / "s.zarr"
    assert written_by.recorded(str(path)) is None  # no store
    registered_store(path)
    root = json.loads((path / "zarr.json").read_text())
    assert root["attributes"] == {"headgeometry_version": metadata.version("headgeometry")}
    assert "consolidated_metadata" in root  # consolidated after the stamp
    monkeypatch.setattr(written_by, "version", lambda: "9.9.9")  # a later release writes the same store
    st.Store.open(path).register(st.ModelRow("q", 1, 2, 16, 4, "learned absolute", source="test", family="gpt2"))
    assert written_by.recorded(str(path)) == "9.9.9"
    assert st.Store.open(path, "r").names() == ["r", "q"]


def test_list_names_the_store_its_reason_and_writer_then_the_demo(outside, tmp_path, capsys):
    user = Path(location.default_store().location)
    assert pipeline_main(["list"]) == 0
    out = capsys.readouterr().out
    assert f"The store {user} (user store) holds no profiles yet.\n\nThe demo store {REPO / 'store.zarr'} " in out
    demo_rows = re.findall(r"^(\S+)\s+complete\s", out.split("The demo store")[1], re.M)
    assert demo_rows == [r.name for r in st.Store.open(REPO / "store.zarr", "r").models() if r.complete]

    computed_store(user, "mine")
    assert pipeline_main(["list"]) == 0
    out = capsys.readouterr().out
    version = metadata.version("headgeometry")
    assert f"The store {user} (user store), last written by headgeometry {version}:\n" in out
    assert re.search(r"^mine\s+complete\s+2\s+3\s", out, re.M) and "The demo store" not in out

    old = computed_store(user.parent / "old.zarr", "old")  # written before versions were kept: no attribute
    root = zarr.open_group(str(old), mode="a", use_consolidated=False)
    del root.attrs[written_by.KEY]
    assert written_by.recorded(str(old)) is None
    assert pipeline_main(["list", "--store", str(old)]) == 0
    assert "(from --store), writer's version not recorded:" in capsys.readouterr().out


def test_the_user_stores_folder_is_made_on_its_first_write_and_no_other(outside, tmp_path):
    from pipeline.run import check_store

    user = Path(location.default_store().location)
    check_store(str(user))
    assert user.parent.is_dir() and not user.exists()  # the folder; the store itself comes with the first write
    typo = tmp_path / "no-such-folder" / "s.zarr"
    with pytest.raises(st.StoreError, match="the folder .* does not exist"):
        check_store(str(typo))
    assert not typo.parent.exists()
