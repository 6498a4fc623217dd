"""The profiles page's Analyses tab in Chromium: it renders for a rotary and a position-free model (exported and
served), draws the stored values, and its deep link (``tab=analyses``) round-trips. On the Profiles tab, the
baseline's parts: the inspector's percentiles among the baseline's heads, the baseline's cloud behind its toggle
turned with the camera, and the colour by cluster with its deep link."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pytest

from dashboard import data
from dashboard.common.geometry import VERTICES
from dashboard.common.selection import statistics_table
from dashboard.export import profile_page_name
from tests.browser.conftest import (
    console_errors,
    frame_box,
    js,
    model_data,
    model_prop,
    route_offline,
    serve_app,
    set_prop,
    set_selected,
    stop,
    wait_for_bokeh,
    wait_for_column,
    wait_for_link,
    wait_js,
)
from tests.dashboard.analyses_store import PLAIN, ROPE, ROPE_BASELINE, analyses_site, analyses_store

pytestmark = pytest.mark.browser

TABS_JS = """
const tabs = () => {
  for (const d of Bokeh.documents) {
    for (const r of d.roots()) {
      for (const m of r.references()) {  // the profiles page's own (the served app's tabs hold it)
        if (m.constructor.__name__ === 'Tabs' && m.tabs.some((t) => t.title === 'Analyses')) { return m; }
      }
    }
  }
  return null;
};
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return analyses_store(tmp_path_factory)


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    return analyses_site(tmp_path_factory)[0]


def active_tab(page):
    return js(page, TABS_JS + "const t = tabs(); return t == null ? null : t.active;")


def open_link(browser, url: str):
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    errors = console_errors(page)
    route_offline(page)
    page.goto(url, timeout=120_000)  # a served app renders the page at its first load
    wait_for_bokeh(page, "analyses_p")
    wait_for_link(page, "model=", timeout=30_000)  # the link applied
    return page, errors


def check_drawn(page, store, model: str) -> None:
    """The Analyses tab is open and shows its figures, their bars the stored P's histogram."""
    assert active_tab(page) == 1
    wait_js(page, "const v = Bokeh.index.find_one(find('analyses_p_figure'));"
                  " return v != null && v.frame.bbox.width > 0;", timeout=30_000)
    for fig in ("analyses_p_figure", "analyses_bound_figure", "analyses_rho_figure", "analyses_sigma_figure"):
        _, _, width, height = frame_box(page, fig)
        assert width > 100 and height > 100, fig
    np.testing.assert_allclose(model_data(page, "analyses_p", "top"), p_histogram(store, model), atol=1e-9)
    assert "KS p" in model_prop(page, "analyses_p_title", "text")
    assert model_prop(page, "url_note", "visible") is False


@pytest.mark.parametrize("model", [ROPE, PLAIN])
def test_the_analyses_tab_renders_exported(browser, store, pages, model):
    page, errors = open_link(browser, (pages / profile_page_name(model)).as_uri() + "?tab=analyses")
    check_drawn(page, store, model)
    assert model_prop(page, "analyses_p_baseline_bars", "visible") is (model == ROPE)  # only ROPE has a baseline
    assert errors == []
    page.close()


def test_the_analyses_deep_link_round_trips(browser, pages):
    page, errors = open_link(browser, (pages / profile_page_name(ROPE)).as_uri() + "?tab=analyses")
    wait_for_link(page, "tab=analyses")
    js(page, TABS_JS + "tabs().active = 0;")  # the user opens the Profiles tab: the URL follows
    wait_for_link(page, "tab=profiles")
    js(page, TABS_JS + "tabs().active = 1;")
    wait_for_link(page, "tab=analyses")
    q = dict(parse_qsl(urlsplit(page.url).query))
    assert (q["model"], q["tab"]) == (ROPE, "analyses")
    url = page.url
    page.close()
    again, more = open_link(browser, url)  # the written link opens the same tab
    assert active_tab(again) == 1
    assert errors == [] and more == []
    again.close()


SELECT_JS = """
const selector = () => {  // the served app's model selector (options in groups)
  for (const d of Bokeh.documents) {
    for (const r of d.roots()) {
      for (const m of r.references()) {
        if (m.constructor.__name__.endsWith('Select') && m.title === 'Model') { return m; }
      }
    }
  }
  return null;
};
const choices = () => {
  const o = selector().options;
  const groups = o instanceof Map ? [...o.values()] : (Array.isArray(o) ? [o] : Object.values(o));
  return groups.flat().map((x) => Array.isArray(x) ? x[0] : x);
};
"""


def p_histogram(store, model: str) -> np.ndarray:
    P = statistics_table(data.profiles(store).sel(model=model))["pairing"].ravel()
    return np.histogram(P, bins=40, range=(0, 1), density=True)[0]


def test_the_analyses_tab_renders_served_with_its_link_and_follows_the_model_selector(browser, store):
    proc, url = serve_app(store)
    try:
        for model in (ROPE, PLAIN):
            page, errors = open_link(browser, f"{url}?model={model}&tab=analyses")
            check_drawn(page, store, model)
            # the baseline is not a model to choose
            assert sorted(js(page, SELECT_JS + "return choices();")) == sorted([ROPE, PLAIN])
            assert errors == []
            if model == ROPE:  # another model chosen: the tab shows its values (the page switched in place)
                js(page, SELECT_JS + "selector().value = arg;", PLAIN)
                want = p_histogram(store, PLAIN).tolist()
                # (while the new model's page is built, a progress line holds the pane: no bars to read yet)
                wait_js(page, "const bars = find('analyses_p'); if (!bars) return false;"
                        " const t = Array.from(bars.data.top); return t.every((v, i) => Math.abs(v - arg[i]) < 1e-9);",
                        arg=want, timeout=60_000)
                assert not model_prop(page, "analyses_p_baseline_bars", "visible")  # PLAIN has no baseline
                assert active_tab(page) == 1
            page.close()
    finally:
        stop(proc)


def profiles_page(browser, pages, model: str, query: str = ""):
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    errors = console_errors(page)
    route_offline(page)
    page.goto((pages / profile_page_name(model)).as_uri() + query, timeout=120_000)
    wait_for_bokeh(page, "heads")
    wait_for_link(page, "model=", timeout=30_000)  # the link applied
    return page, errors


def test_the_inspector_gives_a_tapped_heads_percentiles_among_the_baselines(browser, store, pages):
    from scipy import stats

    ds = data.profiles(store)
    page, errors = profiles_page(browser, pages, ROPE)
    head = 5
    set_selected(page, "heads", [head])
    wait_js(page, "return find('inspector_title').text.includes('head 1<');")  # layer 1, head 1 of 4 heads a layer
    table = dict(zip(model_data(page, "inspector_statistics", "statistic"),
                     model_data(page, "inspector_statistics", "value"), strict=True))
    for name in ("symmetric_energy", "pairing", "rho"):
        ref = statistics_table(ds.sel(model=ROPE_BASELINE))[name].ravel()
        x = statistics_table(ds.sel(model=ROPE))[name].ravel()[head]
        assert table[f"percentile_{name}"] == pytest.approx(stats.percentileofscore(ref, x, kind="mean"), abs=1e-4)
    assert table["pairing"] == pytest.approx(statistics_table(ds.sel(model=ROPE))["pairing"].ravel()[head], rel=1e-6)
    assert errors == []
    page.close()


def test_the_baselines_cloud_shows_on_its_toggle_and_turns_with_the_camera(browser, store, pages):
    base = data.profiles(store).sel(model=ROPE_BASELINE)
    stored = base["profile"].values[:3, :4, 0].reshape(-1, 4)
    page, errors = profiles_page(browser, pages, ROPE)
    assert model_prop(page, "baseline_cloud_dots", "visible") is False
    page.get_by_text("random baseline's heads").click()
    wait_js(page, "return find('baseline_cloud_dots').visible;")
    set_prop(page, "azimuth", "value", 70)
    set_prop(page, "elevation", "value", -25)
    xyz = stored @ VERTICES
    az, el = np.radians(70), np.radians(-25)
    x = xyz[:, 0] * np.cos(az) - xyz[:, 1] * np.sin(az)
    y = xyz[:, 2] * np.cos(el) - (xyz[:, 0] * np.sin(az) + xyz[:, 1] * np.cos(az)) * np.sin(el)
    wait_for_column(page, "baseline_cloud", "x", x, atol=1e-5)
    wait_for_column(page, "baseline_cloud", "y", y, atol=1e-5)
    plain, more = profiles_page(browser, pages, PLAIN)  # no baseline: the toggle is disabled
    assert model_prop(plain, "baseline_cloud_toggle", "disabled") is True
    assert errors == [] and more == []
    page.close()
    plain.close()


def test_colour_by_cluster_shows_the_clusters_and_round_trips_in_the_link(browser, store, pages):
    page, errors = profiles_page(browser, pages, ROPE)
    page.get_by_text("colour by cluster").click()
    wait_js(page, "return find('cluster_legend').visible;")
    assert model_prop(page, "head_dots", "visible") is False and model_prop(page, "type_legend", "visible") is False
    labels = np.array(model_data(page, "heads", "cluster"))
    for k in range(3):
        assert model_prop(page, f"head_dots_cluster{k}", "visible") is True
    assert sorted(set(labels.tolist())) == [0, 1, 2]
    wait_for_link(page, "color=cluster")
    url = page.url
    page.close()
    again, more = profiles_page(browser, pages, ROPE, "?" + url.split("?", 1)[1])
    wait_js(again, "return find('cluster_legend').visible;")
    assert model_prop(again, "color_mode", "active") == 2
    assert errors == [] and more == []
    again.close()
