"""The profiles page's views beyond the tetrahedron, the heat maps and the histograms, linked in the browser.

``more_views`` renders, from ``dashboard.profiles``' views: the a = 0 face (its heads selected with the tetrahedron's,
by index), the layer x type map, the per-head statistic heat map with a chooser and its Gaussian baseline,
the parity spectra and the head inspector. Their browser code is in ``dashboard/profiles/js/page_views.js``: at every
d the face and the layer x type map are recomputed from the heads' decoded profiles and types; a selection
(a tap on a head in the tetrahedron, the face or the statistic heat map) fills the inspector with the first
selected head, from data shipped once with the page (its spectrum and statistics, its profile over d from the
page's profile cube), so the same layout works served and in a static file.

A model without statistics (a store written before them) shows "statistics not computed" with the command
that adds them, in place of the statistic heat map, the parity spectra and the inspector's spectrum (drawn
hidden from stand-in values, so that every model's page holds the same models: the served app switches
models by changing data, ``rendered.replace_in_place``).
"""

from __future__ import annotations

import html

import numpy as np
import xarray as xr
from bokeh.layouts import column, row
from bokeh.models import (
    BoxZoomTool,
    ColumnDataSource,
    Div,
    Legend,
    LegendItem,
    PanTool,
    SaveTool,
    Select,
    TapTool,
    WheelZoomTool,
)

from dashboard.common import geometry as g
from dashboard.common import jscode
from dashboard.common.page_models import PageModels
from dashboard.common.page_widgets import name_ranges, static
from dashboard.common.render import Named, render
from dashboard.common.selection import spectrum_array, statistics_note, statistics_table
from dashboard.profiles.payload import pack_spectra
from dashboard.profiles.spectral import layer_type_map, parity_spectra_figure, symmetric_face
from dashboard.profiles.statistics import baseline_html, head_inspector, statistic_heatmap
from pipeline.schema import COORDINATES, STATISTICS

DEFAULT_STATISTIC = "symmetric_energy"
INSPECTOR_PX = 380  # the inspector's figures: their longest titles fit


def _face(shown: xr.Dataset, heads: ColumnDataSource, sheet):
    """The a = 0 face, its source ``face_heads`` selected with ``heads`` (both ways), a legend with the counts."""
    fig = render(symmetric_face(shown, d=0, size=330))
    fig.name = "face"
    fig.sizing_mode = None  # sized by its frame: "fixed" would ask for width and height
    # a fixed triangle: selection, hover and reset; no zoom, pan or save (their models in every session)
    fig.tools = [t for t in fig.tools if not isinstance(t, (WheelZoomTool, PanTool, BoxZoomTool, SaveTool))]
    named = Named(fig)
    src, dots, old = named["face_heads"], named["face_dots"], named.get("face_legend")
    if old is not None:
        fig.center = [x for x in fig.center if x is not old]
    types = np.asarray(heads.data["type"])
    firsts = [int(np.flatnonzero(types == k)[0]) if (types == k).any() else 0 for k in range(3)]
    legend = Legend(items=[LegendItem(label=label, renderers=[dots], index=firsts[k], name=f"face_legend_item{k}",
                                      visible=bool((types == k).any()))
                           for k, label in enumerate(g.type_labels(types))],
                    location="center", orientation="horizontal", name="face_legend", label_text_font_size="8pt",
                    glyph_width=12, label_standoff=3, spacing=6, padding=4, margin=4, border_line_color=None)
    fig.add_layout(legend, "below")  # inside the triangle's frame it covered the "b = 1" vertex label
    link = jscode.callback(dict(a=heads, b=src), "selection_link")
    back = jscode.callback(dict(a=src, b=heads), "selection_link")
    heads.selected.js_on_change("indices", link)
    src.selected.js_on_change("indices", back)
    return fig, src, legend


def _layer_types(shown: xr.Dataset):
    fig = render(layer_type_map(shown, d=0, width=300))
    fig.name = "layer_types"
    return fig, Named(fig)["layer_types_image"]


def _statistic(shown: xr.Dataset, stats: dict[str, np.ndarray], heads: ColumnDataSource, meta: ColumnDataSource,
               sheet):
    """The statistic heat map, its chooser ``stat_select`` and the baseline sentence beside it."""
    img_el, _ = list(statistic_heatmap(shown, DEFAULT_STATISTIC, width=420))
    fig = render(img_el)
    fig.name = "statistic_map"
    named = Named(fig)
    image, source, mapper = (named[n] for n in ("statistic_heatmap", "statistic_image", "statistic_colours"))
    baseline = Div(text=baseline_html(shown, DEFAULT_STATISTIC, stats[DEFAULT_STATISTIC]), width=260,
                   stylesheets=[sheet], name="statistic_baseline")
    choose = Select(title="statistic (d = 0)", options=list(STATISTICS), value=DEFAULT_STATISTIC, width=220,
                    name="stat_select")
    every = ColumnDataSource({k: v.reshape(-1).astype(np.float32) for k, v in stats.items()},
                             name="statistics_all")
    texts = ColumnDataSource({k: [baseline_html(shown, k, v)] for k, v in stats.items()},
                             name="statistic_texts")
    choose.js_on_change("value", jscode.callback(dict(ctx=PageModels(
        statistic_select=choose, head_statistics=every, statistic_image=source, statistic_colours=mapper,
        statistic_title=fig.title, statistic_baseline=baseline, baseline_texts=texts).args()), "statistic_choose"))
    fig.add_tools(TapTool(renderers=[image]))
    fig.js_on_event("tap", jscode.callback(dict(heads=heads, meta=meta), "statistic_tap"))
    name_ranges(fig, "statistic_map")
    return column(choose, row(fig, baseline), name="statistics_area"), choose, every


def _placeholder(shown: xr.Dataset) -> xr.Dataset:
    """``shown`` with stand-in statistics and spectra (drawn hidden where a model has none of its own), and
    two offsets of a rotary form (the inspector's curves, hidden for a model without positions): every
    page then holds the same models, so the served app switches models by changing data."""
    L, H = int(shown.sizes["layer"]), int(shown.sizes["head"])
    out = shown.drop_vars([v for v in ("head_statistics", "spectrum") if v in shown])
    out = out.drop_dims([d for d in ("statistic", "eigen") if d in out.dims])
    return out.assign(head_statistics=(("layer", "head", "statistic"), np.full((L, H, len(STATISTICS)), 0.5)),
                      spectrum=(("layer", "head", "eigen"), np.tile([0.5, 0.5, -0.5, -0.5], (L, H, 1))))\
        .assign_coords(statistic=list(STATISTICS), eigen=np.arange(4))


def _inspector(shown: xr.Dataset, rotary: bool, baseline: xr.Dataset | None):
    """The head inspector of head (0, 0), with its parts named for page_views.js; the curves over d hidden
    for a model without positions (``shown`` then holds two stand-in offsets); with ``baseline``, the head's
    percentiles among its heads in the table (page_views.js reads them from the heads' source)."""
    parts = [render(element) for element in head_inspector(shown, 0, 0, d=0, width=INSPECTOR_PX,
                                                          baseline=baseline)]
    spectrum, table_box, curves = parts
    table = Named(table_box)["inspector_table"]
    table_box.name = "inspector_table_box"
    table.height = table.row_height * (len(table.source.data["statistic"]) + 1) + 4  # every row without scrolling
    name_ranges(spectrum, "inspector_spectrum")
    curves.visible = rotary
    name_ranges(curves, "inspector_curves")
    ups, overs = Named(spectrum), Named(curves)
    named = dict(inspector_statistics=table.source, inspector_spectrum_title=spectrum.title,
                 inspector_curves_title=curves.title, inspector_up=ups["inspector_up"],
                 inspector_down=ups["inspector_down"],
                 inspector_curves=[overs[f"inspector_curve_{c}"] for c in COORDINATES],
                 inspector_d=overs["inspector_d"])
    title = Div(text="<h2>Head inspector</h2><p class='note'>Tap a head in any view (or select some): the "
                     "first selected head is shown. Now: layer 0, head 0.</p>", width=INSPECTOR_PX + 10,
                name="inspector_title")
    return title, parts, named


def _spectra_sources(spectra: np.ndarray) -> dict[str, ColumnDataSource]:
    """Every head's S spectrum for the inspector, packed (``payload.pack_spectra``): the codes and the scales."""
    packed, scale = pack_spectra(spectra.reshape(-1, spectra.shape[-1]))
    return dict(head_spectra=ColumnDataSource(dict(s=packed), name="inspector_spectra"),
                head_spectrum_scales=ColumnDataSource(dict(scale=scale), name="inspector_spectrum_scales"))


def _parity(shown: xr.Dataset):
    """The parity spectra as one figure (``spectral.parity_spectra_figure``), its ranges named."""
    fig = render(parity_spectra_figure(shown, width=760))
    name_ranges(fig, "parity")
    return fig


def more_views(shown: xr.Dataset, page: PageModels, sheet, rotary: bool, baseline: xr.Dataset | None = None) -> tuple:
    """The second part of the page, ``page`` with the models its browser code needs (page_views.js) added,
    and the statistic chooser. ``page``: the page's models so far, of which the heads and ``profile_meta``
    (sizes the browser reads) are used here; ``rotary``: the model's form depends on position (the inspector
    draws a, b, c, d over d); ``baseline``: one of the model's random baselines (the inspector gives the head's
    percentiles among its heads), or None.

    Every model's page holds the same models: where the model has no statistics, the views that need them
    are drawn hidden from stand-in values and "statistics not computed" shows with the command."""
    missing = statistics_table(shown) is None or spectrum_array(shown) is None
    drawn = _placeholder(shown) if missing else shown
    stats, spectra = statistics_table(drawn), spectrum_array(drawn)
    heads, meta = page.heads, page.profile_meta
    face, face_src, face_legend = _face(shown, heads, sheet)
    name_ranges(face, "face")
    lt_fig, lt_src = _layer_types(shown)
    name_ranges(lt_fig, "layer_types")
    curves_from = drawn
    if not rotary:  # two stand-in offsets of a rotary form: the inspector draws its curves (hidden)
        curves_from = drawn.isel(d=[0, 0]) if "d" in drawn.dims else drawn.expand_dims(d=2)
        curves_from = curves_from.assign(positional="rope")
    insp_title, insp_parts, named = _inspector(curves_from, rotary, None if missing else baseline)
    note = statistics_note(shown)
    missing_divs = [Div(text=note, width=420, stylesheets=[sheet], name=n, visible=missing)
                    for n in ("statistics_missing", "parity_missing", "inspector_missing")]
    for part in insp_parts:
        if part.name in ("inspector_spectrum", "inspector_table_box"):
            part.visible = not missing
    stat_area, choose, every = _statistic(drawn, stats, heads, meta, sheet)
    stat_area.visible = not missing
    parity = _parity(drawn)
    parity.visible = not missing
    for fig in [lt_fig, *[p for p in insp_parts if hasattr(p, "renderers")], parity]:
        static(fig)
    page = page.but(face_heads=face_src, face_legend=face_legend, face_vertex_xy=g.FACE_VERTICES.ravel().tolist(),
                    type_colors=list(g.TYPE_COLORS), type_markers=list(g.TYPE_MARKERS), layer_types_image=lt_src,
                    layer_types_title=lt_fig.title, inspector_title=insp_title, head_statistics=every, **named,
                    **_spectra_sources(spectra))
    heading = lambda text, name: Div(text=f"<h2>{html.escape(text)}</h2>", stylesheets=[sheet], name=name)  # noqa: E731
    layout = column(
        row(column(heading("Spectral types", "types_heading"), row(face, lt_fig)),
            column(heading("Per-head statistics", "statistics_heading"), missing_divs[0], stat_area),
            name="types_row"),
        row(column(insp_title, missing_divs[2], *insp_parts, name="inspector"),
            column(heading("Parity spectra: the 30 most extreme heads of each type (d = 0)", "parity_heading"),
                   missing_divs[1], parity), name="inspector_row"),
        name="more_views")
    return layout, page, choose
