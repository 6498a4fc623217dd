"""The compare page: every computed model of the store side by side, from ``compare.views``.

``compare_view`` renders ``compare.views.compare_depth`` (per-layer medians against relative depth, one line
per computed model) and ``compare.views.compare_histograms`` (two models' coordinate histograms overlaid), with
choosers whose browser code (``dashboard/compare/js/compare_*.js``) swaps in numbers computed here once: the
medians of every coordinate (d = 0) and statistic for every model with the y range that spans them, and every
model's histograms. The same layout
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
from bokeh.models import ColumnDataSource, Div, Plot, Select

from dashboard import data
from dashboard.common import geometry as g
from dashboard.common import jscode
from dashboard.common.page_models import PageModels
from dashboard.common.page_style import style
from dashboard.common.page_widgets import header, message
from dashboard.common.render import Named, render
from dashboard.common.selection import profile_array
from dashboard.compare.views import (
    QUANTITIES,
    compare_depth,
    compare_histograms,
    computed_models,
    depth_medians,
    median_column,
    median_range,
)
from pipeline.schema import COORDINATES

DEFAULT_QUANTITY = "c"


DRAWN = ("profile", "head_statistics", "n_layers", "n_heads")  # the variables the page reads, at d = 0


def _readable(ds: xr.Dataset, rows) -> tuple[xr.Dataset | None, list[str], list[str]]:
    """(the computed models whose profiles can be read, with the variables the page draws at d = 0 read into
    memory once: every median and histogram below is numpy on them; their names; those left out: damaged or
    unreadable). A model's chunks hold every offset, so reading d = 0 reads, and checks, all of them."""
    kept, names, unreadable = [], [], []
    damaged = [r.name for r in rows or () if r.computed and r.damaged and not r.baseline_of]
    for name in [*computed_models(ds, rows), *damaged]:
        if name in damaged:
            unreadable.append(name)
            continue
        sel = ds[[v for v in DRAWN if v in ds]].sel(model=[name])
        try:
            kept.append((sel.isel(d=[0]) if "d" in sel.dims else sel).load())
            names.append(name)
        except Exception:  # noqa: BLE001 - a damaged chunk: its own page says how to repair it
            unreadable.append(name)
    return (xr.concat(kept, dim="model") if kept else None), names, unreadable


def _depth(ds: xr.Dataset, names: list[str]) -> tuple[Plot, Select]:
    """The medians per layer of every model (``compare_depth``) and the quantity chooser, whose browser code
    swaps in the medians of the chosen quantity, computed here for every one, and their y range."""
    depth = render(compare_depth(ds, names, quantity=DEFAULT_QUANTITY, width=640))
    named = Named(depth)
    lines = [named[f"compare_{kind}_{k}"] for k in range(len(names)) for kind in ("line", "dots")]
    medians = {}
    for k, name in enumerate(names):
        n = len(lines[2 * k].data["relative depth"])
        for q in QUANTITIES:
            got = depth_medians(ds, name, q)
            medians[f"{k}|{q}"] = np.asarray(got[1], dtype=float) if got is not None else np.full(n, np.nan)
    quantity = Select(title="quantity (coordinates at d = 0; statistics)", options=list(QUANTITIES),
                      value=DEFAULT_QUANTITY, width=260, name="compare_quantity")
    # the medians in one source of equal-length columns would need padding: one source per model instead
    sources = [ColumnDataSource({q: medians[f"{k}|{q}"] for q in QUANTITIES}, name=f"compare_medians_{k}")
               for k in range(len(names))]
    ranges = ColumnDataSource({q: list(median_range([medians[f"{k}|{q}"] for k in range(len(names))]))
                               for q in QUANTITIES}, name="compare_median_ranges")
    quantity.js_on_change("value", jscode.callback(dict(ctx=PageModels(
        quantity_select=quantity, model_medians=sources, depth_lines=lines,
        median_column=median_column(DEFAULT_QUANTITY), depth_title=depth.title, depth_y_axis=depth.yaxis[0],
        depth_y_range=depth.y_range, median_ranges=ranges).args()), "compare_quantity"))
    return depth, quantity


def _histograms(ds: xr.Dataset, names: list[str]) -> tuple[list[Plot], list[Select]]:
    """Two models' histograms (``compare_histograms``; the first two models) and the two model choosers,
    whose browser code swaps in the chosen models' fractions, computed here for every model."""
    first, second = names[0], names[1] if len(names) > 1 else names[0]
    panels = [render(p) for p in compare_histograms(ds, first, second)]
    named = Named(*panels)
    bars = [[named[f"compare_hist_{c}_{j}"] for j in range(2)] for c in COORDINATES]
    fractions = {}
    for name in names:
        at = profile_array(ds.sel(model=name))[:, :, 0].reshape(-1, 4)
        for k in range(4):
            counts = g.histogram_counts(at[:, k])
            fractions[f"{name}|{k}"] = counts / counts.sum() if counts.sum() else counts
    pick = [Select(title=f"model {j + 1}", options=names, value=v, width=300, name=f"compare_model_{j + 1}")
            for j, v in enumerate((first, second))]
    swap = jscode.callback(dict(ctx=PageModels(
        model_selects=pick, model_bars=bars, model_fractions=ColumnDataSource(fractions, name="compare_fractions"),
        legend_items=[named[f"compare_legend_item{j}"] for j in range(2)]).args()),
        "compare_models")
    for s in pick:
        s.js_on_change("value", swap)
    return panels, pick


def compare_view(ds: xr.Dataset, rows=None):
    """The compare page over the profiles Dataset ``ds`` (every model), as a Bokeh layout. ``rows``: its models
    as a read check gave them (``data.rows``, cached per store state; default: read from ``ds``); those found
    damaged are left out, like a model whose chunks cannot be read."""
    sheet = style()
    ds, names, unreadable = _readable(ds, rows)
    top = header("Compare models", name="compare_header", width=900, sheet=sheet)
    if not names:
        return column(top, Div(text="<p>No computed model in the store yet.</p>", stylesheets=[sheet],
                               name="compare_none"), name="compare_page")
    models = Div(text="<p class='meta' id='compare_models'>Computed models: " + ", ".join(
        f"<b>{html.escape(n)}</b>" for n in names) + "".join(
        f"; <b>{html.escape(n)}</b> left out: its stored profiles are damaged or cannot be read "
        "(the index says how to repair it)"
        for n in unreadable) + "</p>", stylesheets=[sheet], width=900, name="compare_models")
    depth, quantity = _depth(ds, names)
    panels, pick = _histograms(ds, names)
    url_note = Div(text="", stylesheets=[sheet], width=900, name="compare_url_note", visible=False)
    link = dict(ctx=PageModels(model_selects=pick, quantity_select=quantity, url_note=url_note).args())
    write = jscode.callback(link, "url_note", "compare_url", "compare_url_write")
    for s in [quantity, *pick]:
        s.js_on_change("value", write)
    restore = jscode.callback(link, "url_note", "compare_url", "compare_url_restore", name="url_restore")
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
    return compare_view(ds, rows=data.rows(store))
