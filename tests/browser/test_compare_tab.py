"""The compare tab in the browser, served and exported: the depth chart's y axis follows the quantity chosen
(in its chooser or by the deep link ``?tab=compare&models=...&quantity=rho``), so every median drawn is on
the chart, and the histograms' legend covers none of their bars.

The medians expected are computed here from the synthetic store's own numbers (``rope_statistics``,
``rope_profiles``), not read from the page's Python.
"""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.schema import STATISTICS
from tests.browser.conftest import (
    ABSOLUTE_MODEL,
    ROPE_MODEL,
    console_errors,
    js,
    model_prop,
    rope_profiles,
    rope_statistics,
    route_offline,
    set_prop,
    wait_for_bokeh,
    wait_js,
)

pytestmark = pytest.mark.browser

# every line of the depth chart: its y values (NaN as null), and the chart's y range
DEPTH_JS = """
const fig = find('compare_depth'), out = [];
for (const r of fig.renderers) {
  const y = r.glyph.y.field;
  if (y != null) { out.push(Array.from(r.data_source.data[y], (v) => Number.isFinite(v) ? v : null)); }
}
return {start: fig.y_range.start, end: fig.y_range.end, lines: out, title: fig.title.text};
"""

# every legend of the four histogram panels that names something, with its box, and every bar drawn (height > 0),
# in the coordinates of its panel's canvas
PANELS_JS = """
const out = [];
for (const c of ['a', 'b', 'c', 'd']) {
  const fig = find('compare_hist_' + c), v = Bokeh.index.find_one(fig);
  const legends = [...fig.center, ...fig.above, ...fig.below, ...fig.left, ...fig.right]
    .filter((m) => m.items !== undefined && m.click_policy !== undefined && m.items.length > 0 && m.visible);
  const boxes = legends.map((m) => {
    const b = v.renderer_views.get(m).bbox;
    return [b.left, b.top, b.right, b.bottom];
  });
  const labels = legends.map((m) => m.items.map((i) => i.label.value));
  const bars = [];
  for (const r of fig.renderers) {
    const d = r.data_source.data, bottom = r.glyph.bottom.value != null ? r.glyph.bottom.value : 0;
    if (d.top === undefined || !r.visible) { continue; }
    for (let i = 0; i < d.top.length; i++) {
      if (!(d.top[i] > bottom)) { continue; }
      const xs = [v.frame.x_scale.compute(d.left[i]), v.frame.x_scale.compute(d.right[i])];
      const ys = [v.frame.y_scale.compute(d.top[i]), v.frame.y_scale.compute(bottom)];
      bars.push([Math.min(...xs), Math.min(...ys), Math.max(...xs), Math.max(...ys)]);
    }
  }
  out.push({panel: c, legends: boxes, labels: labels, bars: bars});
}
return out;
"""


def medians(quantity: str) -> np.ndarray:
    """The rope model's per-layer median of ``quantity`` at d = 0 (a statistic or a coordinate), from the
    synthetic store's numbers; the absolute-position model has no statistics."""
    if quantity in STATISTICS:
        return np.median(rope_statistics(4, 8)[0][..., STATISTICS.index(quantity)], axis=1)
    return np.median(rope_profiles(4, 8)[:, :, 0, "abcd".index(quantity)], axis=1)


def depth(page) -> dict:
    return js(page, DEPTH_JS)


def assert_on_the_chart(shown: dict, quantity: str) -> None:
    """The chart shows the rope model's medians of ``quantity`` (its line and its dots), every value drawn is
    inside the y range, and the range spans them without being mostly empty."""
    lines = [np.array([np.nan if v is None else v for v in line], dtype=float) for line in shown["lines"]]
    rope = [line for line in lines if line.shape == (4,) and np.allclose(line, medians(quantity), atol=1e-6)]
    assert len(rope) == 2, (lines, medians(quantity))  # its line and its dots
    values = np.concatenate(lines)
    lo, hi = float(np.nanmin(values)), float(np.nanmax(values))
    assert shown["start"] <= lo and hi <= shown["end"], (shown["start"], shown["end"], lo, hi)
    assert shown["end"] - shown["start"] <= 1.5 * (hi - lo), (shown["start"], shown["end"], lo, hi)
    assert shown["title"] == f"median {quantity} per layer"


def assert_c_range_misses_rho(shown: dict) -> None:
    """The test means something: with c shown, the y range leaves some of the rho medians off the chart."""
    rho = medians("rho")
    assert ((rho < shown["start"]) | (rho > shown["end"])).any(), (shown["start"], shown["end"], rho)


def drawn(page) -> None:
    """Wait until the histogram panels are laid out and two more frames are painted (a change relays them)."""
    wait_js(page, "const v = Bokeh.index.find_one(find('compare_hist_d'));"
                  " return v != null && v.frame.bbox.width > 0;", timeout=30_000)
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")


def assert_legend_covers_no_bar(page, models: tuple[str, str]) -> None:
    drawn(page)
    panels = js(page, PANELS_JS)
    named = [(p["panel"], box, labels) for p in panels for box, labels in zip(p["legends"], p["labels"],
                                                                             strict=True)]
    assert len(named) == 1 and named[0][2] == list(models), named  # one legend, naming the two models shown
    _, (l0, t0, r0, b0), _ = named[0]
    panel = next(p for p in panels if p["panel"] == named[0][0])
    assert len(panel["bars"]) > 4  # the panel draws bars
    covered = [b for b in panel["bars"] if min(r0, b[2]) - max(l0, b[0]) > 0.5 and min(b0, b[3]) - max(t0, b[1]) > 0.5]
    assert not covered, f"the legend {[l0, t0, r0, b0]} covers {len(covered)} bars of {named[0][0]}: {covered[:3]}"


@pytest.fixture(scope="module")
def exported(exported_site):
    """The compare page of the session's exported site."""
    return exported_site / "compare.html"


def open_exported(browser, path, query: str = ""):
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    errors = console_errors(page)
    route_offline(page)
    page.goto(path.as_uri() + query)
    wait_for_bokeh(page, "compare_depth")
    return page, errors


def test_exported_quantity_chosen_puts_the_medians_on_the_chart(browser, exported):
    page, errors = open_exported(browser, exported)
    assert_c_range_misses_rho(depth(page))
    set_prop(page, "compare_quantity", "value", "rho")  # the chooser's callbacks run as the value changes
    assert_on_the_chart(depth(page), "rho")
    set_prop(page, "compare_quantity", "value", "a")  # and back to a coordinate
    assert_on_the_chart(depth(page), "a")
    assert not errors, errors


def test_exported_link_with_quantity_rho_puts_the_medians_on_the_chart(browser, exported):
    page, errors = open_exported(browser, exported, f"?tab=compare&models={ABSOLUTE_MODEL},{ROPE_MODEL}&quantity=rho")
    wait_js(page, "return find('compare_quantity').value === 'rho';")
    assert_on_the_chart(depth(page), "rho")
    assert not errors, errors


def test_exported_histograms_legend_covers_no_bar(browser, exported):
    page, errors = open_exported(browser, exported)
    shown = (model_prop(page, "compare_model_1", "value"), model_prop(page, "compare_model_2", "value"))
    assert_legend_covers_no_bar(page, shown)
    set_prop(page, "compare_model_1", "value", shown[1])  # the same model twice: its bars under both colours
    assert_legend_covers_no_bar(page, (shown[1], shown[1]))
    assert not errors, errors


def test_served_link_and_chooser_put_the_medians_on_the_chart_and_the_legend_beside_the_bars(browser, served_app):
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    errors = console_errors(page)
    route_offline(page)
    page.goto(served_app + f"?tab=compare&models={ABSOLUTE_MODEL},{ROPE_MODEL}&quantity=rho", wait_until="commit")
    wait_for_bokeh(page, "compare_depth", timeout=120_000)  # a server's first compare tab is built on demand
    wait_js(page, "return find('compare_quantity').value === 'rho';", timeout=30_000)
    assert_on_the_chart(depth(page), "rho")
    set_prop(page, "compare_quantity", "value", "pairing")
    assert_on_the_chart(depth(page), "pairing")
    assert_legend_covers_no_bar(page, (ABSOLUTE_MODEL, ROPE_MODEL))
    assert not errors, errors
