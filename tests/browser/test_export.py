"""The exported static pages opened from file:// with no server and no internet.

Self-contained pages are opened with every remote request refused (none may be made); CDN pages are
opened with the CDN answered from the installed bokeh/panel files. Both must render without console
errors, keep the interactions (d slider, selection, the orbits movie) and link to each other.
"""

from __future__ import annotations

import re

import bokeh
import numpy as np
import pytest

from dashboard import data
from dashboard.export import profile_page_name
from tests.browser.conftest import (
    ABSOLUTE_MODEL,
    EMPTY_MODEL,
    ROPE_MODEL,
    assert_movie_plays_and_loops,
    console_errors,
    histogram,
    js,
    model_data,
    rope_profiles,
    route_offline,
    set_prop,
    set_selected,
    wait_for_bokeh,
    wait_for_column,
    wait_js,
)

pytestmark = pytest.mark.browser


def open_offline(browser, path):
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    errors = console_errors(page)
    requested: list[str] = []
    route_offline(page, requested)
    page.goto(path.as_uri())
    return page, errors, requested


def test_self_contained_pages_need_nothing_from_outside(browser, exported_inline):
    html = (exported_inline / profile_page_name(ROPE_MODEL)).read_text()
    assert "cdn.bokeh.org" not in html and "<script src=" not in html
    page, errors, requested = open_offline(browser, exported_inline / profile_page_name(ROPE_MODEL))
    wait_for_bokeh(page, "heads")
    set_prop(page, "d_slider", "value", 40)
    wait_for_column(page, "heads", "a", rope_profiles(4, 8)[:, :, 40, 0].ravel(), atol=1 / 65534)
    a = np.array(model_data(page, "heads", "a"), dtype=float)
    np.testing.assert_allclose(a, rope_profiles(4, 8)[:, :, 40, 0].ravel(), atol=1 / 65534)
    set_selected(page, "heads", [5, 6])
    wait_js(page, "return Array.from(find('hist_selected').data.top).some(v => v > 0);")
    assert sum(histogram(page, "a", selected=True)) == pytest.approx(1.0)
    assert requested == [] and errors == []
    page.close()


def test_cdn_pages_ask_only_for_this_bokeh_version(browser, exported_site):
    html = (exported_site / profile_page_name(ROPE_MODEL)).read_text()
    urls = set(re.findall(r'src="(https://[^"]+)"', html))
    assert urls and all(f"-{bokeh.__version__}" in u and u.startswith("https://cdn.bokeh.org/") for u in urls)
    page, errors, requested = open_offline(browser, exported_site / profile_page_name(ROPE_MODEL))
    wait_for_bokeh(page, "heads")
    assert set(requested) == urls
    assert errors == []
    page.close()


@pytest.mark.parametrize("variant", ["inline", "cdn"])
def test_orbits_movie_advances_and_loops(browser, exported_inline, exported_site, variant):
    pages = exported_inline if variant == "inline" else exported_site
    page, errors, requested = open_offline(browser, pages / "orbits.html")
    wait_for_bokeh(page, "orbits_frame")
    set_prop(page, "orbits_frame", "value", 0)
    assert_movie_plays_and_loops(page, page.get_by_text("Play").first)
    assert errors == []
    if variant == "inline":
        assert requested == []
    page.close()


def test_index_links_every_page_and_lists_commands(browser, exported_site):
    page, errors, _ = open_offline(browser, exported_site / "index.html")
    assert "python -m pipeline profiles synthetic-empty" in page.content()
    page.get_by_text(ROPE_MODEL).first.click()
    page.wait_for_url(re.compile(re.escape(profile_page_name(ROPE_MODEL)) + r"(\?.*)?$"))  # its state: in the query
    wait_for_bokeh(page, "heads")
    page.get_by_text("orbits").first.click()
    page.wait_for_url("**/orbits.html")
    wait_for_bokeh(page, "orbits_frame")
    assert errors == []
    page.close()


def test_the_compare_page_lists_every_computed_model(browser, exported_site, synthetic_store):
    page, errors, _ = open_offline(browser, exported_site / "compare.html")
    wait_for_bokeh(page, "compare_depth")
    computed = [ROPE_MODEL, ABSOLUTE_MODEL]  # the empty model is registered, not computed
    n_renderers = js(page, "return find('compare_depth').renderers.length;")
    items = js(page, "const f = find('compare_depth'); const out = [];"
               " for (const l of [...f.center, ...f.right]) {"
               " if (l.items) { for (const i of l.items) { out.push(i.label.value); } } }"
               " return out;")
    assert items == computed and n_renderers == 2 * len(computed)  # a line and its dots per model
    text = js(page, "return find('compare_models').text;")
    assert all(n in text for n in computed) and EMPTY_MODEL not in text
    # the medians of c at d = 0 per layer, against relative depth, as numpy has them
    median_of = "return Array.from(find('compare_depth').renderers[0].data_source.data['median c']);"
    np.testing.assert_allclose(js(page, median_of), np.median(rope_profiles(4, 8)[:, :, 0, 2], axis=1),
                               atol=1 / 65534)
    page.locator("select").first.select_option("a")
    wait_js(page, "return find('compare_depth').title.text === 'median a per layer';")
    np.testing.assert_allclose(js(page, median_of), np.median(rope_profiles(4, 8)[:, :, 0, 0], axis=1),
                               atol=1 / 65534)
    # the second model's histogram of b, as numpy counts it
    b = data.model_data(synthetic_store, ABSOLUTE_MODEL).profile[:, :, 0, 1].ravel()
    page.locator("select").nth(2).select_option(ABSOLUTE_MODEL)
    wait_for_column(page, "compare_hist_b_1", "top", np.histogram(b, 40, (0, 1))[0] / b.size, atol=1e-12)
    np.testing.assert_allclose(js(page, "return Array.from(find('compare_hist_b_1').data.top);"),
                               np.histogram(b, 40, (0, 1))[0] / b.size, atol=1e-12)
    assert errors == []
    page.close()
