"""The served app renders its pages on a thread of its own (``dashboard.rendered.Pages``) while its event loop serves
the sessions: what a rendering does to Bokeh's process-wide state must not reach the other thread.

- HoloViews' renderer attaches each plot to a document; ``bokeh.io.curdoc()``, which it used, is the document Bokeh
  has patched in for the session callback running on the event loop at that moment. The pages' renderer gives each
  plot a document of its own: a session's document keeps its theme and its callbacks.
- HoloViews switches Bokeh's property validation off while it fills each glyph's data source
  (``bokeh.core.properties.validate(False)``), and that switch was process-wide: Bokeh's serializer on the event loop
  then sent a glyph's field as a constant (``{"type": "value", "value": {"type": "field", ...}}``), which BokehJS
  could not draw ("Error rendering Bokeh items: TypeError: n is not iterable"). Once ``Pages`` has started its
  thread, the switch holds in the thread that flips it only.

The browser's side of it, loads of a served app, is tests/browser/test_served_loads.py.
"""

from __future__ import annotations

import threading

import holoviews as hv
from bokeh.core.properties import validate
from bokeh.core.property import bases
from bokeh.core.serialization import Serializer
from bokeh.document import Document
from bokeh.io.doc import patch_curdoc
from bokeh.models import Scatter
from bokeh.themes import Theme

from dashboard.common.render import render
from dashboard.rendered import Pages


def test_a_view_rendered_on_another_thread_leaves_the_current_document_alone():
    """As a session's callback runs on the event loop (its document patched in as ``curdoc()``), a view rendered on
    another thread: the session's document keeps its theme, gains no callback, and the plot is in no document."""
    session = Document()
    theme = Theme(json={"attrs": {"Title": {"text_color": "red"}}})
    session.theme = theme
    out = []
    with patch_curdoc(session):
        worker = threading.Thread(target=lambda: out.append(render(hv.Curve([(0, 0), (1, 1)]).opts(title="t"))))
        worker.start()
        worker.join()
    fig = out[0]
    assert session.theme is theme
    assert session.session_destroyed_callbacks == set()
    assert session.roots == [] and fig.document is None


def field_color_form() -> dict:
    """How Bokeh's serializer writes a glyph whose fill colour is the column ``c``."""
    rep = Serializer().encode(Scatter(fill_color="c"))
    return rep["attributes"]["fill_color"]


def test_a_thread_that_switches_validation_off_does_not_switch_it_off_for_the_others():
    """Once a ``Pages`` has started its thread: another thread holds ``validate(False)`` open (as HoloViews does
    around each data source it fills) while this one checks validation and serialises a field colour."""
    pages = Pages()
    started = threading.Event()
    pages.warm(lambda: (started.set(), [])[1])  # starts the pages' thread and runs there
    assert started.wait(30)
    assert field_color_form() == {"type": "field", "field": "c"}

    inside, leave = threading.Event(), threading.Event()
    seen_inside = []

    def switched_off() -> None:
        with validate(False):
            seen_inside.append(bases.validation_on())
            inside.set()
            leave.wait(30)

    worker = threading.Thread(target=switched_off)
    worker.start()
    try:
        assert inside.wait(30)
        assert bases.validation_on()  # read from its module: the dashboard may replace it
        assert field_color_form() == {"type": "field", "field": "c"}
    finally:
        leave.set()
        worker.join()
    assert seen_inside == [False]  # in its own thread the switch holds
    assert bases.validation_on()
