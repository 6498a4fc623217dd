"""The served app's Python side: a session's document holds the rendered page as it is, without Panel's
per-session walk over the page's models (bokeh_internals.PagePane)."""

from __future__ import annotations

import panel as pn
import pytest
from bokeh.document import Document
from bokeh.model import Model
from bokeh.models import CustomJS

from dashboard import app, data, rendered
from dashboard.bokeh_internals import PagePane
from tests.browser.conftest import ABSOLUTE_MODEL, ROPE_MODEL
from tests.shared import SYNTHETIC_PAGES

pytestmark = SYNTHETIC_PAGES


def walks_of(root: Model, make_pane) -> int:
    """How often the page ``root`` is walked (Model.references) while a session's document is built around it."""
    count = 0
    original = Model.references

    def counting(self):
        nonlocal count
        count += self is root
        return original(self)

    Model.references = counting
    try:
        pn.Column(make_pane(root)).get_root(Document())
    finally:
        Model.references = original
    return count


def test_the_page_pane_hands_the_page_over_without_walking_it(synthetic):
    page = rendered.profiles(synthetic, ROPE_MODEL)
    code = [js.code for js in page.root.select({"type": CustomJS})]
    doc = Document()
    pn.Column(PagePane(page.root)).server_doc(doc)
    assert page.root in doc.roots[0].children and page.root.document is doc
    assert [js.code for js in page.root.select({"type": CustomJS})] == code
    # Panel's own pane walks every model of the page once more for every session; ours does not
    assert walks_of(rendered.profiles(synthetic, ROPE_MODEL).root, pn.pane.Bokeh) >= 1
    assert walks_of(rendered.profiles(synthetic, ROPE_MODEL).root, PagePane) == 0


def test_no_page_draws_with_webgl(synthetic):
    """The served page leaves out BokehJS's WebGL bundle (app.UNUSED_SCRIPTS): every figure of every
    page draws on a canvas."""
    from bokeh.models import Plot

    pages = (rendered.profiles(synthetic, ROPE_MODEL), rendered.profiles(synthetic, ABSOLUTE_MODEL),
             rendered.compare(synthetic), rendered.orbits(synthetic))
    backends = {p.output_backend for page in pages for p in page.root.select({"type": Plot})}
    assert backends == {"canvas"}


def test_a_session_of_the_app_serves_the_models_page(synthetic):
    state = app.AppState()
    doc = Document()
    app.build(synthetic, state).server_doc(doc)
    names = {m.name for m in doc.roots[0].references()}
    assert {"tetrahedron", "hist_all", "hist_selected", "d_slider"} <= names and state.model == ROPE_MODEL


def test_first_load_shows_a_rotary_model_and_the_link_chooses_another(synthetic):
    rows = data.rows(synthetic)
    rope = next(r for r in rows if r.name == ROPE_MODEL)
    absolute = next(r for r in rows if r.name == ABSOLUTE_MODEL)
    assert app.first_model([absolute, rope], [ABSOLUTE_MODEL, ROPE_MODEL]) == ROPE_MODEL
    assert app.first_model([absolute], [ABSOLUTE_MODEL]) == ABSOLUTE_MODEL  # none rotary: the first
    state = app.AppState()
    app.build(synthetic, state, args={"model": ABSOLUTE_MODEL, "tab": "orbits"}).server_doc(Document())
    assert state.model == ABSOLUTE_MODEL


def test_a_bad_link_is_named_in_the_note_and_the_defaults_shown(synthetic):
    state = app.AppState()
    doc = Document()
    app.build(synthetic, state, args={"model": "<i>nope</i>", "tab": "elsewhere"}).server_doc(doc)
    note = next(m for m in doc.roots[0].references() if m.name == "url_note")
    assert note.visible and "&lt;i&gt;nope&lt;/i&gt;" in note.text and "elsewhere" in note.text
    assert state.model == ROPE_MODEL
    tabs = next(m for m in doc.roots[0].references() if type(m).__name__ == "Tabs")
    assert tabs.active == 0


FRESH_PROCESS = """
import gc, json, logging
import holoviews as hv
import numpy as np
import panel as pn
from bokeh.settings import settings
def now():
    return [settings.perform_document_validation(), list(pn.config.raw_css), pn.config.browser_info,
            logging.getLogger("dashboard").level, list(gc.get_threshold())]
logging.getLogger("bokeh").setLevel(logging.DEBUG)  # as panel serve --log-level debug sets it
before = now()
import dashboard.views as v, dashboard.profiles.page, dashboard.compare.page, dashboard.orbits.page
import dashboard.export
import dashboard.app as app
imported = now()
backend = [hv.Store.current_backend, sorted(hv.Store.renderers)]
v.use_bokeh()
drawn = [hv.Store.current_backend, type(v.render(v.histograms(np.full((1, 2, 1, 4), 0.25)))).__name__]
app.serve_settings()
served = now()
print(json.dumps(dict(before=before, imported=imported, served=served, css=app.PAGE_CSS, backend=backend,
                      drawn=drawn)))
"""


@pytest.fixture(scope="module")
def fresh_process() -> dict:
    """What a new Python process sees before and after importing the dashboard's modules (the views, the pages, the
    exporter, the app), after ``use_bokeh`` and a view drawn, and after the app's ``serve_settings``: one process
    for the two tests below."""
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", FRESH_PROCESS], capture_output=True, text=True, timeout=300,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_the_app_changes_no_global_setting_and_serving_does(fresh_process):
    """A notebook or test that imports dashboard.app keeps Bokeh's document validation, Panel's CSS, its
    BrowserInfo model, the level of the app's logger and the garbage collector's thresholds; the app script's
    serve_settings (run by panel serve) switches validation and BrowserInfo off (nothing reads it; on, every page
    sends its seven fields back after loading), adds the page CSS, gives the app's logger Bokeh's level and makes
    the collector run less often."""
    from dashboard.collector import GC_THRESHOLDS

    got = fresh_process
    assert got["before"][0] is True and got["css"] not in got["before"][1]
    assert got["imported"] == got["before"]
    assert got["served"][0] is False and got["css"] in got["served"][1]
    assert got["before"][2] is True and got["served"][2] is False
    assert got["before"][3] == 0 and got["served"][3] == 10  # NOTSET; DEBUG, the level Bokeh's logger has
    assert got["before"][4] == [700, 10, 10] and got["served"][4] == list(GC_THRESHOLDS)  # Python's; the app's


def test_importing_the_dashboard_leaves_holoviews_backend_as_it_was(fresh_process):
    """Importing the views, the pages and the serve layer sets no HoloViews backend (a process-wide setting);
    ``use_bokeh`` does, and the views then draw."""
    assert fresh_process["backend"] == ["matplotlib", []], fresh_process
    assert fresh_process["drawn"] == ["bokeh", "figure"], fresh_process


@pytest.mark.slow
def test_python_m_dashboard_builds_every_first_page_at_start(synthetic):
    """``python -m dashboard`` (``panel serve --warm``) builds, with no session open, the profiles page a plain link
    shows, the compare page and the orbits page (its log names each), and nothing fails. The warm-up runs on the
    pages' thread after the script's first run has ended, so it must not use that run's module (Bokeh clears it)."""
    import subprocess
    import sys
    import threading

    from tests.browser.conftest import free_port

    proc = subprocess.Popen([sys.executable, "-m", "dashboard", "--port", str(free_port()), "--store", str(synthetic)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, wanted = [], (f"built the profiles page of {ROPE_MODEL}", "built the compare page", "built the orbits page")
    done = threading.Event()

    def read() -> None:  # until every page is built, a failure is logged, or the server ends
        for line in proc.stdout:
            lines.append(line)
            if "failed" in line or all(any(w in x for x in lines) for w in wanted):
                break
        done.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert done.wait(180), "".join(lines)
    finally:
        proc.kill()
        proc.wait()
    log = "".join(lines)
    assert "failed" not in log and "Traceback" not in log, log
    assert all(w in log for w in wanted), log
