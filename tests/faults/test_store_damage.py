"""Damaged data: a garbled chunk and a deleted chunk are found by `python -m pipeline verify`, never shown as NaN.

Every reader checks what it reads: `python -m pipeline list`, the dashboard's rows (``dashboard.data``)
and the static export show a model with a garbled or deleted chunk as damaged, with the repair command,
and write nothing to the store. verify finds the same damage, prints each damaged layer and the command that
recomputes it, clears those layers, marks the model damaged and not complete, and leaves every other
layer, model and group as it was. Running the printed repair (the model's command resumes exactly the
layers not done) makes the store verify clean again.
"""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from pipeline import store as st
from pipeline.__main__ import main
from tests.factories import random_layers, write_model
from tests.faults import tree_digest

pytestmark = pytest.mark.timeout(300)  # a hung child fails the test instead of the run

A = st.ModelRow("A", 3, 4, 16, 4, "learned absolute", source="here", command="python -m pipeline profiles A")
C = st.ModelRow("C", 2, 2, 8, 4, "none", source="there", command="python -m pipeline profiles C --fold-ln")


def layer_values(row: st.ModelRow, seed: int):
    return random_layers(np.random.default_rng(seed), row.n_layers, row.n_heads)


A_VALUES, C_VALUES = layer_values(A, 0), layer_values(C, 1)


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("damage") / "s.zarr"
    write_model(path, A, A_VALUES)
    write_model(path, C, C_VALUES)
    st.Store.open(path).replace_group("orbits", xr.Dataset({"position": (("frame", "head", "panel", "xy"),
                                                            np.random.default_rng(2).normal(size=(6, 3, 2, 2)))}))
    return path


@pytest.fixture
def path(template, tmp_path) -> Path:
    p = tmp_path / "s.zarr"
    shutil.copytree(template, p)
    return p


def chunk(path: Path, var: str, model: int, layer: int) -> Path:
    return path / "profiles" / var / "c" / str(model) / str(layer) / ("0/0/0" if var == "profile" else "0/0")


def verify_cli(path, capsys, *extra) -> tuple[int, str, str]:
    code = main(["verify", "--store", str(path), *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


def assert_rest_intact(path: Path, damaged_layers: list[int]) -> None:
    ds = st.Store.open(path, mode="r").dataset("profiles")
    for layer, (p, n) in enumerate(A_VALUES):
        got = ds.profile.sel(model="A").values[layer, :4, 0]
        if layer in damaged_layers:
            assert np.isnan(got).all()  # cleared: shown as not computed, and readable
        else:
            np.testing.assert_array_equal(got, p)
            np.testing.assert_array_equal(ds.norm.sel(model="A").values[layer, :4, 3], n)
    for layer, (p, _) in enumerate(C_VALUES):
        np.testing.assert_array_equal(ds.profile.sel(model="C").values[layer, :2, 0], p)
    rows = {r.name: r for r in st.Store.open(path).models()}
    assert rows["C"].complete and rows["C"].damaged == ""
    assert st.Store.open(path, mode="r").dataset("orbits").position.shape == (6, 3, 2, 2)


def repair(path: Path) -> None:
    """What the printed command does: register again, write the layers not done, mark complete."""
    st.Store.open(path).register(A)
    for layer in np.flatnonzero(~st.Store.open(path, mode="r").layers_done("A")):
        st.Store.open(path).write_layer("A", int(layer), *A_VALUES[layer])
    st.Store.open(path).mark_complete("A")


def test_garbled_chunk_is_found_marked_and_repaired(path, capsys):
    target = chunk(path, "profile", 0, 1)
    target.write_bytes(np.random.default_rng(3).bytes(target.stat().st_size))
    with pytest.raises(Exception):  # noqa: B017 - what any reader hit before: a codec error deep in zarr
        st.Store.open(path, mode="r").dataset("profiles").profile.sel(model="A").load()

    code, out, err = verify_cli(path, capsys)
    assert code == 1 and err == ""
    repair_cmd = f"python -m pipeline profiles A --store {path}"
    assert "profiles model 'A' layer 1: its chunk does not decode" in out and f"repair: {repair_cmd}" in out
    assert out.strip().splitlines()[-1].strip() == repair_cmd
    row = st.Store.open(path, mode="r").row("A")
    assert not row.complete and row.damaged.startswith("layers [1] damaged") and repair_cmd in row.damaged
    assert st.Store.open(path, mode="r").layers_done("A").tolist() == [True, False, True]
    assert_rest_intact(path, [1])
    assert [r.name for r in st.Store.open(path).models()] == ["A", "C"]  # the model list stays whole

    code, out, _ = verify_cli(path, capsys)  # still damaged until repaired: said again, exit 1
    assert code == 1 and "marked damaged: layers [1] damaged" in out
    repair(path)
    row = st.Store.open(path, mode="r").row("A")
    assert row.complete and row.damaged == ""
    code, out, _ = verify_cli(path, capsys)
    assert code == 0 and "every written layer matches its checksum" in out
    assert_rest_intact(path, [])


def test_deleted_chunk_is_no_longer_silent_nan(path, capsys):
    chunk(path, "norm", 0, 2).unlink()
    assert st.Store.open(path, mode="r").is_complete("A")  # what the store said before: complete, with a NaN layer
    assert np.isnan(st.Store.open(path, mode="r").dataset("profiles").norm.sel(model="A").values[2, :4]).all()

    code, out, _ = verify_cli(path, capsys, "A")
    assert code == 1
    assert "profiles model 'A' layer 2: its chunk is missing (the values read as NaN)" in out
    row = st.Store.open(path, mode="r").row("A")
    assert not row.complete and "layers [2]" in row.damaged
    assert st.Store.open(path, mode="r").layers_done("A").tolist() == [True, True, False]
    assert_rest_intact(path, [2])
    repair(path)
    assert verify_cli(path, capsys)[0] == 0


def test_altered_values_and_several_layers(path, capsys):
    chunk(path, "profile", 0, 0).unlink()
    shutil.copy(chunk(path, "norm", 0, 1), chunk(path, "norm", 0, 2))  # a valid chunk with the wrong values
    code, out, _ = verify_cli(path, capsys, "--dry-run")
    assert code == 1 and "layer 0: its chunk is missing" in out
    assert "layer 2: its values do not match the checksum written with them" in out
    assert st.Store.open(path, mode="r").is_complete("A")  # --dry-run marks nothing
    code, out, _ = verify_cli(path, capsys)
    assert code == 1 and "2 damaged piece(s) (marked damaged in the store)" in out
    assert "layers [0, 2]" in st.Store.open(path, mode="r").row("A").damaged
    assert_rest_intact(path, [0, 2])


def test_garbled_chunk_in_another_group(path, capsys):
    target = next(p for p in (path / "orbits" / "position" / "c").rglob("*") if p.is_file())
    target.write_bytes(b"\x00garbage" * 10)
    code, out, _ = verify_cli(path, capsys)
    assert code == 1
    assert "orbits: variable 'position' does not decode" in out
    assert f"python -m pipeline orbits --store {path}" in out
    s = st.Store.open(path, mode="r")
    assert s.is_complete("A") and s.is_complete("C")  # the profiles are fine and say so


def test_verify_bad_input_exit_2_one_line(tmp_path, path, capsys):
    tried = 0
    for args, message in [
        (["--store", str(tmp_path / "missing.zarr")], "no store at"),
        (["--store", str(path), "nope"], "not in the store"),
        (["--store", str(path), "--upgrade", "--dry-run"], "leave out --dry-run"),
    ]:
        code = main(["verify", *args])
        out = capsys.readouterr()
        assert code == 2 and out.err.startswith("error: ") and message in out.err
        assert len(out.err.strip().splitlines()) == 1 and "Traceback" not in out.err
        tried += 1
    assert tried == 3


def write_with_statistics(path, seed: int) -> tuple[st.ModelRow, list]:
    """Model D (2 layers x 3 heads) with random statistics and spectra, as the third model of the store; its row
    and layer values (to write it again)."""
    rng = np.random.default_rng(seed)
    D = st.ModelRow("D", 2, 3, 16, 4, "none", source="x", command="python -m pipeline profiles D")
    values = [(rng.dirichlet(np.ones(4), size=3), rng.uniform(1, 2, 3), rng.normal(size=(3, len(st.STATISTICS))),
               rng.normal(size=(3, 8))) for _ in range(2)]
    write_model(path, D, values)
    return D, values


def test_damaged_statistics_are_found_by_their_own_checksum(path, capsys):
    """Statistics have a checksum of their own: an altered or deleted statistics chunk is damage of its layer."""
    D, values = write_with_statistics(path, seed=9)
    assert verify_cli(path, capsys)[0] == 0
    base = path / "profiles"
    stats = base / "head_statistics" / "c" / "2"
    shutil.copy(stats / "0" / "0" / "0", stats / "1" / "0" / "0")  # a valid chunk with the wrong values
    (base / "spectrum" / "c" / "2" / "0" / "0" / "0").unlink()
    code, out, _ = verify_cli(path, capsys, "D")
    assert code == 1
    assert "model 'D' layer 0: its statistics chunk is missing (the values read as NaN)" in out
    assert "model 'D' layer 1: its statistics do not match the checksum written with them" in out
    row = st.Store.open(path, mode="r").row("D")
    assert not row.complete and "layers [0, 1]" in row.damaged and row.statistics_layers == 0
    cleared = st.Store.open(path, mode="r").dataset("profiles").head_statistics.sel(model="D").values
    assert np.isnan(cleared).all()
    assert_rest_intact(path, [])  # A and C untouched
    write_model(path, D, values)  # the repair
    assert verify_cli(path, capsys)[0] == 0 and st.Store.open(path, mode="r").row("D").statistics_computed


def damage_chunk(path: Path, how: str) -> None:
    """Layer 1 of model A's profile chunk garbled (random bytes of its size) or deleted."""
    target = chunk(path, "profile", 0, 1)
    if how == "garbled":
        target.write_bytes(np.random.default_rng(5).bytes(target.stat().st_size))
    else:
        target.unlink()


@pytest.mark.parametrize("how, why", [("garbled", r"its chunk does not decode \(\w+\)"),
                                      ("deleted", re.escape("its chunk is missing (the values read as NaN)"))])
def test_every_reader_sees_the_damage_and_writes_nothing(path, tmp_path, capsys, how, why):
    """list, dashboard.data and the export name A damaged with the repair (verify, then A's own command);
    the store stays byte-identical (a reader may be read-only); running the repair makes A complete again."""
    from dashboard import data
    from dashboard.export import main as export_main
    from dashboard.export import profile_page_name

    damage_chunk(path, how)
    assert st.Store.open(path, mode="r").is_complete("A")  # the stored row says complete: only reading the chunk tells
    before = tree_digest(path)
    repair_cmd = f"python -m pipeline verify --store {path} && python -m pipeline profiles A --store {path}"
    line = re.compile(re.escape("layers [1] damaged (") + why + re.escape(f"); recompute them with `{repair_cmd}`"))

    assert main(["list", "--store", str(path)]) == 0
    out = capsys.readouterr().out
    table = {r.split()[0]: r.split()[1] for r in out.split(f"The store {path} (from --store)")[1].splitlines()[2:4]}
    assert table == {"A": "damaged", "C": "complete"}
    said = [x.removeprefix("A: ") for x in out.splitlines() if x.startswith("A: ")]
    assert len(said) == 1 and line.fullmatch(said[0]), said

    rows = {r.name: r for r in data.rows(path)}
    assert rows["A"].damaged == said[0] and not rows["A"].complete
    assert rows["C"].damaged == "" and rows["C"].complete

    out_dir = tmp_path / "site"
    stale = out_dir / profile_page_name("A")  # a page of A from an export before the damage
    stale.parent.mkdir()
    stale.write_text("old values")
    capsys.readouterr()
    assert export_main([str(out_dir), "--store", str(path)]) == 0  # C can still be exported
    err = capsys.readouterr().err
    assert f"warning: A is damaged: {said[0]}" in err.splitlines()  # the exporter says so
    index = (out_dir / "index.html").read_text()
    assert f"<b>A</b> (damaged: {html.escape(said[0])})" in index  # listed apart, with the repair
    pages = sorted(p.name for p in out_dir.glob("profiles-*.html"))
    assert pages == sorted([profile_page_name("A"), profile_page_name("C")])
    marked = stale.read_text()  # A's page is marked damaged and draws nothing from its values
    assert not marked.startswith("old values") and "<title>Damaged · A</title>" in marked
    assert "layers [1] damaged (" in marked and "head_dots" not in marked
    assert "head_dots" in (out_dir / profile_page_name("C")).read_text()
    assert tree_digest(path) == before  # no reader wrote to the store

    code, _, _ = verify_cli(path, capsys)  # the repair as printed: verify, then the model's command
    assert code == 1
    repair(path)
    assert main(["list", "--store", str(path)]) == 0
    out = capsys.readouterr().out
    assert "damaged" not in out and {r.name: r.complete for r in st.Store.open(path).checked_models()} == \
        {"A": True, "C": True}


def test_read_check_finds_damaged_statistics(path, capsys):
    """The read-side check covers statistics_checksum too; a model without statistics is not damaged."""
    write_with_statistics(path, seed=11)
    assert st.Store.open(path, "r").damage_found() == {}  # A and C have no statistics: not damage
    (path / "profiles" / "spectrum" / "c" / "2" / "1" / "0" / "0").unlink()
    found = st.Store.open(path, "r").damage_found()
    assert list(found) == ["D"]
    assert found["D"].startswith("layers [1] damaged (its statistics chunk is missing (the values read as NaN))")


def test_the_exporter_fails_only_when_nothing_can_be_exported(path, tmp_path, capsys):
    """Every model damaged and an orbits group that cannot be drawn: exit 1 naming why, the index still written
    (it lists the damage with the repair); the same store with one model intact exports with exit 0."""
    from dashboard.export import main as export_main

    damage_chunk(path, "garbled")  # model A, layer 1
    chunk(path, "profile", 1, 0).unlink()  # model C, layer 0
    shutil.rmtree(path / "orbits")  # and no orbits group
    capsys.readouterr()
    assert export_main([str(tmp_path / "site"), "--store", str(path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("error: nothing could be exported")
    assert {x.split(" is damaged")[0] for x in err if x.startswith("warning: ")} == {"warning: A", "warning: C"}
    index = (tmp_path / "site" / "index.html").read_text()
    assert "<b>A</b> (damaged:" in index and "<b>C</b> (damaged:" in index
