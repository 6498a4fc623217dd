"""The orbits page: data packing for the client-side movie, colours, verification, the heads' profiles in the
tetrahedron, the search's hypotheses table, and robustness.

The browser behaviour (playing, looping, the JavaScript twin of ``frame_state``) is tested in
tests/browser/test_orbits_page.py; here everything is checked in Python against independent
computations (brute-force loops, the serialized document decoded by hand).
"""

from __future__ import annotations

import base64
import gzip
import json

import holoviews as hv
import numpy as np
import pytest
import xarray as xr
from bokeh.embed import json_item
from bokeh.models import ColumnDataSource, Div, GridPlot, Slider

from dashboard import views
from dashboard.orbits import frames as of
from dashboard.orbits.page import frame_state, orbits_view
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


@pytest.fixture(scope="module")
def store_ds(tmp_path_factory):
    """The planted dataset written to a real store and read back through pipeline.store.Store.dataset."""
    path = tmp_path_factory.mktemp("orbits") / "store.zarr"
    store.Store.open(path).replace_group(store.ORBITS, planted_orbits())
    return store.Store.open(path, mode="r").dataset("orbits")


@pytest.fixture(scope="module")
def store_page(store_ds):
    """The orbits page of ``store_ds``, built once for the tests that only read it."""
    return orbits_view(store_ds)


def test_positions_decode_to_the_dataset_values_from_the_serialized_page(store_ds, store_page):
    layout = store_page
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


def test_initial_trails_and_dots_are_the_last_frame_and_its_trail(store_ds, store_page):
    layout = store_page
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


def test_verification_table_and_titles_in_the_page(store_ds, store_page):
    layout = store_page
    table = next(m for m in layout.references() if isinstance(m, Div) and m.name == "orbits_verification")
    assert "2.50e-01" in table.text and ">12<" in table.text and ">4<" in table.text
    grid = next(m for m in layout.references() if getattr(m, "name", None) == "orbits_panels")
    titles = [f.title.text for r in grid.children for f in r.children]
    assert titles == ["QK: query freq 0 × key 10 (rotation 10)",
                      "OV: output freq 10 × input 10 (rotation 6)",
                      "QK: query freq 0 × key 6 (rotation 2)"]
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


# ------------------------------------------------------------------------------- the tetrahedron


def with_profiles(ds: xr.Dataset, seed: int = 3) -> xr.Dataset:
    """``ds`` with a ``head_profile`` (frame, head, coordinate): Dirichlet points, head 31 dead (NaN), stored in
    the coordinate order d, c, b, a (the readers must reorder)."""
    rng = np.random.default_rng(seed)
    F, H = ds.sizes["frame"], ds.sizes["head"]
    prof = rng.dirichlet(np.ones(4), size=(F, H))
    prof[:, H - 1] = np.nan
    return ds.assign(head_profile=(("frame", "head", "coordinate"), prof[:, :, ::-1].copy())).assign_coords(
        coordinate=("coordinate", np.array(["d", "c", "b", "a"], dtype=object)))


def screen(profile: np.ndarray, azimuth: float = 30.0, elevation: float = 20.0) -> np.ndarray:
    """(..., 4) profiles -> (..., 2) screen positions, computed here with rotation matrices: the regular
    tetrahedron with vertices a = (1,1,1), b = (1,-1,-1), c = (-1,1,-1), d = (-1,-1,1) over sqrt(3), turned by
    the azimuth about z, then by -elevation about x (a camera raised by the elevation looks down on it); screen
    x is the turned x axis, screen y the turned z axis."""
    V = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]]) / np.sqrt(3)
    az, el = np.radians(azimuth), np.radians(elevation)
    Rz = np.array([[np.cos(az), -np.sin(az), 0], [np.sin(az), np.cos(az), 0], [0, 0, 1]])
    Rx = np.array([[1, 0, 0], [0, np.cos(el), np.sin(el)], [0, -np.sin(el), np.cos(el)]])  # the camera looks down
    p = (Rx @ Rz @ (profile @ V)[..., None])[..., 0]
    return np.stack([p[..., 0], p[..., 2]], axis=-1)


def _tetra_sources(fig) -> dict:
    return {m.name: m.data for m in fig.references() if isinstance(m, ColumnDataSource) and m.name}


def test_profile_positions_are_the_projected_profiles_in_epoch_order():
    ds = with_profiles(planted_orbits())
    prof = ds["head_profile"].sel(coordinate=["a", "b", "c", "d"]).values
    shuffled = ds.isel(frame=np.random.default_rng(2).permutation(ds.sizes["frame"]))
    xy = views.orbit_profile_positions(shuffled)
    np.testing.assert_allclose(xy, screen(prof), atol=1e-12)  # NaN where the head is dead
    np.testing.assert_allclose(views.orbit_profile_positions(ds, 75.0, -10.0), screen(prof, 75.0, -10.0), atol=1e-12)
    # as the profiles page's tetrahedron draws the same profiles (frame 5's heads as one layer)
    page = views.render(views.tetrahedron(prof[5][None, :, None, :]))
    heads = next(m for m in page.references() if isinstance(m, ColumnDataSource) and m.name == "heads").data
    np.testing.assert_allclose(np.stack([heads["x"], heads["y"]], axis=-1), xy[5], atol=1e-12)
    assert views.orbit_profile_positions(planted_orbits()) is None


@pytest.mark.parametrize("frame", [-1, 0, 9])
def test_tetrahedron_view_draws_each_frames_profiles_trails_and_orbit_colours(frame):
    ds = with_profiles(planted_orbits())
    prof = ds["head_profile"].sel(coordinate=["a", "b", "c", "d"]).values
    F, H = prof.shape[:2]
    f = frame % F
    fig = views.render(views.orbit_tetrahedron(ds, frame=frame))
    assert fig.name == "orbits_tetrahedron"
    src = _tetra_sources(fig)
    dots, trails = src["orbits_tetra_dots"], src["orbits_tetra_trails"]
    heads = np.asarray(dots["head"])
    assert sorted(heads) == list(range(H))
    xy = screen(prof)
    np.testing.assert_allclose(np.stack([dots["x"], dots["y"]], axis=-1), xy[f, heads], atol=1e-12)
    for c, k in zip("abcd", range(4), strict=True):
        np.testing.assert_allclose(dots[c], prof[f, heads, k])
    # orbit colours as in the planes: the 12-head orbit (label 1) blue, the 4-head orbit orange, the rest gray
    want = {h: "#1f77b4" if h < 12 else "#ff7f0e" if h < 16 else of.NO_ORBIT for h in range(H)}
    assert [dots["colour"][i] for i in range(H)] == [want[h] for h in heads]
    assert list(heads[:16]) == list(range(16, 32))  # heads in no orbit are drawn first (under the orbits)
    # trails: the frames within the group's 250 epochs before frame f, one line per head in the dots' order
    epochs = ds["epoch"].values
    within = [g for g in range(f + 1) if epochs[f] - epochs[g] <= 250]
    assert len(trails["xs"]) == H
    for i, h in enumerate(heads):
        np.testing.assert_allclose(trails["xs"][i], xy[within, h, 0], atol=1e-12)
        np.testing.assert_allclose(trails["ys"][i], xy[within, h, 1], atol=1e-12)
    short = _tetra_sources(views.render(views.orbit_tetrahedron(ds, frame=frame, trail_epochs=30)))
    n = len([g for g in range(f + 1) if epochs[f] - epochs[g] <= 30])  # 25 epochs apart: 2 frames, 1 at frame 0
    assert {len(x) for x in short["orbits_tetra_trails"]["xs"]} == {n}


def test_tetrahedron_vertices_are_the_profiles_pages():
    fig = views.render(views.orbit_tetrahedron(with_profiles(planted_orbits())))
    vertices = next(m.data for m in fig.references() if isinstance(m, ColumnDataSource) and "label" in m.data)
    np.testing.assert_allclose(np.stack([vertices["x"], vertices["y"]], axis=-1), screen(np.eye(4)), atol=1e-12)
    page = views.render(views.tetrahedron(np.full((1, 1, 1, 4), 0.25)))
    theirs = next(m.data for m in page.references() if isinstance(m, ColumnDataSource) and m.name == "tetra_vertices")
    assert list(vertices["label"]) == list(theirs["label"])


def test_tetrahedron_without_profiles_names_the_command_that_records_them():
    ds = planted_orbits()
    ds.attrs["command"] = "python -m pipeline orbits --recipe long --seed 9"
    div = views.orbit_tetrahedron(ds)
    assert isinstance(div, hv.Div)
    assert "stored without frame profiles" in div.data
    assert "<code>python -m pipeline orbits --recipe long --seed 9</code>" in div.data
    page = orbits_view(ds)
    msg = next(m for m in page.references() if isinstance(m, Div) and m.name == "orbits_tetra_message")
    assert "<code>python -m pipeline orbits --recipe long --seed 9</code>" in msg.text
    assert not any(getattr(m, "name", None) == "orbits_tetra_dots" for m in page.references())
    del ds.attrs["command"]
    assert f"<code>{of.FIX_COMMAND}</code>" in views.orbit_tetrahedron(ds).data


def test_page_ships_every_frames_tetrahedron_once_and_opens_on_the_last(tmp_path):
    path = tmp_path / "store.zarr"
    store.Store.open(path).replace_group(store.ORBITS, with_profiles(planted_orbits()))
    ds = store.Store.open(path, mode="r").dataset("orbits")
    layout = orbits_view(ds)
    prof = ds["head_profile"].sel(coordinate=["a", "b", "c", "d"]).values
    F, H = prof.shape[:2]
    doc = json.loads(json.dumps(json_item(layout)))
    flat = _decode_ndarray(_find_source_data(doc, "orbits_tetra_positions")["pos"])
    assert flat.dtype == np.float32
    packed = flat.reshape(F, H, 6)  # the index the JavaScript uses: pos[(f * H + h) * 6 + k]
    np.testing.assert_allclose(packed[..., :2], screen(prof), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(packed[..., 2:], prof, rtol=1e-6, atol=1e-7)
    dots = _sources(layout)["orbits_tetra_dots"].data
    np.testing.assert_allclose(np.stack([dots["x"], dots["y"]], axis=-1), screen(prof)[-1, dots["head"]], atol=1e-12)
    # the polygons' dots come from views.orbit_polygons: the same heads, order and colours
    planes = _sources(layout)["orbits_dots_0"].data
    assert list(planes["head"]) == list(dots["head"]) and list(planes["colour"]) == list(dots["colour"])
    slider = next(m for m in layout.references() if isinstance(m, Slider))
    tetra_cbs = [cb for cb in slider.js_property_callbacks["change:value"]
                 if cb.args["ctx"].get("tetra_dots") is _sources(layout)["orbits_tetra_dots"]]
    assert len(tetra_cbs) == 1 and tetra_cbs[0].args["ctx"]["n_heads"] == H


# ------------------------------------------------------------------------------- the hypotheses


def hand_search() -> xr.Dataset:
    """Five runs of three recipes, with family heads, orbit counts, accuracies and errors set by hand."""
    runs = ["long+x=1-s0", "long+x=1-s1", "long+x=1-s12", "long-s3", "long+tf=0.25+hold=3000-s9"]
    k = np.arange(13)
    fam = np.zeros((5, 13), dtype=np.int64)
    fam[:, 2] = [12, 4, 8, 0, 1]
    fam[:, 10] = [0, 13, 2, 7, 0]
    fam[:, 6] = [4, 3, 5, 0, 16]
    tols, sizes = np.array([0.02, 0.05, 0.10, 0.20]), np.array([1, 2, 3, 4, 6, 8, 12, 24])
    counts = np.zeros((5, 4, 8), dtype=np.int64)
    counts[0, 0, 3] = 1  # run 0: a 4-orbit at 2%
    counts[1, 0, 2] = 2  # run 1: two 3-orbits at 2%
    counts[1, 1, 6] = 1  # and a 12-orbit only at 5%: not within 2%
    counts[3, 3, 7] = 1  # run 3: a 24-orbit at 20% only
    return xr.Dataset(
        {"family_heads": (("run", "k"), fam), "orbit_count": (("run", "tol", "size"), counts),
         "heldout_accuracy": ("run", np.array([0.5, 0.75, np.nan, 0.9, 1.0])),
         "e3": ("run", np.array([1e-3, 4e-3, 2e-3, np.nan, 5e-5])),
         "seed": ("run", np.array([0, 1, 12, 3, 9]))},
        coords={"run": np.array(runs, dtype=object), "k": k, "tol": tols, "size": sizes})


def test_gap_to_12_4_against_a_loop():
    rng = np.random.default_rng(3)
    k2_k10, k6 = rng.integers(0, 25, (40, 2)), rng.integers(0, 25, 40)
    expect = [min(abs(12 - a), abs(12 - b)) + abs(4 - c) for (a, b), c in zip(k2_k10, k6, strict=True)]
    assert views.gap_to_12_4(k2_k10, k6).tolist() == expect
    assert views.gap_to_12_4(np.array([[12, 0], [3, 12]]), np.array([4, 4])).tolist() == [0, 0]


def test_recipe_labels_drop_only_the_seed_suffix():
    assert views.recipe_label("long+qk_init_scale=0.5-s9") == "long+qk_init_scale=0.5"
    assert views.recipe_label("long+weight_decay=2+epochs=4500-s17") == "long+weight_decay=2+epochs=4500"
    assert views.recipe_label("long+train_fraction=0.25-s0") == "long+train_fraction=0.25"
    assert views.recipe_label("base") == "base"


def test_hypotheses_one_row_per_recipe_against_hand_values():
    rows = {r["hypothesis"]: r for r in views.hypotheses(hand_search())}
    assert list(rows) == ["long", "long+tf=0.25+hold=3000", "long+x=1"]
    x = rows["long+x=1"]
    assert x["runs"] == 3
    assert (x["k2_max"], x["k2_mean"]) == (12, pytest.approx(8.0))  # 12, 4, 8
    assert (x["k10_max"], x["k10_mean"]) == (13, pytest.approx(5.0))  # 0, 13, 2
    assert (x["k6_max"], x["k6_mean"]) == (5, pytest.approx(4.0))  # 4, 3, 5
    # from 12 + 4: run 0 has 12 at k = 2 and 4 at k = 6 (0); run 1 13 at k = 10 (1) and 3 at k = 6 (1);
    # run 2 8 at k = 2 (4, nearer than 2 at k = 10) and 5 at k = 6 (1)
    assert (x["gap_min"], x["gap_mean"]) == (0, pytest.approx(7 / 3))
    assert x["largest_orbit"] == 4  # a 4-orbit and 3-orbits at 2%; the 12-orbit only at 5%
    assert x["heldout"] == pytest.approx(0.625)  # the NaN run left out
    assert x["e3"] == pytest.approx(2e-3)  # median of 1e-3, 4e-3, 2e-3
    one = rows["long"]
    assert (one["runs"], one["k10_max"], one["largest_orbit"], one["heldout"]) == (1, 7, 0, 0.9)
    assert np.isnan(one["e3"])
    assert rows["long+tf=0.25+hold=3000"]["k6_mean"] == 16.0 and rows["long+x=1"]["tol"] == 0.02
    assert views.hypotheses(None) == []


def test_hypotheses_table_shows_the_rows_and_the_page_captions_it():
    table = views.render(views.hypotheses_table(hand_search()))
    cols = [c.field for c in table.columns]
    data = table.source.data
    i = list(data[cols[0]]).index("long+x=1")
    assert [data[c][i] for c in cols[1:]] == [3, "12 / 8.0", "13 / 5.0", "5 / 4.0", "0 / 2.3", "4", "62.5%",
                                             "2.0e-03"]
    j = list(data[cols[0]]).index("long")
    assert [data[c][j] for c in cols[5:]] == ["9 / 9.0", "none", "90.0%", "—"]  # |12 - 7| + |4 - 0|
    assert table.columns[6].title == "largest orbit ≤ 2%"
    assert isinstance(views.hypotheses_table(None), hv.Div)
    page = orbits_view(planted_orbits(), search=hand_search())
    named = {getattr(m, "name", None): m for m in page.references()}
    assert named["orbits_hypotheses"].source.data[cols[0]][i] == "long+x=1"
    assert "one row per recipe" in named["orbits_hypotheses_caption"].text
    assert "orbits_hypotheses" not in {getattr(m, "name", None) for m in orbits_view(planted_orbits()).references()}
