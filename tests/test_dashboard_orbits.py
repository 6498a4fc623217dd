"""The orbits page: data packing for the client-side movie, colours, verification, and robustness.

The browser behaviour (playing, looping, the JavaScript twin of ``frame_state``) is tested in
tests/browser/test_orbits_page.py; here everything is checked in Python against independent
computations (brute-force loops, the serialized document decoded by hand).
"""

from __future__ import annotations

import base64
import gzip
import json

import numpy as np
import pytest
import xarray as xr
from bokeh.embed import json_item
from bokeh.models import ColumnDataSource, Div, GridPlot, Slider

from dashboard import orbits_frames as of
from dashboard.orbits_page import frame_state, orbits_view
from pipeline import store
from tests.browser.conftest import synthetic_orbits_dataset

STORED_EPOCHS = np.concatenate([np.arange(0, 4000, 25), np.arange(4000, 4601, 100)])  # as the pipeline stores


def planted_orbits(epochs=STORED_EPOCHS[:24], n_heads=32, panels=("QK 0x10", "OV 10x10", "QK 0x6"),
                   seed=0) -> xr.Dataset:
    """A 12-head orbit labelled 1 and a 4-head orbit labelled 0 (so size, not label, must pick the colour).

    Orbit heads sit on a regular polygon that grows and turns with the frame; the others wander at random.
    """
    rng = np.random.default_rng(seed)
    F, P = len(epochs), len(panels)
    rotation = np.array([10, 6, 2, 4, 8, 12][:P])
    orbit = np.full(n_heads, -1)
    orbit[:12], orbit[12:16] = 1, 0
    pos = rng.normal(0, 0.2, (F, n_heads, P, 2))
    t = np.arange(F)[:, None, None] / max(F - 1, 1)
    for heads, size in ((np.arange(12), 12), (np.arange(12, 16), 4)):
        k = np.arange(size)[None, :, None]
        ang = rotation[None, None, :] * k * 2 * np.pi / 24 + 0.3 * t * np.arange(1, P + 1)
        pos[:, heads] = np.stack([(0.2 + t) * np.cos(ang), (0.2 + t) * np.sin(ang)], axis=-1)
    shift_error = rng.uniform(0, 1e-3, (24, n_heads))
    shift_error[7, 3] = 0.25  # the worst of the 12-head orbit
    shift_image = np.tile(np.arange(n_heads), (24, 1))
    shift_image[:, :12] = (np.arange(12)[None, :] + np.arange(24)[:, None]) % 12
    kinds = [p.split()[0] for p in panels]
    return xr.Dataset(
        {
            "position": (("frame", "head", "panel", "xy"), pos),
            "panel_kind": ("panel", np.array(kinds, dtype=object)),
            "freq_a": ("panel", np.array([0, 10, 0, 6, 0, 6][:P])),
            "freq_b": ("panel", np.array([10, 10, 6, 6, 2, 2][:P])),
            "eps": ("panel", np.array([1, -1, 1, 1, 1, 1][:P])),
            "rotation": ("panel", rotation),
            "train_accuracy": ("frame", np.linspace(0.1, 1, F)),
            "heldout_accuracy": ("frame", np.linspace(0.05, 0.97, F)),
            "loss": ("frame", np.linspace(3, 0.01, F)),
            "equivariance_error": ("frame", np.linspace(1, 1e-4, F)),
            "orbit": ("head", orbit),
            "shift_image": (("shift", "head"), shift_image),
            "shift_error": (("shift", "head"), shift_error),
        },
        coords={"epoch": ("frame", np.asarray(epochs)), "panel": ("panel", np.array(panels, dtype=object)),
                "xy": np.array(["x", "y"], dtype=object), "shift": np.arange(24)},
        attrs={"trail_epochs": 250},
    )


def _sources(layout) -> dict[str, ColumnDataSource]:
    return {m.name: m for m in layout.references() if isinstance(m, ColumnDataSource) and m.name}


def _decode_ndarray(enc: dict) -> np.ndarray:
    """Decode Bokeh's wire encoding of a numpy array (base64 bytes, gzip-compressed when large)."""
    raw = base64.b64decode(enc["array"]["data"])
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return np.frombuffer(raw, dtype=enc["dtype"]).reshape(enc["shape"])


def _find_source_data(obj, name: str):
    """The serialized ``data`` map of the ColumnDataSource called ``name`` in a json_item document."""
    if isinstance(obj, dict):
        if obj.get("name") == "ColumnDataSource" or obj.get("type") == "object":
            attrs = obj.get("attributes", {})
            if attrs.get("name") == name and "data" in attrs:
                return dict(attrs["data"]["entries"])
        for v in obj.values():
            found = _find_source_data(v, name)
            if found is not None:
                return found
    elif isinstance(obj, list):
        for v in obj:
            found = _find_source_data(v, name)
            if found is not None:
                return found
    return None


@pytest.fixture
def store_ds(tmp_path):
    """The planted dataset written to a real store and read back through pipeline.store.Store.dataset."""
    path = tmp_path / "store.zarr"
    store.Store.open(path).replace_group(store.ORBITS, planted_orbits())
    return store.Store.open(path, mode="r").dataset("orbits")


def test_positions_decode_to_the_dataset_values_from_the_serialized_page(store_ds):
    layout = orbits_view(store_ds)
    doc = json.loads(json.dumps(json_item(layout)))  # exactly what a page embeds
    data = _find_source_data(doc, "orbits_positions")
    flat = _decode_ndarray(data["pos"])
    assert flat.dtype == np.float32
    expected = store_ds["position"].transpose("frame", "head", "panel", "xy").values
    F, H, P, _ = expected.shape
    decoded = flat.reshape(F, H, P, 2)
    np.testing.assert_allclose(decoded, expected, rtol=1e-6, atol=1e-7)
    # the index formula the JavaScript uses: pos[((f * H + h) * P + p) * 2 + k]
    f, h, p = 5, 13, 2
    assert flat[((f * H + h) * P + p) * 2 + 1] == np.float32(expected[f, h, p, 1])


def test_xy_order_is_taken_from_the_coordinate():
    ds = planted_orbits()
    swapped = ds.isel(xy=[1, 0])  # stored as (y, x)
    np.testing.assert_array_equal(of.positions(swapped), of.positions(ds))


def test_trail_starts_are_exactly_the_frames_within_trail_epochs():
    epochs = STORED_EPOCHS
    for trail in (0, 24, 25, 250, 260, 1e9):
        starts = of.trail_starts(epochs, trail)
        for f in range(len(epochs)):
            within = [g for g in range(f + 1) if epochs[f] - epochs[g] <= trail]
            assert list(range(starts[f], f + 1)) == within, (trail, f)
    # per 25 epochs, 250 epochs of trail is the frame itself and the 10 before it
    assert of.trail_starts(epochs, 250)[40] == 30
    # after 4000, per 100 epochs: the last 3 frames (epochs 4400, 4500, 4600)
    assert of.trail_starts(epochs, 250)[-1] == len(epochs) - 3


def test_initial_trails_and_dots_are_the_last_frame_and_its_trail(store_ds):
    layout = orbits_view(store_ds)
    src = _sources(layout)
    pos = store_ds["position"].transpose("frame", "head", "panel", "xy").values
    epochs = store_ds["epoch"].values
    F = len(epochs)
    trail = [g for g in range(F) if epochs[-1] - epochs[g] <= 250]
    for p in range(store_ds.sizes["panel"]):
        dots, trails = src[f"orbits_dots_{p}"].data, src[f"orbits_trails_{p}"].data
        for i, h in enumerate(dots["head"]):
            assert dots["x"][i] == pos[-1, h, p, 0] and dots["y"][i] == pos[-1, h, p, 1]
            np.testing.assert_array_equal(trails["xs"][i], pos[trail, h, p, 0])
            np.testing.assert_array_equal(trails["ys"][i], pos[trail, h, p, 1])
        assert sorted(dots["head"]) == list(range(store_ds.sizes["head"]))


def test_view_radius_is_the_largest_radius_over_the_trail():
    ds = planted_orbits()
    pos = of.positions(ds)
    starts = of.trail_starts(ds["epoch"].values, 250)
    radii = of.view_radii(pos, starts)
    for f in (0, 7, len(starts) - 1):
        for p in range(pos.shape[2]):
            brute = max(np.hypot(*pos[g, h, p]) for g in range(starts[f], f + 1) for h in range(pos.shape[1]))
            assert radii[f, p] == pytest.approx(brute)
            assert frame_state(pos, starts, radii, f, p)[2] == pytest.approx(1.1 * brute)


def test_frames_are_played_in_epoch_order():
    ds = planted_orbits()
    shuffled = ds.isel(frame=np.random.default_rng(1).permutation(ds.sizes["frame"]))
    back = of.sorted_by_epoch(shuffled)
    np.testing.assert_array_equal(back["epoch"].values, ds["epoch"].values)
    np.testing.assert_array_equal(of.positions(back), of.positions(ds))


def test_colours_follow_orbit_size_and_gray_for_no_orbit():
    orbit = planted_orbits()["orbit"].values  # label 1 has 12 heads, label 0 has 4
    colours, per_head = of.orbit_colours(orbit)
    assert colours == {1: "#1f77b4", 0: "#ff7f0e"}  # the 12-head orbit blue, the 4-head orbit orange
    assert per_head[0] == "#1f77b4" and per_head[12] == "#ff7f0e" and per_head[20] == of.NO_ORBIT
    many = np.repeat(np.arange(20), 2)  # more orbits than palette entries: still one colour each, no gray
    colours, _ = of.orbit_colours(many)
    assert len(colours) == 20 and of.NO_ORBIT not in colours.values()
    assert len(set(list(colours.values())[: len(of.PALETTE)])) == len(of.PALETTE)


def test_orbit_verification_is_the_worst_error_over_shifts_and_heads():
    ds = planted_orbits()
    checks = of.orbit_checks(ds)
    assert [c.label for c in checks] == [1, 0]
    err = ds["shift_error"].values
    assert checks[0].heads == list(range(12)) and checks[0].worst_error == pytest.approx(0.25)
    assert checks[1].worst_error == pytest.approx(err[:, 12:16].max())
    assert checks[0].closed is True  # shifts permute heads 0..11 among themselves
    assert checks[1].closed is True  # the stored images of heads 12..15 are themselves
    broken = ds.copy(deep=True)
    broken["shift_image"][3, 14] = 20
    assert of.orbit_checks(broken)[1].closed is False


def test_verification_table_and_titles_in_the_page(store_ds):
    layout = orbits_view(store_ds)
    table = next(m for m in layout.references() if isinstance(m, Div) and m.name == "orbits_verification")
    assert "2.50e-01" in table.text and ">12<" in table.text and ">4<" in table.text
    grid = next(m for m in layout.references() if getattr(m, "name", None) == "orbits_panels")
    titles = [f.title.text for r in grid.children for f in r.children]
    assert titles == ["QK: query freq 0 × key freq 10 (rotation 10)",
                      "OV: output freq 10 × input freq 10 (rotation 6)",
                      "QK: query freq 0 × key freq 6 (rotation 2)"]
    assert [of.panel_subtitle(store_ds, p) for p in range(3)] == [
        "a full orbit draws a 12-gon · ε = +1", "a full orbit draws a 4-gon · ε = −1",
        "a full orbit draws a 12-gon · ε = +1"]
    assert [of.vertex_count(r) for r in (0, 1, 2, 3, 6, 8, 10, 12, 23)] == [1, 24, 12, 8, 4, 3, 12, 2, 24]
    flat = store_ds.assign(rotation=("panel", np.array([0, 12, 8])))
    assert [of.panel_subtitle(flat, p).split(" · ")[0] for p in range(3)] == [
        "an orbit's dots coincide", "a full orbit draws a segment through 0", "a full orbit draws a 3-gon"]


@pytest.mark.parametrize("n_panels", [1, 3, 5])
def test_any_number_of_panels_in_two_columns(n_panels):
    ds = synthetic_orbits_dataset(n_frames=5)
    ds = xr.concat([ds.isel(panel=[i % 4]) for i in range(n_panels)], dim="panel", data_vars="minimal")
    ds = ds.assign_coords(panel=("panel", np.array([f"p{i}" for i in range(n_panels)], dtype=object)))
    layout = orbits_view(ds)
    grid = next(m for m in layout.references() if getattr(m, "name", None) == "orbits_panels")
    widths = [len(r.children) for r in grid.children]
    assert sum(widths) == n_panels and max(widths) == min(2, n_panels)
    assert not any(isinstance(m, GridPlot) for m in layout.references())  # GridPlot renders empty in Panel
    assert sorted(_sources(layout)) == sorted(
        ["orbits_positions", "orbits_frames"] + [f"orbits_{k}_{p}" for p in range(n_panels)
                                                 for k in ("dots", "trails")])


def test_conftest_dataset_and_a_single_frame_work():
    layout = orbits_view(synthetic_orbits_dataset(n_frames=1))
    slider = next(m for m in layout.references() if isinstance(m, Slider))
    assert slider.disabled and slider.value == 0


def test_missing_metrics_and_orbits_are_shown_as_absent():
    ds = planted_orbits().drop_vars(["orbit", "loss", "heldout_accuracy", "shift_error", "shift_image"])
    layout = orbits_view(ds)
    info = next(m for m in layout.references() if isinstance(m, Div) and m.name == "orbits_info")
    assert "held-out acc <b>—</b>" in info.text and "train acc <b>100.0%</b>" in info.text
    assert "(at 2× QK —)" in info.text  # a store written before the metric existed
    dots = _sources(layout)["orbits_dots_0"].data
    assert set(dots["colour"]) == {of.NO_ORBIT}
    table = next(m for m in layout.references() if isinstance(m, Div) and m.name == "orbits_verification")
    assert "no orbits found" in table.text


def test_store_without_orbits_gives_the_command_that_fixes_it(tmp_path):
    path = tmp_path / "store.zarr"
    store.Store.open(path).register(store.ModelRow("m", 1, 1, 8, 4, "none"))
    with pytest.raises(store.StoreError, match="python -m pipeline orbits"):
        store.Store.open(path, mode="r").dataset("orbits")
    view = orbits_view(None)
    assert isinstance(view, Div) and "python -m pipeline orbits --store" in view.text


@pytest.mark.parametrize("broken", [
    lambda ds: ds.drop_vars("position"),
    lambda ds: ds.isel(frame=slice(0, 0)),
    lambda ds: ds.rename_dims(panel="plane"),
])
def test_unusable_groups_give_a_message_not_a_traceback(broken):
    view = orbits_view(broken(planted_orbits()))
    assert isinstance(view, Div) and view.name == "orbits_message"
    assert "<code>python -m pipeline orbits --store PATH</code>" in view.text


def test_missing_positions_are_skipped_in_the_radius():
    ds = planted_orbits()
    pos = of.positions(ds)
    pos[3, 0, 0] = np.nan  # a head with no position at frame 3
    pos[3, 5, 0] = [40.0, 0.0]  # and an outlier that sets the radius
    starts = of.trail_starts(ds["epoch"].values, 0)  # no trail: the frame alone
    radii = of.view_radii(pos, starts)
    assert radii[3, 0] == 40.0
    finite = np.hypot(pos[4, :, 0, 0], pos[4, :, 0, 1])
    assert radii[4, 0] == pytest.approx(finite.max())
    ds["position"].values[:] = np.nan
    assert orbits_view(ds).name == "orbits_view"  # all missing: drawn empty, axes at ±1


def test_only_the_runs_own_panels_are_shown_when_the_store_marks_them(tmp_path):
    ds = synthetic_orbits_dataset(n_frames=3)
    role = np.array(["run", "seed", "run", "seed"], dtype=object)[: ds.sizes["panel"]]
    ds = ds.assign(panel_role=("panel", role))
    # through the store: strings come back as StringDType
    store.Store.open(tmp_path / "s.zarr").replace_group(store.ORBITS, ds)
    layout = orbits_view(store.Store.open(tmp_path / "s.zarr", mode="r").dataset("orbits"))
    grid = next(m for m in layout.references() if getattr(m, "name", None) == "orbits_panels")
    titles = [f.title.text for r in grid.children for f in r.children]
    keep = np.flatnonzero(role == "run")
    assert titles == [of.panel_title(ds, p) for p in keep]
