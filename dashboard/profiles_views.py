"""The profiles page's views beyond the tetrahedron, the heat maps and the histograms, linked in the browser.

``more_views`` renders, from ``dashboard.views``: the a = 0 face (its heads selected with the tetrahedron's,
by index), the layer x type map, the per-head statistic heat map with a chooser and its Gaussian baseline,
the parity spectra and the head inspector. Their browser code is in ``dashboard/js/page_views.js``: at every
d the face and the layer x type map are recomputed from the heads' decoded profiles and types; a selection
(a tap on a head in the tetrahedron, the face or the statistic heat map) fills the inspector with the first
selected head, from data shipped once with the page (its spectrum and statistics, its profile over d from the
page's profile cube), so the same layout works served and in a static file.

A model without statistics (a store written before them) shows "statistics not computed" with the command
that adds them, in place of the statistic heat map, the parity spectra and the inspector's spectrum (drawn
hidden from stand-in values, so that every model's page holds the same models: the served app switches
models by changing data, ``profiles_page.replace_in_place``).
"""

from __future__ import annotations

import html

import numpy as np
import xarray as xr
from bokeh.layouts import column, row
from bokeh.models import (
    Axis,
    BoxSelectTool,
    BoxZoomTool,
    ColumnDataSource,
    CustomJS,
    DataTable,
    Div,
    GlyphRenderer,
    Grid,
    LassoSelectTool,
    Legend,
    LegendItem,
    PanTool,
    SaveTool,
    Select,
    Span,
    TapTool,
    WheelZoomTool,
)

from dashboard import geometry as g
from dashboard import jscode, views
from dashboard.page_models import PageModels
from pipeline.schema import STATISTICS

DEFAULT_STATISTIC = "symmetric_energy"
INSPECTOR_PX = 380  # the inspector's figures: their longest titles fit


def lean(fig, selectable: list) -> None:
    """Only the ``selectable`` renderers (the heads) take part in box and lasso selections, and the figure
    keeps only the glyphs it draws: every other renderer drops the copies of its glyph for selected,
    unselected and muted data, the selectable ones their muted copy, and what draws nothing goes (empty
    legends, hidden axes, grids without lines). About 60 fewer models for every session to build, walk and
    send (``benchmarks/dashboard_bench.py``)."""
    for tool in fig.tools:
        if isinstance(tool, (BoxSelectTool, LassoSelectTool)):
            tool.renderers = list(selectable)
    for r in fig.renderers:
        if isinstance(r, GlyphRenderer):
            r.muted_glyph = "auto"
            if r not in selectable:
                r.selection_glyph = r.nonselection_glyph = "auto"
    for side in ("center", "above", "below", "left", "right"):
        kept = [x for x in getattr(fig, side) if not _draws_nothing(x)]
        if len(kept) != len(getattr(fig, side)):
            setattr(fig, side, kept)


def _draws_nothing(annotation) -> bool:
    """An empty legend, a hidden axis, or a grid with neither lines nor bands (the tetrahedron's)."""
    if isinstance(annotation, Legend):
        return not annotation.items
    if isinstance(annotation, Axis):
        return not annotation.visible
    if isinstance(annotation, Grid):
        return not annotation.visible or (annotation.grid_line_color is None and annotation.minor_grid_line_color
                                          is None and annotation.band_fill_color is None)
    return False


def _glyphs(fig, kind: str) -> list[GlyphRenderer]:
    return [r for r in fig.renderers if isinstance(r, GlyphRenderer) and type(r.glyph).__name__ == kind]


def _face(shown: xr.Dataset, heads: ColumnDataSource, sheet):
    """The a = 0 face, its source ``face_heads`` selected with ``heads`` (both ways), a legend with the counts."""
    fig = views.render(views.symmetric_face(shown, d=0, size=330))
    fig.name = "face"
    fig.sizing_mode = None  # sized by its frame: "fixed" would ask for width and height
    # a fixed triangle: selection, hover and reset; no zoom, pan or save (their models in every session)
    fig.tools = [t for t in fig.tools if not isinstance(t, (WheelZoomTool, PanTool, BoxZoomTool, SaveTool))]
    src = fig.select_one({"name": "face_heads"})
    dots = fig.select_one({"name": "face_dots"})
    old = fig.select_one({"name": "face_legend"})
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
    link = CustomJS(args=dict(a=heads, b=src), code=jscode.code("selection_link"))
    back = CustomJS(args=dict(a=src, b=heads), code=jscode.code("selection_link"))
    heads.selected.js_on_change("indices", link)
    src.selected.js_on_change("indices", back)
    return fig, src, legend


def _layer_types(shown: xr.Dataset):
    fig = views.render(views.layer_type_map(shown, d=0, width=300))
    fig.name = "layer_types"
    image = _glyphs(fig, "Image")[0]
    image.data_source.name = "layer_types_image"
    return fig, image.data_source


def _statistic(shown: xr.Dataset, stats: dict[str, np.ndarray], heads: ColumnDataSource, meta: ColumnDataSource,
               sheet):
    """The statistic heat map, its chooser ``stat_select`` and the baseline sentence beside it."""
    img_el, _ = list(views.statistic_heatmap(shown, DEFAULT_STATISTIC, width=420))
    fig = views.render(img_el)
    fig.name = "statistic_map"
    image = _glyphs(fig, "Image")[0]
    image.data_source.name = "statistic_image"
    mapper = image.glyph.color_mapper
    mapper.name = "statistic_colours"
    baseline = Div(text=views.baseline_html(shown, DEFAULT_STATISTIC, stats[DEFAULT_STATISTIC]), width=260,
                   stylesheets=[sheet], name="statistic_baseline")
    choose = Select(title="statistic (d = 0)", options=list(STATISTICS), value=DEFAULT_STATISTIC, width=220,
                    name="stat_select")
    every = ColumnDataSource({k: v.reshape(-1).astype(np.float32) for k, v in stats.items()},
                             name="statistics_all")
    texts = ColumnDataSource({k: [views.baseline_html(shown, k, v)] for k, v in stats.items()},
                             name="statistic_texts")
    choose.js_on_change("value", CustomJS(args=dict(ctx=PageModels(
        select=choose, every=every, image=image.data_source, mapper=mapper, title=fig.title, baseline=baseline,
        texts=texts).args()), code=jscode.code("statistic_choose")))
    fig.add_tools(TapTool(renderers=[image]))
    fig.js_on_event("tap", CustomJS(args=dict(heads=heads, meta=meta), code=jscode.code("statistic_tap")))
    _name_ranges(fig, "statistic_map")
    return column(choose, row(fig, baseline), name="statistics_area"), choose, every


def _name_ranges(fig, prefix: str) -> None:
    """Name a figure's ranges and title, so the served app's in-place model switch gives them the new values."""
    fig.x_range.name, fig.y_range.name = f"{prefix}_x", f"{prefix}_y"
    if fig.title is not None:
        fig.title.name = f"{prefix}_title"


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


def _inspector(shown: xr.Dataset, rotary: bool):
    """The head inspector of head (0, 0), with its parts named for page_views.js; the curves over d hidden
    for a model without positions (``shown`` then holds two stand-in offsets)."""
    parts, named = [], {}
    for element in views.head_inspector(shown, 0, 0, d=0, width=INSPECTOR_PX):
        p = views.render(element)
        parts.append(p)
        tables = list(p.select({"type": DataTable}))
        if isinstance(p, DataTable) or tables:
            table = p if isinstance(p, DataTable) else next(iter(tables))
            table.name, table.source.name, p.name = "inspector_table", "inspector_statistics", "inspector_table_box"
            table.height = table.row_height * (len(STATISTICS) + 1) + 4  # every statistic without scrolling
            named["table"] = table.source
            continue
        quads, lines = _glyphs(p, "Quad"), _glyphs(p, "Line")
        if quads:
            p.name = "inspector_spectrum"
            _name_ranges(p, "inspector_spectrum")
            for q in quads:
                q.data_source.name = "inspector_up" if q.glyph.fill_color == "#d62728" else "inspector_down"
                named["up" if q.data_source.name == "inspector_up" else "down"] = q.data_source
            named["spectrum_title"] = p.title
        elif lines:
            p.name = "inspector_curves"
            p.visible = rotary
            _name_ranges(p, "inspector_curves")
            for k, r in enumerate(lines):
                r.data_source.name = f"inspector_curve_{g.COORDS[k]}"
            named["curves"] = [r.data_source for r in lines]
            named["vline"] = list(p.select({"type": Span}))[0]
            named["vline"].name = "inspector_d"
            named["curves_title"] = p.title
    title = Div(text="<h2>Head inspector</h2><p class='note'>Tap a head in any view (or select some): the "
                     "first selected head is shown. Now: layer 0, head 0.</p>", width=INSPECTOR_PX + 10,
                name="inspector_title")
    return title, parts, named


def _parity(shown: xr.Dataset):
    """The parity spectra as one figure (``views.parity_spectra_figure``), every model and range named."""
    fig = views.render(views.parity_spectra_figure(shown, width=760))
    fig.name = "parity_spectra"
    _name_ranges(fig, "parity")
    for r in fig.renderers:
        if isinstance(r, GlyphRenderer):
            kind = type(r.glyph).__name__.lower()
            if kind == "quad":
                kind = "negative" if r.glyph.fill_color == "#1f77b4" else "positive"
            r.name, r.data_source.name = f"parity_{kind}", f"parity_{kind}_source"
    return fig


def _static(fig) -> None:
    """A figure that only shows numbers (no selection, no zoom): no tools, and only the glyphs it draws
    (``lean``): fewer models for every served session to copy, walk and send."""
    fig.tools = []
    fig.toolbar_location = None
    lean(fig, [])


def more_views(shown: xr.Dataset, page: PageModels, sheet, rotary: bool) -> tuple:
    """The second part of the page, ``page`` with the models its browser code needs (page_views.js) added,
    and the statistic chooser. ``page``: the page's models so far, of which the heads, the profile cube and
    ``meta`` (the page's ``profile_meta``: sizes the browser reads) are used here; ``rotary``: the model's
    form depends on position (the inspector draws a, b, c, d over d).

    Every model's page holds the same models: where the model has no statistics, the views that need them
    are drawn hidden from stand-in values and "statistics not computed" shows with the command."""
    missing = views.statistics_table(shown) is None or views.spectrum_array(shown) is None
    drawn = _placeholder(shown) if missing else shown
    stats, spectra = views.statistics_table(drawn), views.spectrum_array(drawn)
    heads, meta = page.heads, page.meta
    face, face_src, face_legend = _face(shown, heads, sheet)
    _name_ranges(face, "face")
    lt_fig, lt_src = _layer_types(shown)
    _name_ranges(lt_fig, "layer_types")
    curves_from = drawn
    if not rotary:  # two stand-in offsets of a rotary form: the inspector draws its curves (hidden)
        curves_from = drawn.isel(d=[0, 0]) if "d" in drawn.dims else drawn.expand_dims(d=2)
        curves_from = curves_from.assign(positional="rope")
    insp_title, insp_parts, named = _inspector(curves_from, rotary)
    note = views.statistics_note(shown)
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
        _static(fig)
    page = page.but(face=face_src, face_legend=face_legend, face_vertices=g.FACE_VERTICES.ravel().tolist(),
                    type_colors=list(g.TYPE_COLORS), type_markers=list(g.TYPE_MARKERS), lt=lt_src,
                    lt_title=lt_fig.title, insp_title=insp_title, every=every, **named,
                    spectra=ColumnDataSource(dict(s=spectra.reshape(-1).astype(np.float32)),
                                             name="inspector_spectra"))
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
