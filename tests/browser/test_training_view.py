"""The training view in Chromium: a run's page exported (file://, the CDN answered from the installed files) and
served, from the training view's store (tests/dashboard/training_store.py). The step slider moves the dots and their
trails, the d slider and the trails' length redraw them, play advances the step, a tapped row inspects its head, the
deep link ``?tab=training&step=S&head=L.H`` round-trips; no page logs a console error."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pytest

from dashboard.common import geometry as g
from dashboard.export import profile_page_name
from dashboard.training import frames as tf
from dashboard.training import runs
from dashboard.training import views as tv
from pipeline.schema import STATISTICS
from tests.browser.conftest import (
    console_errors,
    js,
    model_data,
    model_prop,
    route_offline,
    serve_app,
    set_prop,
    stop,
    wait_for_bokeh,
    wait_for_column,
    wait_for_drawn,
    wait_for_link,
    wait_js,
)
from tests.dashboard.training_store import RUN, RUN_SHAPE, RUN_STEPS, write_training_store
from tests.shared import built_once, exported_once

pytestmark = pytest.mark.browser

L, H = RUN_SHAPE


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return built_once(tmp_path_factory, "dashboard-training",
                      lambda folder: write_training_store(folder / "store.zarr")) / "store.zarr"


@pytest.fixture(scope="module")
def shown(store) -> np.ndarray:
    """(F, heads, D, 2): where the page draws every head at every frame and offset: its 12-bit profile projected."""
    frames = tf.run_frames(runs.run(store, RUN), RUN)
    codes = tf.frame_codes(frames.profile)
    values = np.where(codes == tf.FRAME_NAN, np.nan, codes / tf.FRAME_SCALE)
    F, _, _, D, _ = values.shape
    return (values @ tv.vertex_xy()).reshape(F, L * H, D, 2)


@pytest.fixture(scope="module")
def site(tmp_path_factory, store):
    return exported_once(tmp_path_factory, "training-export", store)[0]


def open_page(browser, url: str):
    page = browser.new_page(viewport={"width": 1450, "height": 1200})
    errors = console_errors(page)
    route_offline(page)
    page.goto(url)
    wait_for_bokeh(page, "training_step")
    return page, errors


@pytest.fixture(scope="module")
def run_page(browser, site):
    page, errors = open_page(browser, (site / profile_page_name(RUN)).as_uri() + "?tab=training")
    wait_for_drawn(page)
    yield page, errors
    page.close()


def trail_lengths(page) -> list[int]:
    return js(page, "return find('training_trails').data.xs.map((a) => a.length);")


def test_the_step_slider_moves_the_dots_and_their_trails(run_page, shown):
    page, errors = run_page
    F = len(RUN_STEPS)
    assert model_prop(page, "training_step", "value") == F - 1  # the trained model first
    for f in (3, 11):
        set_prop(page, "training_step", "value", f)
        wait_for_column(page, "training_dots", "x", shown[f, :, 0, 0], atol=1e-12)
        np.testing.assert_allclose(np.array(model_data(page, "training_dots", "y"), dtype=float), shown[f, :, 0, 1],
                                   atol=1e-12)
        assert trail_lengths(page) == [f + 1] * (L * H)  # every frame from the first, by default
        xs = js(page, "return Array.from(find('training_trails').data.xs[5]);")
        np.testing.assert_allclose(xs, shown[:f + 1, 5, 0, 0], atol=1e-12)
        wait_for_prop_text(page, "training_info", f"step {RUN_STEPS[f]}")
    set_prop(page, "training_trail", "value", 2)
    wait_js(page, "return find('training_trails').data.xs.every((a) => a.length === 3);")
    set_prop(page, "training_d", "value", 40)
    wait_for_column(page, "training_dots", "x", shown[11, :, 40, 0], atol=1e-12)
    xs = js(page, "return Array.from(find('training_trails').data.xs[0]);")
    np.testing.assert_allclose(xs, shown[9:12, 0, 40, 0], atol=1e-12)
    set_prop(page, "training_d", "value", 0)
    set_prop(page, "training_trail", "value", 0)
    assert errors == []


def wait_for_prop_text(page, name: str, part: str) -> None:
    wait_js(page, "const m = find(arg[0]); return m != null && m.text.includes(arg[1]);", [name, part])


def test_play_advances_the_step_and_pause_stops_it(run_page):
    page, errors = run_page
    set_prop(page, "training_interval_ms", "value", 30)
    set_prop(page, "training_step", "value", 0)
    set_prop(page, "training_play", "active", True)
    wait_js(page, "return find('training_step').value >= 3;")
    wait_for_prop_text(page, "training_info", "step ")
    set_prop(page, "training_play", "active", False)
    wait_js(page, "return Object.values(window.__movies || {}).every((st) => st.timer === null);")
    stopped = model_prop(page, "training_step", "value")
    page.wait_for_timeout(200)  # a paused movie stays where it is: nothing to await but time passing
    assert model_prop(page, "training_step", "value") == stopped
    assert errors == []


def test_a_row_of_the_movers_table_inspects_its_head(run_page):
    page, errors = run_page
    rows = model_data(page, "training_movers_rows", "index")
    js(page, "find('training_movers_rows').selected.indices = [2];")
    wait_js(page, "return Array.from(find('training_dots').selected.indices).join() === String(arg);", rows[2])
    label = f"{rows[2] // H}.{rows[2] % H}"
    wait_for_prop_text(page, "training_head_title", f"head {label}")
    wait_for_link(page, f"head={label}")
    assert errors == []


def test_the_statistic_and_the_colours_redraw_from_what_the_page_holds(run_page, store, shown):
    page, errors = run_page
    frames = tf.run_frames(runs.run(store, RUN), RUN)
    set_prop(page, "training_statistic", "value", "rho")
    k = STATISTICS.index("rho")
    wait_for_column(page, "training_q_median", "symmetric_energy", tf.quantiles(frames.statistics)[k, :, 2],
                    rtol=1e-6, atol=1e-7)  # the column keeps the first statistic's name; float32 values
    head = js(page, "return find('training_meta').data.head[0];")
    wait_for_column(page, "training_head_statistic", "symmetric_energy",
                    frames.statistics[:, head // H, head % H, k], rtol=1e-6, atol=1e-7)
    wait_for_prop_text(page, "training_quantile_title", "rho (d = 0)")
    f = model_prop(page, "training_step", "value")
    set_prop(page, "training_colour", "active", 1)
    codes = tf.frame_codes(frames.profile)[f, :, :, 0].reshape(L * H, 4) / tf.FRAME_SCALE
    kinds = g.spectral_types(codes)
    wait_js(page, "return JSON.stringify(find('training_dots').data.color) === JSON.stringify(arg);",
            [g.TYPE_COLORS[t] for t in kinds])
    assert [model_prop(page, f"training_legend_{m}", "visible") for m in ("layer", "type", "cluster")] == [
        False, True, False]
    set_prop(page, "training_colour", "active", 0)
    set_prop(page, "training_statistic", "value", "symmetric_energy")
    assert errors == []


def test_an_exported_deep_link_round_trips(browser, site):
    f, head = 7, (1, 2)
    page, errors = open_page(browser, (site / profile_page_name(RUN)).as_uri()
                             + f"?tab=training&step={RUN_STEPS[f]}&head={head[0]}.{head[1]}")
    wait_js(page, "return find('training_step').value === arg;", f)
    wait_js(page, "return Array.from(find('training_dots').selected.indices).join() === String(arg);",
            head[0] * H + head[1])
    wait_for_prop_text(page, "training_head_title", "head 1.2")
    set_prop(page, "training_step", "value", 12)
    wait_for_link(page, f"step={RUN_STEPS[12]}")
    q = dict(parse_qsl(urlsplit(page.url).query))
    assert (q["model"], q["tab"], q["step"], q["head"]) == (RUN, "training", str(RUN_STEPS[12]), "1.2")
    url = page.url
    page.close()
    page, errors2 = open_page(browser, url)
    wait_js(page, "return find('training_step').value === 12;")
    wait_for_prop_text(page, "training_head_title", "head 1.2")
    page.close()
    page, errors3 = open_page(browser, (site / profile_page_name(RUN)).as_uri() + "?tab=training&step=7&head=9.9")
    wait_for_prop_text(page, "training_url_note", "step = <code>7</code> is not a step")
    assert "head = <code>9.9</code> is not a head" in model_prop(page, "training_url_note", "text")
    page.close()
    assert errors == [] and errors2 == [] and errors3 == []


def test_a_served_deep_link_round_trips_and_a_step_change_sends_no_frame(browser, store, shown):
    proc, url = serve_app(store)
    try:
        page = browser.new_page(viewport={"width": 1450, "height": 1200})
        errors = console_errors(page)
        route_offline(page)
        sent: list[str] = []
        page.on("websocket", lambda ws: ws.on("framesent", lambda p: sent.append(p if isinstance(p, str) else "?")))
        page.goto(url + f"?model={RUN}&tab=training&step={RUN_STEPS[5]}&head=0.3")
        wait_for_bokeh(page, "training_step")
        wait_js(page, "return find('training_step').value === 5;", timeout=30_000)
        wait_for_prop_text(page, "training_head_title", "head 0.3")
        wait_for_column(page, "training_dots", "x", shown[5, :, 0, 0], atol=1e-12)
        wait_for_drawn(page)
        before = len(sent)
        set_prop(page, "training_step", "value", 9)
        wait_for_column(page, "training_dots", "x", shown[9, :, 0, 0], atol=1e-12)
        wait_for_link(page, f"step={RUN_STEPS[9]}")
        step_frames = sent[before:]
        # the slider's value goes to the server, and nothing of the frame (the rewritten sources are not synced)
        assert step_frames and all('"training_dots"' not in s and '"xs"' not in s for s in step_frames), step_frames
        assert sum(len(s) for s in step_frames) < 2_000, [s[:300] for s in step_frames]
        q = dict(parse_qsl(urlsplit(page.url).query))
        assert (q["model"], q["tab"], q["step"], q["head"]) == (RUN, "training", str(RUN_STEPS[9]), "0.3")
        assert errors == []
        page.close()
    finally:
        stop(proc)
