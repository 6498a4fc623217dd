"""The Zarr store contract: region writes, completeness, resume, growth, and clear errors."""

import hashlib
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from pipeline import store as st
from pipeline.schema import BASELINE_STATE, SPECTRA_DATA, STATISTICS, model_rows
from tests.factories import random_layer, random_layers


def info(name="m", L=2, H=3, positional="learned absolute", **kw):
    return st.ModelRow(name=name, n_layers=L, n_heads=H, d_model=16, d_head=4, positional=positional, **kw)


def test_round_trip_through_plain_xarray(tmp_path):
    path = tmp_path / "s.zarr"
    rng = np.random.default_rng(0)
    st.Store.open(path).register(info("abs", L=2, H=3, source="here"))
    st.Store.open(path).register(info("rot", L=1, H=2, positional="rope", rotary_dim=4))
    layers = random_layers(rng, 2, 3)
    for layer, (p, n) in enumerate(layers):
        st.Store.open(path).write_layer("abs", layer, p, n)
    pr, nr = random_layer(rng, 2, rotary=True)
    st.Store.open(path).write_layer("rot", 0, pr, nr)
    st.Store.open(path).mark_complete("abs", revision="deadbeef")
    st.Store.open(path).mark_complete("rot")

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the contract: plain open_zarr with a group, no warnings
        ds = xr.open_zarr(path, group="profiles")
    assert list(ds.model.values) == ["abs", "rot"]
    assert list(ds.coordinate.values) == ["a", "b", "c", "d"]
    assert ds.sizes == {"model": 2, "layer": 2, "head": 3, "d": 129, "coordinate": 4, "statistic": 17,
                        "eigen": 2 * 4}  # eigen: the largest 2 d_head
    got = ds.profile.sel(model="abs").values
    for layer, (p, n) in enumerate(layers):
        np.testing.assert_array_equal(got[layer, :, 5], p)  # position-independent: repeated at every d
        np.testing.assert_array_equal(ds.norm.sel(model="abs").values[layer, :, 77], n)
    np.testing.assert_array_equal(ds.profile.sel(model="rot").values[0, :2], pr)
    assert np.isnan(ds.profile.sel(model="rot").values[1]).all()  # layer padding
    assert np.isnan(ds.profile.sel(model="rot").values[0, 2]).all()  # head padding
    assert ds.complete.values.tolist() == [True, True]
    assert ds.revision.values.tolist() == ["deadbeef", ""]
    assert ds.positional.values.tolist() == ["learned absolute", "rope"]
    assert ds.n_layers.values.tolist() == [2, 1] and ds.n_heads.values.tolist() == [3, 2]
    assert ds.attrs["schema_version"] == st.SCHEMA_VERSION
    assert "W_K^T W_Q" in ds.attrs["bilinear_form"] and "query position - key position" in ds.attrs["offset"]
    # strings are variable-length in Zarr v3, not fixed-width numpy <U
    meta = json.loads((path / "profiles" / "model" / "zarr.json").read_text())
    assert meta["data_type"] == "string"


def test_complete_only_when_every_layer_written(tmp_path):
    path = tmp_path / "s.zarr"
    st.Store.open(path).register(info(L=3))
    p, n = random_layer(np.random.default_rng(1), 3)
    st.Store.open(path).write_layer("m", 0, p, n)
    st.Store.open(path).write_layer("m", 2, p, n)
    with pytest.raises(st.StoreError, match=r"layers \[1\]"):
        st.Store.open(path).mark_complete("m")
    assert not st.Store.open(path, mode="r").is_complete("m")
    assert st.Store.open(path, mode="r").layers_done("m").tolist() == [True, False, True]


def test_growth_keeps_what_was_written(tmp_path):
    path = tmp_path / "s.zarr"
    rng = np.random.default_rng(2)
    st.Store.open(path).register(info("small", L=1, H=2))
    p, n = random_layer(rng, 2)
    st.Store.open(path).write_layer("small", 0, p, n)
    st.Store.open(path).mark_complete("small")
    st.Store.open(path).register(info("big", L=4, H=5))  # more layers and heads than the store had
    p2, n2 = random_layer(rng, 5)
    st.Store.open(path).write_layer("big", 3, p2, n2)
    ds = st.Store.open(path, mode="r").dataset("profiles")
    assert ds.sizes["layer"] == 4 and ds.sizes["head"] == 5
    np.testing.assert_array_equal(ds.profile.sel(model="small").values[0, :2, 0], p)
    assert np.isnan(ds.profile.sel(model="small").values[0, 2:]).all()
    np.testing.assert_array_equal(ds.profile.sel(model="big").values[3, :, 0], p2)
    assert ds["layer"].values.tolist() == [0, 1, 2, 3] and ds["head"].values.tolist() == [0, 1, 2, 3, 4]


def test_reregistering_keeps_data_and_reset_forgets(tmp_path):
    path = tmp_path / "s.zarr"
    st.Store.open(path).register(info(L=2))
    p, n = random_layer(np.random.default_rng(3), 3)
    st.Store.open(path).write_layer("m", 0, p, n)
    st.Store.open(path).register(info(L=2, source="again"))  # resume: nothing lost
    assert st.Store.open(path, mode="r").layers_done("m").tolist() == [True, False]
    assert st.Store.open(path, mode="r").row("m").source == "again"
    st.Store.open(path).reset("m")
    assert st.Store.open(path, mode="r").layers_done("m").tolist() == [False, False]
    assert np.isnan(st.Store.open(path, mode="r").dataset("profiles").profile.values).all()


def test_complete_model_with_other_shape_is_refused(tmp_path):
    path = tmp_path / "s.zarr"
    st.Store.open(path).register(info(L=1))
    p, n = random_layer(np.random.default_rng(4), 3)
    st.Store.open(path).write_layer("m", 0, p, n)
    st.Store.open(path).mark_complete("m")
    with pytest.raises(st.StoreError, match="--name"):
        st.Store.open(path).register(info(L=2))
    assert st.Store.open(path, mode="r").is_complete("m") and st.Store.open(path, mode="r").row("m").n_layers == 1


def test_bad_writes_are_refused(tmp_path):
    path = tmp_path / "s.zarr"
    st.Store.open(path).register(info(L=2))
    with pytest.raises(st.StoreError, match="out of range"):
        st.Store.open(path).write_layer("m", 5, np.zeros((3, 4)), np.zeros(3))
    with pytest.raises(st.StoreError, match="expected profile"):
        st.Store.open(path).write_layer("m", 0, np.zeros((2, 4)), np.zeros(2))
    with pytest.raises(st.StoreError, match="not in the store"):
        st.Store.open(path).write_layer("nope", 0, np.zeros((3, 4)), np.zeros(3))
    with pytest.raises(ValueError, match="positional"):
        info(positional="sinusoidal")


def test_open_errors_say_what_to_do(tmp_path):
    with pytest.raises(st.StoreError, match="no store at"):
        st.Store.open(tmp_path / "missing.zarr", mode="r").dataset("profiles")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "file.txt").write_text("not zarr")
    with pytest.raises(st.StoreError, match="not a Zarr store"):
        st.Store.open(tmp_path / "junk", mode="r").dataset("profiles")
    path = tmp_path / "s.zarr"
    st.Store.open(path).register(info())
    with pytest.raises(st.StoreError, match="python -m pipeline orbits"):
        st.Store.open(path, mode="r").dataset("orbits")
    # an older schema
    meta_path = path / "profiles" / "zarr.json"
    meta = json.loads(meta_path.read_text())
    meta["attributes"]["schema_version"] = 0
    meta_path.write_text(json.dumps(meta))
    st.Store.open(path).journal.consolidate()  # the root's consolidated copy, as an old writer left it
    with pytest.raises(st.StoreError, match="schema version 0"):
        st.Store.open(path, mode="r").dataset("profiles")


def test_write_group_replaces_only_its_group(tmp_path):
    path = tmp_path / "s.zarr"
    st.Store.open(path).register(info())
    ds = xr.Dataset({"x": (("frame",), np.arange(3.0)), "label": (("panel",), np.array(["QK 0x10", "OV"])),
                     "position": (("frame", "head", "panel", "xy"), np.zeros((3, 1, 2, 2)))})
    st.Store.open(path).replace_group("orbits", ds, {"seed": 7})
    st.Store.open(path).replace_group("orbits", ds.assign(x=ds.x * 2), {"seed": 8})
    got = st.Store.open(path, mode="r").dataset("orbits")
    assert got.x.values.tolist() == [0.0, 2.0, 4.0] and got.attrs["seed"] == 8
    assert got.label.values.tolist() == ["QK 0x10", "OV"]
    assert st.Store.open(path, mode="r").dataset("profiles").model.values.tolist() == ["m"]
    assert sorted(p.name for p in path.iterdir()) == ["orbits", "profiles", "zarr.json"]
    assert sorted(p.name for p in (tmp_path / ".s.zarr.writer" / "staging").iterdir()) == []  # no side copies left


def test_side_groups_of_a_writer_without_journal_are_finished_by_upgrade_not_on_open(tmp_path):
    """A writer that replaced a group by two renames inside the store, killed between them, left ``G.__old__``
    (the old group moved aside) or ``G.__writing__`` (the new one, complete or not). Opening the store leaves
    them alone; ``Store.upgrade`` (``verify --upgrade``) puts a lone old or complete new group back in place and
    removes the rest, and the data read back is the group's."""
    path = tmp_path / "s.zarr"
    ds = xr.Dataset({"x": (("frame",), np.arange(3.0)),
                     "position": (("frame", "head", "panel", "xy"), np.zeros((3, 1, 2, 2)))})
    st.Store.open(path).register(info())
    st.Store.open(path).replace_group("orbits", ds, {"seed": 7})
    shutil.move(path / "orbits", path / "orbits.__old__")  # killed after moving the old group aside
    shutil.copytree(path / "profiles", path / "profiles.__writing__")  # a finished copy beside the live group
    (path / "junk.__writing__").mkdir()  # an unfinished new group (no zarr.json), no group of that name
    st.Store.open(path)  # opening recovers nothing of these
    assert (path / "orbits.__old__").is_dir() and (path / "profiles.__writing__").is_dir()
    done = st.Store.open(path).upgrade()
    assert sorted(done) == ["removed junk.__writing__", "removed profiles.__writing__", "restored orbits.__old__"]
    assert sorted(p.name for p in path.iterdir()) == ["orbits", "profiles", "zarr.json"]
    got = st.Store.open(path, mode="r").dataset("orbits")
    assert got.x.values.tolist() == [0.0, 1.0, 2.0] and got.attrs["seed"] == 7
    assert st.Store.open(path, mode="r").dataset("profiles").model.values.tolist() == ["m"]
    assert st.Store.open(path).upgrade() == []  # nothing left to do


# ------------------------------------------------------------------------------------ the Store handle


def test_one_shape_and_one_provenance_type_serve_every_model_type():
    """ModelRow holds ModelShape's and Provenance's fields (same names, types and defaults); Layout and ModelSpec are
    ModelShapes; the store's per-model int and provenance variables are those fields."""
    import dataclasses

    from pipeline import schema
    from pipeline.families import Layout
    from pipeline.registry.models import MODELS, ModelSpec

    row_fields = {f.name: f for f in dataclasses.fields(schema.ModelRow)}
    for record in (schema.ModelShape, schema.Provenance):
        for f in dataclasses.fields(record):
            assert row_fields[f.name].type == f.type, f.name
            if f.default is not dataclasses.MISSING and f.name != "n_kv_heads":
                assert row_fields[f.name].default == f.default, f.name
    assert issubclass(Layout, schema.ModelShape) and issubclass(ModelSpec, schema.ModelShape)
    assert schema.INT_FIELDS == ("n_layers", "n_heads", "n_kv_heads", "d_model", "d_head", "rotary_dim",
                                 "baseline_seed")
    assert schema.STR_FIELDS[-8:-2] == schema.PROVENANCE_FIELDS == ("format", "quantization", "package", "file",
                                                                    "sha256", "note")
    assert schema.STR_FIELDS[-2:] == ("baseline_of", "baseline_kind")
    spec = MODELS["pythia-70m-deduped"]
    row = schema.ModelRow.of("p", spec.shape, schema.Provenance(format="hub"), source=spec.hub_id)
    assert row.shape == spec.shape and row.provenance == schema.Provenance(format="hub")
    assert (row.n_layers, row.n_heads, row.n_kv_heads, row.rotary_dim, row.family) == (6, 8, 8, 16, "gpt_neox")
    assert spec.mismatches(dataclasses.replace(spec, n_heads=4, rope_theta=1.0)) == {"n_heads": (8, 4),
                                                                                      "rope_theta": (10000.0, 1.0)}


def test_a_row_added_where_rows_were_dropped_reads_as_new(tmp_path):
    """Rows share the chunks of the per-model variables, and zarr keeps the values of a chunk past an array's end
    when it shrinks: dropping trailing unnamed rows (what a killed registration leaves) sets them to the fill first,
    so the model registered next in their place is neither complete nor damaged."""
    import zarr

    from pipeline.store.profile_arrays import resize_rows

    path = tmp_path / "s.zarr"
    store = st.Store.open(path)
    for name in "abc":
        store.register(info(name))
    g = zarr.open_group(str(path), path="profiles", mode="a")
    resize_rows(g, 5)  # two rows without a name, as a registration killed before its name leaves them
    g["complete"][3:] = True
    g["damaged"][3:] = "stale"
    store.profiles.drop_ghost_rows()
    assert g["model"].shape == (3,) and g["complete"].shape == (3,) and g["complete"].chunks[0] > 5

    store.register(info("d"))
    row = store.row("d")
    assert (row.complete, row.damaged) == (False, "")  # neither is written by a registration: both read their fill
    raw = zarr.open_group(str(path), path="profiles", mode="r")
    assert raw["complete"][3] == False and raw["damaged"][3] == ""  # noqa: E712 - numpy bool
    assert list(raw["model"][:]) == ["a", "b", "c", "d"]

    # what the clearing prevents: a plain zarr resize keeps the values past the end of a partly kept chunk
    a = zarr.create_array(zarr.storage.MemoryStore(), shape=(5,), chunks=(256,), dtype=bool, fill_value=False)
    a[3:] = True
    a.resize((3,))
    a.resize((5,))
    assert list(a[:]) == [False, False, False, True, True]


def test_upgrade_rewrites_the_per_model_variables_of_a_chunk_per_row_with_every_value(tmp_path):
    """A store whose per-model variables have a chunk per row (an earlier version's layout) reads the same after
    ``upgrade`` rewrites them MODEL_CHUNK rows to a chunk; a second upgrade has nothing to do."""
    import zarr

    from pipeline import schema
    from pipeline.schema import MODEL_CHUNK
    from tests.factories import narrow_chunks, write_model

    path = tmp_path / "s.zarr"
    rng = np.random.default_rng(3)
    write_model(path, info("abs", L=2, H=3, source="here", note="ünïcode"), random_layers(rng, 2, 3))
    write_model(path, info("rot", L=1, H=2, positional="rope", rotary_dim=4), [random_layer(rng, 2, rotary=True)],
                complete=False)
    narrowed = narrow_chunks(path)
    per_model = {k for k, (dims, _, _) in (schema.MODEL_DATA | schema.CONVENTIONS_DATA).items() if dims == ("model",)}
    assert set(narrowed) == {"model"} | per_model
    before = st.Store.open(path, "r").checked_models()
    plain_before = xr.open_zarr(path, group="profiles").load()

    said = st.Store.open(path).upgrade()
    assert said == [f"profiles: {len(narrowed)} per-model variables rewritten with {MODEL_CHUNK} rows to a chunk "
                    "(they had a chunk per row)"]
    g = zarr.open_group(str(path), path="profiles", mode="r")
    assert {name: g[name].chunks for name in narrowed} == dict.fromkeys(narrowed, (MODEL_CHUNK,))
    assert st.Store.open(path, "r").checked_models() == before
    xr.testing.assert_identical(xr.open_zarr(path, group="profiles").load(), plain_before)
    assert st.Store.open(path).upgrade() == []
    st.Store.open(path).register(info("new"))  # the rewritten group takes rows as a new one does
    assert [r.name for r in st.Store.open(path, "r").models()] == ["abs", "rot", "new"]


def test_created_arrays_have_the_schemas_chunks_fills_and_dtypes(tmp_path):
    """Every array of a new profiles group, read back from its zarr.json: dimension names, data type, fill value and
    chunk shape as pipeline.schema declares them (data variables at the creation sizes, per-model variables
    MODEL_CHUNK rows to a chunk, coordinates their own chunk length)."""
    from pipeline import schema
    from pipeline.schema.conventions import conventions_chunks

    path = tmp_path / "s.zarr"
    st.Store.open(path).register(info("m", L=2, H=3))  # d_head 4: eigen 8
    zarr_type = {"float64": "float64", "int32": "int32", "int64": "int64", "bool": "bool", "str": "string"}
    sizes = {"model": 1, "layer": 2, "head": 3, "d": 129, "coordinate": 4, "statistic": 17, "eigen": 8}
    want = {}
    variables = schema.PROFILE_DATA | schema.STATISTICS_DATA | schema.SPECTRA_DATA | schema.MODEL_DATA
    for name, (dims, dtype, fill) in variables.items():
        want[name] = (list(dims), zarr_type[dtype], fill, list(schema.profile_chunks(dims, sizes)))
    for name, (dims, dtype, fill) in schema.CONVENTIONS_DATA.items():  # per-layer ones: one chunk per model
        want[name] = (list(dims), zarr_type[dtype], fill, list(conventions_chunks(dims)))
    for name, (dtype, fill, chunk) in schema.PROFILE_COORD_ARRAYS.items():
        want[name] = ([name], zarr_type[dtype], fill, [chunk])
    folders = sorted(p.name for p in (path / "profiles").iterdir() if p.is_dir())
    assert folders == sorted(want)
    for name, (dims, dtype, fill, chunks) in want.items():
        meta = json.loads((path / "profiles" / name / "zarr.json").read_text())
        got_fill = meta["fill_value"]
        assert (meta["dimension_names"], meta["data_type"]) == (dims, dtype), name
        assert meta["chunk_grid"]["configuration"]["chunk_shape"] == chunks, name
        assert (got_fill == "NaN") if isinstance(fill, float) else (got_fill == fill), (name, got_fill)
    # the chunk shapes the schema's prose gives: [1, 1, H0, 129, 4] and [1, 1, H0, E0]
    assert want["profile"][3] == [1, 1, 3, 129, 4] and want["spectrum"][3] == [1, 1, 3, 8]
    M = schema.MODEL_CHUNK
    assert M > 1 and want["n_heads"][1:] == ("int32", 0, [M]) and want["note"][1:] == ("string", "", [M])
    assert want["eig_abs"][3] == [1, 1, 3, 8] and want["baseline_seed"][1:] == ("int64", 0, [M])
    assert want["model"][3] == [M] and want["tower"][3] == [M] and want["layer_positional"][3] == [1, 4096]


def test_store_rows_carry_provenance_and_state(tmp_path):
    s = st.Store.open(tmp_path / "s.zarr")
    row = st.ModelRow("q", 2, 4, 32, 8, "rope", source="file.gguf", family="llama", command="python -m pipeline "
                      "profiles file.gguf --name q", n_kv_heads=2, rotary_dim=8, format="gguf", quantization="Q4_1",
                      package="llm-x==0.1", file="file.gguf", sha256="ab" * 32, note="quantized weights")
    s.register(row)
    p, n = random_layer(np.random.default_rng(5), 4, rotary=True)
    s.write_layer("q", 1, p, n)
    got = s.row("q")
    for f in ("source", "family", "command", "n_kv_heads", "rotary_dim", "format", "quantization", "package",
              "file", "sha256", "note"):
        assert getattr(got, f) == getattr(row, f)
    assert got.layers_done == 1 and got.computed and got.rotary and not got.complete and got.damaged == ""
    assert got.fix_command == row.command
    assert s.layers_done("q").tolist() == [False, True]
    ds = s.dataset("profiles")
    assert [r.name for r in model_rows(ds)] == ["q"]
    # the checksum is the documented sha256 of the layer's float64 values
    want = hashlib.sha256(np.ascontiguousarray(p).tobytes() + np.ascontiguousarray(n).tobytes())
    assert str(ds.layer_checksum.sel(model="q").values[1]) == want.hexdigest()
    assert str(ds.layer_checksum.sel(model="q").values[0]) == ""


def test_read_only_handle_refuses_writes(tmp_path):
    path = tmp_path / "s.zarr"
    st.Store.open(path).register(info())
    ro = st.Store.open(path, mode="r")
    with pytest.raises(st.StoreError, match="opened read-only"):
        ro.write_layer("m", 0, np.zeros((3, 4)), np.zeros(3))
    assert ro.models()[0].name == "m"


def rand_statistics(rng, H, k):
    return rng.normal(size=(H, len(STATISTICS))), -np.sort(-rng.normal(size=(H, k)), axis=-1)


def test_statistics_round_trip_and_the_eigen_dimension_grows(tmp_path):
    path = tmp_path / "s.zarr"
    rng = np.random.default_rng(4)
    st.Store.open(path).register(info("small", L=2, H=3))  # d_head 4: 8 eigenvalues
    p, n = random_layer(rng, 3)
    s0, e0 = rand_statistics(rng, 3, 8)
    s1, e1 = rand_statistics(rng, 3, 6)  # a span narrower than 2n (N < 2n): NaN past k
    st.Store.open(path).write_layer("small", 0, p, n, s0, e0)
    st.Store.open(path).write_layer("small", 1, p, n, s1, e1)
    st.Store.open(path).mark_complete("small")
    ds = st.Store.open(path, mode="r").dataset("profiles")
    assert list(ds.statistic.values) == list(STATISTICS) and ds.sizes["eigen"] == 8
    np.testing.assert_array_equal(ds.head_statistics.sel(model="small").values[1, :3], s1)
    np.testing.assert_array_equal(ds.spectrum.sel(model="small").values[1, :3, :6], e1)
    assert np.isnan(ds.spectrum.sel(model="small").values[1, :3, 6:]).all()
    assert st.Store.open(path, mode="r").row("small").statistics_computed

    big = st.ModelRow("big", 1, 5, 32, 12, "rope", rotary_dim=12)  # 24 eigenvalues: eigen grows from 8 to 24
    st.Store.open(path).register(big)
    sb, eb = rand_statistics(rng, 5, 24)
    st.Store.open(path).write_layer("big", 0, *random_layer(rng, 5, rotary=True), sb, eb)
    ds = st.Store.open(path, mode="r").dataset("profiles")
    assert ds.sizes["eigen"] == 24 and ds.eigen.values.tolist() == list(range(24))
    np.testing.assert_array_equal(ds.spectrum.sel(model="big").values[0, :5], eb)
    np.testing.assert_array_equal(ds.spectrum.sel(model="small").values[0, :3, :8], e0)  # kept
    assert np.isnan(ds.spectrum.sel(model="small").values[0, :3, 8:]).all()  # padding
    np.testing.assert_array_equal(ds.head_statistics.sel(model="small").values[0, :3], s0)
    assert st.Store.open(path).verify() == []  # the small model's checksums cover its own 2n columns only
    with pytest.raises(st.StoreError, match="expected spectrum"):
        st.Store.open(path).write_layer("small", 0, p, n, s0, rng.normal(size=(3, 9)))  # wider than 2n
    with pytest.raises(st.StoreError, match="both statistics and spectrum"):
        st.Store.open(path).write_layer("small", 0, p, n, s0)
    st.Store.open(path).reset("small")
    ds = st.Store.open(path, mode="r").dataset("profiles")
    assert np.isnan(ds.head_statistics.sel(model="small").values).all()
    assert not st.Store.open(path, mode="r").row("small").statistics_computed


def drop_statistics(path: Path) -> None:
    """Make ``path`` a store as written before the statistics existed: no statistics or spectra variables, no
    coordinates ``statistic`` and ``eigen``."""
    for name in ("head_statistics", "spectrum", "statistics_checksum", "statistic", "eigen", *SPECTRA_DATA):
        shutil.rmtree(path / "profiles" / name)
    st.Store(str(path), "a").journal.consolidate()


def drop_spectra(path: Path) -> None:
    """Make ``path`` a store as written before the spectra of T and L existed (its statistics kept), and before the
    baseline fields."""
    for name in (*SPECTRA_DATA, *BASELINE_STATE):
        shutil.rmtree(path / "profiles" / name)
    st.Store(str(path), "a").journal.consolidate()


def test_a_store_written_before_the_statistics_opens_and_says_so(tmp_path, capsys):
    from dashboard import data
    from pipeline.__main__ import main

    path = tmp_path / "old.zarr"
    rng = np.random.default_rng(6)
    row = info("m", L=2, H=3, command="python -m pipeline profiles org/m")
    st.Store.open(path).register(row)
    layers = [random_layer(rng, 3) + rand_statistics(rng, 3, 8) for _ in range(2)]
    for layer, values in enumerate(layers):
        st.Store.open(path).write_layer("m", layer, *values)
    st.Store.open(path).mark_complete("m")
    drop_statistics(path)

    ds = st.Store.open(path, mode="r").dataset("profiles")  # validated: the statistics are optional
    assert "head_statistics" not in ds and "eigen" not in ds.sizes
    m = st.Store.open(path, mode="r").row("m")
    assert m.complete and not m.statistics_computed
    assert m.statistics_note == "statistics not computed; add them with `python -m pipeline profiles org/m`"
    assert main(["list", "--store", str(path)]) == 0
    assert f"m: {m.statistics_note}" in capsys.readouterr().out
    assert main(["verify", "--store", str(path)]) == 0  # not damage
    out = capsys.readouterr().out
    assert "every written layer matches its checksum" in out and m.statistics_note in out
    got = data.model_statistics(path, "m")
    assert got.note == m.statistics_note and np.isnan(got.statistics).all() and got.statistics.shape == (2, 3, 17)
    assert data.model_data(path, "m").profile.shape == (2, 3, 1, 4)  # the profiles still draw

    assert st.Store.open(path, "r").layers_with_statistics("m").tolist() == [False, False]
    # what the command does (register, then every layer without statistics again, with them): the arrays come back
    st.Store.open(path).register(row)
    for layer, values in enumerate(layers):
        st.Store.open(path).write_layer("m", layer, *values)
    st.Store.open(path).mark_complete("m")
    m = st.Store.open(path, mode="r").row("m")
    assert m.statistics_computed and m.statistics_note == ""
    stats = st.Store.open(path, mode="r").dataset("profiles").head_statistics.sel(model="m").values
    np.testing.assert_array_equal(stats[1, :3], layers[1][2])
    assert st.Store.open(path).verify() == []
    got = data.model_statistics(path, "m")
    assert got.note == "" and got.spectrum.shape == (2, 3, 8)
    np.testing.assert_array_equal(got.statistics[1], layers[1][2])
    np.testing.assert_array_equal(got.spectrum[0], layers[0][3])


def test_an_old_store_gains_the_statistics_on_its_next_write(tmp_path):
    """A layer written with statistics into a store without the variables adds them; the others read not computed."""
    path = tmp_path / "old.zarr"
    rng = np.random.default_rng(8)
    st.Store.open(path).register(info("m", L=2, H=3))
    st.Store.open(path).write_layer("m", 0, *random_layer(rng, 3))
    drop_statistics(path)
    values = random_layer(rng, 3) + rand_statistics(rng, 3, 8)
    st.Store.open(path).write_layer("m", 1, *values)
    ds = st.Store.open(path, mode="r").dataset("profiles")
    np.testing.assert_array_equal(ds.spectrum.sel(model="m").values[1, :3], values[3])
    assert np.isnan(ds.head_statistics.sel(model="m").values[0]).all()
    m = st.Store.open(path, mode="r").row("m")
    assert (m.layers_done, m.statistics_layers, m.statistics_computed) == (2, 1, False)


def test_a_writer_kept_open_while_other_models_grow_the_group_writes_what_write_layer_would(tmp_path):
    """A run's writer opens the row and arrays once. Other models registered meanwhile (one more row, more layers,
    more heads, a wider eigen dimension: the arrays' shapes change under it) neither move its row nor shift its
    chunks: every value, checksum and padding reads back as a writer opened afresh for each layer writes it, and
    ``verify`` finds nothing. Opened on a store without the statistics variables (a store written before them,
    which another registration upgrades meanwhile), it writes them too."""
    rng = np.random.default_rng(12)
    values = [random_layer(rng, 3) + rand_statistics(rng, 3, 8) for _ in range(3)]
    kept, fresh = tmp_path / "kept.zarr", tmp_path / "fresh.zarr"
    for path in (kept, fresh):
        st.Store.open(path).register(info("first", L=1, H=2))
        st.Store.open(path).register(info("m", L=3, H=3))
        drop_statistics(path)
    writer = st.Store.open(kept).layer_writer("m")
    growers = [info("more-layers", L=6, H=2), st.ModelRow("wide", 1, 5, 32, 12, "rope", rotary_dim=12), None]
    for layer, grower in enumerate(growers):
        for path in (kept, fresh):
            if grower is not None:
                st.Store.open(path).register(grower)
        writer.write(layer, *values[layer])
        st.Store.open(fresh).write_layer("m", layer, *values[layer])

    a = st.Store.open(kept, mode="r").dataset("profiles")
    b = st.Store.open(fresh, mode="r").dataset("profiles")
    assert a.sizes == b.sizes and a.sizes["eigen"] == 24 and a.sizes["head"] == 5 and a.sizes["layer"] == 6
    assert list(a.model.values) == ["first", "m", "more-layers", "wide"]
    for var in ("profile", "norm", "layer_done", "layer_checksum", "head_statistics", "spectrum",
                "statistics_checksum"):
        np.testing.assert_array_equal(a[var].sel(model="m").values, b[var].sel(model="m").values, err_msg=var)
    np.testing.assert_array_equal(a.spectrum.sel(model="m").values[2, :3, :8], values[2][3])
    assert np.isnan(a.spectrum.sel(model="m").values[:, :, 8:]).all()
    assert a.layer_done.sel(model="m").values[:3].all()
    assert st.Store.open(kept).verify() == []
    st.Store.open(kept).mark_complete("m")
    with pytest.raises(st.StoreError, match="layer 3 out of range"):
        writer.write(3, *values[0])
    with pytest.raises(st.StoreError, match="not in the store"):
        st.Store.open(kept).layer_writer("nobody")


def test_spectra_and_baseline_fields_round_trip(tmp_path):
    """The spectra of T and L are stored NaN-padded to the store's eigen width with the documented checksum (sha256 of
    the three (H, 2n) arrays in SPECTRA order); a baseline's fields (a 64-bit seed) come back, and the rows of trained
    models and baselines come apart."""
    from pipeline import schema

    path = tmp_path / "s.zarr"
    rng = np.random.default_rng(13)
    st.Store.open(path).register(st.ModelRow("wide", 1, 2, 32, 12, "rope", rotary_dim=12))  # eigen 24
    base = info("m~iid-seed0", baseline_of="m", baseline_kind="iid", baseline_seed=2 ** 40)
    for row in (info("m"), base):
        st.Store.open(path).register(row)
    p, n = random_layer(rng, 3)
    stats, spectrum = rand_statistics(rng, 3, 8)
    spectra = rng.uniform(size=(3, 3, 6))  # k = 6 < 2n = 8: NaN past it
    st.Store.open(path).write_layer("m~iid-seed0", 0, p, n, stats, spectrum, spectra)
    ds = st.Store.open(path, mode="r").dataset("profiles").sel(model="m~iid-seed0")
    for i, name in enumerate(schema.SPECTRA):
        np.testing.assert_array_equal(ds[name].values[0, :3, :6], spectra[i])
        assert np.isnan(ds[name].values[0, :3, 6:]).all()
    padded = np.pad(spectra, ((0, 0), (0, 0), (0, 2)), constant_values=np.nan)
    want = hashlib.sha256(np.ascontiguousarray(padded, dtype="<f8").tobytes()).hexdigest()
    assert str(ds.spectra_checksum.values[0]) == want
    rows = st.Store.open(path, mode="r").models()
    got = {r.name: r for r in rows}["m~iid-seed0"]
    assert (got.baseline_of, got.baseline_kind, got.baseline_seed, got.spectra_layers) == ("m", "iid", 2 ** 40, 1)
    trained, baselines = schema.trained_and_baselines(rows)
    assert [r.name for r in trained] == ["wide", "m"] and [r.name for r in baselines] == ["m~iid-seed0"]
    assert [r.name for r in schema.baselines_of(rows, "m")] == ["m~iid-seed0"]
    with pytest.raises(st.StoreError, match="spectra of T and L are written with the statistics"):
        st.Store.open(path).write_layer("m", 0, p, n, spectra=spectra)
    with pytest.raises(st.StoreError, match="expected the spectra"):
        st.Store.open(path).write_layer("m", 0, p, n, stats, spectrum, spectra[:2])
    assert st.Store.open(path).verify() == []


def test_per_layer_variables_are_read_up_to_each_models_layer_count(tmp_path):
    """``layer_prefixes`` (how the rows read the (model, layer) variables) equals the whole variable read by zarr
    with every entry past a model's layer count replaced by the fill value, a stray value there included; and the
    rows it gives equal the rows read through xarray (``model_rows``)."""
    import zarr

    from pipeline.store.profile_arrays import layer_prefixes

    path = tmp_path / "s.zarr"
    rng = np.random.default_rng(3)
    st.Store.open(path).register(info("deep", L=4, H=2))
    st.Store.open(path).register(info("shallow", L=2, H=2))
    st.Store.open(path).register(info("none", L=3, H=2))
    for name, layers in (("deep", (0, 2, 3)), ("shallow", (1,))):
        for layer in layers:
            st.Store.open(path).write_layer(name, layer, *random_layer(rng, 2))
    g = zarr.open_group(str(path), path="profiles", mode="a")
    g["layer_done"][1, 3] = True  # past shallow's two layers: not part of its row
    counts = g["n_layers"][:]
    assert counts.tolist() == [4, 2, 3]
    past = np.arange(4)[None, :] >= counts[:, None]
    for var in ("layer_done", "layer_checksum"):
        whole = g[var][:]
        got = layer_prefixes(g[var], counts)
        assert got.dtype == whole.dtype and got.shape == whole.shape == (3, 4), var
        np.testing.assert_array_equal(got, np.where(past, g[var].fill_value, whole), err_msg=var)
    assert bool(g["layer_done"][:][1, 3]) and not layer_prefixes(g["layer_done"], counts)[1, 3]
    np.testing.assert_array_equal(layer_prefixes(g["layer_done"], [0, 0, 0]), np.zeros((3, 4), dtype=bool))
    rows = st.Store.open(path, "r").models()
    assert [(r.name, r.layers_done) for r in rows] == [("deep", 3), ("shallow", 1), ("none", 0)]
    assert rows == model_rows(st.Store.open(path, "r").dataset("profiles"))
    assert st.Store.open(path, "r").checked_models() == rows  # every written layer matches its checksum
