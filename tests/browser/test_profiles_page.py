"""The profiles page in chromium, from the exported static files (file://, no server, CDN routed offline).

Every number the browser computes is checked against an independent numpy computation: the
projection (``tetrahedron.project``), the decoded profiles (the synthetic store's values), the
histograms (``np.histogram``-style counts of the heads' values).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pytest

from dashboard import data
from dashboard.common.geometry import (
    dequantise,
    face_coordinates,
    layer_type_fractions,
    project,
    quantise,
    spectral_types,
    to_3d,
    type_labels,
)
from dashboard.export import profile_page_name
from pipeline.schema import STATISTICS
from tests.browser.conftest import (
    ABSOLUTE_MODEL,
    FIND_JS,
    POLL_MS,
    ROPE_MODEL,
    console_errors,
    drag,
    frame_box,
    histogram,
    js,
    model_data,
    model_prop,
    next_paint,
    rope_profiles,
    rope_statistics,
    route_offline,
    screen_positions,
    selected,
    set_prop,
    wait_for_bokeh,
    wait_for_column,
    wait_for_link,
    wait_js,
)

pytestmark = pytest.mark.browser
ROPE_SHAPE = (4, 8)  # write_synthetic_store's default


def open_model_page(browser, pages, model):
    """An exported model page opened offline from file://, once its heads are drawn; (page, console errors)."""
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    errors = console_errors(page)
    route_offline(page)
    page.goto((pages / profile_page_name(model)).as_uri())
    wait_for_bokeh(page, "heads")
    return page, errors


@pytest.fixture
def rope_page(browser, exported_site):
    page, errors = open_model_page(browser, exported_site, ROPE_MODEL)
    yield page, errors
    page.close()


def heads_profile(page) -> np.ndarray:
    """(heads, 4) current a, b, c, d of the page's heads source, NaN for null."""
    return np.array([model_data(page, "heads", c) for c in "abcd"], dtype=float).T


def expected_at(d: int) -> np.ndarray:
    """The synthetic rope model's profile at offset d, (layers * heads, 4), rounded as quantised."""
    L, H = ROPE_SHAPE
    return rope_profiles(L, H)[:, :, d].reshape(L * H, 4)


def test_renders_without_errors_and_draws_every_head(rope_page):
    page, errors = rope_page
    L, H = ROPE_SHAPE
    assert model_data(page, "heads", "layer") == list(np.repeat(np.arange(L), H))
    np.testing.assert_allclose(heads_profile(page), expected_at(0), atol=1 / 65534)
    for name in ("tetrahedron", "layers", "hists", "d_slider", "play"):
        assert model_prop(page, name, "name") == name
    assert page.get_by_text("Profiles of attention heads").count() >= 1
    assert errors == []


def test_drag_rotates_and_matches_numpy_projection(rope_page):
    page, errors = rope_page
    x_before = model_data(page, "heads", "x")
    left, top, w, h = frame_box(page, "tetrahedron")
    drag(page, left + w / 2, top + h / 2, left + w / 2 + 80, top + h / 2 + 30)
    az, el = model_prop(page, "azimuth", "value"), model_prop(page, "elevation", "value")
    assert (az, el) != (30, 20)
    ex, ey = project(to_3d(heads_profile(page)), az, el)
    wait_for_column(page, "heads", "x", ex, atol=1e-9)  # projected for the camera the drag set
    x, y = np.array(model_data(page, "heads", "x")), np.array(model_data(page, "heads", "y"))
    assert not np.allclose(x, x_before)
    np.testing.assert_allclose(x, ex, atol=1e-9)
    np.testing.assert_allclose(y, ey, atol=1e-9)
    assert errors == []


def test_d_slider_moves_every_view(rope_page):
    page, errors = rope_page
    heat_before = model_data(page, "heat_a", "image")
    track = page.locator(".noUi-base").first.bounding_box()
    page.mouse.click(track["x"] + track["width"] * 0.25, track["y"] + track["height"] / 2)
    wait_js(page, "return find('d_slider').value !== 0;")
    d = model_prop(page, "d_slider", "value")
    assert 20 <= d <= 44
    p = expected_at(d)
    wait_for_column(page, "heads", "a", p[:, 0], atol=1 / 65534)  # the slider's callbacks have run
    np.testing.assert_allclose(heads_profile(page), p, atol=1 / 65534)
    L, H = ROPE_SHAPE
    bins = np.minimum(np.floor(np.rint(p * 65534) / 65534 * 40).astype(int), 39)
    for k, c in enumerate("abcd"):
        img = np.array(model_data(page, f"heat_{c}", "image")[0], dtype=float).reshape(L, 40)
        expected = np.zeros((L, 40))
        np.add.at(expected, (np.repeat(np.arange(L), H), bins[:, k]), 1)
        np.testing.assert_array_equal(img, expected)
        np.testing.assert_allclose(histogram(page, c), expected.sum(0) / (L * H))
    assert model_data(page, "heat_a", "image") != heat_before
    ex, ey = project(to_3d(heads_profile(page)), 30, 20)
    np.testing.assert_allclose(model_data(page, "heads", "x"), ex, atol=1e-9)
    assert errors == []


def test_box_selection_changes_histograms(rope_page):
    page, errors = rope_page
    assert histogram(page, "b", selected=True) == [0] * 40
    page.locator(".bk-tool-icon-box-select").first.click()
    fl, ft, fw, fh = frame_box(page, "tetrahedron")
    sx, sy = screen_positions(page, "tetrahedron", "heads")  # page pixels of every dot
    x_cut = float(np.median(sx[np.isfinite(sx)]))  # a box over the left half of the dots
    drag(page, fl + 2, ft + 2, x_cut, ft + fh - 2)
    wait_js(page, "return find('heads').selected.indices.length > 0;")
    sel = sorted(selected(page, "heads"))
    n = len(sx)
    assert 0 < len(sel) < n
    clearly_in = np.flatnonzero(sx < x_cut - 1)
    clearly_out = np.flatnonzero(sx > x_cut + 1)
    assert set(clearly_in) <= set(sel) and not set(clearly_out) & set(sel)
    values = heads_profile(page)[sel]
    for k, c in enumerate("abcd"):
        counts = np.bincount(np.minimum((values[:, k] * 40).astype(int), 39), minlength=40)
        np.testing.assert_allclose(histogram(page, c, selected=True), counts / len(sel), atol=1e-12)
    assert f"{len(sel)}" in model_prop(page, "selection_info", "text")
    page.get_by_text("Clear selection").click()
    wait_js(page, "return Array.from(find('hist_selected').data.top).every(v => v === 0);")
    assert histogram(page, "b", selected=True) == [0] * 40
    assert errors == []


def test_play_advances_and_loops(rope_page):
    page, errors = rope_page
    set_prop(page, "d_slider", "value", 124)
    page.get_by_text("Play").click()
    wait_js(page, "return find('d_slider').value < 20;")
    assert "Pause" in model_prop(page, "play", "label")
    page.get_by_text("Pause").click()
    # paused: the button's interval (profiles_play.js keeps its handle on the button) is cleared
    wait_js(page, "const b = find('play'); return b.__timer == null && b.label.includes('Play');")
    v = model_prop(page, "d_slider", "value")
    next_paint(page)
    assert model_prop(page, "d_slider", "value") == v
    np.testing.assert_allclose(heads_profile(page), expected_at(v), atol=1 / 65534)
    assert errors == []


def test_absolute_model_has_no_d_slider(browser, exported_site):
    page, errors = open_model_page(browser, exported_site, ABSOLUTE_MODEL)
    assert model_prop(page, "d_slider", "visible") is False
    assert "does not depend on position" in model_prop(page, "position_note", "text")
    # the selector navigates to the other model's page
    page.locator("select").first.select_option(label=ROPE_MODEL)
    page.wait_for_url(re.compile(re.escape(profile_page_name(ROPE_MODEL)) + r"(\?.*)?$"))
    wait_for_bokeh(page, "d_slider")
    assert errors == []
    page.close()


def data_to_page(page, figure: str, x: float, y: float) -> tuple[float, float]:
    """Page pixels of the data point (x, y) in ``figure`` (through Bokeh's own scales)."""
    return tuple(page.evaluate(
        "([f, x, y]) => {" + FIND_JS + "const v = Bokeh.index.find_one(find(f));"
        " const r = v.el.getBoundingClientRect();"
        " return [r.left + v.frame.x_scale.compute(x), r.top + v.frame.y_scale.compute(y)]; }", [figure, x, y]))


def test_box_selection_in_a_per_layer_view_selects_those_layers(rope_page):
    page, errors = rope_page
    L, H = ROPE_SHAPE
    x0, y0 = data_to_page(page, "layers", -0.03, L - 0.45)  # panel a, from above the top layer ...
    x1, y1 = data_to_page(page, "layers", 1.03, 1.5)  # ... down to between layers 1 and 2
    drag(page, x0, y0, x1, y1)
    wait_js(page, "return find('heads').selected.indices.length > 0;")
    assert sorted(selected(page, "heads")) == [i for i in range(L * H) if i // H >= 2]
    sel = np.array(histogram(page, "c", selected=True))
    values = expected_at(0)[2 * H:, 2]
    counts = np.bincount(np.minimum((np.rint(values * 65534) / 65534 * 40).astype(int), 39), minlength=40)
    np.testing.assert_allclose(sel, counts / len(values), atol=1e-12)
    assert errors == []


def test_hover_shows_model_layer_head_and_profile(rope_page):
    page, errors = rope_page
    sx, sy = screen_positions(page, "tetrahedron", "heads")
    others = np.hypot(sx[:, None] - sx[None, :], sy[:, None] - sy[None, :]) + np.eye(len(sx)) * 1e9
    i = int(np.argmax(others.min(axis=1)))  # the head farthest from every other: its tooltip alone
    page.mouse.move(sx[i], sy[i])
    tip = page.locator(".bk-tooltip-content").first
    tip.wait_for(state="visible", timeout=10_000)
    text = tip.inner_text()
    L, H = ROPE_SHAPE
    p = expected_at(0)[i]
    assert ROPE_MODEL in text
    assert re.search(rf"layer\W+{i // H}\b", text) and re.search(rf"head\W+{i % H}\b", text)
    for v in p:
        assert f"{v:.3f}" in text
    assert errors == []


# ------------------------------------------------------------------------------------------ deep links


def open_link(browser, pages, model, query):
    """The exported page of ``model`` opened with the query string ``query``, once the link is applied."""
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    errors = console_errors(page)
    route_offline(page)
    page.goto((pages / profile_page_name(model)).as_uri() + query)
    wait_for_bokeh(page, "heads")
    wait_for_link(page, "model=")  # written back
    return page, errors


def query_of(page) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(page.url).query))


def test_a_deep_link_round_trips(browser, exported_site):
    L, H = ROPE_SHAPE
    page, errors = open_link(browser, exported_site, ROPE_MODEL, "?d=17&heads=1.2,3.5")
    assert model_prop(page, "d_slider", "value") == 17
    np.testing.assert_allclose(heads_profile(page), expected_at(17), atol=1 / 65534)
    assert sorted(selected(page, "heads")) == [1 * H + 2, 3 * H + 5]
    assert model_prop(page, "url_note", "visible") is False
    # the state the user then sets is written into the URL ...
    set_prop(page, "d_slider", "value", 23)
    js(page, "find('heads').selected.indices = [0, 9];")
    page.wait_for_function("() => { const q = new URLSearchParams(window.location.search);"
                           " return q.get('d') === '23' && q.get('heads') === '0.0,1.1'; }", timeout=10_000,
                           polling=POLL_MS)
    q = query_of(page)
    assert (q["model"], q["tab"], q["d"], q["heads"]) == (ROPE_MODEL, "profiles", "23", "0.0,1.1")
    # ... and opening that URL again restores it
    url = page.url
    page.close()
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    route_offline(page)
    page.goto(url)
    wait_for_bokeh(page, "heads")
    wait_js(page, "return find('d_slider').value === 23;")
    np.testing.assert_allclose(heads_profile(page), expected_at(23), atol=1 / 65534)
    assert sorted(selected(page, "heads")) == [0, 9]
    assert errors == []
    page.close()


def test_a_link_to_another_model_opens_its_page(browser, exported_site):
    page, errors = open_link(browser, exported_site, ROPE_MODEL, f"?model={ABSOLUTE_MODEL}&heads=2.5")
    page.wait_for_url(re.compile(re.escape(profile_page_name(ABSOLUTE_MODEL)) + r"\?"))
    wait_for_bokeh(page, "heads")
    wait_js(page, "return find('heads').selected.indices.length === 1;")
    assert ABSOLUTE_MODEL in model_prop(page, "model_line", "text")
    assert selected(page, "heads") == [2 * 6 + 5]  # 6 heads per layer
    assert errors == []
    page.close()


def test_bad_link_input_shows_the_defaults_and_says_why(browser, exported_site):
    page, errors = open_link(browser, exported_site, ROPE_MODEL,
                             "?model=no-such-model&tab=nowhere&d=999&color=purple&heads=9.9,x&stat=nothing")
    note = model_prop(page, "url_note", "text")
    assert model_prop(page, "url_note", "visible") is True
    for asked in ("no-such-model", "nowhere", "999", "purple", "9.9", "nothing"):
        assert f"<code>{asked}" in note
    assert model_prop(page, "d_slider", "value") == 0 and selected(page, "heads") == []
    np.testing.assert_allclose(heads_profile(page), expected_at(0), atol=1 / 65534)
    assert page.get_by_text("This link asked for something the page cannot show").is_visible()
    # markup in a link is shown as text, never run
    page.goto((exported_site / profile_page_name(ROPE_MODEL)).as_uri() + "?d=%3Cimg%20src=x%20onerror=alert(1)%3E")
    wait_for_bokeh(page, "heads")
    wait_js(page, "return find('url_note').visible;")
    assert "&lt;img" in model_prop(page, "url_note", "text") and page.locator("img[src=x]").count() == 0
    assert errors == []
    page.close()


def test_a_compare_link_opens_the_compare_page_with_its_choosers(browser, exported_site, synthetic_store):
    """?tab=compare&models=A,B&quantity=q on a model's page opens compare.html with those choosers (the data
    they show included); a chooser's change is written back into the link."""
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    errors = console_errors(page)
    route_offline(page)
    page.goto((exported_site / profile_page_name(ROPE_MODEL)).as_uri()
              + f"?tab=compare&models={ABSOLUTE_MODEL},{ROPE_MODEL}&quantity=rho")
    page.wait_for_url(re.compile(r"compare\.html\?"))
    wait_for_bokeh(page, "compare_depth")
    wait_js(page, f"return find('compare_model_1').value === '{ABSOLUTE_MODEL}';")
    assert (model_prop(page, "compare_model_2", "value"), model_prop(page, "compare_quantity", "value")) == (
        ROPE_MODEL, "rho")
    assert model_prop(page, "compare_url_note", "visible") is False
    b = data.model_data(synthetic_store, ABSOLUTE_MODEL).profile[:, :, 0, 1].ravel()  # model 1's bars of b
    np.testing.assert_allclose(js(page, "return Array.from(find('compare_hist_b_0').data.top);"),
                               np.histogram(b, 40, (0, 1))[0] / b.size, atol=1e-12)
    rho = rope_statistics(*ROPE_SHAPE)[0][:, :, list(STATISTICS).index("rho")]
    np.testing.assert_allclose(js(page, "return Array.from(find('compare_depth').renderers[0].data_source"
                                        ".data['median c']);"), np.median(rho, axis=1), rtol=1e-12)
    set_prop(page, "compare_quantity", "value", "a")
    wait_for_link(page, "quantity=a")
    assert query_of(page)["models"] == f"{ABSOLUTE_MODEL},{ROPE_MODEL}"
    assert errors == []
    page.close()


def test_bad_compare_link_input_shows_the_defaults_and_says_why(browser, exported_site):
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    errors = console_errors(page)
    route_offline(page)
    page.goto((exported_site / "compare.html").as_uri() + "?models=nope,%3Cimg%20src%3Dx%3E&quantity=volume")
    wait_for_bokeh(page, "compare_depth")
    wait_js(page, "return find('compare_url_note').visible;")
    note = model_prop(page, "compare_url_note", "text")
    assert "<code>nope,&lt;img src=x&gt;</code>" in note and "<code>volume</code>" in note
    assert page.locator("img[src=x]").count() == 0  # markup in a link is shown as text, never run
    assert [model_prop(page, n, "value") for n in ("compare_model_1", "compare_model_2", "compare_quantity")] == [
        ROPE_MODEL, ABSOLUTE_MODEL, "c"]
    assert page.get_by_text("This link asked for something the page cannot show").is_visible()
    assert errors == []
    page.close()


# ---------------------------------------------------------------------------------------- spectral types


def legend_labels(page) -> list[str]:
    return js(page, "return find('type_legend').items.map(i => i.label.value);")


def click_legend_item(page, k: int) -> None:
    """Click item ``k`` of the tetrahedron's type legend, where BokehJS drew it."""
    x, y = js(page, "const fv = Bokeh.index.find_one(find('tetrahedron')); const lg = find('type_legend');"
              " const lv = fv.renderer_views.get(lg); const r = fv.el.getBoundingClientRect(); const b = lv.bbox;"
              " const step = (b.height - 2 * lg.padding) / lg.items.length;"
              " return [r.left + b.left + lg.padding + 8, r.top + b.top + lg.padding + (arg + 0.5) * step];", k)
    page.mouse.click(x, y)


def test_colour_by_type_counts_follow_d_and_a_legend_click_hides_a_type(rope_page):
    page, errors = rope_page
    assert model_prop(page, "type_legend", "visible") is False and model_prop(page, "head_dots", "visible") is True
    page.get_by_text("colour by type").click()
    wait_js(page, "return find('type_legend').visible;")
    assert model_prop(page, "type_legend", "visible") is True and model_prop(page, "head_dots", "visible") is False
    wait_for_link(page, "color=type")
    seen = set()
    for d in (0, 20, 32):
        set_prop(page, "d_slider", "value", d)
        shown = dequantise(quantise(expected_at(d)))
        types = spectral_types(shown)
        wait_js(page, "const l = find('type_legend').items.map(i => i.label.value);"
                " return l.length === arg.length && l.every((x, i) => x === arg[i]);", type_labels(types))
        assert legend_labels(page) == type_labels(types)  # "Type I₊ (n=K)", recounted at this d
        assert model_data(page, "heads", "type") == types.tolist()
        seen.add(tuple(legend_labels(page)))
    assert len(seen) == 3  # the counts changed with d
    click_legend_item(page, 0)
    wait_js(page, "return !find('head_dots_type0').visible;")
    assert model_prop(page, "head_dots_type0", "visible") is False
    assert model_prop(page, "head_dots_type2", "visible") is True
    click_legend_item(page, 0)
    wait_js(page, "return find('head_dots_type0').visible;")
    assert model_prop(page, "head_dots_type0", "visible") is True
    page.get_by_text("colour by layer").click()
    wait_js(page, "return find('head_dots').visible;")
    assert model_prop(page, "head_dots", "visible") is True and model_prop(page, "type_legend", "visible") is False
    assert errors == []


# ------------------------------------------------------------------- the face, layer x type, statistics


def test_a_tap_on_a_head_fills_the_inspector(rope_page):
    page, errors = rope_page
    L, H = ROPE_SHAPE
    set_prop(page, "d_slider", "value", 12)
    wait_for_column(page, "heads", "a", expected_at(12)[:, 0], atol=1 / 65534)
    next_paint(page)  # the dots drawn where they are now, for the click below
    sx, sy = screen_positions(page, "tetrahedron", "heads")
    others = np.hypot(sx[:, None] - sx[None, :], sy[:, None] - sy[None, :]) + np.eye(len(sx)) * 1e9
    i = int(np.argmax(others.min(axis=1)))  # a head alone under the pointer
    page.mouse.click(sx[i], sy[i])
    wait_js(page, "return find('heads').selected.indices.length === 1;")
    assert selected(page, "heads") == [i]
    layer, head = divmod(i, H)
    assert f"layer {layer}, head {head}" in model_prop(page, "inspector_title", "text")
    stats, spectra = rope_statistics(L, H)
    np.testing.assert_allclose(model_data(page, "inspector_statistics", "value"), stats[layer, head], rtol=1e-6)
    lam = spectra[layer, head]
    half = np.abs(lam).max() / 65534  # half a quantum of the shipped spectrum (dashboard/profiles/payload.py)
    np.testing.assert_allclose(model_data(page, "inspector_up", "top"), np.sort(lam[lam > 0])[::-1], rtol=1e-9,
                               atol=half)
    np.testing.assert_allclose(model_data(page, "inspector_down", "bottom"), np.sort(lam[lam < 0]), rtol=1e-9,
                               atol=half)
    for k, c in enumerate("abcd"):  # the head's profile over every d, as stored
        np.testing.assert_allclose(model_data(page, f"inspector_curve_{c}", "value"),
                                   rope_profiles(L, H)[layer, head, :, k], atol=1 / 65534)
    assert model_prop(page, "inspector_d", "location") == 12
    assert errors == []


def test_the_face_and_the_layer_type_map_follow_d_and_the_selection(rope_page):
    page, errors = rope_page
    L, H = ROPE_SHAPE
    for d in (0, 32):
        set_prop(page, "d_slider", "value", d)
        shown = dequantise(quantise(expected_at(d)))
        xy = face_coordinates(shown)
        wait_js(page, "return find('layer_types').title.text === arg;", f"Layer × type (d = {d})")
        wait_for_column(page, "face_heads", "x", xy[:, 0], atol=1e-12)
        np.testing.assert_allclose(model_data(page, "face_heads", "x"), xy[:, 0], atol=1e-12)
        np.testing.assert_allclose(model_data(page, "face_heads", "y"), xy[:, 1], atol=1e-12)
        img = np.array(model_data(page, "layer_types_image", "image")[0], dtype=float).reshape(L, 3)
        np.testing.assert_allclose(img, layer_type_fractions(shown.reshape(L, H, 4)), atol=1e-12)
        assert js(page, "return find('layer_types').title.text;") == f"Layer × type (d = {d})"
    js(page, "find('heads').selected.indices = [3, 17];")
    wait_js(page, "return find('face_heads').selected.indices.length === 2;")
    assert selected(page, "face_heads") == [3, 17]
    js(page, "find('face_heads').selected.indices = [5];")
    wait_js(page, "return find('heads').selected.indices.length === 1;")
    assert selected(page, "heads") == [5]
    assert errors == []


def test_the_statistic_chooser_and_a_tap_on_its_map(rope_page):
    page, errors = rope_page
    L, H = ROPE_SHAPE
    stats, _ = rope_statistics(L, H)
    img = lambda: np.array(model_data(page, "statistic_image", "image")[0], dtype=float).reshape(L, H)  # noqa: E731
    np.testing.assert_allclose(img(), stats[..., STATISTICS.index("symmetric_energy")], rtol=1e-12)
    assert "(N + 1) / (2N)" in model_prop(page, "statistic_baseline", "text")
    page.locator("select").nth(1).select_option("rho")
    wait_for_column(page, "statistic_image", "image", stats[..., STATISTICS.index("rho")], rtol=1e-6)
    np.testing.assert_allclose(img(), stats[..., STATISTICS.index("rho")], rtol=1e-6)
    wait_for_link(page, "stat=rho")  # written back
    assert "(N + 1) / (2N)" not in model_prop(page, "statistic_baseline", "text")
    x, y = data_to_page(page, "statistic_map", 5, 2)  # head 5 of layer 2
    page.mouse.click(x, y)
    wait_js(page, "return find('heads').selected.indices.length === 1;")
    assert selected(page, "heads") == [2 * H + 5]
    assert "layer 2, head 5" in model_prop(page, "inspector_title", "text")
    assert errors == []


def test_a_model_without_statistics_says_so_with_the_command(browser, exported_site):
    page, errors = open_model_page(browser, exported_site, ABSOLUTE_MODEL)
    for name in ("statistics_missing", "parity_missing", "inspector_missing"):
        text = model_prop(page, name, "text")
        assert "statistics not computed" in text and "python -m pipeline" in text, name
    assert page.get_by_text("statistics not computed").first.is_visible()
    js(page, "find('heads').selected.indices = [7];")  # the inspector still names the head
    wait_js(page, "return find('inspector_title').text.includes('layer 1');")
    assert "layer 1, head 1" in model_prop(page, "inspector_title", "text")
    assert errors == []
    page.close()
