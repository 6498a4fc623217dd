"""The HoloViews views of dashboard.views, rendered with hv.render: the numbers in the Bokeh models are
checked against the Dataset they were drawn from, through independent numpy computations."""

from __future__ import annotations

import math

import holoviews as hv
import numpy as np
import pytest
import xarray as xr
from bokeh.models import ColorBar, LogScale

import dashboard.views as v
from dashboard.geometry import VERTICES, project
from pipeline import store as st
from tests.browser.conftest import ROPE_MODEL, rope_profiles, synthetic_orbits_dataset, write_synthetic_store

L, H = 4, 8  # the synthetic rotary model


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    return write_synthetic_store(tmp_path_factory.mktemp("views") / "store.zarr")


@pytest.fixture(scope="module")
def rope(path):
    return xr.open_zarr(path, group="profiles").sel(model=ROPE_MODEL)


def renderers(fig, glyph: str):
    return [r for r in fig.renderers if type(getattr(r, "glyph", None)).__name__ == glyph]


def test_profile_array_cuts_the_padding_from_a_dataset_or_a_dataarray(rope):
    expected = rope_profiles(L, H)
    np.testing.assert_allclose(v.profile_array(rope), expected)
    np.testing.assert_allclose(v.profile_array(rope["profile"]), expected)  # padding recognised as all-NaN
    np.testing.assert_allclose(v.profile_array(rope.sel(d=7))[:, :, 0], expected[:, :, 7])
    with pytest.raises(ValueError, match="select one model"):
        v.profile_array(rope["profile"].expand_dims(model=["a", "b"]))


def test_tetrahedron_draws_every_head_where_the_camera_sees_it(rope):
    fig = hv.render(v.tetrahedron(rope, d=9, azimuth=-40, elevation=35))
    heads = fig.select_one({"name": "heads"}).data
    p = rope_profiles(L, H)[:, :, 9].reshape(-1, 4)
    xyz = np.einsum("nk,kj->nj", p, VERTICES)  # barycentric -> Cartesian, by hand
    az, el = np.radians(-40), np.radians(35)
    x = xyz[:, 0] * np.cos(az) - xyz[:, 1] * np.sin(az)
    y = xyz[:, 2] * np.cos(el) - (xyz[:, 0] * np.sin(az) + xyz[:, 1] * np.cos(az)) * np.sin(el)
    np.testing.assert_allclose(heads["x"], x, atol=1e-12)
    np.testing.assert_allclose(heads["y"], y, atol=1e-12)
    np.testing.assert_array_equal(heads["layer"], np.repeat(np.arange(L), H))
    vx, vy = project(VERTICES, -40, 35)
    vertices = fig.select_one({"name": "tetra_vertices"}).data
    np.testing.assert_allclose(vertices["x"], vx, atol=1e-12)
    assert fig.select_one({"name": "camera"}).data == {"az": [-40.0], "el": [35.0]}
    bar = [c for c in fig.right if isinstance(c, ColorBar)]
    assert len(bar) == 1 and (bar[0].color_mapper.low, bar[0].color_mapper.high) == (0, L - 1)
    hover = [t for t in fig.tools if type(t).__name__ == "HoverTool" and t.limit == 1]
    assert len(hover) == 1 and ("model", ROPE_MODEL) in hover[0].tooltips  # one tooltip at a time
    assert "pan" in fig.js_event_callbacks and "project_all" in fig.js_event_callbacks["pan"][0].code


def test_layer_heatmaps_count_heads_per_layer_and_bin_with_one_colour_bar(rope):
    fig = hv.render(v.layer_heatmaps(rope, d=20, bins=10))
    images = renderers(fig, "Image")
    p = rope_profiles(L, H)[:, :, 20]
    for k in range(4):
        expected = np.stack([np.histogram(p[layer, :, k], bins=10, range=(0, 1))[0] for layer in range(L)])
        np.testing.assert_array_equal(np.asarray(images[k].data_source.data["image"][0]), expected)
    counts_every_d = [np.histogram(rope_profiles(L, H)[layer, :, d, k], bins=10, range=(0, 1))[0].max()
                      for layer in range(L) for d in range(129) for k in range(4)]
    bars = [c for c in fig.right if isinstance(c, ColorBar)]
    assert len(bars) == 1 and bars[0].color_mapper.high == max(counts_every_d)  # the scale covers every d


def test_histograms_give_the_fraction_of_heads_and_the_selection_only_when_there_is_one(rope):
    p = rope_profiles(L, H)[:, :, 3].reshape(-1, 4)
    fig = hv.render(v.histograms(rope, d=3, bins=20))
    quads = renderers(fig, "Quad")
    assert len(quads) == 1  # no selected-heads outline without a selection
    bars = quads[0].data_source.data  # the four coordinates' bars, coordinate-major
    for k in range(4):
        np.testing.assert_allclose(bars["top"][20 * k: 20 * (k + 1)], np.histogram(p[:, k], 20, (0, 1))[0] / (L * H))
        np.testing.assert_allclose(bars["left"][20 * k: 20 * (k + 1)], np.linspace(0, 1, 21)[:-1] + k * v.PANEL_STEP)
    chosen = [0, 5, 9, 30]
    quads = renderers(hv.render(v.histograms(rope, d=3, bins=20, selected=chosen)), "Quad")
    assert len(quads) == 2
    np.testing.assert_allclose(quads[1].data_source.data["top"][20:40], np.histogram(p[chosen, 1], 20, (0, 1))[0] / 4)


def test_orbit_polygons_show_one_frame_with_its_trails():
    ds = synthetic_orbits_dataset(n_frames=6)
    ds.attrs["trail_epochs"] = 20  # epochs 0, 10, ..., 50: a trail of three frames
    grid = hv.render(v.orbit_polygons(ds, frame=4))
    figs = [c[0] for c in sorted(grid.children, key=lambda c: (c[1], c[2]))]
    assert len(figs) == 4
    dots = renderers(figs[2], "Scatter")[0].data_source.data
    heads = np.asarray(dots["head"])
    np.testing.assert_allclose(dots["x"], ds.position.values[4, heads, 2, 0])
    np.testing.assert_allclose(dots["y"], ds.position.values[4, heads, 2, 1])
    trails = renderers(figs[2], "MultiLine")[0].data_source.data  # each trail drawn as its segments
    assert len(trails["xs"]) == 2 * len(heads)
    np.testing.assert_allclose(np.concatenate([trails["xs"][0], trails["xs"][1][1:]]),
                               ds.position.values[2:5, heads[0], 2, 0])


def test_training_metrics_put_the_equivariance_error_on_a_log_axis():
    ds = synthetic_orbits_dataset(n_frames=7)
    grid = hv.render(v.training_metrics(ds))
    acc, err = [c[0] for c in sorted(grid.children, key=lambda c: (c[1], c[2]))]
    assert isinstance(err.y_scale, LogScale) and not isinstance(acc.y_scale, LogScale)
    curve = renderers(err, "Line")[0].data_source.data
    np.testing.assert_allclose(curve["equivariance error"], ds.equivariance_error.values)
    np.testing.assert_allclose(renderers(acc, "Line")[1].data_source.data["accuracy"], ds.heldout_accuracy.values)


def search_dataset() -> xr.Dataset:
    """An orbits_search group as contracts.md fixes it: 3 runs, counts of orbits by tolerance and size."""
    sizes = [1, 2, 3, 4, 6, 8, 12, 24]
    count = np.zeros((3, 4, 8), dtype=np.int64)
    count[0, 0, sizes.index(4)] = 1  # run 0: a 4-orbit at 2%
    count[1, 0, sizes.index(4)] = 2  # run 1: two 4-orbits and a 12-orbit at 2%
    count[1, 0, sizes.index(12)] = 1
    count[2, 3, sizes.index(12)] = 1  # run 2: a 12-orbit only at 20%
    return xr.Dataset({"orbit_count": (("run", "tol", "size"), count),
                       "seed": (("run",), np.arange(3))},
                      coords={"run": ["a", "b", "c"], "tol": [0.02, 0.05, 0.10, 0.20], "size": sizes})


def test_search_families_count_runs_per_orbit_size_at_the_strictest_tolerance():
    bars = renderers(hv.render(v.search_families(search_dataset())), "VBar")[0].data_source.data
    got = dict(zip(bars["orbit_size"], bars["runs_with_such_an_orbit"], strict=True))
    assert got == {"1": 0, "2": 0, "3": 0, "4": 2, "6": 0, "8": 0, "12": 1, "24": 0}


def test_family_heads_puts_a_dot_per_run_and_frequency_and_the_orbit_size_at_each_frequency():
    heads = np.zeros((2, 13), dtype=np.int64)
    heads[0, 2], heads[0, 6], heads[1, 2], heads[1, 9] = 12, 4, 7, 3
    ds = search_dataset().assign(family_heads=(("run", "k"), np.vstack([heads, np.zeros((1, 13), int)])))
    ds = ds.assign_coords(k=np.arange(13))
    scatters = renderers(hv.render(v.family_heads(ds)), "Scatter")
    dots, need = (r.data_source.data for r in scatters)
    key = "key frequency k"
    assert sorted(zip(dots[key].tolist(), dots["heads"].tolist(), strict=True)) == [(2, 7), (2, 12), (6, 4), (9, 3)]
    assert dict(zip(need[key].tolist(), need["heads"].tolist(), strict=True)) == {
        k: 24 // math.gcd(k, 24) for k in range(1, 13)}  # e.g. k = 2 and 10 need 12 heads, k = 6 needs 4


def test_search_families_without_the_group_say_how_to_make_it():
    div = v.search_families(None)
    assert isinstance(div, hv.Div) and "python -m pipeline orbits search" in div.data


def test_reproduction_judges_each_result_from_the_stored_values():
    ds = synthetic_orbits_dataset(n_frames=5)  # three 8-head orbits, errors below 5%
    err = ds.shift_error.values
    rows = {r["result"]: r for r in v.reproduction(ds)}
    assert rows["train accuracy"]["stored"] == f"{ds.train_accuracy.values[-1]:.1%}"
    assert rows["a 12-head orbit"]["reproduced"] == "partly" and "largest 8" in rows["a 12-head orbit"]["stored"]
    assert rows["a 4-head orbit"]["reproduced"] == "no"
    worst = [err[:, ds.orbit.values == o].max() for o in range(3)]
    within = sum(w <= 0.02 for w in worst)
    verdict = rows["orbits verified within 2% under all 24 shifts"]
    assert verdict["stored"] == f"{within} of 3 orbits, worst {max(worst):.2%}"
    assert verdict["reproduced"] == ("yes" if within == 3 else "partly" if within else "no")


def test_views_open_straight_from_the_store_like_a_notebook(path):
    orb = xr.open_zarr(path, group=st.ORBITS)
    acc = sorted(hv.render(v.training_metrics(orb)).children, key=lambda c: c[1])[0][0]
    np.testing.assert_allclose(renderers(acc, "Line")[0].data_source.data["accuracy"], orb.train_accuracy.values)
    prof = xr.open_zarr(path, group=st.PROFILES)
    fig = hv.render(v.tetrahedron(prof.sel(model=ROPE_MODEL)))
    assert len(fig.select_one({"name": "heads"}).data["x"]) == L * H
