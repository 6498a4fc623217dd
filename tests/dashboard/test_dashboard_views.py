"""The HoloViews views of dashboard.views, rendered with hv.render: the numbers in the Bokeh models are
checked against the Dataset they were drawn from, through independent numpy computations."""

from __future__ import annotations

import math

import holoviews as hv
import numpy as np
import pytest
import xarray as xr
from bokeh.models import ColorBar, LogScale, Span

import dashboard.views as v
from dashboard.common import geometry as g
from dashboard.common.geometry import VERTICES, project
from pipeline import store as st
from pipeline.schema import STATISTICS, model_rows
from tests.browser.conftest import ROPE_MODEL, rope_profiles, synthetic_orbits_dataset
from tests.dashboard.test_dashboard_geometry_types import rule

L, H = 4, 8  # the synthetic rotary model


@pytest.fixture(scope="module")
def rope(synthetic):
    return xr.open_zarr(synthetic, group="profiles").sel(model=ROPE_MODEL)


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
    fig = v.render(v.tetrahedron(rope, d=9, azimuth=-40, elevation=35))
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
    hover = fig.select_one({"name": "head_hover"})
    assert hover.limit == 1 and ("model", ROPE_MODEL) in hover.tooltips  # one tooltip at a time
    assert "pan" in fig.js_event_callbacks and "project_all" in fig.js_event_callbacks["pan"][0].code


def test_layer_heatmaps_count_heads_per_layer_and_bin_with_one_colour_bar(rope):
    fig = v.render(v.layer_heatmaps(rope, d=20, bins=10))
    p = rope_profiles(L, H)[:, :, 20]
    for k, c in enumerate("abcd"):
        expected = np.stack([np.histogram(p[layer, :, k], bins=10, range=(0, 1))[0] for layer in range(L)])
        np.testing.assert_array_equal(np.asarray(fig.select_one({"name": f"heat_{c}"}).data["image"][0]), expected)
        assert fig.select_one({"name": f"layer_dots_{c}"}).glyph.x == f"{c}_x"  # the heads, named for a page
    counts_every_d = [np.histogram(rope_profiles(L, H)[layer, :, d, k], bins=10, range=(0, 1))[0].max()
                      for layer in range(L) for d in range(129) for k in range(4)]
    bars = [c for c in fig.right if isinstance(c, ColorBar)]
    assert len(bars) == 1 and bars[0].color_mapper.high == max(counts_every_d)  # the scale covers every d


def test_histograms_give_the_fraction_of_heads_and_the_selection_only_when_there_is_one(rope):
    p = rope_profiles(L, H)[:, :, 3].reshape(-1, 4)
    fig = v.render(v.histograms(rope, d=3, bins=20))
    quads = renderers(fig, "Quad")
    assert quads == [fig.select_one({"name": "hist_bars"})]  # no selected-heads outline without a selection
    bars = fig.select_one({"name": "hist_all"}).data  # the four coordinates' bars, coordinate-major
    for k in range(4):
        np.testing.assert_allclose(bars["top"][20 * k: 20 * (k + 1)], np.histogram(p[:, k], 20, (0, 1))[0] / (L * H))
        np.testing.assert_allclose(bars["left"][20 * k: 20 * (k + 1)], np.linspace(0, 1, 21)[:-1] + k * v.PANEL_STEP)
    chosen = [0, 5, 9, 30]
    quads = renderers(hv.render(v.histograms(rope, d=3, bins=20, selected=chosen)), "Quad")
    assert len(quads) == 2
    np.testing.assert_allclose(quads[1].data_source.data["top"][20:40], np.histogram(p[chosen, 1], 20, (0, 1))[0] / 4)


@pytest.mark.slow
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
    trails = renderers(figs[2], "MultiLine")[0].data_source.data  # one line per head, in the dots' order
    assert len(trails["xs"]) == len(heads)
    np.testing.assert_allclose(trails["xs"][0], ds.position.values[2:5, heads[0], 2, 0])
    np.testing.assert_allclose(trails["ys"][-1], ds.position.values[2:5, heads[-1], 2, 1])


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


def test_views_open_straight_from_the_store_like_a_notebook(synthetic):
    orb = xr.open_zarr(synthetic, group=st.ORBITS)
    acc = sorted(hv.render(v.training_metrics(orb)).children, key=lambda c: c[1])[0][0]
    np.testing.assert_allclose(renderers(acc, "Line")[0].data_source.data["accuracy"], orb.train_accuracy.values)
    prof = xr.open_zarr(synthetic, group=st.PROFILES)
    fig = hv.render(v.tetrahedron(prof.sel(model=ROPE_MODEL)))
    assert len(fig.select_one({"name": "heads"}).data["x"]) == L * H


# ------------------------------------------------------------------- spectral types, statistics, comparison


def naive_head(W_Q: np.ndarray, W_K: np.ndarray):
    """Profile, statistics (pipeline.schema.STATISTICS order) and the 2n-eigenvalue spectrum of one head, from
    the full N x N form (numpy eigh and svd), written out from the definitions."""
    n = W_Q.shape[0]
    L = W_K.T @ W_Q
    L = L / np.linalg.norm(L)
    S, T = (L + L.T) / 2, (L - L.T) / 2
    full = np.linalg.eigvalsh(S)
    lam = np.sort(full[np.argsort(np.abs(full))[::-1][: 2 * n]])[::-1]  # drop the N - 2n zero eigenvalues
    cut = 1e-9 * np.abs(lam).max()
    lp = np.zeros(2 * n)
    lm = np.zeros(2 * n)
    pos, neg = np.sort(lam[lam > 0])[::-1], np.sort(-lam[lam < 0])[::-1]
    lp[: pos.size], lm[: neg.size] = pos, neg
    u = lp - lm
    a, b, c, d = (T**2).sum(), 2 * lp @ lm, (u[u > 0] ** 2).sum(), (u[u < 0] ** 2).sum()
    n_pos, n_neg = (lam > cut).sum(), (lam < -cut).sum()
    rho = np.linalg.norm(lm) / np.linalg.norm(lp)
    h2 = np.linalg.svd(L, compute_uv=False) ** 2
    sym = (S**2).sum()
    bound = 1 - abs(1 - rho) / np.sqrt(1 + rho**2)
    pairing = 1 - np.linalg.norm(lp - lm) / np.sqrt(sym)
    stats = dict(symmetric_energy=sym, n_pos=n_pos, n_neg=n_neg, n_zero=2 * n - n_pos - n_neg,
                 balance=1 - abs(n_pos - n_neg) / (n_pos + n_neg), pairing=pairing, rho=rho, pairing_bound=bound,
                 pairing_gap=bound - pairing, lobe_departure=np.linalg.norm(lm - rho * lp) / np.linalg.norm(lm),
                 b_sym=b / sym, c_sym=c / sym, d_sym=d / sym, trace_ratio=abs(np.trace(L)),
                 participation_ratio=h2.sum() ** 2 / (h2**2).sum(), stable_rank=h2.sum() / h2.max(),
                 leading_share=h2.max() / h2.sum())
    return np.array([a, b, c, d]), np.array([stats[s] for s in STATISTICS], dtype=float), lam


def random_model(name: str, L: int = 4, H: int = 12, N: int = 16, n: int = 3, seed: int = 0, D: int = 1,
                 with_statistics: bool = True, n_kv: int | None = None) -> xr.Dataset:
    """A profiles Dataset of one model like the store's, from random heads: a third of them near positive
    semidefinite (W_K = W_Q + noise), a third near negative (W_K = -W_Q + noise), a third i.i.d. D > 1 adds
    offsets whose profile drifts (a synthetic rotary model, only the inspector reads them)."""
    rng = np.random.default_rng(seed)
    prof = np.zeros((L, H, D, 4))
    stats = np.zeros((L, H, len(STATISTICS)))
    spec = np.full((L, H, 2 * n + 2), np.nan)  # padded past the model's 2n, as a store with a wider model
    for layer in range(L):
        for head in range(H):
            W_Q = rng.standard_normal((n, N))
            kind = (layer * H + head) % 3
            noise = rng.uniform(0.2, 2.0) * rng.standard_normal((n, N))
            W_K = W_Q + noise if kind == 0 else (-W_Q + noise if kind == 1 else rng.standard_normal((n, N)))
            p, s, lam = naive_head(W_Q, W_K)
            prof[layer, head, 0], stats[layer, head], spec[layer, head, : 2 * n] = p, s, lam
            for dd in range(1, D):
                prof[layer, head, dd] = rng.dirichlet(np.ones(4))
    ds = xr.Dataset(
        {"profile": (("layer", "head", "d", "coordinate"), prof),
         "n_layers": ((), np.int32(L)), "n_heads": ((), np.int32(H)), "n_kv_heads": ((), np.int32(n_kv or H)),
         "d_model": ((), np.int32(N)), "d_head": ((), np.int32(n)), "rotary_dim": ((), np.int32(n if D > 1 else 0)),
         "positional": ((), "rope" if D > 1 else "learned absolute"), "source": ((), "synthetic"),
         "command": ((), f"python -m pipeline profiles {name}"), "complete": ((), True)},
        coords={"model": name, "layer": np.arange(L), "head": np.arange(H), "d": np.arange(D),
                "coordinate": list("abcd")})
    if with_statistics:
        ds["head_statistics"] = (("layer", "head", "statistic"), stats)
        ds["spectrum"] = (("layer", "head", "eigen"), spec)
        ds = ds.assign_coords(statistic=list(STATISTICS), eigen=np.arange(2 * n + 2))
    return ds


@pytest.fixture(scope="module")
def heads():
    return random_model("random-heads", seed=5)


def test_the_naive_statistics_agree_with_the_profile(heads):
    p = heads.profile.values[:, :, 0]
    s = {name: heads.head_statistics.sel(statistic=name).values for name in STATISTICS}
    np.testing.assert_allclose(s["symmetric_energy"], 1 - p[..., 0], atol=1e-12)
    np.testing.assert_allclose(s["c_sym"], p[..., 2] / (1 - p[..., 0]), atol=1e-12)
    types = g.spectral_types(p)
    assert set(types.ravel()) == {0, 1, 2}  # the random model has heads of every type


def test_tetrahedron_by_type_has_one_renderer_and_legend_item_per_type_at_the_given_d(heads):
    fig = v.render(v.tetrahedron(heads, color_by="type"))
    p = heads.profile.values[:, :, 0].reshape(-1, 4)
    expected = np.array([rule(x) for x in p])
    data = fig.select_one({"name": "heads"}).data
    np.testing.assert_array_equal(data["type"], expected)
    assert list(data["type_name"]) == [g.TYPE_NAMES[t] for t in expected]
    dots = [fig.select_one({"name": f"head_dots_type{k}"}) for k in range(3)]
    for k, r in enumerate(dots):
        assert r.data_source is fig.select_one({"name": "heads"})  # one source: one selection, one rotation
        assert (r.view.filter.column_name, r.view.filter.group) == ("type", k)
        assert r.glyph.fill_color == g.TYPE_COLORS[k]
    legend = fig.select_one({"name": "type_legend"})
    assert legend.click_policy == "hide"
    assert [it.label.value for it in legend.items] == [
        f"{name} (n={int((expected == k).sum())})" for k, name in enumerate(g.TYPE_NAMES)]
    assert [it.renderers[0] for it in legend.items] == dots
    assert not [c for c in fig.right if isinstance(c, ColorBar)]  # no layer colour bar in type mode
    hover = fig.select_one({"name": "head_hover"})
    assert set(dots) <= set(hover.renderers)
    fields = dict(hover.tooltips)
    assert fields["kv head"] == "@kv_head" and fields["type"] == "@type_name"
    assert "rho (d = 0)" in fields
    np.testing.assert_allclose(data["rho"], heads.head_statistics.sel(statistic="rho").values.ravel())


def test_tetrahedron_by_layer_keeps_one_renderer_and_its_colour_bar(rope):
    rope = rope.drop_vars(["head_statistics", "spectrum", "statistics_checksum"], errors="ignore")  # an older store
    fig = v.render(v.tetrahedron(rope, d=40))
    assert fig.select_one({"name": "head_dots"}) is not None and fig.select_one({"name": "type_legend"}) is None
    assert len([c for c in fig.right if isinstance(c, ColorBar)]) == 1
    p = rope_profiles(L, H)[:, :, 40].reshape(-1, 4)
    data = fig.select_one({"name": "heads"}).data
    np.testing.assert_array_equal(data["type"], [rule(x) for x in p])  # the type at this d, for the browser
    assert np.isnan(data["rho"]).all()  # without statistics the columns are there, NaN, and not on hover
    assert "rho (d = 0)" not in dict(fig.select_one({"name": "head_hover"}).tooltips)
    with pytest.raises(ValueError, match="color_by"):
        v.tetrahedron(rope, color_by="head")


def test_kv_heads_group_query_heads():
    ds = random_model("gqa", L=1, H=6, n_kv=2, seed=1)
    np.testing.assert_array_equal(v.kv_heads(ds, 6), [0, 0, 0, 1, 1, 1])
    fig = v.render(v.tetrahedron(ds))
    np.testing.assert_array_equal(fig.select_one({"name": "heads"}).data["kv_head"], [0, 0, 0, 1, 1, 1])


def test_rank_one_curve_is_drawn_projected_and_turned_with_the_camera(rope):
    fig = v.render(v.tetrahedron(rope, azimuth=-60, elevation=25, rank_one=True))
    curve = fig.select_one({"name": "rank_one_curve"})
    assert curve.visible
    data = curve.data_source.data
    xyz = g.to_3d(g.rank_one_curve())
    x, y = project(xyz, -60, 25)
    np.testing.assert_allclose(data["x"], x, atol=1e-12)
    np.testing.assert_allclose(data["y"], y, atol=1e-12)
    np.testing.assert_allclose(data["x3"], xyz[:, 0])
    assert data["rho"][0] == "0" and data["rho"][-1] == "∞"
    np.testing.assert_allclose(data["t"], g.rank_one_cosine(g.rank_one_rho()))
    order = [r.name for r in fig.renderers]
    assert order.index("rank_one_curve") < order.index("head_dots")  # under the heads
    camera = fig.select_one({"name": "camera"})
    callback = camera.js_property_callbacks["change:data"][0]
    assert callback.args["ctx"]["heads"] is curve.data_source and "project_all(ctx)" in callback.code
    assert not v.render(v.tetrahedron(rope, rank_one=False)).select_one({"name": "rank_one_curve"}).visible
    assert v.render(v.tetrahedron(rope)).select_one({"name": "rank_one_curve"}) is None


def test_symmetric_face_places_each_head_with_its_type_marker(heads):
    fig = v.render(v.symmetric_face(heads))
    src = fig.select_one({"name": "face_heads"}).data
    p = heads.profile.values[:, :, 0].reshape(-1, 4)
    bcd = p[:, 1:] / (1 - p[:, :1])
    np.testing.assert_allclose(np.c_[src["x"], src["y"]], bcd @ g.FACE_VERTICES, atol=1e-12)
    types = [rule(x) for x in p]
    assert list(src["marker"]) == [g.TYPE_MARKERS[t] for t in types]
    assert list(src["colour"]) == [g.TYPE_COLORS[t] for t in types]
    assert len(set(g.TYPE_MARKERS)) == 3
    dashed = [r for r in renderers(fig, "MultiLine") + renderers(fig, "Line") if r.glyph.line_dash != []]
    assert len(dashed) == 1
    assert {type(t).__name__ for t in fig.tools} >= {"BoxSelectTool", "TapTool"}
    labels = [it.label.value for it in fig.select_one({"name": "face_legend"}).items]
    assert labels == g.type_labels(np.array(types))


def test_layer_type_map_shows_fractions_that_sum_to_one_per_layer(heads):
    fig = v.render(v.layer_type_map(heads))
    image = np.asarray(fig.select_one({"name": "layer_types_image"}).data["image"][0])  # Bokeh rows: layer 0 first
    p = heads.profile.values[:, :, 0]
    for layer in range(p.shape[0]):
        t = [rule(x) for x in p[layer]]
        np.testing.assert_allclose(image[layer], [t.count(k) / len(t) for k in range(3)])
    np.testing.assert_allclose(image.sum(axis=1), 1.0)
    assert len([c for c in fig.right if isinstance(c, ColorBar)]) == 1


def test_parity_spectra_take_the_most_extreme_heads_of_each_type_and_histogram_their_mean(heads):
    n = 3
    chosen = v.parity_selection(heads, n)
    p = heads.profile.values[:, :, 0].reshape(-1, 4)
    stat = {s: heads.head_statistics.sel(statistic=s).values.ravel() for s in ("c_sym", "d_sym")}
    key = {0: stat["d_sym"], 1: p[:, 2] + p[:, 3], 2: stat["c_sym"]}
    types = [rule(x) for x in p]
    for k in range(3):
        members = sorted((i for i in range(len(p)) if types[i] == k), key=lambda i: (key[k][i], i))
        assert chosen[k].tolist() == members[:n]
    layout = v.render(v.parity_spectra(heads, n=n, bins=10))
    figs = [c[0] for c in sorted(layout.children, key=lambda c: (c[1], c[2]))]
    spec = heads.spectrum.values.reshape(len(p), -1)[:, :6]
    for k, fig in enumerate(figs):
        unit = np.array([np.sort(s / np.linalg.norm(s))[::-1] for s in spec[chosen[k]]]).mean(axis=0)
        quads = renderers(fig, "Quad")
        neg, pos = (np.asarray(q.data_source.data["top"]) for q in quads)
        assert neg.sum() == (unit < 0).sum() and pos.sum() == (unit > 0).sum()
        assert quads[0].glyph.fill_color == "#1f77b4" and quads[1].glyph.fill_color == "#d62728"
        spans = sorted(fig.select({"type": Span}), key=lambda s: s.location)
        np.testing.assert_allclose([s.location for s in spans], [unit[unit < 0].mean(), unit[unit > 0].mean()])
        assert [(s.line_color, s.line_dash) for s in spans] == [("#1f77b4", [6]), ("#d62728", [6])]  # dashed


def test_statistic_heatmap_shows_the_values_and_the_gaussian_baseline(heads):
    layout = v.render(v.statistic_heatmap(heads, "pairing"))
    fig = [c[0] for c in layout.children if hasattr(c[0], "renderers")][0]
    image = np.asarray(fig.select_one({"name": "statistic_image"}).data["image"][0])  # Bokeh rows: layer 0 first
    np.testing.assert_allclose(image, heads.head_statistics.sel(statistic="pairing").values)
    assert len([c for c in fig.right if isinstance(c, ColorBar)]) == 1
    html = v.baseline_html(heads, "symmetric_energy")
    assert f"{17 / 32:.4g}" in html and "closed form" in html  # N = 16: (N + 1) / (2N)
    assert "not measured" in v.baseline_html(heads, "pairing")  # no table row at N = 16, n = 3
    with pytest.raises(ValueError, match="unknown statistic 'energy'.*symmetric_energy, n_pos"):
        v.statistic_heatmap(heads, "energy")


def test_views_without_statistics_say_so_and_how_to_add_them(rope, synthetic):
    row = [r for r in model_rows(xr.open_zarr(synthetic, group=st.PROFILES)) if r.name == ROPE_MODEL][0]
    assert row.statistics_command.startswith(f"python -m pipeline profiles {ROPE_MODEL}")
    rope = rope.drop_vars(["head_statistics", "spectrum", "statistics_checksum"], errors="ignore")  # an older store
    for view in (v.statistic_heatmap(rope), v.parity_spectra(rope)):
        assert isinstance(view, hv.Div)
        assert "statistics not computed" in view.data
        assert f"<code>{row.statistics_command}</code>" in view.data  # the store's own command that adds them
    inspector = v.head_inspector(rope, 1, 2, d=5)
    assert any(isinstance(x, hv.Div) and "statistics not computed" in x.data for x in inspector)
    v.render(inspector)
    old = random_model("older", with_statistics=False)
    assert v.statistics_table(old) is None and isinstance(v.parity_spectra(old), hv.Div)
    both = xr.concat([random_model("older", seed=1), random_model("newer", seed=2)], "model")
    both["head_statistics"][0] = np.nan  # a model whose statistics are not computed
    overlay = v.compare_depth(both, ["older", "newer"], "rho")
    assert [c.label for c in overlay if isinstance(c, hv.Curve)] == ["newer"]
    assert "statistics not computed: older" in hv.Store.lookup_options("bokeh", overlay, "plot").kwargs["title"]


def test_head_inspector_shows_the_spectrum_the_statistics_and_the_profile_over_d():
    ds = random_model("rotary", L=2, H=3, D=9, seed=3)
    layout = v.head_inspector(ds, 1, 2, d=4)
    spectrum, table, over_d = list(layout)
    lam = ds.spectrum.values[1, 2, :6]
    up = spectrum.get(0).data
    down = spectrum.get(1).data
    np.testing.assert_allclose(up["y1"], np.sort(lam[lam > 0])[::-1])
    np.testing.assert_allclose(down["y0"], -np.sort(-lam[lam < 0])[::-1])
    rows = dict(zip(table.dimension_values("statistic"), table.dimension_values("value"), strict=True))
    for s in STATISTICS:
        np.testing.assert_allclose(rows[s], ds.head_statistics.values[1, 2, STATISTICS.index(s)])
    curves = [e for e in over_d if isinstance(e, hv.Curve)]
    for k, c in enumerate(curves):
        np.testing.assert_allclose(c.dimension_values(1), ds.profile.values[1, 2, :, k])
    assert [e.data for e in over_d if isinstance(e, hv.VLine)] == [4]
    v.render(layout)
    assert len(list(v.head_inspector(random_model("flat", L=1, H=2), 0, 1))) == 2  # no d curves: one offset
    absolute = random_model("absolute", L=1, H=2, D=4).assign(positional="learned absolute")
    assert len(list(v.head_inspector(absolute, 0, 1))) == 2  # offsets stored, but the form does not move with d
    with pytest.raises(ValueError, match="no head"):
        v.head_inspector(ds, 2, 0)


def test_compare_depth_draws_each_models_layer_medians_against_relative_depth():
    both = xr.concat([random_model("m1", L=4, seed=1), random_model("m2", L=3, seed=2)], "model", join="outer")
    both["layer_done"] = (("model", "layer"), np.ones((2, 4), bool))
    overlay = v.compare_depth(both, ["m1", "m2"], "c_sym")
    curves = [e for e in overlay if isinstance(e, hv.Curve)]
    assert [c.label for c in curves] == ["m1", "m2"]
    for c, name in zip(curves, ("m1", "m2"), strict=True):
        one = both.sel(model=name)
        values = one.head_statistics.sel(statistic="c_sym").values[: int(one.n_layers)]
        depth = np.arange(len(values)) / (len(values) - 1)
        np.testing.assert_allclose(c.dimension_values(0), depth)
        np.testing.assert_allclose(c.dimension_values(1), np.median(values, axis=1))
    coord = [e for e in v.compare_depth(both, ["m1"], "a") if isinstance(e, hv.Curve)][0]
    np.testing.assert_allclose(coord.dimension_values(1), np.median(both.sel(model="m1").profile.values[:, :, 0, 0],
                                                                    axis=1))
    v.render(overlay)
    with pytest.raises(ValueError, match="unknown quantity 'e'"):
        v.compare_depth(both, ["m1"], "e")
    with pytest.raises(ValueError, match="no model"):
        v.compare_depth(both, ["m3"], "c")


def test_compare_histograms_overlay_two_models_fractions_per_coordinate():
    both = xr.concat([random_model("m1", seed=1), random_model("m2", seed=2)], "model")
    layout = v.compare_histograms(both, "m1", "m2", bins=8)
    panels = list(layout)
    assert len(panels) == 4
    for k, panel in enumerate(panels):
        for hist, name in zip(panel, ("m1", "m2"), strict=True):
            p = both.sel(model=name).profile.values[:, :, 0, k].ravel()
            np.testing.assert_allclose(hist.dimension_values(1), np.histogram(p, 8, (0, 1))[0] / p.size)
            assert hist.label == name
    v.render(layout)
    with pytest.raises(ValueError, match=r"no model \['m3'\].*'m1', 'm2'"):
        v.compare_histograms(both, "m1", "m3")


def test_every_new_view_renders(heads, rope):
    for view in (v.tetrahedron(heads, color_by="type", rank_one=True), v.symmetric_face(rope, d=3),
                 v.layer_type_map(rope, d=7), v.parity_spectra(heads), v.statistic_heatmap(heads, "stable_rank"),
                 v.head_inspector(heads, 0, 0), v.statistic_heatmap(rope)):
        assert v.render(view) is not None


# ------------------------------------------------------------------------------ the Gaussian baselines


def _baseline_script():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "gaussian_baseline.py"
    spec = importlib.util.spec_from_file_location("gaussian_baseline", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_baseline_script_and_the_pipeline_compute_the_statistics_of_the_naive_definition():
    from pipeline.profile.statistics import head_statistics

    script = _baseline_script()
    rng = np.random.default_rng(6)
    for N, n in ((12, 3), (20, 4)):
        W_Q, W_K = rng.standard_normal((n, N)), rng.standard_normal((n, N))
        W_K[0] = W_Q[0]  # a shared direction, so c and d differ
        profile, expected, lam = naive_head(W_Q, W_K)
        Q, _ = np.linalg.qr(np.concatenate([W_K.T, W_Q.T], axis=1))
        got = script.statistics_of((W_K @ Q).T @ (W_Q @ Q))
        np.testing.assert_allclose([got[s] for s in STATISTICS], expected, rtol=1e-9, atol=1e-12)
        L_ = W_K.T @ W_Q / np.linalg.norm(W_K.T @ W_Q)
        h2 = np.linalg.svd(L_, compute_uv=False) ** 2
        pipe = head_statistics(lam[None], h2[None], np.array([np.trace(L_)]), profile[None])[0]
        np.testing.assert_allclose(pipe, expected, rtol=1e-9, atol=1e-12)  # the store's and the tests' agree


def test_gaussian_baselines_closed_form_and_table():
    from dashboard.common import baselines

    for N in (16, 384, 576):
        value, how = baselines.gaussian("symmetric_energy", N, 8)
        assert value == (N + 1) / (2 * N) and "closed form" in how
    assert baselines.gaussian("pairing", 576, 64) == (baselines.MEASURED[(576, 64)]["pairing"], baselines.MEASURED_HOW)
    assert baselines.gaussian("pairing", 16, 3) is None
    for row in baselines.MEASURED.values():
        assert set(row) == set(STATISTICS) - {"symmetric_energy"}
    # the closed form is the mean ||S||^2 of sampled Gaussian heads, within the sampling error
    script = _baseline_script()
    rng = np.random.default_rng(7)
    sampled = np.array([script.statistics_of(script.gaussian_head(rng, 24, 4))["symmetric_energy"]
                        for _ in range(400)])
    assert abs(sampled.mean() - 25 / 48) < 4 * sampled.std() / np.sqrt(sampled.size)
