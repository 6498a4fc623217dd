"""The orbits movie in headless chromium, from a static HTML file opened with file:// (no server), and the
tetrahedron beside it on the served and the exported page.

The view is written alone into a page with INLINE resources (the test runs offline) and a short interval; the
JavaScript's per-frame output is compared with its Python twin ``frame_state``. The tetrahedron's dots and
trails at each frame are compared with the run's ``head_profile`` projected in Python (``screen``), on the
page ``panel serve dashboard/app.py`` serves and on the one the exporter writes (the session's store).
"""

from __future__ import annotations

import io

import numpy as np
import pytest

from dashboard.export import bokeh_resources, page_html
from dashboard.orbits import frames as of
from dashboard.orbits.page import RECORD_FRAMES_JS, frame_state, orbits_view
from tests.browser.conftest import (
    ORBIT_FRAMES,
    POLL_MS,
    TRAIL_EPOCHS,
    console_errors,
    model_data,
    next_paint,
    orbits_with_profiles,
    route_offline,
    set_prop,
    wait_for_bokeh,
    wait_for_drawn,
    wait_js,
)
from tests.dashboard.test_dashboard_orbits import screen

pytestmark = pytest.mark.browser

INTERVAL_MS = 40
HOLD_MS = 500

# the movie is paused: no next frame is pending (common/js/movie_play.js keeps its timer on window.__movies)
MOVIE_STOPPED = "() => Object.values(window.__movies || {}).every(st => st.timer === null)"
# record the delay of every setTimeout the page asks for in window.__delays, until UNRECORD_DELAYS
RECORD_DELAYS = ("() => { window.__delays = []; const set = window.__setTimeout = window.setTimeout;"
                 " window.setTimeout = (f, ms, ...a) => { window.__delays.push(ms); return set(f, ms, ...a); }; }")
UNRECORD_DELAYS = "() => { window.setTimeout = window.__setTimeout; }"
READY = "() => window.Bokeh && Bokeh.documents.length > 0 && Bokeh.documents[0].get_model_by_name('orbits_frame')"
MODEL = "(name) => Bokeh.documents[0].get_model_by_name(name)"


@pytest.fixture(scope="module")
def movie_page(browser, tmp_path_factory):
    """The movie alone in a static page with BokehJS inlined (as the exporter writes pages: no Panel bundles)."""
    path = tmp_path_factory.mktemp("orbits") / "orbits.html"
    view = orbits_view(orbits_with_profiles(), interval_ms=INTERVAL_MS, hold_ms=HOLD_MS)
    path.write_text(page_html(view, "orbits", bokeh_resources(True)), encoding="utf-8")
    page = browser.new_page(viewport={"width": 1100, "height": 800})
    errors = console_errors(page)
    page.goto(path.as_uri())
    page.wait_for_function(READY, timeout=30_000, polling=POLL_MS)
    wait_for_drawn(page)
    yield page, errors
    page.close()


def _pause_at(page, frame: int) -> None:
    page.evaluate(f"() => {{ ({MODEL})('orbits_play').active = false; ({MODEL})('orbits_frame').value = {frame}; }}")


def _frame(page) -> int:
    return page.evaluate(f"() => ({MODEL})('orbits_frame').value")


def test_plots_exist_and_draw_the_dots(movie_page):
    page, errors = movie_page
    names = page.evaluate("() => [...Bokeh.documents[0].all_models].filter(m => m.type == 'Figure').length")
    assert names == 4 + 1 + 2  # four Fourier planes, the tetrahedron and the two metrics charts
    from PIL import Image

    png = Image.open(io.BytesIO(page.screenshot(full_page=True))).convert("RGB")
    px = np.asarray(png).reshape(-1, 3).astype(int)
    for colour in ("#1f77b4", "#ff7f0e", "#2ca02c"):  # the three orbits of the synthetic data
        rgb = np.array([int(colour[i: i + 2], 16) for i in (1, 3, 5)])
        assert (np.abs(px - rgb).sum(axis=1) < 12).sum() > 200, f"no dots of colour {colour} drawn"
    assert _frame(page) == ORBIT_FRAMES - 1  # opens on the trained state
    assert errors == []


def test_movie_advances_holds_the_last_frame_and_loops(movie_page):
    page, errors = movie_page
    _pause_at(page, ORBIT_FRAMES - 1)
    page.evaluate(RECORD_FRAMES_JS)
    page.get_by_role("button", name="▶ Play").click()
    # wait until it has played through the last frame and come back round past frame 2
    page.wait_for_function(
        f"() => {{ const v = window.__orbitsFrames.map(r => r[0]); const i = v.indexOf({ORBIT_FRAMES - 1}, 1);"
        " return i > 0 && v.slice(i).includes(2); }", timeout=15_000, polling=POLL_MS)
    page.get_by_role("button", name="❚❚ Pause").click()
    page.wait_for_function(MOVIE_STOPPED, polling=POLL_MS)
    rec = page.evaluate("() => window.__orbitsFrames")
    values = [int(v) for v, _ in rec]
    assert values[0] == 0  # pressed at the last frame: restarts from the first
    first_last = values.index(ORBIT_FRAMES - 1)
    assert values[: first_last + 1] == list(range(ORBIT_FRAMES))  # one frame at a time, none skipped
    assert values[first_last + 1: first_last + 4] == [0, 1, 2]  # the loop
    times = {i: t for i, (_, t) in enumerate(rec)}
    held = times[first_last + 1] - times[first_last]
    step = np.median(np.diff([times[i] for i in range(first_last + 1)]))
    assert held >= HOLD_MS - 20, f"last frame shown {held:.0f} ms, expected the {HOLD_MS} ms hold"
    assert step >= INTERVAL_MS - 5, f"median frame interval {step:.0f} ms, shorter than the {INTERVAL_MS} ms asked"
    paused_at = _frame(page)
    next_paint(page)
    assert _frame(page) == paused_at
    assert errors == []


def test_interval_is_read_from_the_spinner_at_every_tick(movie_page):
    page, errors = movie_page
    _pause_at(page, 0)
    page.evaluate(f"() => {{ ({MODEL})('orbits_interval_ms').value = 100000; }}")
    page.evaluate(RECORD_DELAYS)
    page.get_by_role("button", name="▶ Play").click()
    # the movie's next frame is 100 s away (at the built-in 40 ms it would have moved on)
    page.wait_for_function("() => window.__delays.includes(100000)", polling=POLL_MS)
    page.evaluate(UNRECORD_DELAYS)
    assert _frame(page) == 0
    page.get_by_role("button", name="❚❚ Pause").click()
    page.evaluate(f"() => {{ ({MODEL})('orbits_interval_ms').value = {INTERVAL_MS}; }}")
    page.get_by_role("button", name="▶ Play").click()
    page.wait_for_function(f"() => ({MODEL})('orbits_frame').value >= 2", timeout=10_000, polling=POLL_MS)
    page.get_by_role("button", name="❚❚ Pause").click()
    assert errors == []


@pytest.mark.parametrize("frame", [0, 1, 5])
def test_each_frame_matches_its_python_twin(movie_page, frame):
    """Step buttons and the slider drive the dots, trails, axis ranges and metrics line as frame_state says."""
    page, errors = movie_page
    _pause_at(page, frame + 1)
    page.get_by_role("button", name="◀").click()  # step back lands on `frame`
    assert _frame(page) == frame
    ds = orbits_with_profiles()
    pos = of.positions(ds)
    starts = of.trail_starts(ds["epoch"].values, TRAIL_EPOCHS)
    radii = of.view_radii(pos, starts)
    for p in range(4):
        got = page.evaluate(
            f"""() => {{ const d = ({MODEL})('orbits_dots_{p}').data, t = ({MODEL})('orbits_trails_{p}').data;
                 const fig = [...Bokeh.documents[0].all_models].filter(m => m.type == 'Figure')[{p}];
                 return {{head: [...d.head], x: [...d.x], y: [...d.y], xs: t.xs.map(a => [...a]),
                          ys: t.ys.map(a => [...a]), xr: [fig.x_range.start, fig.x_range.end],
                          yr: [fig.y_range.start, fig.y_range.end]}}; }}""")
        dots, trails, r = frame_state(pos, starts, radii, frame, p)
        heads = got["head"]
        np.testing.assert_allclose(got["x"], dots[heads, 0], rtol=1e-6)
        np.testing.assert_allclose(got["y"], dots[heads, 1], rtol=1e-6)
        for i, h in enumerate(heads):
            np.testing.assert_allclose(got["xs"][i], trails[h][:, 0], rtol=1e-6)
            np.testing.assert_allclose(got["ys"][i], trails[h][:, 1], rtol=1e-6)
        np.testing.assert_allclose(got["xr"], [-r, r], rtol=1e-6)
        np.testing.assert_allclose(got["yr"], [-r, r], rtol=1e-6)
    info = page.evaluate(f"() => ({MODEL})('orbits_info').text")
    acc = ds["train_accuracy"].values[frame]
    assert f"<b>epoch {ds['epoch'].values[frame]}</b>" in info and f"{100 * acc:.1f}%" in info
    sharp = float(ds["sharpened_error"].values[frame])  # the error at 2x QK, formatted as the page's num()
    assert f"(at 2× QK {sharp:.2e})" in info if sharp < 1e-3 else f"(at 2× QK {sharp:.4f})" in info
    assert errors == []


# ------------------------------------------------------------------- the tetrahedron, served and exported


@pytest.fixture(scope="module", params=["served", "exported"])
def tetra_page(request, browser, served_app, exported_inline):
    """The orbits page over the session's store (its orbits group is ``orbits_with_profiles``): served by
    ``panel serve`` (the Orbits tab) or written by the exporter (self-contained)."""
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    errors = console_errors(page)
    route_offline(page)
    if request.param == "served":
        page.goto(served_app)
        wait_for_bokeh(page, "heads")
        page.get_by_text("Orbits", exact=True).first.click()
    else:
        page.goto((exported_inline / "orbits.html").as_uri())
    wait_for_bokeh(page, "orbits_tetra_dots")
    wait_for_drawn(page)
    yield page, errors
    page.close()


def _tetra_at(page) -> dict:
    got = {c: np.array(model_data(page, "orbits_tetra_dots", c), dtype=float) for c in ("x", "y", *"abcd")}
    got["head"] = np.array(model_data(page, "orbits_tetra_dots", "head"), dtype=int)
    got["xs"] = [np.array(t, dtype=float) for t in model_data(page, "orbits_tetra_trails", "xs")]
    got["ys"] = [np.array(t, dtype=float) for t in model_data(page, "orbits_tetra_trails", "ys")]
    return got


def test_tetrahedron_dots_and_trails_move_with_the_frame(tetra_page):
    """Step the movie frame by frame: the dots are head_profile at that frame projected in Python (screen), the
    trails the frames within TRAIL_EPOCHS epochs before it; the hover's a..d follow."""
    page, errors = tetra_page
    ds = orbits_with_profiles()
    prof = ds["head_profile"].sel(coordinate=["a", "b", "c", "d"]).values
    xy = screen(prof)
    epochs = ds["epoch"].values
    set_prop(page, "orbits_frame", "value", 6)
    shown = []
    for frame in (5, 4, 0):  # the step-back button, then the slider
        if frame:
            page.get_by_role("button", name="◀").click()
        else:
            set_prop(page, "orbits_frame", "value", 0)
        wait_js(page, "return find('orbits_frame').value === arg;", frame)
        wait_js(page, "const d = find('orbits_tetra_dots').data;"  # the dots of this frame (dead heads: NaN)
                " return Array.from(d.head).every((h, i) => arg[h] === null ? Number.isNaN(d.x[i])"
                " : Math.abs(d.x[i] - arg[h]) <= 1e-6 * (1 + Math.abs(arg[h])));",
                [None if np.isnan(v) else float(v) for v in xy[frame, :, 0]])
        got = _tetra_at(page)
        heads = got["head"]
        assert sorted(heads) == list(range(ds.sizes["head"]))
        np.testing.assert_allclose(got["x"], xy[frame, heads, 0], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got["y"], xy[frame, heads, 1], rtol=1e-6, atol=1e-6)
        for k, c in enumerate("abcd"):
            np.testing.assert_allclose(got[c], prof[frame, heads, k], rtol=1e-6, atol=1e-7)
        within = [g for g in range(frame + 1) if epochs[frame] - epochs[g] <= TRAIL_EPOCHS]
        for i, h in enumerate(heads):
            np.testing.assert_allclose(got["xs"][i], xy[within, h, 0], rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(got["ys"][i], xy[within, h, 1], rtol=1e-6, atol=1e-6)
        shown.append(got["x"])
    assert not np.allclose(shown[0], shown[2], equal_nan=True)  # the dots moved
    assert errors == []
