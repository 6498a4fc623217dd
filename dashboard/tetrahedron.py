"""The 3-simplex drawn in 3D, projected in the browser.

A profile (a, b, c, d) is a point of the 3-simplex; it is drawn at a V_a + b V_b + c V_c + d V_d with
V the vertices of a regular tetrahedron centred at 0 with circumradius 1. The view is an orthographic
camera turned by azimuth (about the vertical z axis) then elevation (about the screen's x axis);
the projection runs in JavaScript (``PROJECT_JS``) so that the sliders and drags work in a static
page. ``project`` is the same map in numpy, used to label the vertices server-side and by the tests
as the reference for the browser's numbers.
"""

from __future__ import annotations

import numpy as np
from bokeh.models import (
    BasicTicker,
    BoxSelectTool,
    ColorBar,
    ColumnDataSource,
    CustomJS,
    HoverTool,
    LassoSelectTool,
    LinearColorMapper,
    Range1d,
    ResetTool,
    Slider,
)
from bokeh.palettes import Viridis256
from bokeh.plotting import figure

# Vertices of the regular tetrahedron on the unit sphere, in the order of the coordinates a, b, c, d.
VERTICES = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], dtype=float) / np.sqrt(3)
VERTEX_LABELS = (
    "a = 1 antisymmetric",
    "b = 1 H: symmetric, spectrum symmetric about 0",
    "c = 1 positive semidefinite",
    "d = 1 negative semidefinite",
)
VERTEX_SHORT = ("a: antisymmetric", "b: H", "c: PSD", "d: NSD")
EDGES = ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3))
DEFAULT_AZIMUTH = 30.0
DEFAULT_ELEVATION = 20.0


def to_3d(profile: np.ndarray) -> np.ndarray:
    """Barycentric (..., 4) -> Cartesian (..., 3): sum_k p_k V_k. NaN stays NaN."""
    return np.asarray(profile, dtype=float) @ VERTICES


def project(xyz: np.ndarray, azimuth_deg: float, elevation_deg: float) -> tuple[np.ndarray, np.ndarray]:
    """Orthographic projection of (..., 3) points to screen (x, y) for a camera at (azimuth, elevation).

    Turn by the azimuth about z, then look from the elevation: screen x = x', screen y =
    z cos(el) - y' sin(el), with (x', y') the turned horizontal coordinates.
    """
    az, el = np.radians(azimuth_deg), np.radians(elevation_deg)
    x, y, z = xyz[..., 0], xyz[..., 1], xyz[..., 2]
    xr = x * np.cos(az) - y * np.sin(az)
    yr = x * np.sin(az) + y * np.cos(az)
    return xr, z * np.cos(el) - yr * np.sin(el)


# The same map as ``project`` in JS; operates on the data of the heads, edges and vertex sources.
PROJECT_JS = """
function project_all(ctx) {
  const az = ctx.azimuth.value * Math.PI / 180, el = ctx.elevation.value * Math.PI / 180;
  const ca = Math.cos(az), sa = Math.sin(az), ce = Math.cos(el), se = Math.sin(el);
  function px(x, y, z) { return x * ca - y * sa; }
  function py(x, y, z) { return z * ce - (x * sa + y * ca) * se; }
  const h = ctx.heads.data, n = h.x3.length;
  for (let i = 0; i < n; i++) {
    h.x[i] = px(h.x3[i], h.y3[i], h.z3[i]);
    h.y[i] = py(h.x3[i], h.y3[i], h.z3[i]);
  }
  const v = ctx.vertices.data;
  for (let k = 0; k < v.x3.length; k++) {
    v.x[k] = px(v.x3[k], v.y3[k], v.z3[k]);
    v.y[k] = py(v.x3[k], v.y3[k], v.z3[k]);
    v.align[k] = v.x[k] < -0.15 ? 'right' : (v.x[k] > 0.15 ? 'left' : 'center');
    v.dx[k] = v.align[k] === 'right' ? -8 : (v.align[k] === 'left' ? 8 : 0);
    v.dy[k] = v.y[k] >= 0 ? 8 : -18;
  }
  const e = ctx.edges.data;
  for (let k = 0; k < e.i.length; k++) {
    e.x0[k] = v.x[e.i[k]]; e.y0[k] = v.y[e.i[k]];
    e.x1[k] = v.x[e.j[k]]; e.y1[k] = v.y[e.j[k]];
  }
  ctx.heads.change.emit(); ctx.vertices.change.emit(); ctx.edges.change.emit();
}
"""

# Drag to rotate: remember the camera at pan start, turn by the pointer's travel (0.4 degree per pixel).
DRAG_JS = """
if (ctx.box.active || ctx.lasso.active) { return; }
const f = ctx.fig;
if (cb_obj.event_name === 'panstart' || f.__drag == null) {
  f.__drag = {sx: cb_obj.sx, sy: cb_obj.sy, az: ctx.azimuth.value, el: ctx.elevation.value};
  if (cb_obj.event_name === 'panstart') { return; }
}
const s = f.__drag;
let az = s.az - 0.4 * (cb_obj.sx - s.sx);
az = ((az % 360) + 540) % 360 - 180;
const el = Math.max(-90, Math.min(90, s.el + 0.4 * (cb_obj.sy - s.sy)));
ctx.azimuth.value = Math.round(az * 10) / 10;
ctx.elevation.value = Math.round(el * 10) / 10;
"""


def label_placement(x: np.ndarray, y: np.ndarray) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Vertex labels sit outside the figure: aligned away from the centre (same rule as the JS)."""
    align = ["right" if v < -0.15 else ("left" if v > 0.15 else "center") for v in x]
    dx = np.array([{"right": -8.0, "left": 8.0, "center": 0.0}[a] for a in align])
    dy = np.where(np.asarray(y) >= 0, 8.0, -18.0)
    return align, dx, dy


def vertex_source(azimuth: float = DEFAULT_AZIMUTH, elevation: float = DEFAULT_ELEVATION) -> ColumnDataSource:
    x, y = project(VERTICES, azimuth, elevation)
    align, dx, dy = label_placement(x, y)
    return ColumnDataSource(
        dict(x3=VERTICES[:, 0].copy(), y3=VERTICES[:, 1].copy(), z3=VERTICES[:, 2].copy(), x=x, y=y,
             label=list(VERTEX_SHORT), full=list(VERTEX_LABELS), align=align, dx=dx, dy=dy),
        name="tetra_vertices",
    )


def edge_source(vertices: ColumnDataSource) -> ColumnDataSource:
    i = np.array([e[0] for e in EDGES], dtype=np.int32)
    j = np.array([e[1] for e in EDGES], dtype=np.int32)
    x, y = np.asarray(vertices.data["x"]), np.asarray(vertices.data["y"])
    return ColumnDataSource(dict(i=i, j=j, x0=x[i], y0=y[i], x1=x[j], y1=y[j]), name="tetra_edges")


def angle_sliders(azimuth: float = DEFAULT_AZIMUTH, elevation: float = DEFAULT_ELEVATION) -> tuple[Slider, Slider]:
    az = Slider(start=-180, end=180, value=azimuth, step=1, title="azimuth (°)", name="azimuth", width=240)
    el = Slider(start=-90, end=90, value=elevation, step=1, title="elevation (°)", name="elevation", width=240)
    return az, el


def tetrahedron_figure(heads: ColumnDataSource, model: str, n_layers: int, azimuth: Slider, elevation: Slider,
                       size: int = 520):
    """The tetrahedron with one dot per head; returns (figure, context dict for the JS callbacks).

    ``heads`` has columns layer, head, a, b, c, d (current profile), x3, y3, z3 and x, y (projected).
    Dragging in the plot (with neither selection tool active) turns the camera by moving the sliders.
    """
    vertices = vertex_source(azimuth.value, elevation.value)
    edges = edge_source(vertices)
    lim = 1.3
    fig = figure(width=size, height=size, x_range=Range1d(-lim, lim), y_range=Range1d(-lim, lim),
                 tools=[], toolbar_location="above", match_aspect=True, name="tetrahedron",
                 title="Profiles on the 3-simplex (drag to rotate)")
    fig.axis.visible = False
    fig.grid.visible = False
    fig.outline_line_color = None
    fig.segment("x0", "y0", "x1", "y1", source=edges, line_color="#5b6270", line_width=1.5, line_alpha=0.8)
    corners = fig.scatter("x", "y", source=vertices, size=11, color="#222831", marker="diamond")
    fig.text("x", "y", text="label", source=vertices, x_offset="dx", y_offset="dy", text_align="align",
             text_baseline="bottom", text_font_size="10.5pt", text_color="#222831", text_font_style="bold")
    mapper = LinearColorMapper(palette=Viridis256, low=0, high=max(n_layers - 1, 1))
    dots = fig.scatter("x", "y", source=heads, size=7, fill_color={"field": "layer", "transform": mapper},
                       line_color="#ffffff", line_width=0.4, fill_alpha=0.85,
                       selection_fill_color="#ff5a1f", selection_line_color="#222831", selection_fill_alpha=1.0,
                       nonselection_fill_alpha=0.15, nonselection_line_alpha=0.1, name="head_dots")
    fig.add_layout(ColorBar(color_mapper=mapper, title="layer", width=10, label_standoff=6,
                            ticker=BasicTicker(min_interval=1, desired_num_ticks=min(max(n_layers, 2), 10)),
                            title_text_font_style="normal"), "right")
    hover = HoverTool(renderers=[dots], tooltips=[
        ("model", model), ("layer", "@layer"), ("head", "@head"),
        ("a", "@a{0.000}"), ("b", "@b{0.000}"), ("c", "@c{0.000}"), ("d", "@d{0.000}")])
    box = BoxSelectTool(renderers=[dots], persistent=False)
    lasso = LassoSelectTool(renderers=[dots])
    fig.add_tools(hover, HoverTool(renderers=[corners], tooltips=[("vertex", "@full")]), box, lasso, ResetTool())
    fig.toolbar.active_drag = None
    ctx = dict(heads=heads, vertices=vertices, edges=edges, azimuth=azimuth, elevation=elevation,
               fig=fig, box=box, lasso=lasso)
    drag = CustomJS(args=dict(ctx=ctx), code=DRAG_JS)
    fig.js_on_event("panstart", drag)
    fig.js_on_event("pan", drag)
    project_cb = CustomJS(args=dict(ctx=ctx), code=PROJECT_JS + "project_all(ctx);")
    azimuth.js_on_change("value", project_cb)
    elevation.js_on_change("value", project_cb)
    return fig, ctx
