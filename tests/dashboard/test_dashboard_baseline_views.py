"""A model against its random baseline on the profiles page and in the views: each head's percentiles among the
baseline's heads (the tetrahedron's hover, the inspector), the baseline's heads as a cloud in the tetrahedron, the
"trained vs random" heat maps of S and P, and the heads coloured by their k-means clusters. Checked against scipy,
scikit-learn and a projection by hand, on two tiny models profiled by the pipeline (a rotary one with an i.i.d.
baseline, a position-free one without)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dashboard import data
from dashboard.common.geometry import VERTICES
from dashboard.common.render import render
from dashboard.common.selection import statistics_table
from dashboard.profiles import analyses as views
from dashboard.profiles.analyses_data import baseline_of
from dashboard.profiles.tetrahedron import CLUSTER_COLORS, tetrahedron
from pipeline.schema import STATISTICS
from tests.dashboard.analyses_store import PLAIN, ROPE, ROPE_BASELINE
from tests.shared import ANALYSES_PAGES

RANKED = ("symmetric_energy", "pairing", "rho")


pytestmark = ANALYSES_PAGES


@pytest.fixture(scope="module")
def ds(analyses_pages):
    return data.profiles(analyses_pages[0])


@pytest.fixture(scope="module")
def pages(analyses_pages):
    return analyses_pages[1]


def stat(sel, name: str) -> np.ndarray:
    return statistics_table(sel)[name].ravel()


def scipy_percentiles(ds, name: str) -> np.ndarray:
    ref = stat(ds.sel(model=ROPE_BASELINE), name)
    return np.array([stats.percentileofscore(ref, x, kind="mean") for x in stat(ds.sel(model=ROPE), name)])


def test_each_heads_percentiles_among_the_baseline_are_in_the_hover_and_the_inspector(ds, pages):
    page = pages[ROPE]
    heads = page.select_one({"name": "heads"}).data
    tips = dict(page.select_one({"name": "head_hover"}).tooltips)
    table = page.select_one({"name": "inspector_statistics"}).data
    inspected = dict(zip(table["statistic"], table["value"], strict=True))  # head (0, 0)
    for name in RANKED:
        want = scipy_percentiles(ds, name)
        assert 0 < np.ptp(want)  # the check is not of a constant
        np.testing.assert_allclose(heads[f"percentile_{name}"], want, atol=1e-4, err_msg=name)  # float32
        assert np.asarray(heads[f"percentile_{name}"]).dtype == np.float32
        assert tips[f"{name} percentile vs baseline"] == f"@percentile_{name}{{0.0}}"
        assert inspected[f"percentile_{name}"] == pytest.approx(want[0], abs=1e-9)
    # the browser fills the inspector for another head from the heads' source (page_views.js: inspect)
    select = page.select_one({"name": "heads"}).selected.js_property_callbacks["change:indices"]
    inspector = next(cb for cb in select if "inspector_statistics" in cb.code)
    assert inspector.args["ctx"]["heads"] is page.select_one({"name": "heads"})
    assert "ctx.heads.data[nm]" in inspector.code


def test_a_model_without_a_baseline_shows_no_percentiles(pages):
    page = pages[PLAIN]
    heads = page.select_one({"name": "heads"}).data
    assert not [k for k in heads if k.startswith("percentile_")]
    assert not [t for t, _ in page.select_one({"name": "head_hover"}).tooltips if "percentile" in t]
    assert list(page.select_one({"name": "inspector_statistics"}).data["statistic"]) == list(STATISTICS)


def by_hand(profile: np.ndarray, az: float, el: float) -> tuple[np.ndarray, np.ndarray]:
    xyz = np.einsum("nk,kj->nj", profile, VERTICES)  # barycentric -> Cartesian
    a, e = np.radians(az), np.radians(el)
    x = xyz[:, 0] * np.cos(a) - xyz[:, 1] * np.sin(a)
    y = xyz[:, 2] * np.cos(e) - (xyz[:, 0] * np.sin(a) + xyz[:, 1] * np.cos(a)) * np.sin(e)
    return x, y


def test_the_baselines_cloud_is_its_stored_profile_at_d0_projected(ds):
    base = baseline_of(ds, ROPE)
    fig = render(tetrahedron(ds.sel(model=ROPE), d=7, azimuth=-40, elevation=35, baseline=base))
    cloud = fig.select_one({"name": "baseline_cloud"}).data
    L, H = int(base["n_layers"]), int(base["n_heads"])
    stored = base["profile"].values[:L, :H, 0].reshape(-1, 4)  # d = 0, whatever d the heads are drawn at
    x, y = by_hand(stored, -40, 35)
    np.testing.assert_allclose(cloud["x"], x, atol=1e-6)
    np.testing.assert_allclose(cloud["y"], y, atol=1e-6)
    np.testing.assert_allclose(cloud["z3"], stored @ VERTICES[:, 2], atol=1e-6)
    dots = fig.select_one({"name": "baseline_cloud_dots"})
    order = [r.name for r in fig.renderers]
    assert dots.visible and order.index("baseline_cloud_dots") < order.index("head_dots")  # behind the heads
    box = fig.select_one({"name": "head_box_select"})
    assert dots not in box.renderers and fig.select_one({"name": "head_dots"}) in box.renderers
    turn = [cb for cb in fig.select_one({"name": "camera"}).js_property_callbacks["change:data"]
            if cb.args["ctx"]["heads"] is dots.data_source]
    assert len(turn) == 1 and "project_all(ctx)" in turn[0].code  # turned with the camera
    assert render(tetrahedron(ds.sel(model=ROPE))).select_one({"name": "baseline_cloud"}) is None


def test_the_page_draws_the_cloud_hidden_behind_a_toggle(ds, pages):
    rope, plain = pages[ROPE], pages[PLAIN]
    cloud = rope.select_one({"name": "baseline_cloud_dots"})
    toggle = rope.select_one({"name": "baseline_cloud_toggle"})
    assert not cloud.visible and toggle.active == [] and not toggle.disabled
    assert toggle.labels == ["random baseline's heads (d = 0)"]  # rotary: the cloud stays at d = 0
    assert toggle.js_property_callbacks["change:active"][0].args["cloud"] is cloud
    assert len(cloud.data_source.data["x"]) == 12
    empty = plain.select_one({"name": "baseline_cloud_toggle"})
    assert empty.disabled and len(plain.select_one({"name": "baseline_cloud"}).data["x"]) == 0
    tetra = lambda p: sorted((m.name, type(m).__name__) for m in p.select_one({"name": "tetrahedron"}).references()  # noqa: E731
                             if m.name)
    assert tetra(rope) == tetra(plain)  # the served app switches models in place


def test_trained_vs_random_heat_maps_are_the_stored_statistics_on_one_scale_per_pair(ds):
    sel, base = ds.sel(model=ROPE), baseline_of(ds, ROPE)
    figs = [render(view) for view in views.trained_vs_random(sel, base)]
    assert [f.name for f in figs] == [f"analyses_pair_{x}_{w}_figure" for x in "SP" for w in ("trained", "baseline")]
    for letter, name in (("S", "symmetric_energy"), ("P", "pairing")):
        trained_fig, base_fig = (figs[2 * "SP".index(letter) + k] for k in (0, 1))
        maps = []
        for fig, which, source in ((trained_fig, "trained", sel), (base_fig, "baseline", base)):
            image = np.asarray(fig.select_one({"name": f"analyses_pair_{letter}_{which}"}).data["image"][0])
            want = source["head_statistics"].sel(statistic=name).values[:3, :4]  # Bokeh rows: layer 0 first
            np.testing.assert_allclose(image, want, rtol=1e-6, err_msg=f"{letter} {which}")
            maps.append(want)
        both = np.concatenate([m.ravel() for m in maps])
        for fig, which in ((trained_fig, "trained"), (base_fig, "baseline")):
            mapper = fig.select_one({"name": f"analyses_pair_{letter}_{which}_colours"})
            assert (mapper.low, mapper.high) == pytest.approx((both.min(), both.max()))
        assert base_fig.title.text == f"{letter}: random baseline iid-seed4"
        assert trained_fig.title.text == f"{letter} ({name}): trained"
    alone = [render(view) for view in views.trained_vs_random(ds.sel(model=PLAIN))]
    assert np.isnan(np.asarray(alone[1].select_one({"name": "analyses_pair_S_baseline"}).data["image"][0])).all()
    assert f"python -m pipeline baseline {PLAIN}" in alone[1].title.text


def test_the_analyses_tab_shows_the_pairs(pages):
    for page in pages.values():
        tab = page.select_one({"name": "analyses"})
        assert all(tab.select_one({"name": f"analyses_pair_{x}_{w}_figure"}) is not None
                   for x in "SP" for w in ("trained", "baseline"))


def signed_energy(X: np.ndarray) -> np.ndarray:
    return np.sum(np.where(X > 0, X ** 2, -(X ** 2)), axis=1)


@pytest.mark.parametrize("model", [ROPE, PLAIN])
def test_the_heads_coloured_by_cluster_follow_scikit_learns_kmeans(ds, model):
    from sklearn.cluster import KMeans
    from sklearn.metrics import adjusted_rand_score

    sel = ds.sel(model=model)
    k = min(int(sel["d_model"]), 2 * int(sel["d_head"]))
    spectra = sel["spectrum"].values[:3, :4, :k].reshape(-1, k)
    X = -np.sort(-(spectra / np.linalg.norm(spectra, axis=1, keepdims=True)), axis=1)
    theirs = KMeans(n_clusters=3, n_init=50, random_state=0).fit(X).labels_
    energy = [signed_energy(X[theirs == c]).mean() for c in range(3)]
    want = np.argsort(np.argsort(-np.array(energy)))[theirs]  # numbered by decreasing mean signed energy
    fig = render(tetrahedron(sel, color_by="cluster"))
    heads = fig.select_one({"name": "heads"}).data
    assert adjusted_rand_score(heads["cluster"], theirs) == pytest.approx(1.0)
    np.testing.assert_array_equal(heads["cluster"], want)
    colour = {}
    for c in range(3):
        r = fig.select_one({"name": f"head_dots_cluster{c}"})
        assert r.visible and r.view.filter.column_name == "cluster" and r.view.filter.group == c
        colour |= {i: r.glyph.fill_color for i in np.flatnonzero(np.asarray(heads["cluster"]) == c)}
    assert [colour[i] for i in range(len(want))] == [CLUSTER_COLORS[c] for c in want]
    assert not fig.select_one({"name": "head_dots"}).visible
    items = fig.select_one({"name": "cluster_legend"}).items
    assert [i.label.value for i in items[:3]] == [f"cluster {c} (n={int(np.sum(want == c))})" for c in range(3)]
    assert not items[3].visible  # every head has a spectrum: none left out


def test_the_page_offers_the_clusters_as_a_colour_mode(pages):
    for page in pages.values():
        mode = page.select_one({"name": "color_mode"})
        assert mode.labels == ["colour by layer", "colour by type", "colour by cluster"] and mode.active == 0
        ctx = mode.js_property_callbacks["change:active"][0].args["ctx"]
        assert [r.name for r in ctx["cluster_dots"]] == [f"head_dots_cluster{c}" for c in range(4)]
        assert not any(r.visible for r in ctx["cluster_dots"]) and not ctx["cluster_legend"].visible
