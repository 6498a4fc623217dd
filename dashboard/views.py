"""The dashboard's views as HoloViews objects, over Datasets opened from the store with xarray.

Use them in a notebook on any subset of the data::

    import holoviews as hv, xarray as xr
    import dashboard.views as v
    hv.extension("bokeh")
    ds = xr.open_zarr("store.zarr", group="profiles")
    v.tetrahedron(ds.sel(model="all-MiniLM-L6-v2"))            # drag to rotate
    v.layer_heatmaps(ds.sel(model="all-MiniLM-L6-v2")) + v.histograms(ds.sel(model="all-MiniLM-L6-v2"))
    one = ds.sel(model="SmolLM2-135M-Instruct")
    v.tetrahedron(one, d=64, color_by="type", rank_one=True)   # spectral types, the rank-one curve
    v.symmetric_face(one) + v.layer_type_map(one)              # the a = 0 face, layer x type
    v.parity_spectra(one)                                      # the most extreme heads of each type
    v.statistic_heatmap(one, "pairing")                        # a statistic per head, and its Gaussian value
    v.head_inspector(one, layer=3, head=5, d=64)               # one head: spectrum, statistics, profile over d
    v.compare_depth(ds, quantity="c") + v.compare_histograms(ds, "all-MiniLM-L6-v2", "SmolLM2-135M-Instruct")
    orb = xr.open_zarr("store.zarr", group="orbits")
    v.orbit_polygons(orb, frame=-1) + v.training_metrics(orb)
    v.orbit_tetrahedron(orb, frame=-1)                         # each head's W_K^T W_Q profile, with trails
    search = xr.open_zarr("store.zarr", group="orbits_search")
    v.hypotheses_table(search)                                 # one row per searched recipe

A profiles selection is either the Dataset of one model (``ds.sel(model=name)``: its ``n_layers`` and
``n_heads`` cut the padding) or its ``profile`` DataArray (the padding is recognised as all-NaN). Rotary
models vary with the offset ``d``; pass ``d=`` to choose one (a selection without a ``d`` dimension is
used as it is). The served app and the static pages render these same views with ``hv.render`` and add
their browser behaviour (``dashboard/js/``).

The per-head statistics and spectra (``head_statistics``, ``spectrum``: d = 0) are read when the selection
holds them; the views that need them show "statistics not computed" and the command that adds them
otherwise (a store written before them). Spectral types and their colours, the rank-one curve and the a = 0
face are computed by ``dashboard.geometry``; the i.i.d. Gaussian baselines are in ``dashboard.baselines``.
"""

from __future__ import annotations

import html
import re
import threading
import warnings

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401 - registers the Bokeh renderer, so options apply before hv.extension
import numpy as np
import xarray as xr
from bokeh.models import (
    BasicTicker,
    CDSView,
    ColorBar,
    ColumnDataSource,
    CustomJS,
    GlyphRenderer,
    GroupFilter,
    HoverTool,
    Legend,
    LegendItem,
    LinearColorMapper,
    Plot,
)
from bokeh.palettes import Viridis256

from dashboard import baselines, jscode
from dashboard import geometry as g
from dashboard import orbits_frames as of
from pipeline.schema import STATISTICS, model_rows, orbits_problems

hv.Store.set_current_backend("bokeh")  # the views are Bokeh plots: their options are Bokeh options
_RENDER_LOCK = threading.RLock()


def render(obj):
    """``hv.render(obj)`` for the dashboard's pages, one call at a time (HoloViews' renderer is not
    thread-safe), drawn with Bokeh's canvas backend.

    HoloViews asks for WebGL by default; the pages draw at most a few thousand glyphs, where WebGL only
    adds a context per figure and a copy of it onto the canvas at every paint (in headless chromium,
    without a GPU, that copy took 350 ms of a page load). Notebooks keep HoloViews' default.
    """
    with _RENDER_LOCK:
        out = hv.render(obj)
    for plot in out.select({"type": Plot}):
        plot.output_backend = "canvas"
    return out


SELECTED = "#ff5a1f"
ALL = "#8a93a3"
COORD_TITLES = ("a · antisymmetric", "b · H (±spectrum)", "c · positive semidef.", "d · negative semidef.")
NO_SEARCH = ("<p class='note'>No orbits search in this store: <code>python -m pipeline orbits search</code> "
             "adds the <code>orbits_search</code> group, and its distribution of orbit sizes appears here.</p>")


# ------------------------------------------------------------------------------------------ profiles


def profile_array(sel) -> np.ndarray:
    """(n_layers, n_heads, D, 4) float64 profile of one model without the padding (D = 1 without ``d``).

    ``sel``: the profiles Dataset of one model or its ``profile`` DataArray (see the module doc), or such an
    array already (returned as it is).
    """
    if isinstance(sel, np.ndarray) and sel.ndim == 4:
        return sel
    da = sel["profile"] if isinstance(sel, xr.Dataset) else sel
    if not isinstance(da, xr.DataArray):
        raise TypeError(f"expected an xarray Dataset or DataArray of one model's profiles, got {type(sel).__name__}")
    extra = [dim for dim in da.dims if dim not in ("layer", "head", "d", "coordinate") and da.sizes[dim] > 1]
    if extra:
        raise ValueError(f"select one model first (e.g. ds.sel(model=NAME)); the selection still has {extra}")
    da = da.squeeze([dim for dim in da.dims if dim not in ("layer", "head", "d", "coordinate")])
    if "d" not in da.dims:
        da = da.expand_dims("d")
    values = np.asarray(da.transpose("layer", "head", "d", "coordinate").values, dtype=np.float64)
    if isinstance(sel, xr.Dataset) and "n_layers" in sel and "n_heads" in sel:
        n_layers, n_heads = int(sel["n_layers"].values), int(sel["n_heads"].values)
    else:
        finite = np.isfinite(values).any(axis=(2, 3))
        n_layers = int(np.flatnonzero(finite.any(axis=1)).max() + 1) if finite.any() else 0
        n_heads = int(np.flatnonzero(finite.any(axis=0)).max() + 1) if finite.any() else 0
    return values[:n_layers, :n_heads]


def _name(sel) -> str:
    model = sel.coords.get("model") if hasattr(sel, "coords") else None
    return str(model.values) if model is not None and model.ndim == 0 else "model"


def _at(profile: np.ndarray, d: int) -> np.ndarray:
    """(L, H, 4) at offset d (clipped to the stored offsets)."""
    return profile[:, :, int(np.clip(d, 0, profile.shape[2] - 1))]


def _shape(sel) -> tuple[int, int]:
    """(n_layers, n_heads) of one model's selection."""
    p = profile_array(sel)
    return p.shape[0], p.shape[1]


def statistics_table(sel) -> dict[str, np.ndarray] | None:
    """{statistic: (n_layers, n_heads) float64} at d = 0 of one model (``ds.sel(model=...)``), or None when
    the selection holds no ``head_statistics`` (a store written before them, or a model whose statistics are
    not computed: all NaN)."""
    values = _per_head(sel, "head_statistics", "statistic")
    if values is None:
        return None
    names = [str(x) for x in sel["head_statistics"]["statistic"].values]
    return {name: values[:, :, k] for k, name in enumerate(names)}


def _per_head(sel, var: str, inner: str) -> np.ndarray | None:
    """(n_layers, n_heads, len(inner)) float64 of one model's d = 0 variable ``var``, or None when the selection
    does not hold it or holds only NaN."""
    if not isinstance(sel, xr.Dataset) or var not in sel:
        return None
    L, H = _shape(sel)
    da = sel[var]
    da = da.squeeze([dim for dim in da.dims if dim not in ("layer", "head", inner)])
    values = np.asarray(da.transpose("layer", "head", inner).values, dtype=np.float64)[:L, :H]
    return values if values.size and np.isfinite(values).any() else None


def spectrum_array(sel) -> np.ndarray | None:
    """(n_layers, n_heads, E) eigenvalues of S at d = 0 (decreasing, NaN-padded), or None when not stored."""
    return _per_head(sel, "spectrum", "eigen")


def _check_statistic(name: str) -> str:
    if name not in STATISTICS:
        raise ValueError(f"unknown statistic {name!r}; known: {', '.join(STATISTICS)}")
    return name


def statistics_note(sel) -> str:
    """The line shown where statistics are missing: 'statistics not computed' and the command that adds them."""
    cmd = ""
    if isinstance(sel, xr.Dataset) and "command" in sel and "model" in sel.coords and sel["model"].ndim == 0:
        small = [k for k in sel.data_vars if sel[k].ndim == 0]
        rows = model_rows(sel[small].expand_dims("model"))
        cmd = rows[0].statistics_command if rows else ""
    how = f": add them with <code>{html.escape(cmd)}</code>" if cmd else ""
    return f"<p class='note'><b>{html.escape(_name(sel))}</b>: statistics not computed{how}</p>"


def _missing(sel, width: int = 430, height: int = 60) -> hv.Div:
    return hv.Div(statistics_note(sel)).opts(width=width, height=height)


def heads_table(profile_at_d: np.ndarray, azimuth: float = g.DEFAULT_AZIMUTH,
                elevation: float = g.DEFAULT_ELEVATION) -> dict[str, np.ndarray]:
    """One row per head, layer-major: layer, head, lj (layer spread by head), a..d, x3..z3, x, y (projected),
    type (the spectral type code at this profile, ``geometry.spectral_types``) and type_name."""
    L, H, _ = profile_at_d.shape
    layer = np.repeat(np.arange(L, dtype=np.int32), H)
    head = np.tile(np.arange(H, dtype=np.int32), L)
    p = profile_at_d.reshape(L * H, 4)
    xyz = g.to_3d(p)
    x, y = g.project(xyz, azimuth, elevation)
    table = dict(x=x, y=y, layer=layer, head=head, lj=layer + ((head + 0.5) / max(H, 1) - 0.5) * 0.8)
    table |= {c: p[:, k].copy() for k, c in enumerate(g.COORDS)}
    table |= dict(x3=xyz[:, 0].copy(), y3=xyz[:, 1].copy(), z3=xyz[:, 2].copy())
    types = g.spectral_types(p).astype(np.int32)
    table |= dict(type=types, type_name=np.array([g.TYPE_NAMES[t] for t in types], dtype=object))
    return table


def edge_indices() -> dict[str, list[int]]:
    """The two vertices of each edge, for the browser's projection (project.js)."""
    return {"edge_i": [e[0] for e in g.EDGES], "edge_j": [e[1] for e in g.EDGES]}


def kv_heads(sel, n_heads: int) -> np.ndarray:
    """(n_heads,) the key/value head each query head reads (grouped-query attention: ``head // (n_heads /
    n_kv_heads)``); the head itself without ``n_kv_heads`` or for multi-head attention."""
    head = np.arange(n_heads, dtype=np.int32)
    n_kv = int(sel["n_kv_heads"].values) if isinstance(sel, xr.Dataset) and "n_kv_heads" in sel else 0
    if 0 < n_kv < n_heads and n_heads % n_kv == 0:
        return head // (n_heads // n_kv)
    return head


def _tetrahedron_hook(azimuth: float, elevation: float, n_layers: int, columns: dict, color_by: str,
                      rank_one: bool):
    """A render hook: names the sources, adds ``columns`` to the heads' source (the 3D positions the
    browser turns), colours the heads by layer (a colour bar) or by type (one renderer per type and a
    legend), draws the rank-one curve and the vertex labels, adds drag-to-rotate (rotate_drag.js)."""
    return lambda plot, element: _rotatable(plot, azimuth, elevation, n_layers, columns, color_by, rank_one)


def _by_type(fig, dots, heads) -> list:
    """Split the heads' renderer into one per type over the same source (a GroupFilter on ``type``), each in
    its colour, with a legend whose click hides a type. Returns the three renderers."""
    types = np.asarray(heads.data["type"])
    out = []
    for k in range(3):
        if k == 0:
            r = dots
        else:
            r = GlyphRenderer(data_source=heads, glyph=dots.glyph.clone())
            for attr in ("selection_glyph", "nonselection_glyph", "hover_glyph"):
                glyph = getattr(dots, attr)
                setattr(r, attr, glyph.clone() if glyph is not None and glyph != "auto" else glyph)
            fig.renderers.append(r)
        r.view = CDSView(filter=GroupFilter(column_name="type", group=k))
        r.name = f"head_dots_type{k}"
        for glyph in (r.glyph, r.nonselection_glyph, r.hover_glyph):
            if glyph is not None and glyph != "auto":
                glyph.fill_color = g.TYPE_COLORS[k]
        out.append(r)
    labels = g.type_labels(types)
    legend = Legend(items=[LegendItem(label=labels[k], renderers=[out[k]]) for k in range(3)],
                    click_policy="hide", location="top_left", name="type_legend", label_text_font_size="9pt",
                    background_fill_alpha=0.7)
    fig.add_layout(legend)
    for tool in fig.tools:
        rs = getattr(tool, "renderers", "auto")
        if isinstance(rs, list) and dots in rs:
            tool.renderers = [*rs, *out[1:]]
    return out


def _curve(fig, az: float, el: float, visible: bool, vertices, edges, camera) -> None:
    """The rank-one curve (``geometry.rank_one_curve``) as a line under the heads, with rho on hover; turned
    with the camera (rank_one_project.js, whenever the camera's data is written)."""
    rho = g.rank_one_rho()
    p = g.rank_one_curve(rho)
    xyz = g.to_3d(p)
    x, y = g.project(xyz, az, el)
    label = np.array(["∞" if not np.isfinite(r) else f"{r:.4g}" for r in rho], dtype=object)
    src = ColumnDataSource(dict(x=x, y=y, x3=xyz[:, 0].copy(), y3=xyz[:, 1].copy(), z3=xyz[:, 2].copy(),
                                rho=label, t=g.rank_one_cosine(rho), a=p[:, 0], b=p[:, 1], c=p[:, 2], d=p[:, 3]),
                           name="rank_one_source")
    line = fig.line("x", "y", source=src, line_color="#2e7d32", line_width=2.2, line_dash="dashed",
                    line_alpha=0.9, name="rank_one_curve", visible=bool(visible))
    rest = [r for r in fig.renderers if r is not line]  # under the heads
    at = next((i for i, r in enumerate(rest) if str(r.name).startswith("head_dots")), len(rest))
    fig.renderers = [*rest[:at], line, *rest[at:]]
    fig.add_tools(HoverTool(renderers=[line], tooltips=[("rank-one forms: ρ", "@rho"), ("u·v of L = u vᵀ", "@t{0.000}"),
                                                        ("a = b", "@a{0.000}"), ("c", "@c{0.000}"),
                                                        ("d", "@d{0.000}")], name="rank_one_hover"))
    ctx = dict(heads=src, vertices=vertices, edges=edges, camera=camera, label_offset=g.LABEL_OFFSET_PX,
               **edge_indices())
    camera.js_on_change("data", CustomJS(args=dict(ctx=ctx), code=jscode.code("project", "rank_one_project")))


def _rotatable(plot, az: float, el: float, n_layers: int, columns: dict, color_by: str, rank_one: bool) -> None:
    fig = plot.state
    parts = {key[0]: sub for key, sub in plot.subplots.items()}
    heads, vertices, edges = (parts[k].handles["cds"] for k in ("Heads", "Vertices", "Edges"))
    heads.name, vertices.name, edges.name = "heads", "tetra_vertices", "tetra_edges"
    heads.data.update({k: np.array(v, copy=True) for k, v in columns.items()})
    dots = parts["Heads"].handles["glyph_renderer"]
    dots.name = "head_dots"
    if color_by == "type":
        _by_type(fig, dots, heads)
    else:
        mapper = LinearColorMapper(palette=Viridis256, low=0, high=max(n_layers - 1, 1), name="layer_colours")
        for glyph in (dots.glyph, dots.nonselection_glyph, dots.muted_glyph, dots.hover_glyph):
            if glyph is not None and glyph != "auto":
                glyph.fill_color = {"field": "layer", "transform": mapper}
        fig.add_layout(ColorBar(color_mapper=mapper, title="layer", width=10, name="layer_colour_bar",
                                ticker=BasicTicker(min_interval=1, desired_num_ticks=min(max(n_layers, 2), 10))),
                       "right")
    fig.name = "tetrahedron"
    fig.text("x", "y", text="label", source=vertices, y_offset="dy", text_align="center", text_baseline="middle",
             text_font_size="10.5pt", text_color="#222831", text_font_style="bold",
             background_fill_color="#ffffff", background_fill_alpha=0.75, name="vertex_labels")
    camera = ColumnDataSource(dict(az=[float(az)], el=[float(el)]), name="camera")
    if rank_one is not None:
        _curve(fig, az, el, bool(rank_one), vertices, edges, camera)
    tools = {type(t).__name__: t for t in fig.tools}
    ctx = dict(heads=heads, vertices=vertices, edges=edges, camera=camera, fig=fig,
               box=tools.get("BoxSelectTool"), lasso=tools.get("LassoSelectTool"), label_offset=g.LABEL_OFFSET_PX,
               **edge_indices())
    drag = CustomJS(args=dict(ctx=ctx), code=jscode.code("project", "rotate_drag"))
    fig.js_on_event("panstart", drag)
    fig.js_on_event("pan", drag)
    fig.toolbar.active_drag = None


COLOR_MODES = ("layer", "type")
MAIN_STATISTICS = ("symmetric_energy", "rho", "pairing", "stable_rank")


def tetrahedron(sel, d: int = 0, azimuth: float = g.DEFAULT_AZIMUTH, elevation: float = g.DEFAULT_ELEVATION,
                size: int = 440, color_by: str = "layer", rank_one: bool | None = None) -> hv.Overlay:
    """Every head of one model as a dot in the 3-simplex; drag it to rotate.

    ``color_by``: "layer" (a colour bar; one renderer ``head_dots``) or "type" (the spectral type at this d,
    ``geometry.spectral_types``: one renderer per type, ``head_dots_type0`` .. ``head_dots_type2``, over the
    same ``heads`` source filtered by its ``type`` column, and a legend ``type_legend`` whose items read
    "Type I₊ (n=K)" and whose click hides a type). ``rank_one``: draw the rank-one curve (renderer
    ``rank_one_curve``, source ``rank_one_source``; False draws it hidden, for a toggle to show; None leaves it
    out). Hover a dot for its model, layer, head, kv head, profile, type and (when the store holds them) main
    statistics at d = 0; box or lasso select from the toolbar.

    The heads' source ``heads`` holds, per head in layer-major order: x, y (projected), layer, head, kv_head,
    a..d, lj, x3..z3 (3D position), type, type_name and the main statistics (``MAIN_STATISTICS``, NaN without).
    """
    if color_by not in COLOR_MODES:
        raise ValueError(f"color_by must be one of {COLOR_MODES}, got {color_by!r}")
    profile = profile_array(sel)
    heads = heads_table(_at(profile, d), azimuth, elevation)
    L, H = profile.shape[:2]
    heads["kv_head"] = np.tile(kv_heads(sel, H), L)
    stats = statistics_table(sel)
    for name in MAIN_STATISTICS:
        heads[name] = stats[name].reshape(-1).copy() if stats is not None else np.full(L * H, np.nan)
    vx, vy = g.project(g.VERTICES, azimuth, elevation)
    i = np.array([e[0] for e in g.EDGES], dtype=np.int32)
    j = np.array([e[1] for e in g.EDGES], dtype=np.int32)
    edges = hv.Segments(dict(x0=vx[i], y0=vy[i], x1=vx[j], y1=vy[j]), ["x0", "y0", "x1", "y1"],
                        group="Edges").opts(color="#5b6270", line_width=1.5, alpha=0.8, default_tools=[])
    vertices = hv.Points(dict(x=vx, y=vy, label=list(g.VERTEX_SHORT), full=list(g.VERTEX_LABELS),
                              x3=g.VERTICES[:, 0].copy(), y3=g.VERTICES[:, 1].copy(), z3=g.VERTICES[:, 2].copy(),
                              dy=g.label_offsets(vy)), ["x", "y"], ["label", "full", "x3", "y3", "z3", "dy"],
                         group="Vertices").opts(color="#222831", marker="diamond", size=11, default_tools=[],
                                                tools=[HoverTool(tooltips=[("vertex", "@full")])])
    tips = [("model", _name(sel)), ("layer", "@layer"), ("head", "@head"), ("kv head", "@kv_head"),
            ("a", "@a{0.000}"), ("b", "@b{0.000}"), ("c", "@c{0.000}"), ("d", "@d{0.000}"), ("type", "@type_name")]
    if stats is not None:
        tips += [(f"{name} (d = 0)", f"@{name}{{0.000}}") for name in MAIN_STATISTICS]
    hover = HoverTool(tooltips=tips, limit=1, attachment="horizontal")
    shown = ("layer", "head", *g.COORDS)  # the columns HoloViews sees; the hook adds the rest
    points = hv.Points({k: heads[k] for k in ("x", "y", *shown)}, ["x", "y"], list(shown), group="Heads").opts(
        color="#440154", size=7,
        line_color="#ffffff", line_width=0.4, fill_alpha=0.85, selection_fill_color=SELECTED,
        selection_line_color="#222831", selection_fill_alpha=1.0, nonselection_fill_alpha=0.15,
        nonselection_line_alpha=0.1, tools=[hover, "box_select", "lasso_select", "reset"], default_tools=[])
    lim = g.VIEW_LIMIT
    extra = {k: v for k, v in heads.items() if k not in ("x", "y", *shown)}
    return (edges * vertices * points).opts(
        hv.opts.Overlay(frame_width=size, frame_height=size, xlim=(-lim, lim), ylim=(-lim, lim), xaxis=None,
                        yaxis=None, show_grid=False, default_tools=["reset"], active_tools=[], toolbar="right",
                        title="Profiles on the 3-simplex (drag to rotate)", show_legend=False,
                        hooks=[_tetrahedron_hook(azimuth, elevation, max(L, 1), extra, color_by, rank_one)]))


def _counts(profile: np.ndarray, bins: int) -> np.ndarray:
    return g.layer_counts(profile, bins) if profile.shape[0] else np.zeros((profile.shape[2], 1, 4, bins))


PANEL_STEP = 1.2  # x offset between the four coordinate panels of the per-layer views (each spans [0, 1])


def _panel_axis(plot, element) -> None:
    """Render hook: ticks 0, 0.5, 1 under each of the four coordinate panels, no grid."""
    from bokeh.models import FixedTicker

    fig = plot.state
    labels = {k * PANEL_STEP + t: text for k in range(4) for t, text in ((0.0, "0"), (0.5, "0.5"), (1.0, "1"))}
    fig.xaxis.ticker = FixedTicker(ticks=list(labels))
    fig.xaxis.major_label_overrides = labels
    fig.xgrid.visible = False
    fig.ygrid.visible = False


def _panel_titles(y: float) -> hv.Labels:
    return hv.Labels({"x": [k * PANEL_STEP + 0.5 for k in range(4)], "y": [y] * 4, "text": list(COORD_TITLES)},
                     ["x", "y"], "text", group="PanelTitles").opts(text_font_size="10pt", text_baseline="bottom",
                                                                   text_font_style="bold", text_color="#222831",
                                                                   default_tools=[])


def scales(sel, bins: int = g.N_BINS) -> tuple[float, float]:
    """(colour-scale top of ``layer_heatmaps``, height of ``histograms``): each covers every offset d."""
    profile = profile_array(sel)
    high = max(float(_counts(profile, bins).max()), 1.0)
    n = profile.shape[0] * profile.shape[1]
    flat = np.moveaxis(profile.reshape(n, profile.shape[2], 4), 0, -1)  # (D, 4, heads)
    b = g.bin_index(flat, bins)
    counts = np.stack([(b == i).sum(axis=-1) for i in range(bins)], axis=-1)  # (D, 4, bins)
    totals = counts.sum(axis=-1, keepdims=True)
    top = float(np.max(np.divide(counts, totals, out=np.zeros(counts.shape), where=totals > 0), initial=0.0))
    return high, max(top, 0.05)


def layer_heatmaps(sel, d: int = 0, bins: int = g.N_BINS, width: int = 800, high: float | None = None) -> hv.Overlay:
    """Per coordinate (four panels side by side), the number of heads of each layer in each value bin.

    One colour scale, shown by the colour bar, covers the four panels and every offset d, so a colour
    keeps its meaning while d moves (``high``: its top, computed by ``scales`` when not given). The heads
    are drawn on top as dots that show only when selected (box-select them here).
    """
    profile = profile_array(sel)
    dd = int(np.clip(d, 0, profile.shape[2] - 1))
    counts = _counts(profile[:, :, dd: dd + 1], bins)  # (1, L, 4, B)
    dd = 0
    L = max(profile.shape[0], 1)
    high = scales(sel, bins)[0] if high is None else high
    heads = heads_table(_at(profile, d))
    for k, c in enumerate(g.COORDS):
        heads[f"{c}_x"] = heads[c] + k * PANEL_STEP
    layers = []
    for k, c in enumerate(g.COORDS):
        x0 = k * PANEL_STEP
        layers.append(hv.Image(counts[dd, ::-1, k].copy(), bounds=(x0, -0.5, x0 + 1, L - 0.5), kdims=["value", "layer"],
                               vdims=["heads"], group="Heat", label=c).opts(
            cmap="Blues", clim=(0, high), colorbar=k == 3, clabel="heads per layer and bin",
            colorbar_opts={"width": 10}, default_tools=[]))
        layers.append(hv.Points(heads, [f"{c}_x", "lj"], ["layer", "head"], group="LayerDots", label=c).opts(
            size=6, color=SELECTED, fill_alpha=0.0, line_alpha=0.0, line_color="#222831", selection_fill_alpha=1.0,
            selection_line_alpha=1.0, nonselection_fill_alpha=0.0, nonselection_line_alpha=0.0,
            tools=["box_select"], default_tools=[]))
    top = L - 0.5 + max(1.0, 0.06 * L)
    layers.append(_panel_titles(L - 0.5))
    return hv.Overlay(layers).opts(hv.opts.Overlay(
        width=width, height=max(280, min(560, 14 * L + 100)), xlim=(-0.04, 3 * PANEL_STEP + 1.04), ylim=(-0.5, top),
        xlabel="value of the coordinate", ylabel="layer", default_tools=["reset"], active_tools=["box_select"],
        toolbar="above", show_legend=False, hooks=[_panel_axis],
        title="Per layer: heads per value bin; selected heads in orange (box-select here too)"))


def histograms(sel, d: int = 0, bins: int = g.N_BINS, selected=None, width: int = 800,
               top: float | None = None) -> hv.Overlay:
    """Per coordinate (four panels side by side), the fraction of all heads in each value bin, and of the
    ``selected`` heads (an orange outline, drawn only when some are selected).

    ``selected``: indices into the heads in layer-major order (as the tetrahedron's selection gives them).
    The height (``top``, computed by ``scales`` when not given) covers every offset d. Each kind is one
    ``hv.Rectangles`` of 4 x ``bins`` bars, coordinate-major (the bars of a, then of b, ...): one glyph
    for the four panels.
    """
    profile = profile_array(sel)
    edges = np.linspace(0, 1, bins + 1)
    left = np.concatenate([edges[:-1] + k * PANEL_STEP for k in range(4)])
    right = np.concatenate([edges[1:] + k * PANEL_STEP for k in range(4)])

    def fractions(values):  # (heads, 4) -> (4 * bins,)
        out = []
        for k in range(4):
            counts = g.histogram_counts(values[:, k], bins).astype(float)
            out.append(counts / counts.sum() if counts.sum() else counts)
        return np.concatenate(out)

    def bars(heights, group):
        return hv.Rectangles((left, np.zeros_like(left), right, heights), group=group)

    top = scales(sel, bins)[1] if top is None else top
    at = _at(profile, d).reshape(-1, 4)
    chosen = np.asarray(selected if selected is not None else [], dtype=int)
    layers = [bars(fractions(at), "All").opts(color=ALL, alpha=0.55, line_color=None, default_tools=[])]
    if chosen.size:
        s = fractions(at[chosen])
        top = max(top, float(s.max()))
        layers.append(bars(s, "Selected").opts(fill_alpha=0.0, line_color=SELECTED, line_width=2, default_tools=[]))
    return hv.Overlay(layers).opts(hv.opts.Overlay(
        width=width, height=170, xlim=(-0.04, 3 * PANEL_STEP + 1.04), ylim=(0, top * 1.05), default_tools=[],
        toolbar=None, show_legend=False, hooks=[_panel_axis], xlabel="value of the coordinate",
        ylabel="fraction of heads", title=""))


# ------------------------------------------------------------------------ spectral types and statistics


def symmetric_face(sel, d: int = 0, size: int = 360) -> hv.Overlay:
    """The a = 0 face: every head at (b, c, d) / (1 - a) in the triangle b (top), c (left), d (right), one
    marker and colour per spectral type (at this d), the c-d edge dashed (no form reaches its inside).

    One source ``face_heads`` (renderer ``face_dots``), one row per head in layer-major order (the tetrahedron's
    order; a head with a = 1 has NaN coordinates and is not drawn), so a page links the selection by index.
    """
    profile = profile_array(sel)
    at = _at(profile, d)
    L, H = at.shape[:2]
    p = at.reshape(-1, 4)
    xy = g.face_coordinates(p)
    types = g.spectral_types(p).astype(np.int32)
    data = dict(x=xy[:, 0], y=xy[:, 1], layer=np.repeat(np.arange(L, dtype=np.int32), H),
                head=np.tile(np.arange(H, dtype=np.int32), L), type_name=[g.TYPE_NAMES[t] for t in types],
                colour=[g.TYPE_COLORS[t] for t in types], marker=[g.TYPE_MARKERS[t] for t in types],
                b_sym=p[:, 1] / (1 - p[:, 0]), c_sym=p[:, 2] / (1 - p[:, 0]), d_sym=p[:, 3] / (1 - p[:, 0]))
    fv = g.FACE_VERTICES
    solid = hv.Path([fv[[1, 0, 2]]], group="FaceEdges").opts(color="#5b6270", line_width=1.4)
    dashed = hv.Path([fv[[1, 2]]], group="FaceEdges").opts(color="#5b6270", line_width=1.4, line_dash="dashed")
    # b's label centred above its vertex; c's and d's below theirs, each running inwards from just outside its
    # vertex, so that none reaches the frame's edge (where Bokeh clips it) whatever the font's width
    labels = hv.Labels({"x": fv[:, 0] + np.array([0.0, -0.06, 0.06]), "y": fv[:, 1] + np.array([0.06, -0.06, -0.06]),
                        "text": list(g.FACE_LABELS), "align": ["center", "left", "right"]},
                       ["x", "y"], ["text", "align"], group="FaceLabels").opts(
        text_font_size="9.5pt", text_color="#222831", text_align="align")
    hover = HoverTool(tooltips=[("layer", "@layer"), ("head", "@head"), ("type", "@type_name"),
                                ("(b, c, d) / (1 − a)", "@b_sym{0.000}, @c_sym{0.000}, @d_sym{0.000}")], limit=1)
    dots = hv.Points(data, ["x", "y"], [k for k in data if k not in ("x", "y")], group="Face").opts(
        color="colour", marker="marker", size=7, line_color="#ffffff", line_width=0.4, fill_alpha=0.85,
        selection_fill_color=SELECTED, nonselection_fill_alpha=0.15, nonselection_line_alpha=0.1,
        tools=[hover, "box_select", "lasso_select", "tap", "reset"], default_tools=[])
    counts = g.type_labels(types)

    def name_face(plot, element):
        fig = plot.state
        r = [x for x in fig.renderers if type(getattr(x, "glyph", None)).__name__ == "Scatter"][0]
        r.name, r.data_source.name = "face_dots", "face_heads"
        firsts = [int(np.flatnonzero(types == k)[0]) for k in range(3) if (types == k).any()]
        names = [counts[int(types[i])] for i in firsts]
        fig.add_layout(Legend(items=[LegendItem(label=n, renderers=[r], index=i) for n, i in zip(names, firsts,
                                                                                                  strict=True)],
                              location="top_right", name="face_legend", label_text_font_size="9pt"))

    return (solid * dashed * labels * dots).opts(hv.opts.Overlay(
        frame_width=size, frame_height=int(size * 0.92), xlim=(-0.62, 0.62), ylim=(-0.14, np.sqrt(3) / 2 + 0.12),
        xaxis=None, yaxis=None, show_grid=False, toolbar="right", show_legend=False, hooks=[name_face],
        title="The a = 0 face: (b, c, d) / (1 − a)"))


def layer_type_map(sel, d: int = 0, width: int = 330) -> hv.Image:
    """The fraction of each layer's heads in each spectral type at this d (``geometry.layer_type_fractions``),
    a heat map (types across, layers up) with a colour bar from 0 to 1."""
    frac = g.layer_type_fractions(_at(profile_array(sel), d))
    L = max(frac.shape[0], 1)
    img = hv.Image(frac[::-1].copy() if frac.size else np.zeros((1, 3)), bounds=(-0.5, -0.5, 2.5, L - 0.5),
                   kdims=["type", "layer"], vdims=["fraction of the layer's heads"], group="LayerTypes")
    return img.opts(cmap="Blues", clim=(0, 1), colorbar=True, colorbar_opts={"width": 10}, width=width,
                    height=max(220, min(560, 16 * L + 110)), xticks=list(enumerate(g.TYPE_NAMES)),
                    tools=["hover"], default_tools=[], toolbar=None, title=f"Layer × type (d = {int(d)})")


def parity_selection(sel, n: int = g.N_EXTREME) -> list[np.ndarray] | None:
    """For each type (at d = 0) the flat head indices of its ``n`` most extreme heads (``geometry.extreme_heads``:
    I₊ smallest d_sym, II smallest c + d, I₋ smallest c_sym); None without statistics."""
    stats = statistics_table(sel)
    if stats is None:
        return None
    p = _at(profile_array(sel), 0).reshape(-1, 4)
    return g.extreme_heads(g.spectral_types(p), p, stats["c_sym"], stats["d_sym"], n)


def parity_spectra(sel, n: int = g.N_EXTREME, bins: int = 30, panel_px: int = 260):
    """Per spectral type, the histogram of the entries of the mean sorted unit-norm S spectrum of its ``n``
    most extreme heads (``parity_selection``): negative entries blue, positive red, each lobe's mean dashed.
    A message instead when the store holds no statistics or spectra for the model."""
    chosen = parity_selection(sel, n)
    spectra = spectrum_array(sel)
    if chosen is None or spectra is None:
        return _missing(sel)
    flat = spectra.reshape(-1, spectra.shape[-1])
    panels = []
    for k, idx in enumerate(chosen):
        mean = g.mean_unit_spectrum(flat[idx])
        title = f"{g.TYPE_NAMES[k]}: {len(idx)} most extreme head{'s' if len(idx) != 1 else ''}"
        if mean.size == 0:
            panels.append(hv.Curve([], "eigenvalue", "entries").opts(width=panel_px, height=200, title=title,
                                                                    toolbar=None, default_tools=[]))
            continue
        top = max(float(np.abs(mean).max()), 1e-12)
        edges = np.linspace(-top, top, 2 * bins + 1)
        neg, pos = mean[mean < 0], mean[mean > 0]
        dims = dict(kdims=["eigenvalue"], vdims=["entries"])
        layers = [hv.Histogram((edges[: bins + 1], np.histogram(neg, edges[: bins + 1])[0]), group="Negative",
                               **dims).opts(color="#1f77b4", line_color=None),
                  hv.Histogram((edges[bins:], np.histogram(pos, edges[bins:])[0]), group="Positive",
                               **dims).opts(color="#d62728", line_color=None)]
        for values, colour in ((neg, "#1f77b4"), (pos, "#d62728")):
            if values.size:
                layers.append(hv.VLine(float(values.mean())).opts(color=colour, line_dash="dashed", line_width=1.5))
        panels.append(hv.Overlay(layers).opts(hv.opts.Overlay(width=panel_px, height=200, title=title,
                                                              toolbar=None, default_tools=[], show_legend=False)))
    return hv.Layout(panels).cols(3).opts(shared_axes=False)


PARITY_STEP = 2.6  # parity_spectra_figure: the distance between its groups' centres, in group half-widths


def parity_spectra_figure(sel, n: int = g.N_EXTREME, bins: int = 30, width: int = 760, height: int = 230):
    """``parity_spectra`` as one figure: the three types' histograms side by side (group k centred on
    ``k * PARITY_STEP``), each entry divided by the largest |entry| of its type's mean spectrum, so that every
    group spans -1..1; above each group its type, head count and that largest |entry|. One figure, one renderer
    per kind of mark, whatever the counts: a page can change model by changing data. A message instead when
    the store holds no statistics or spectra for the model."""
    chosen = parity_selection(sel, n)
    spectra = spectrum_array(sel)
    if chosen is None or spectra is None:
        return _missing(sel)
    flat = spectra.reshape(-1, spectra.shape[-1])
    unit = np.linspace(-1.0, 1.0, 2 * bins + 1)
    bars = {"Negative": [], "Positive": []}
    means, labels = [], []
    for k, idx in enumerate(chosen):
        mean = g.mean_unit_spectrum(flat[idx])
        top = max(float(np.abs(mean).max()), 1e-12) if mean.size else 1.0
        x = k * PARITY_STEP
        for group, values, edges in (("Negative", mean[mean < 0] / top, unit[: bins + 1]),
                                     ("Positive", mean[mean > 0] / top, unit[bins:])):
            counts = np.histogram(values, edges)[0]
            bars[group] += [(x + a, 0.0, x + b, float(c))
                            for a, b, c in zip(edges[:-1], edges[1:], counts, strict=True) if c]
            if values.size:
                means.append((x + float(values.mean()), "#1f77b4" if group == "Negative" else "#d62728"))
        heads = f"{len(idx)} head{'s' if len(idx) != 1 else ''}"
        labels.append((x, f"{g.TYPE_NAMES[k]}: {heads}" + (f", max |λ| {top:.3g}" if mean.size else "")))
    ymax = max([b[3] for group in bars.values() for b in group] + [1.0]) * 1.2
    rect = dict(kdims=["x0", "y0", "x1", "y1"])
    layers = [hv.Rectangles(bars[k], group=k, **rect).opts(color=c, line_color=None)
              for k, c in (("Negative", "#1f77b4"), ("Positive", "#d62728"))]
    layers.append(hv.Segments([(x, 0.0, x, ymax / 1.2, c) for x, c in means],
                              kdims=["x0", "y0", "x1", "y1"], vdims=["colour"], group="LobeMeans")
                  .opts(color="colour", line_dash="dashed", line_width=1.5))
    layers.append(hv.Labels([(x, ymax / 1.1, t) for x, t in labels], kdims=["x", "y"], vdims=["text"],
                            group="ParityTypes").opts(text_font_size="8pt", text_baseline="middle"))
    ticks = [(k * PARITY_STEP + u, f"{u:g}") for k in range(3) for u in (-1, 0, 1)]
    return hv.Overlay(layers).opts(hv.opts.Overlay(
        width=width, height=height, title="", toolbar=None, default_tools=[], show_legend=False,
        xlim=(-1.15, 2 * PARITY_STEP + 1.15), ylim=(0, ymax), xticks=ticks,
        xlabel="eigenvalue / largest |eigenvalue| of the type's mean spectrum", ylabel="entries"))


def statistic_heatmap(sel, statistic: str = "symmetric_energy", width: int = 430):
    """A layer x head heat map of one statistic at d = 0 (``pipeline.schema.STATISTICS``; another name is a
    ValueError), with a colour bar, and beside it the value for i.i.d. Gaussian heads of the model's own
    N = d_model and n = d_head (``dashboard.baselines``). A message instead when the statistics are missing."""
    _check_statistic(statistic)
    stats = statistics_table(sel)
    if stats is None:
        return _missing(sel, width)
    values = stats[statistic]
    L, H = values.shape
    img = hv.Image(values[::-1].copy(), bounds=(-0.5, -0.5, H - 0.5, L - 0.5), kdims=["head", "layer"],
                   vdims=[statistic], group="Statistic").opts(
        cmap="Viridis", colorbar=True, colorbar_opts={"width": 10}, width=width,
        height=max(220, min(560, 14 * L + 110)), tools=["hover"], default_tools=[], toolbar=None,
        title=f"{statistic} per head (d = 0)", clipping_colors={"NaN": "#eeeeee"})
    return (img + hv.Div(baseline_html(sel, statistic, values)).opts(width=260, height=120)).opts(shared_axes=False)


def baseline_html(sel, statistic: str, values: np.ndarray | None = None) -> str:
    """The sentence beside a statistic: the model's median and the i.i.d. Gaussian value at its (N, n)."""
    N = int(sel["d_model"].values) if isinstance(sel, xr.Dataset) and "d_model" in sel else 0
    n = int(sel["d_head"].values) if isinstance(sel, xr.Dataset) and "d_head" in sel else 0
    base = baselines.gaussian(statistic, N, n)
    median = (f"median over the heads: <b>{np.nanmedian(values):.4g}</b><br>"
              if values is not None and np.isfinite(values).any() else "")
    if base is None:
        gauss = (f"i.i.d. Gaussian heads at N = {N}, n = {n}: not measured "
                 "(<code>benchmarks/gaussian_baseline.py</code>)")
    else:
        value, how = base
        gauss = f"i.i.d. Gaussian W<sub>Q</sub>, W<sub>K</sub> at N = {N}, n = {n}: <b>{value:.4g}</b> ({how})"
    return f"<p class='note'>{median}{gauss}</p>"


def head_inspector(sel, layer: int, head: int, d: int = 0, width: int = 330):
    """One head: its S spectrum at d = 0 as bars (λ₊ up in red, −λ₋ down in blue, paired by rank), its
    statistics (a table), and for rotary models (``positional`` "rope", or without it more than one d stored)
    its a, b, c, d over d = 0..128 with the current d marked. Without statistics the spectrum and table give
    way to a message. ``layer``, ``head``: the head's indices (the tetrahedron's row is layer * n_heads + head).
    """
    profile = profile_array(sel)
    L, H, D, _ = profile.shape
    if not (0 <= layer < L and 0 <= head < H):
        raise ValueError(f"no head (layer {layer}, head {head}): the model has {L} layers of {H} heads")
    parts = []
    stats, spectra = statistics_table(sel), spectrum_array(sel)
    if stats is None or spectra is None:
        parts.append(_missing(sel, width))
    else:
        lam = spectra[layer, head]
        lam = lam[np.isfinite(lam)]
        lp, lm = np.sort(lam[lam > 0])[::-1], np.sort(-lam[lam < 0])[::-1]
        rank = max(lp.size, lm.size, 1)
        up = hv.Rectangles((np.arange(lp.size) + 0.6, np.zeros(lp.size), np.arange(lp.size) + 1.4, lp),
                           group="LambdaPlus").opts(color="#d62728", line_color=None)
        down = hv.Rectangles((np.arange(lm.size) + 0.6, -lm, np.arange(lm.size) + 1.4, np.zeros(lm.size)),
                             group="LambdaMinus").opts(color="#1f77b4", line_color=None)
        parts.append((up * down * hv.HLine(0).opts(color="#444", line_width=0.8)).opts(hv.opts.Overlay(
            width=width, height=220, xlim=(0, rank + 1), xlabel="rank", ylabel="λ₊ (up), −λ₋ (down)",
            title=f"layer {layer}, head {head}: spectrum of S (d = 0)", toolbar=None, default_tools=[],
            show_legend=False)))
        rows = [(name, float(stats[name][layer, head])) for name in stats]
        parts.append(hv.Table(rows, ["statistic"], ["value"]).opts(width=width, height=420,
                                                                    title="statistics (d = 0)"))
    rotary = str(sel["positional"].values) == "rope" if isinstance(sel, xr.Dataset) and "positional" in sel else D > 1
    if rotary and D > 1:
        dd = int(np.clip(d, 0, D - 1))
        colours = ("#9467bd", "#7f7f7f", "#d62728", "#1f77b4")
        curves = [hv.Curve((np.arange(D), profile[layer, head, :, k]), "d", "value", label=c).opts(color=colours[k])
                  for k, c in enumerate(g.COORDS)]
        parts.append(hv.Overlay([*curves, hv.VLine(dd).opts(color="#222831", line_dash="dashed")]).opts(
            hv.opts.Overlay(width=width, height=220, ylim=(0, 1), legend_position="top_right", toolbar=None,
                            default_tools=[], title=f"a, b, c, d over d (now d = {dd})")))
    return hv.Layout(parts).cols(1).opts(shared_axes=False)


# ---------------------------------------------------------------------------------------- compare models


def _quantity_values(sel, quantity: str, d: int = 0) -> np.ndarray | None:
    """(L, H) of a coordinate (a..d at d) or a statistic (d = 0) of one model; None without statistics."""
    if quantity in g.COORDS:
        return _at(profile_array(sel), d)[:, :, g.COORDS.index(quantity)]
    _check_quantity(quantity)
    stats = statistics_table(sel)
    return None if stats is None else stats[quantity]


def _check_quantity(quantity: str) -> None:
    if quantity not in g.COORDS and quantity not in STATISTICS:
        raise ValueError(f"unknown quantity {quantity!r}; known: the coordinates {', '.join(g.COORDS)} and the "
                         f"statistics {', '.join(STATISTICS)}")


def _check_models(ds: xr.Dataset, names) -> None:
    held = [str(m) for m in ds["model"].values] if "model" in ds.dims else []
    unknown = [n for n in names if n not in held]
    if unknown:
        raise ValueError(f"no model {unknown} in the store; it holds {held} (pass the profiles Dataset with its "
                         "model dimension)")


def computed_models(ds: xr.Dataset) -> list[str]:
    """The models of a profiles Dataset with something to draw (computed, not damaged), in store order."""
    return [r.name for r in model_rows(ds) if r.computed and not r.damaged]


def depth_medians(ds: xr.Dataset, name: str, quantity: str, d: int = 0):
    """(relative depth in [0, 1], per-layer median) of ``quantity`` for one model; None without statistics."""
    values = _quantity_values(ds.sel(model=name), quantity, d)
    if values is None:
        return None
    L = values.shape[0]
    depth = np.arange(L) / (L - 1) if L > 1 else np.zeros(L)
    with warnings.catch_warnings():  # a layer without heads has no median: NaN, a gap in the line
        warnings.simplefilter("ignore", RuntimeWarning)
        return depth, np.nanmedian(values, axis=1)


def compare_depth(ds: xr.Dataset, names=None, quantity: str = "c", d: int = 0, width: int = 520) -> hv.Overlay:
    """Per-layer medians of a coordinate (a..d, at offset d) or a statistic (d = 0) against relative depth
    (layer / (L - 1)), one line per model. ``ds``: the profiles Dataset with its ``model`` dimension; ``names``:
    the models (default: every computed one). Models without statistics are named in the title."""
    _check_quantity(quantity)
    names = computed_models(ds) if names is None else list(names)
    _check_models(ds, names)
    curves, missing = [], []
    for name in names:
        got = depth_medians(ds, name, quantity, d)
        if got is None:
            missing.append(name)
            continue
        curves.append(hv.Curve(got, "relative depth", f"median {quantity}", label=name).opts(line_width=2))
        curves.append(hv.Scatter(got, "relative depth", f"median {quantity}", label=name).opts(size=4))
    title = f"median {quantity} per layer" + (f" (statistics not computed: {', '.join(missing)})" if missing else "")
    if not curves:
        curves = [hv.Curve([], "relative depth", f"median {quantity}")]
    return hv.Overlay(curves).opts(hv.opts.Overlay(width=width, height=300, xlim=(-0.02, 1.02), title=title,
                                                   legend_position="right", toolbar=None, default_tools=[]))


def compare_histograms(ds: xr.Dataset, name1: str, name2: str, d: int = 0, bins: int = g.N_BINS,
                       panel_px: int = 230) -> hv.Layout:
    """The four coordinate histograms (fraction of heads per bin, at offset d) of two models overlaid."""
    _check_models(ds, [name1, name2])
    panels = []
    profiles = [_at(profile_array(ds.sel(model=n)), d).reshape(-1, 4) for n in (name1, name2)]
    edges = np.linspace(0, 1, bins + 1)
    for k, c in enumerate(g.COORDS):
        layers = []
        for p, name, colour in zip(profiles, (name1, name2), ("#8a93a3", SELECTED), strict=True):
            counts = g.histogram_counts(p[:, k], bins)
            frac = counts / counts.sum() if counts.sum() else counts
            layers.append(hv.Histogram((edges, frac), kdims=[c], vdims=["fraction of heads"], label=name).opts(
                fill_alpha=0.45, color=colour, line_color=colour))
        panels.append(hv.Overlay(layers).opts(hv.opts.Overlay(width=panel_px, height=200, title=COORD_TITLES[k],
                                                              toolbar=None, default_tools=[],
                                                              show_legend=k == 0, legend_position="top_right")))
    return hv.Layout(panels).cols(4).opts(shared_axes=False)


# -------------------------------------------------------------------------------------------- orbits


def _orbits_ready(orbits: xr.Dataset) -> xr.Dataset:
    problems = orbits_problems(orbits, check_version=False)
    if problems:
        raise ValueError("; ".join(problems))
    return of.sorted_by_epoch(of.run_panels(orbits))


def _named_sources(names: dict[str, str], figure: str | None = None):
    """A render hook: names the data source of each overlaid element by its group ({group: name}), and the
    figure, so that a page finds them by name and drives them from the browser."""
    def hook(plot, element):
        parts = {key[0]: sub for key, sub in plot.subplots.items()}
        for group, name in names.items():
            parts[group].handles["cds"].name = name
        if figure is not None:
            plot.state.name = figure
    return hook


def _trails(xy: np.ndarray, starts: np.ndarray, f: int, order: np.ndarray, colour: list[str], orbit: np.ndarray,
            group: str) -> hv.Contours:
    """One line per head (in ``order``) through its positions ``xy`` (F, H, 2) at frames start[f] .. f, in its
    orbit's colour (no orbit: fainter). Contours, not Path: Path splits a line with its own colour into segments."""
    return hv.Contours([{"x": xy[starts[f]: f + 1, h, 0], "y": xy[starts[f]: f + 1, h, 1], "colour": colour[h],
                         "alpha": 0.55 if orbit[h] >= 0 else 0.22} for h in order],
                       vdims=["colour", "alpha"], group=group).opts(color=hv.dim("colour"), alpha=hv.dim("alpha"),
                                                                    line_width=1.3, default_tools=[])


def _dots(x: np.ndarray, y: np.ndarray, order: np.ndarray, colour: list[str], orbit: np.ndarray, group: str,
          extra: dict | None = None, tips: tuple = ()) -> hv.Points:
    """The heads (in ``order``) at (x, y), in their orbit's colour, with head and orbit on hover."""
    data = dict(x=x, y=y, head=order.astype(np.int32), orbit=[str(o) if o >= 0 else "none" for o in orbit[order]],
                colour=[colour[h] for h in order]) | (extra or {})
    hover = HoverTool(tooltips=[("head", "@head"), ("orbit", "@orbit"), *tips])
    return hv.Points(data, ["x", "y"], [k for k in data if k not in ("x", "y")], group=group).opts(
        color=hv.dim("colour"), line_color="white", line_width=0.5, size=8, default_tools=[], tools=[hover])


def orbit_polygons(orbits: xr.Dataset, frame: int = -1, trail_epochs: float | None = None,
                   panel_px: int = 230) -> hv.Layout:
    """Every head as a dot in each Fourier plane at one frame, coloured by orbit, with its recent trail.

    ``frame``: an index into the frames in epoch order (-1 = the last). ``trail_epochs``: how far back the
    trails reach (default: the group's ``trail_epochs`` attribute). Panel p's sources are named
    ``orbits_dots_{p}`` (x, y, head, orbit, colour; heads in no orbit first) and ``orbits_trails_{p}`` (one line
    per head, in the dots' order), its figure ``orbits_panel_{p}``.
    """
    ds = _orbits_ready(orbits)
    pos = of.positions(ds)
    F, H, P, _ = pos.shape
    f = int(frame) % F
    epochs = np.asarray(ds["epoch"].values)
    starts = of.trail_starts(epochs, of.trail_epochs(ds) if trail_epochs is None else float(trail_epochs))
    radii = of.view_radii(pos, starts)
    orbit = of.orbit_labels(ds)
    _, colour = of.orbit_colours(orbit)
    order = np.argsort(orbit >= 0, kind="stable")  # heads in no orbit first, so orbits draw on top
    plots = []
    for p in range(P):
        r = 1.1 * radii[f, p] if radii[f, p] > 0 else 1.0
        trails = _trails(pos[:, :, p, :], starts, f, order, colour, orbit, "Trails")
        dots = _dots(pos[f, order, p, 0], pos[f, order, p, 1], order, colour, orbit, "Dots")
        title = of.panel_title(ds, p)
        plots.append((trails * dots * hv.HLine(0) * hv.VLine(0)).opts(
            hv.opts.HLine(color="#444", line_width=0.7, alpha=0.7, default_tools=[]),
            hv.opts.VLine(color="#444", line_width=0.7, alpha=0.7, default_tools=[]),
            hv.opts.Overlay(frame_width=panel_px, frame_height=panel_px, xlim=(-r, r), ylim=(-r, r), title=title,
                            fontsize={"title": "9.5pt", "ticks": "7pt"}, default_tools=[], toolbar=None,
                            xlabel="", ylabel="", show_legend=False,
                            hooks=[_named_sources({"Trails": f"orbits_trails_{p}", "Dots": f"orbits_dots_{p}"},
                                                  f"orbits_panel_{p}")])))
    return hv.Layout(plots).cols(2).opts(shared_axes=False)


def orbit_profile_positions(orbits: xr.Dataset, azimuth: float = g.DEFAULT_AZIMUTH,
                            elevation: float = g.DEFAULT_ELEVATION) -> np.ndarray | None:
    """(F, H, 2): every head's profile at every frame (frames in epoch order) projected into the tetrahedron
    as ``tetrahedron`` draws it (``heads_table``); None when the group has no ``head_profile``."""
    ds = _orbits_ready(orbits)
    prof = of.head_profiles(ds)
    if prof is None:
        return None
    F, H, _ = prof.shape
    t = heads_table(prof, azimuth, elevation)  # the frames stand where a model's layers would
    return np.stack([t["x"], t["y"]], axis=-1).reshape(F, H, 2)


def _simplex_outline(azimuth: float, elevation: float, group: str) -> tuple[hv.Segments, hv.Points]:
    """The tetrahedron's edges and vertices (``geometry.VERTICES``, ``EDGES``) as the camera sees them; the
    vertices' source holds ``label`` and ``dy`` for the labels ``_vertex_labels`` draws."""
    vx, vy = g.project(g.VERTICES, azimuth, elevation)
    e = edge_indices()
    i, j = np.array(e["edge_i"]), np.array(e["edge_j"])
    edges = hv.Segments(dict(x0=vx[i], y0=vy[i], x1=vx[j], y1=vy[j]), ["x0", "y0", "x1", "y1"],
                        group=f"{group}Edges").opts(color="#5b6270", line_width=1.5, alpha=0.8, default_tools=[])
    vertices = hv.Points(dict(x=vx, y=vy, label=list(g.VERTEX_SHORT), full=list(g.VERTEX_LABELS),
                              dy=g.label_offsets(vy)), ["x", "y"], ["label", "full", "dy"],
                         group=f"{group}Vertices").opts(color="#222831", marker="diamond", size=9, default_tools=[],
                                                        tools=[HoverTool(tooltips=[("vertex", "@full")])])
    return edges, vertices


def _vertex_labels(group: str):
    """A render hook: the vertex labels of ``_simplex_outline(..., group)``, above or below their vertex."""
    def hook(plot, element):
        parts = {key[0]: sub for key, sub in plot.subplots.items()}
        plot.state.text("x", "y", text="label", source=parts[f"{group}Vertices"].handles["cds"], y_offset="dy",
                        text_align="center", text_baseline="middle", text_font_size="9pt", text_color="#222831",
                        text_font_style="bold", background_fill_color="#ffffff", background_fill_alpha=0.75)
    return hook


def orbit_tetrahedron(orbits: xr.Dataset, frame: int = -1, trail_epochs: float | None = None,
                      azimuth: float = g.DEFAULT_AZIMUTH, elevation: float = g.DEFAULT_ELEVATION, size: int = 280):
    """Every head's profile (a, b, c, d) of W_K^T W_Q at one frame as a dot in the 3-simplex, projected as
    ``tetrahedron`` projects a model's heads, coloured by orbit as in ``orbit_polygons`` (gray: no orbit), with
    its trail over the last ``trail_epochs`` epochs (default: the group's ``trail_epochs`` attribute).

    ``frame``: an index into the frames in epoch order (-1 = the last). Sources ``orbits_tetra_dots`` (x, y,
    head, orbit, colour, a..d; heads in no orbit first) and ``orbits_tetra_trails`` (one line per head, in the
    dots' order); figure ``orbits_tetrahedron``. A run stored without ``head_profile`` gives a message with the
    command that regenerates it (the group's ``command`` attribute).
    """
    ds = _orbits_ready(orbits)
    prof = of.head_profiles(ds)
    if prof is None:
        return hv.Div(f"<p class='note'>{of.code_html(of.no_profiles_note(ds))}</p>").opts(width=size, height=80)
    xy = orbit_profile_positions(ds, azimuth, elevation)
    F = xy.shape[0]
    f = int(frame) % F
    epochs = np.asarray(ds["epoch"].values)
    starts = of.trail_starts(epochs, of.trail_epochs(ds) if trail_epochs is None else float(trail_epochs))
    orbit = of.orbit_labels(ds)
    _, colour = of.orbit_colours(orbit)
    order = np.argsort(orbit >= 0, kind="stable")  # heads in no orbit first, so orbits draw on top
    edges, vertices = _simplex_outline(azimuth, elevation, "Tetra")
    trails = _trails(xy, starts, f, order, colour, orbit, "TetraTrails")
    coords = {c: prof[f, order, k] for k, c in enumerate(g.COORDS)}
    dots = _dots(xy[f, order, 0], xy[f, order, 1], order, colour, orbit, "TetraDots", coords,
                 tuple((c, f"@{c}{{0.000}}") for c in g.COORDS))
    lim = g.VIEW_LIMIT
    names = {"TetraDots": "orbits_tetra_dots", "TetraTrails": "orbits_tetra_trails"}
    return (edges * vertices * trails * dots).opts(
        hv.opts.Overlay(frame_width=size, frame_height=size, xlim=(-lim, lim), ylim=(-lim, lim), xaxis=None,
                        yaxis=None, show_grid=False, default_tools=[], toolbar=None, show_legend=False,
                        title="each head's W_Kᵀ W_Q profile", fontsize={"title": "9.5pt"},
                        hooks=[_named_sources(names, "orbits_tetrahedron"), _vertex_labels("Tetra")]))


def training_metrics(orbits: xr.Dataset, width: int = 430) -> hv.Layout:
    """Train and held-out accuracy (linear axis) over the epochs, and the equivariance errors on a log axis."""
    ds = _orbits_ready(orbits)
    epochs = np.asarray(ds["epoch"].values, dtype=float)
    m = of.metric_columns(ds)
    acc = (hv.Curve((epochs, m["train_accuracy"]), "epoch", "accuracy", label="train").opts(color="#1f77b4")
           * hv.Curve((epochs, m["heldout_accuracy"]), "epoch", "accuracy", label="held-out").opts(color="#2ca02c"))
    acc = acc.opts(hv.opts.Overlay(width=width, height=170, ylim=(0, 1.02), legend_position="bottom_right",
                                   default_tools=[], toolbar=None, title="accuracy"))
    curves = []
    for key, label, colour in (("equivariance_error", "equivariance error", "#d62728"),
                               ("sharpened_error", "at 2× QK", "#9467bd")):
        v = np.where(m[key] > 0, m[key], np.nan)
        if np.isfinite(v).any():
            curves.append(hv.Curve((epochs, v), "epoch", "equivariance error", label=label).opts(color=colour))
    if not curves:
        curves.append(hv.Curve(([], []), "epoch", "equivariance error"))
    err = hv.Overlay(curves).opts(hv.opts.Overlay(width=width, height=190, logy=True, default_tools=[],
                                                  toolbar=None, legend_position="bottom_left",
                                                  title="equivariance error (log axis)"))
    return (acc + err).cols(1).opts(shared_axes=False)


def family_sizes(search: xr.Dataset | None) -> dict[str, np.ndarray]:
    """Over the searched runs: for each orbit size, how many runs found at least one orbit of that size
    at the strictest stored tolerance (``size``, ``runs``), and the number of runs (``n_runs``)."""
    if search is None or "orbit_count" not in search:
        return {"size": np.zeros(0, int), "runs": np.zeros(0, int), "n_runs": np.array(0)}
    counts = search["orbit_count"]
    if "tol" in counts.dims:
        counts = counts.isel(tol=int(np.argmin(np.asarray(search["tol"].values, dtype=float))))
    values = np.asarray(counts.transpose("run", "size").values)
    return {"size": np.asarray(search["size"].values, dtype=int), "runs": (values > 0).sum(axis=0).astype(int),
            "n_runs": np.array(values.shape[0])}


def search_families(search: xr.Dataset | None, width: int = 430):
    """The orbits search: in how many runs an orbit of each size appeared (bars), or a message when the
    store has no ``orbits_search`` group."""
    if search is None or "orbit_count" not in search:
        return hv.Div(NO_SEARCH).opts(width=width, height=50)
    f = family_sizes(search)
    tol = float(np.min(search["tol"].values)) if "tol" in search else float("nan")
    bars = hv.Bars((f["size"].astype(str), f["runs"]), "orbit size", "runs with such an orbit")
    return bars.opts(width=width, height=190, color="#1f77b4", default_tools=[], toolbar=None,
                     ylim=(0, max(1, int(f["runs"].max(initial=0)))),
                     title=f"{int(f['n_runs'])} runs: orbits within {tol:.0%}")


def family_heads(search: xr.Dataset | None, width: int = 430):
    """The orbits search's frequency families: one dot per run and key frequency k with live heads, at the
    number of heads there, and a red dash at the heads an orbit at k needs, 24 / gcd(k, 24). A family can
    only form an orbit where its dots reach the dash (12 heads at k = 2 or 10 for the original 12-orbit)."""
    if search is None or "family_heads" not in search:
        return hv.Div(NO_SEARCH).opts(width=width, height=50)
    k = np.asarray(search["k"].values, dtype=int)
    heads = np.asarray(search["family_heads"].transpose("run", "k").values, dtype=int)
    run, col = np.nonzero(heads > 0)
    dots = hv.Scatter((k[col], heads[run, col]), "key frequency k", "heads").opts(
        color="#1f77b4", alpha=0.6, size=6)
    ks = k[k > 0]
    need = hv.Scatter((ks, 24 // np.gcd(ks, 24)), "key frequency k", "heads").opts(
        color="#c62828", marker="dash", size=14)
    return (dots * need).opts(width=width, height=190, default_tools=[], toolbar=None,
                              title=f"{heads.shape[0]} runs: heads per k")


# ----------------------------------------------------------------- what the stored run reproduces


def reproduction(orbits: xr.Dataset) -> list[dict]:
    """The original work's results next to the stored run's, each judged yes / no / partly.

    Rows: train accuracy 100%, held-out 76%, equivariance error 1e-4, a 12-head orbit, a 4-head orbit,
    every orbit verified within 2% under all 24 shifts. Values come from the group's last frame, its
    ``orbit`` labels and ``shift_error``.
    """
    ds = of.sorted_by_epoch(orbits)
    m = of.metric_columns(ds)
    train, held, e3 = (float(m[k][-1]) for k in ("train_accuracy", "heldout_accuracy", "equivariance_error"))
    checks = of.orbit_checks(ds)
    sizes = sorted((len(c.heads) for c in checks), reverse=True)
    rows = []

    def row(what, original, stored, verdict):
        rows.append({"result": what, "original": original, "stored": stored, "reproduced": verdict})

    row("train accuracy", "100%", f"{train:.1%}", "yes" if train >= 0.995 else ("partly" if train >= 0.9 else "no"))
    row("held-out accuracy", "76%", f"{held:.1%}", "yes" if held >= 0.74 else ("partly" if held >= 0.5 else "no"))
    row("equivariance error", "1e-4", f"{e3:.1e}", "yes" if e3 <= 1.5e-4 else ("partly" if e3 <= 1e-3 else "no"))
    largest = max(sizes, default=0)
    for size in (12, 4):
        found = sum(s == size for s in sizes)
        near = any(size // 2 <= s < size for s in sizes)
        verdict = "yes" if found else ("partly" if near else "no")
        stored = f"{found} found" if found else (f"none (largest {largest})" if largest else "none")
        row(f"a {size}-head orbit", "yes", stored, verdict)
    worst = [c.worst_error for c in checks if np.isfinite(c.worst_error)]
    within = sum(w <= 0.02 for w in worst)
    if not checks:
        stored, verdict = "no orbits", "no"
    else:
        stored = f"{within} of {len(checks)} orbits, worst {max(worst):.2%}" if worst else "not stored"
        verdict = "yes" if worst and within == len(checks) else ("partly" if within else "no")
    row("orbits verified within 2% under all 24 shifts", "yes", stored, verdict)
    return rows


def reproduction_table(orbits: xr.Dataset) -> hv.Table:
    """``reproduction`` as a HoloViews table."""
    rows = reproduction(orbits)
    return hv.Table([tuple(r.values()) for r in rows], ["result"], ["original", "stored", "reproduced"]).opts(
        width=430, height=200)



# --------------------------------------------------------------- the search's hypotheses, one row each

SEED_SUFFIX = re.compile(r"-s\d+$")
HYPOTHESIS_KS = (2, 10, 6)  # a 12-orbit's key frequencies (2 or 10) and a 4-orbit's (6)


def recipe_label(run: str) -> str:
    """A searched run's recipe: its name without the ``-sSEED`` suffix (``long+qk_init_scale=0.5-s9`` ->
    ``long+qk_init_scale=0.5``)."""
    return SEED_SUFFIX.sub("", str(run))


def gap_to_12_4(k2_k10: np.ndarray, k6: np.ndarray) -> np.ndarray:
    """How far each run's frequency families are from the counts a 12-orbit and a 4-orbit need: the heads to move
    for 12 at k = 2 or 10 (the nearer of the two) plus those for 4 at k = 6, |12 - h| + |4 - h6|, where too many
    heads count as much as too few (an orbit of C_24 at k has exactly 24 / gcd(k, 24) heads). 0: the families have
    the counts of 12 + 4 (the orbits themselves still have to form). k2_k10 (runs, 2), k6 (runs,) -> (runs,)."""
    return np.abs(12 - np.asarray(k2_k10)).min(axis=-1) + np.abs(4 - np.asarray(k6))


def hypotheses(search: xr.Dataset | None) -> list[dict]:
    """One row per recipe of the ``orbits_search`` group (``recipe_label``; labels sorted), over its runs:
    ``hypothesis`` (the label), ``runs``; for k in ``HYPOTHESIS_KS`` the frequency family at k (``family_heads``:
    the merged live heads whose strongest key frequency is k) as ``k{k}_max`` and ``k{k}_mean``; ``gap_min`` and
    ``gap_mean``, each run's family counts' distance from 12 + 4 (``gap_to_12_4``) least and on average; ``tol`` (the
    strictest stored tolerance, 2%) and ``largest_orbit``, the largest orbit found within it in any run (0:
    none); ``heldout``, the mean held-out accuracy, and ``e3``, the median equivariance error (runs without a
    value left out). [] without a search."""
    if search is None or any(v not in search for v in ("family_heads", "orbit_count")):
        return []
    labels = np.array([recipe_label(r) for r in search["run"].values], dtype=object)
    k = [int(x) for x in search["k"].values]
    fam = np.asarray(search["family_heads"].transpose("run", "k").values)
    t = int(np.argmin(np.asarray(search["tol"].values, dtype=float)))
    found = np.asarray(search["orbit_count"].transpose("run", "tol", "size").values)[:, t, :] > 0
    sizes = np.asarray(search["size"].values, dtype=int)
    held = np.asarray(search["heldout_accuracy"].values, dtype=float)
    e3 = np.asarray(search["e3"].values, dtype=float)
    rows = []
    for label in sorted(set(labels)):
        runs = np.flatnonzero(labels == label)
        row = {"hypothesis": label, "runs": len(runs)}
        for kk in HYPOTHESIS_KS:
            heads = fam[runs, k.index(kk)]
            row[f"k{kk}_max"], row[f"k{kk}_mean"] = int(heads.max()), float(heads.mean())
        gaps = gap_to_12_4(fam[runs][:, [k.index(2), k.index(10)]], fam[runs, k.index(6)])
        row["gap_min"], row["gap_mean"] = int(gaps.min()), float(gaps.mean())
        row["tol"] = float(search["tol"].values[t])
        row["largest_orbit"] = int(sizes[found[runs].any(axis=0)].max(initial=0))
        row["heldout"] = float(np.nanmean(held[runs])) if np.isfinite(held[runs]).any() else float("nan")
        row["e3"] = float(np.nanmedian(e3[runs])) if np.isfinite(e3[runs]).any() else float("nan")
        rows.append(row)
    return rows


def hypotheses_table(search: xr.Dataset | None, width: int = 1200):
    """``hypotheses`` as a HoloViews table: the family heads at each k as "max / mean", the largest orbit within
    the strictest tolerance, the mean held-out accuracy and the median equivariance error (E3); a message when
    the store has no ``orbits_search`` group."""
    rows = hypotheses(search)
    if not rows:
        return hv.Div(NO_SEARCH).opts(width=width, height=50)
    tol = rows[0]["tol"]

    def pct(v):
        return f"{v:.1%}" if np.isfinite(v) else "—"

    table = [(r["hypothesis"], r["runs"], *(f"{r[f'k{k}_max']} / {r[f'k{k}_mean']:.1f}" for k in HYPOTHESIS_KS),
              f"{r['gap_min']} / {r['gap_mean']:.1f}", str(r["largest_orbit"]) if r["largest_orbit"] else "none",
              pct(r["heldout"]),
              f"{r['e3']:.1e}" if np.isfinite(r["e3"]) else "—") for r in rows]
    vdims = [hv.Dimension("runs"),
             *(hv.Dimension(f"k{k}", label=f"k = {k}: max/mean") for k in HYPOTHESIS_KS),
             hv.Dimension("gap", label="from 12 + 4: min/mean"),
             hv.Dimension("largest", label=f"largest orbit ≤ {tol:.0%}"),
             hv.Dimension("heldout", label="held-out (mean)"), hv.Dimension("e3", label="E3 (median)")]
    return hv.Table(table, [hv.Dimension("hypothesis", label="recipe (run names without -sSEED)")], vdims).opts(
        width=width, height=min(30 + 25 * len(rows), 800), hooks=[_hypotheses_columns])


def _hypotheses_columns(plot, element) -> None:
    """A render hook: no index column, and the recipe column wide enough for the longest label (the columns
    share the table's width in proportion to their widths)."""
    table = plot.handles["table"]
    table.index_position = None
    for column, w in zip(table.columns, (500, 45, 110, 110, 110, 120, 120, 100, 95), strict=False):
        column.width = w


__all__ = [
    "baseline_html",
    "compare_depth",
    "compare_histograms",
    "computed_models",
    "depth_medians",
    "family_heads",
    "family_sizes",
    "gap_to_12_4",
    "head_inspector",
    "heads_table",
    "histograms",
    "hypotheses",
    "hypotheses_table",
    "kv_heads",
    "layer_type_map",
    "layer_heatmaps",
    "orbit_polygons",
    "orbit_profile_positions",
    "orbit_tetrahedron",
    "parity_selection",
    "parity_spectra",
    "parity_spectra_figure",
    "profile_array",
    "recipe_label",
    "render",
    "reproduction",
    "reproduction_table",
    "scales",
    "search_families",
    "spectrum_array",
    "statistic_heatmap",
    "statistics_note",
    "statistics_table",
    "symmetric_face",
    "tetrahedron",
    "training_metrics",
]
