"""The tetrahedron view: every head of one model as a dot in the 3-simplex, coloured by layer or by spectral
type, with the rank-one curve, turned by a drag (``rotate_drag.js``) or, on a page, by its angle sliders."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import xarray as xr
from bokeh.models import (
    BasicTicker,
    BoxSelectTool,
    CDSView,
    ColorBar,
    ColumnDataSource,
    GlyphRenderer,
    GroupFilter,
    HoverTool,
    LassoSelectTool,
    Legend,
    LegendItem,
    LinearColorMapper,
)
from bokeh.palettes import Viridis256

from dashboard.common import geometry as g
from dashboard.common import jscode
from dashboard.common.render import Named, name_models, name_tools
from dashboard.common.selection import at_offset, model_name, profile_array, statistics_table
from dashboard.common.simplex import edge_indices, heads_table, simplex_outline, vertex_labels
from dashboard.profiles.analyses_data import baseline_percentiles, cluster_labels
from pipeline.analyses import clusters
from pipeline.analyses.report import BASELINE_STATISTICS
from pipeline.schema import COORDINATES

COLOR_MODES = ("layer", "type", "cluster")
MAIN_STATISTICS = ("symmetric_energy", "rho", "pairing", "stable_rank")
CLUSTER_K = clusters.K  # the clusters drawn: the report's chosen k
CLUSTER_COLORS = g.CLUSTER_COLORS
CLOUD_COLOR = "#9e9e9e"


def kv_heads(sel, n_heads: int) -> np.ndarray:
    """(n_heads,) the key/value head each query head reads (grouped-query attention: ``head // (n_heads /
    n_kv_heads)``); the head itself without ``n_kv_heads`` or for multi-head attention."""
    head = np.arange(n_heads, dtype=np.int32)
    n_kv = int(sel["n_kv_heads"].values) if isinstance(sel, xr.Dataset) and "n_kv_heads" in sel else 0
    if 0 < n_kv < n_heads and n_heads % n_kv == 0:
        return head // (n_heads // n_kv)
    return head


def _grouped(fig, dots, heads, column: str, groups: list, colours: list[str], labels: list[str],
             names: tuple[str, str], shown: bool) -> tuple[list[GlyphRenderer], Legend]:
    """One renderer per group of heads beside ``dots``, over the same source ``heads`` filtered by its ``column``
    (a GroupFilter), named ``{names[0]}{k}``, in ``colours[k]``, and a legend named ``names[1]`` (items
    ``{names[1]}_item{k}`` reading ``labels[k]``) whose click hides a group. The selection tools of ``dots``
    cover them too; ``shown``: drawn with ``dots`` hidden (the hover then covers them), else added hidden for a
    page to show (color_mode.js, which also moves the hover)."""
    out = []
    for k, group in enumerate(groups):
        r = GlyphRenderer(data_source=heads, glyph=dots.glyph.clone(), visible=shown, name=f"{names[0]}{k}",
                          view=CDSView(filter=GroupFilter(column_name=column, group=group)))
        for attr in ("selection_glyph", "nonselection_glyph", "hover_glyph"):
            glyph = getattr(dots, attr)
            setattr(r, attr, glyph.clone() if glyph is not None and glyph != "auto" else glyph)
        for glyph in (r.glyph, r.nonselection_glyph, r.hover_glyph):
            if glyph is not None and glyph != "auto":
                glyph.fill_color = colours[k]
        out.append(r)
    at = fig.renderers.index(dots) + 1
    fig.renderers = [*fig.renderers[:at], *out, *fig.renderers[at:]]
    legend = Legend(items=[LegendItem(label=label, renderers=[out[k]], name=f"{names[1]}_item{k}")
                           for k, label in enumerate(labels)],
                    click_policy="hide", location="top_left", name=names[1], label_text_font_size="9pt",
                    background_fill_alpha=0.7, visible=shown)
    fig.add_layout(legend)
    for tool in fig.tools:
        rs = getattr(tool, "renderers", "auto")
        if isinstance(rs, list) and dots in rs and (shown or not isinstance(tool, HoverTool)):
            tool.renderers = [*rs, *out]
    if shown:
        dots.visible = False
    return out, legend


def by_type(fig, dots, heads, shown: bool) -> tuple[list[GlyphRenderer], Legend]:
    """The colour by spectral type beside ``dots`` (the heads coloured by layer): one renderer per type over
    the same source ``heads`` (a GroupFilter on its ``type`` column, which the browser rewrites at every d:
    spectral_types.js), ``head_dots_type0`` .. ``head_dots_type2``, each in its colour
    (``geometry.TYPE_COLORS``), and a legend ``type_legend`` whose items read "Type I₊ (n=K)" and hide their
    type on a click. The selection tools of ``dots`` cover them too.

    ``shown``: the types are drawn and ``dots`` hidden (the hover then covers the types); else the types and
    their legend are added hidden, for a page to show (color_mode.js, which also moves the hover)."""
    types = np.asarray(heads.data["type"])
    return _grouped(fig, dots, heads, "type", [0, 1, 2], list(g.TYPE_COLORS), g.type_labels(types),
                    ("head_dots_type", "type_legend"), shown)


def by_cluster(fig, dots, heads, shown: bool) -> tuple[list[GlyphRenderer], Legend]:
    """The colour by cluster beside ``dots``: the k-means clusters of the heads' unit S spectra at d = 0
    (``analyses_data.cluster_labels``, the ``cluster`` column of ``heads``; 0 the positive-dominant one), one
    renderer per cluster ``head_dots_cluster0`` .. and one for the heads left out (``-1``: no spectrum), each in
    ``CLUSTER_COLORS``, and a legend ``cluster_legend`` whose items read "cluster 0 (n=K)". As ``by_type``
    otherwise (``shown``); the clusters do not move with d."""
    labels = np.asarray(heads.data["cluster"])
    groups = [*range(CLUSTER_K), -1]
    names = [*(f"cluster {k}" for k in range(CLUSTER_K)), "not clustered"]
    counts = [int(np.sum(labels == k)) for k in groups]
    out, legend = _grouped(fig, dots, heads, "cluster", groups, list(CLUSTER_COLORS),
                           [f"{n} (n={c})" for n, c in zip(names, counts, strict=True)],
                           ("head_dots_cluster", "cluster_legend"), shown)
    for item, c in zip(legend.items, counts, strict=True):
        item.visible = c > 0  # "not clustered" only where a head has no spectrum
    return out, legend


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
    ctx = dict(heads=src, vertices=vertices, edges=edges, camera=camera, label_offset_px=g.LABEL_OFFSET_PX,
               **edge_indices())
    camera.js_on_change("data", jscode.callback(dict(ctx=ctx), "project", "rank_one_project"))


def cloud_columns(baseline: xr.Dataset | None, azimuth: float, elevation: float) -> dict[str, np.ndarray]:
    """The baseline's heads at d = 0 as the cloud's columns: x3, y3, z3 (3D) and x, y (projected), float32 (drawn,
    not read); no rows without a baseline. At d = 0 only, for a rotary model too: following the d slider would ship
    the baseline's profile at every offset, as large again as the page's own profile cube."""
    if baseline is None:
        return {k: np.zeros(0, np.float32) for k in ("x", "y", "x3", "y3", "z3")}
    p = at_offset(profile_array(baseline), 0).reshape(-1, 4)
    xyz = g.to_3d(p)
    x, y = g.project(xyz, azimuth, elevation)
    return {k: np.asarray(v, dtype=np.float32) for k, v in
            dict(x=x, y=y, x3=xyz[:, 0], y3=xyz[:, 1], z3=xyz[:, 2]).items()}


def _cloud(fig, columns: dict, visible: bool, vertices, edges, camera) -> None:
    """The baseline's heads (``cloud_columns``) as faint grey dots ``baseline_cloud_dots`` (source
    ``baseline_cloud``) under the heads and the rank-one curve, without hover or selection; turned with the camera
    (baseline_cloud_project.js, whenever the camera's data is written)."""
    src = ColumnDataSource(columns, name="baseline_cloud")
    dots = fig.scatter("x", "y", source=src, size=4, fill_color=CLOUD_COLOR, fill_alpha=0.3, line_color=None,
                       name="baseline_cloud_dots", visible=bool(visible))
    rest = [r for r in fig.renderers if r is not dots]
    at = next((i for i, r in enumerate(rest) if str(r.name).startswith("head_dots")), len(rest))
    fig.renderers = [*rest[:at], dots, *rest[at:]]
    for tool in fig.tools:  # the selection tools pick heads, not the cloud
        if isinstance(tool, (BoxSelectTool, LassoSelectTool)) and tool.renderers == "auto":
            tool.renderers = [r for r in fig.renderers if str(r.name).startswith("head_dots")]
    ctx = dict(heads=src, vertices=vertices, edges=edges, camera=camera, label_offset_px=g.LABEL_OFFSET_PX,
               **edge_indices())
    camera.js_on_change("data", jscode.callback(dict(ctx=ctx), "project", "baseline_cloud_project"))


def _layer_colours(fig, dots, n_layers: int) -> None:
    """The heads coloured by layer (Viridis), with the colour bar ``layer_colour_bar``."""
    mapper = LinearColorMapper(palette=Viridis256, low=0, high=max(n_layers - 1, 1), name="layer_colours")
    for glyph in (dots.glyph, dots.nonselection_glyph, dots.muted_glyph, dots.hover_glyph):
        if glyph is not None and glyph != "auto":
            glyph.fill_color = {"field": "layer", "transform": mapper}
    fig.add_layout(ColorBar(color_mapper=mapper, title="layer", width=10, name="layer_colour_bar",
                            ticker=BasicTicker(min_interval=1, desired_num_ticks=min(max(n_layers, 2), 10))),
                   "right")


def _rotatable(az: float, el: float, n_layers: int, columns: dict, color_by: str, rank_one: bool | None,
               cloud: tuple[dict, bool] | None):
    """A render hook: adds ``columns`` to the heads' source (the 3D positions the browser turns), colours the
    heads by layer (a colour bar), by type (``by_type``) or by cluster (``by_cluster``), draws the baseline's
    cloud (``cloud``: its columns and whether it is shown), the rank-one curve and the vertex labels, adds
    drag-to-rotate (rotate_drag.js)."""
    names = name_models({"Heads": {"source": "heads", "renderer": "head_dots"},
                         "Vertices": {"source": "tetra_vertices"}, "Edges": {"source": "tetra_edges"}}, "tetrahedron")

    def hook(plot, element):
        names(plot, element)
        fig = plot.state
        name_tools(fig, {BoxSelectTool: "head_box_select", LassoSelectTool: "head_lasso_select"})
        named = Named(fig)
        heads, vertices, edges, dots = (named[n] for n in ("heads", "tetra_vertices", "tetra_edges", "head_dots"))
        heads.data.update({k: np.array(v, copy=True) for k, v in columns.items()})
        if color_by == "type":
            by_type(fig, dots, heads, shown=True)
        elif color_by == "cluster":
            by_cluster(fig, dots, heads, shown=True)
        else:
            _layer_colours(fig, dots, n_layers)
        vertex_labels(fig, vertices, "10.5pt", name="vertex_labels")
        camera = ColumnDataSource(dict(az=[float(az)], el=[float(el)]), name="camera")
        if cloud is not None:
            _cloud(fig, *cloud, vertices, edges, camera)
        if rank_one is not None:
            _curve(fig, az, el, bool(rank_one), vertices, edges, camera)
        ctx = dict(heads=heads, vertices=vertices, edges=edges, camera=camera, tetrahedron=fig,
                   box_select=named["head_box_select"], lasso_select=named["head_lasso_select"],
                   label_offset_px=g.LABEL_OFFSET_PX,
                   **edge_indices())
        drag = jscode.callback(dict(ctx=ctx), "project", "rotate_drag")
        fig.js_on_event("panstart", drag)
        fig.js_on_event("pan", drag)
        fig.toolbar.active_drag = None
    return hook


def _heads(sel, d: int, azimuth: float, elevation: float, baseline) -> tuple[dict[str, np.ndarray], list]:
    """The heads' columns (``tetrahedron``'s docstring) and the hover's tooltips."""
    profile = profile_array(sel)
    heads = heads_table(at_offset(profile, d), azimuth, elevation)
    L, H = profile.shape[:2]
    heads["kv_head"] = np.tile(kv_heads(sel, H), L)
    stats = statistics_table(sel)
    for name in MAIN_STATISTICS:
        heads[name] = stats[name].reshape(-1).copy() if stats is not None else np.full(L * H, np.nan)
    heads["cluster"] = cluster_labels(sel).astype(np.int32)
    ranks = baseline_percentiles(sel, baseline) if baseline is not None else None
    heads |= {k: v.astype(np.float32) for k, v in (ranks or {}).items()}  # hover and inspector: float32 is enough
    tips = [("model", model_name(sel)), ("layer", "@layer"), ("head", "@head"), ("kv head", "@kv_head"),
            ("a", "@a{0.000}"), ("b", "@b{0.000}"), ("c", "@c{0.000}"), ("d", "@d{0.000}"), ("type", "@type_name")]
    if stats is not None:
        tips += [(f"{name} (d = 0)", f"@{name}{{0.000}}") for name in MAIN_STATISTICS]
        tips.append((f"cluster (k = {CLUSTER_K}, d = 0)", "@cluster"))
    if ranks:
        tips += [(f"{name} percentile vs baseline", f"@percentile_{name}{{0.0}}") for name in BASELINE_STATISTICS]
    return heads, tips


def tetrahedron(sel, d: int = 0, azimuth: float = g.DEFAULT_AZIMUTH, elevation: float = g.DEFAULT_ELEVATION,
                size: int = 440, color_by: str = "layer", rank_one: bool | None = None,
                baseline: xr.Dataset | None = None, cloud: bool | None = None) -> hv.Overlay:
    """Every head of one model as a dot in the 3-simplex; drag it to rotate.

    ``color_by``: "layer" (a colour bar; one renderer ``head_dots``), "type" (the spectral type at this d,
    ``geometry.spectral_types``: ``by_type``'s renderers ``head_dots_type0`` .. ``head_dots_type2`` over the
    same ``heads`` source filtered by its ``type`` column, and its legend ``type_legend`` whose items read
    "Type I₊ (n=K)" and whose click hides a type) or "cluster" (the k-means clusters of the heads' unit S spectra
    at d = 0, ``by_cluster``: renderers ``head_dots_cluster0`` .., legend ``cluster_legend``). ``rank_one``: draw
    the rank-one curve (renderer ``rank_one_curve``, source ``rank_one_source``; False draws it hidden, for a
    toggle to show; None leaves it out). Hover a dot for its model, layer, head, kv head, profile, type and (when
    the store holds them) main statistics at d = 0 and cluster; box or lasso select from the toolbar (tools
    ``head_box_select``, ``head_lasso_select``; the hover ``head_hover``).

    ``baseline``: the Dataset of one of the model's random baselines (``analyses_data.baseline_of``): the hover
    gives each head's percentile of ``symmetric_energy``, ``pairing`` and ``rho`` among the baseline's heads, and
    the baseline's heads at d = 0 are a faint cloud behind the model's (``cloud_columns``; renderer
    ``baseline_cloud_dots``, source ``baseline_cloud``). ``cloud``: None draws the cloud when a baseline is given;
    True or False draw it (empty without a baseline) shown or hidden, for a toggle to show.

    The heads' source ``heads`` holds, per head in layer-major order: x, y (projected), layer, head, kv_head,
    a..d, lj, x3..z3 (3D position), type, type_name, the main statistics (``MAIN_STATISTICS``, NaN without),
    cluster (-1 for a head without a spectrum) and, with a baseline, ``percentile_<statistic>``.
    """
    if color_by not in COLOR_MODES:
        raise ValueError(f"color_by must be one of {COLOR_MODES}, got {color_by!r}")
    heads, tips = _heads(sel, d, azimuth, elevation, baseline)
    L = int(np.max(heads["layer"], initial=0)) + 1
    edges, vertices = simplex_outline(azimuth, elevation, turnable=True)
    hover = HoverTool(tooltips=tips, limit=1, attachment="horizontal", name="head_hover")
    shown = ("layer", "head", *COORDINATES)  # the columns HoloViews sees; the hook adds the rest
    points = hv.Points({k: heads[k] for k in ("x", "y", *shown)}, ["x", "y"], list(shown), group="Heads").opts(
        color="#440154", size=7,
        line_color="#ffffff", line_width=0.4, fill_alpha=0.85, selection_fill_color=g.SELECTED,
        selection_line_color="#222831", selection_fill_alpha=1.0, nonselection_fill_alpha=0.15,
        nonselection_line_alpha=0.1, tools=[hover, "box_select", "lasso_select", "reset"], default_tools=[])
    lim = g.VIEW_LIMIT
    extra = {k: v for k, v in heads.items() if k not in ("x", "y", *shown)}
    drawn = None if cloud is None and baseline is None else (cloud_columns(baseline, azimuth, elevation),
                                                             True if cloud is None else bool(cloud))
    return (edges * vertices * points).opts(
        hv.opts.Overlay(frame_width=size, frame_height=size, xlim=(-lim, lim), ylim=(-lim, lim), xaxis=None,
                        yaxis=None, show_grid=False, default_tools=["reset"], active_tools=[], toolbar="right",
                        title="Profiles on the 3-simplex (drag to rotate)", show_legend=False,
                        hooks=[_rotatable(azimuth, elevation, max(L, 1), extra, color_by, rank_one, drawn)]))
