"""The compare page: every computed model of the store side by side, from ``compare.views``.

``compare_view`` renders ``compare.views.compare_depth`` (per-layer medians against relative depth, one line
per computed model) and ``compare.views.compare_histograms`` (two models' coordinate histograms overlaid), with
choosers whose browser code (``dashboard/compare/js/compare_*.js``) swaps in numbers computed here once: the medians
of every coordinate (d = 0) and statistic for every model, and every model's histograms. The same layout
works served (the app's Compare tab) and as ``compare.html`` of an export. The choosers are part of the deep
link, ``?tab=compare&models=A,B&quantity=rho`` (``compare_url.js``): the layout's ``tags`` hold the CustomJS
``url_restore`` that applies it once the document is ready (``page_widgets.restore_on_ready``), and a
chooser's change writes it back.
"""

from __future__ import annotations

import html

import numpy as np
import xarray as xr
from bokeh.layouts import column, row
from bokeh.models import ColumnDataSource, CustomJS, Div, Legend, Select

from dashboard import data
from dashboard.common import geometry as g
from dashboard.common import jscode
from dashboard.common.page_models import PageModels
from dashboard.common.page_style import style
from dashboard.common.page_widgets import header, message
from dashboard.common.render import render
from dashboard.common.selection import profile_array
from dashboard.compare.views import compare_depth, compare_histograms, computed_models, depth_medians, median_column
from pipeline.schema import COORDINATES, STATISTICS

DEFAULT_QUANTITY = "c"


def compare_view(ds: xr.Dataset, damaged=()):
    """The compare page over the profiles Dataset ``ds`` (every model), as a Bokeh layout. ``damaged``: names
    that a read check (``data.rows``) found damaged; they are left out, like a model whose chunks cannot be read."""
    sheet = style()
    names, unreadable = [], []
    for name in computed_models(ds):
        if name in damaged:
            unreadable.append(name)
            continue
        try:
            profile_array(ds.sel(model=name))
            names.append(name)
        except Exception:  # noqa: BLE001 - a damaged chunk: its own page says how to repair it
            unreadable.append(name)
    top = header("Compare models", name="compare_header", width=900, sheet=sheet)
    if not names:
        return column(top, Div(text="<p>No computed model in the store yet.</p>", stylesheets=[sheet],
                               name="compare_none"), name="compare_page")
    quantities = [*COORDINATES, *STATISTICS]
    depth = render(compare_depth(ds, names, quantity=DEFAULT_QUANTITY, width=640))
    lines = [depth.select_one({"name": f"compare_{kind}_{k}"}) for k in range(len(names)) for kind in ("line", "dots")]
    medians = {}
    for k, name in enumerate(names):
        for q in quantities:
            got = depth_medians(ds, name, q)
            n = len(lines[2 * k].data["relative depth"])
            medians[f"{k}|{q}"] = (np.asarray(got[1], dtype=float) if got is not None else np.full(n, np.nan))
    models = Div(text="<p class='meta' id='compare_models'>Computed models: " + ", ".join(
        f"<b>{html.escape(n)}</b>" for n in names) + "".join(
        f"; <b>{html.escape(n)}</b> left out: its stored profiles are damaged or cannot be read "
        "(the index says how to repair it)"
        for n in unreadable) + "</p>", stylesheets=[sheet], width=900, name="compare_models")
    quantity = Select(title="quantity (coordinates at d = 0; statistics)", options=quantities,
                      value=DEFAULT_QUANTITY, width=260, name="compare_quantity")
    # the medians in one source of equal-length columns would need padding: one source per model instead
    sources = [ColumnDataSource({q: medians[f"{k}|{q}"] for q in quantities}, name=f"compare_medians_{k}")
               for k in range(len(names))]
    quantity.js_on_change("value", CustomJS(args=dict(ctx=PageModels(
        select=quantity, medians=sources, lines=lines, y=median_column(DEFAULT_QUANTITY),
        title=depth.title, axis=depth.yaxis[0]).args()), code=jscode.code("compare_quantity")))

    first, second = names[0], names[1] if len(names) > 1 else names[0]
    panels = [render(p) for p in compare_histograms(ds, first, second, panel_px=230)]
    bars, legend_items = [], []
    for k, p in enumerate(panels):
        c = COORDINATES[k]
        bars.append([p.select_one({"name": f"compare_hist_{c}_{j}"}) for j in range(2)])
        for legend in p.select({"type": Legend}):
            legend_items += list(legend.items)
    fractions = {}
    for name in names:
        at = profile_array(ds.sel(model=name))[:, :, 0].reshape(-1, 4)
        for k in range(4):
            counts = g.histogram_counts(at[:, k])
            fractions[f"{name}|{k}"] = counts / counts.sum() if counts.sum() else counts
    every = ColumnDataSource({key: v for key, v in fractions.items()}, name="compare_fractions")
    pick = [Select(title=f"model {j + 1}", options=names, value=v, width=300, name=f"compare_model_{j + 1}")
            for j, v in enumerate((first, second))]
    swap = CustomJS(args=dict(ctx=PageModels(picks=pick, bars=bars, every=every, items=legend_items).args()),
                    code=jscode.code("compare_models"))
    for s in pick:
        s.js_on_change("value", swap)
    url_note = Div(text="", stylesheets=[sheet], width=900, name="compare_url_note", visible=False)
    link = PageModels(picks=pick, quantity=quantity, url_note=url_note).args()
    write = CustomJS(args=dict(ctx=link), code=jscode.code("url_note", "compare_url", "compare_url_write"))
    for s in [quantity, *pick]:
        s.js_on_change("value", write)
    restore = CustomJS(args=dict(ctx=link), code=jscode.code("url_note", "compare_url", "compare_url_restore"),
                       name="url_restore")
    return column(top, url_note, models, quantity, depth,
                  Div(text="<h2>Two models' coordinate histograms (d = 0)</h2>", stylesheets=[sheet],
                      name="compare_hist_heading"),
                  row(*pick), row(*panels), name="compare_page", tags=[restore])


def compare_content(store, shown: str | None = None):
    """The compare page (``compare_view``) over the store's models, or a message."""
    try:
        ds = data.profiles(store)
    except data.StoreError as exc:
        text = str(exc).replace(str(store), shown) if shown else str(exc)
        return column(header("Compare models", name="compare_header"),
                      message(html.escape(text), "error", name="compare_store_error"), name="compare_page")
    return compare_view(ds, damaged={r.name for r in data.rows(store) if r.damaged})
