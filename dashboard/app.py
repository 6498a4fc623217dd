"""The served dashboard: ``panel serve dashboard/app.py [--args --store PATH]`` (or ``python -m dashboard``).

A thin Panel shell over the Bokeh layouts of ``profiles_page`` and ``orbits_page`` (the same ones the
static exporter writes), with a model selector that rebuilds the profiles view on the server. Every
interaction inside a view runs in the browser.

The store is chosen only at start-up: ``--store PATH`` after ``--args``, else $HEADGEOMETRY_STORE, else
the committed store.zarr. URL query parameters are ignored. Bind to localhost (``python -m dashboard``
does; with ``panel serve`` pass ``--address 127.0.0.1``).
"""

from __future__ import annotations

import html
import logging
import sys

import panel as pn
from bokeh.layouts import column

from dashboard import data
from dashboard.export import orbits_content
from dashboard.profiles_page import CSS, header, message, not_computed_html, profiles_view

TITLE = "Attention-head geometry"

pn.extension(raw_css=[CSS.replace(":host", "body")], design="bootstrap", notifications=False)


def _error_view(title: str, text: str):
    return column(header(title), message(html.escape(text), "error", name="store_error"))


def profiles_panel(store) -> pn.viewable.Viewable:
    """The model selector and the profiles view of the chosen model (or the store's problem)."""
    try:
        ds = data.profiles(store)
        models = data.summaries(ds)
    except data.StoreError as exc:
        return pn.pane.Bokeh(_error_view("Profiles of attention heads", str(exc)))
    computed = [m for m in models if m.computed]
    if not computed:
        body = "The store holds no computed model yet. " + (not_computed_html(models) or
                                                             "Compute one with <code>python -m pipeline profiles "
                                                             "MODEL</code>.")
        return pn.pane.Bokeh(column(header("Profiles of attention heads"), message(body, name="no_models")))
    by_name = {m.name: m for m in models}
    labels = {(m.name if m.computed else f"{m.name} (not computed)"): m.name for m in models}
    select = pn.widgets.Select(label="Model", options=labels, value=computed[0].name, width=340)
    pane = pn.pane.Bokeh()

    def show(name: str) -> None:
        m = by_name[name]
        pane.object = profiles_view(m, data.model_profile(ds, m), models=models)

    select.param.watch(lambda ev: show(ev.new), "value")
    show(select.value)
    return pn.Column(select, pane, name="Profiles")


def orbits_panel(store) -> pn.viewable.Viewable:
    content = orbits_content(store)
    return content if isinstance(content, pn.viewable.Viewable) else pn.pane.Bokeh(content)


def guarded(make, title: str, store) -> pn.viewable.Viewable:
    """One tab, or a message if drawing it fails: a bug in one view never blanks the whole app.

    Store problems the user can fix come as StoreError messages from the views themselves; anything else
    is unexpected, so its traceback goes to the server's log and the page says where to find it.
    """
    try:
        return make(store)
    except Exception as exc:  # noqa: BLE001 - shown on the page, logged in full
        logging.getLogger("dashboard").exception("drawing %s failed", title)
        return pn.pane.Bokeh(_error_view(title, f"this view could not be drawn from {store}: "
                                                f"{type(exc).__name__}: {exc}. The full traceback is in the "
                                                "server's log; please report it with the store."))


def build(store) -> pn.template.BaseTemplate:
    """The whole served page over ``store``: a Profiles tab and an Orbits tab."""
    tmpl = pn.template.BootstrapTemplate(title=TITLE, header_background="#1f2a3a")
    tabs = (("Profiles", guarded(profiles_panel, "Profiles of attention heads", store)),
            ("Orbits", guarded(orbits_panel, "Orbits of C24", store)))
    tmpl.main.append(pn.Tabs(*tabs, dynamic=True))
    tmpl.main.append(pn.pane.HTML(f"<p class='meta'>Store: <code>{html.escape(str(store))}</code></p>",
                                  name="store_path"))
    return tmpl


if __name__.startswith("bokeh"):  # run by `panel serve`: the store comes from argv after --args, never the URL
    build(data.store_path(sys.argv[1:])).servable(title=TITLE)
