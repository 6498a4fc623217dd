"""The compare page: every computed model of the store side by side, from ``dashboard.views``.

``compare_view`` renders ``views.compare_depth`` (per-layer medians against relative depth, one line per
computed model) and ``views.compare_histograms`` (two models' coordinate histograms overlaid), with
choosers whose browser code (``dashboard/js/compare_*.js``) swaps in numbers computed here once: the medians
of every coordinate (d = 0) and statistic for every model, and every model's histograms. The same layout
works served (the app's Compare tab) and as ``compare.html`` of an export. The choosers are part of the deep
link, ``?tab=compare&models=A,B&quantity=rho`` (``compare_url.js``): the layout's ``tags`` hold the CustomJS
``url_restore`` that applies it once the document is ready (``profiles_page.restore_on_ready``), and a
chooser's change writes it back.
"""

from __future__ import annotations

import html

import numpy as np
import xarray as xr
from bokeh.layouts import column, row
from bokeh.models import ColumnDataSource, CustomJS, Div, GlyphRenderer, Legend, Select

from dashboard import data, jscode, views
from dashboard import geometry as g
from dashboard.page_models import PageModels
from dashboard.profiles_page import header, message
from dashboard.stylesheet import style
from pipeline.schema import STATISTICS

DEFAULT_QUANTITY = "c"


def _field(spec) -> str:
    return spec if isinstance(spec, str) else spec.field


def compare_view(ds: xr.Dataset, damaged=()):
    """The compare page over the profiles Dataset ``ds`` (every model), as a Bokeh layout. ``damaged``: names
    that a read check (``data.rows``) found damaged; they are left out, like a model whose chunks cannot be read."""
    sheet = style()
    names, unreadable = [], []
    for name in views.computed_models(ds):
        if name in damaged:
            unreadable.append(name)
            continue
        try:
            views.profile_array(ds.sel(model=name))
            names.append(name)
        except Exception:  # noqa: BLE001 - a damaged chunk: its own page says how to repair it
            unreadable.append(name)
    top = header("Compare models", name="compare_header", width=900, sheet=sheet)
    if not names:
        return column(top, Div(text="<p>No computed model in the store yet.</p>", stylesheets=[sheet],
                               name="compare_none"), name="compare_page")
    quantities = [*g.COORDS, *STATISTICS]
    depth = views.render(views.compare_depth(ds, names, quantity=DEFAULT_QUANTITY, width=640))
    depth.name = "compare_depth"
    lines = [r for r in depth.renderers if isinstance(r, GlyphRenderer)]  # a line and its dots per model
    medians = {}
    for k, name in enumerate(names):
        for q in quantities:
            got = views.depth_medians(ds, name, q)
            n = len(lines[2 * k].data_source.data["relative depth"])
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
        select=quantity, medians=sources, lines=[r.data_source for r in lines], y=_field(lines[0].glyph.y),
        title=depth.title, axis=depth.yaxis[0]).args()), code=jscode.code("compare_quantity")))

    first, second = names[0], names[1] if len(names) > 1 else names[0]
    panels = [views.render(p) for p in views.compare_histograms(ds, first, second, panel_px=230)]
    bars, legend_items = [], []
    for k, p in enumerate(panels):
        p.name = f"compare_hist_{g.COORDS[k]}"
        quads = [r for r in p.renderers if isinstance(r, GlyphRenderer)]
        for j, r in enumerate(quads):
            r.data_source.name = f"compare_hist_{g.COORDS[k]}_{j}"
        bars.append([r.data_source for r in quads])
        for legend in p.select({"type": Legend}):
            legend_items += list(legend.items)
    fractions = {}
    for name in names:
        at = views.profile_array(ds.sel(model=name))[:, :, 0].reshape(-1, 4)
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
    """The compare page (``compare_page.compare_view``) over the store's models, or a message."""
    try:
        ds = data.profiles(store)
    except data.StoreError as exc:
        text = str(exc).replace(str(store), shown) if shown else str(exc)
        return column(header("Compare models", name="compare_header"),
                      message(html.escape(text), "error", name="compare_store_error"), name="compare_page")
    return compare_view(ds, damaged={r.name for r in data.rows(store) if r.damaged})
