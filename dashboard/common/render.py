"""HoloViews views to Bokeh models: the one switch to HoloViews' Bokeh backend, rendering one view at a
time, and the render hooks that name the Bokeh models a view makes, so that a page finds them by name.

Importing a dashboard module sets nothing process-wide. The views write Bokeh options, so HoloViews'
current backend must be Bokeh when they are called: the entry points switch to it with ``use_bokeh()``
(the served app's ``app.serve_settings``, the exporter, the tests' fixtures); a notebook calls
``use_bokeh()`` or ``hv.extension("bokeh")``, which also loads BokehJS into the notebook.

Every Bokeh model a page reads or drives is named where the view makes it, with ``name_models`` (a
render hook: the models HoloViews made for each element of a plot, by the element's group and label) or
Bokeh's ``name=``; the pages find them by name (``Named``), never by class or colour.
"""

from __future__ import annotations

import functools
import threading

import holoviews as hv
from bokeh.model import Model

_RENDER_LOCK = threading.RLock()

# A part of an element's plot that ``name_models`` names: HoloViews' handle holding it, and where it sits
# (``None``: the handle itself). ``mapper`` is the colour mapper of an element drawn with colours.
_PARTS = {"renderer": ("glyph_renderer", None), "source": ("cds", None), "glyph": ("glyph", None),
          "mapper": ("glyph", "color_mapper"), "table": ("table", None)}


def use_bokeh() -> None:
    """Make Bokeh HoloViews' current backend, registering its renderer: the views' options are Bokeh
    options. The entry points call it (see the module doc); calling it again changes nothing."""
    import holoviews.plotting.bokeh  # noqa: F401 - registers the Bokeh renderer

    hv.Store.set_current_backend("bokeh")


def render(obj):
    """``hv.render(obj)`` with Bokeh for the dashboard's pages, one call at a time (HoloViews' renderer is
    not thread-safe), drawn with Bokeh's canvas backend.

    HoloViews asks for WebGL by default; the pages draw at most a few thousand glyphs, where WebGL only
    adds a context per figure and a copy of it onto the canvas at every paint (in headless chromium,
    without a GPU, that copy took 350 ms of a page load). The pages' renderer is an instance of HoloViews'
    Bokeh renderer with ``webgl=False`` (:func:`_canvas_renderer`), so its figures keep Bokeh's canvas
    backend; notebooks keep HoloViews' default renderer.
    """
    with _RENDER_LOCK:
        return _canvas_renderer().get_plot_state(obj)


@functools.cache
def _canvas_renderer():
    """HoloViews' Bokeh renderer without WebGL, made once per process (``hv.render(obj, backend="bokeh",
    webgl=False)`` would make one per call), that attaches each plot to a new document.

    Outside a notebook HoloViews attaches a plot to ``bokeh.io.curdoc()``, sets its theme on that document and hooks
    the plot into the end of its session. In the served app ``curdoc()`` is, process-wide, the document of the session
    whose callback runs on the event loop at that moment, so a page rendered on the pages' thread
    (``dashboard.rendered``) would change that session's document from the wrong thread: HoloViews' theme on its
    titles (and the session's page serialised anew on the event loop) and a callback that holds the plot; elsewhere
    the process's own document would hold every plot rendered. As in a notebook (``notebook_context``), each plot gets
    a ``Document()`` of its own, which no page ever shows."""
    renderer = hv.renderer("bokeh").instance(webgl=False)
    renderer.notebook_context = True
    return renderer


def models_by_name(*models: Model) -> dict[str, list[Model]]:
    """The named Bokeh models reachable from ``models`` (themselves included), by name: one walk of their
    references."""
    out: dict[str, list[Model]] = {}
    for m in set().union(*(model.references() for model in models)):
        if m.name:
            out.setdefault(m.name, []).append(m)
    return out


class Named:
    """The named Bokeh models reachable from the models given (themselves included), by name, from one walk
    of their references. Where Bokeh's ``select_one({"name": n})`` gives None for a name no model carries (which a
    page would pass on into its browser code), ``named[n]`` raises, naming the names there are. Built after the
    models are named and read before the graph changes: a model added later is not in it."""

    def __init__(self, *models: Model):
        self._by_name = models_by_name(*models)

    def get(self, name: str) -> Model | None:
        """The model named ``name``; None where none is. Two models of that name raise ``ValueError``, as
        ``select_one`` does."""
        found = self._by_name.get(name, [])
        if len(found) > 1:
            raise ValueError(f"{len(found)} models are named {name!r}; a page names each model once")
        return found[0] if found else None

    def __getitem__(self, name: str) -> Model:
        found = self.get(name)
        if found is None:
            raise KeyError(f"no model named {name!r}; named here: {sorted(self._by_name)}")
        return found


def element_plots(plot, element) -> dict[str, object]:
    """The plots of the elements drawn by a HoloViews ``plot``, by element: ``"Group.label"`` for each
    labelled element and ``"Group"`` for the one element of its group; the element's group for a plot of
    one element."""
    if not getattr(plot, "subplots", None):
        return {element.group: plot}
    out, groups = {}, {}
    for sub in plot.subplots.values():
        drawn = sub.current_frame
        if drawn.label:
            out[f"{drawn.group}.{drawn.label}"] = sub
        groups.setdefault(drawn.group, []).append(sub)
    out |= {group: subs[0] for group, subs in groups.items() if len(subs) == 1}
    return out


def name_models(names: dict[str, dict[str, str]], figure: str | None = None):
    """A render hook naming the Bokeh models HoloViews made for each element: ``names`` is
    {element (``element_plots``' keys): {part: name}}, a part being ``renderer``, ``source``, ``glyph``,
    ``mapper`` (the colour mapper) or ``table`` (a table's DataTable); a line's Span is its ``glyph``;
    ``figure``: the figure's name."""
    def hook(plot, element):
        plots = element_plots(plot, element)
        for key, parts in names.items():
            if key not in plots:
                raise KeyError(f"no element {key!r} in the plot; it draws {sorted(plots)}")
            for part, name in parts.items():
                handle, attribute = _PARTS[part]
                model = plots[key].handles[handle]
                (getattr(model, attribute) if attribute else model).name = name
        if figure is not None:
            plot.state.name = figure
    return hook


def name_tools(fig, names: dict[type, str]) -> None:
    """Name the tools of ``fig`` that HoloViews made from strings (``tools=["box_select"]``), by their
    class: {Bokeh tool class: name}. Called from the render hook of the view that asked for them."""
    for tool in fig.tools:
        for cls, name in names.items():
            if isinstance(tool, cls):
                tool.name = name
