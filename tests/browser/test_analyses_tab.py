"""The profiles page's Analyses tab in Chromium: it renders for a rotary and a position-free model (exported and
served), draws the stored values, and its deep link (``tab=analyses``) round-trips."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pytest

from dashboard import data
from dashboard.common.selection import statistics_table
from dashboard.export import export, profile_page_name
from tests.browser.conftest import (
    FIND_JS,
    console_errors,
    frame_box,
    js,
    model_data,
    model_prop,
    route_offline,
    serve_app,
    stop,
    wait_for_bokeh,
)
from tests.dashboard.analyses_store import PLAIN, ROPE, write_analyses_store

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
    return write_analyses_store(tmp_path_factory.mktemp("analyses_store"))


@pytest.fixture(scope="module")
def pages(store, tmp_path_factory):
    out = tmp_path_factory.mktemp("analyses_export")
    export(out, store)
    return out


def active_tab(page):
    return js(page, TABS_JS + "const t = tabs(); return t == null ? null : t.active;")


def open_link(browser, url: str):
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    errors = console_errors(page)
    route_offline(page)
    page.goto(url, timeout=120_000)  # a served app renders the page at its first load
    wait_for_bokeh(page, "analyses_p")
    page.wait_for_function("() => window.location.search.includes('model=')", timeout=30_000)  # the link applied
    return page, errors


def check_drawn(page, store, model: str) -> None:
    """The Analyses tab is open and shows its figures, their bars the stored P's histogram."""
    assert active_tab(page) == 1
    page.wait_for_function("() => {" + FIND_JS + "const v = Bokeh.index.find_one(find('analyses_p_figure'));"
                           " return v != null && v.frame.bbox.width > 0; }", timeout=30_000)
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
    page.wait_for_function("() => window.location.search.includes('tab=analyses')", timeout=10_000)
    js(page, TABS_JS + "tabs().active = 0;")  # the user opens the Profiles tab: the URL follows
    page.wait_for_function("() => window.location.search.includes('tab=profiles')", timeout=10_000)
    js(page, TABS_JS + "tabs().active = 1;")
    page.wait_for_function("() => window.location.search.includes('tab=analyses')", timeout=10_000)
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
                page.wait_for_function("(arg) => {" + FIND_JS + "const bars = find('analyses_p');"
                                       " if (!bars) return false; const t = Array.from(bars.data.top);"
                                       " return t.every((v, i) => Math.abs(v - arg[i]) < 1e-9); }", arg=want,
                                       timeout=60_000)
                assert not model_prop(page, "analyses_p_baseline_bars", "visible")  # PLAIN has no baseline
                assert active_tab(page) == 1
            page.close()
    finally:
        stop(proc)
