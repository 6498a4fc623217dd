"""The 3-simplex as the views draw it: the heads' table (profile, 3D position, projection, type), the
tetrahedron's edges and vertices as the camera sees them, and the vertex labels. Shared by the profiles
page's tetrahedron and the orbits page's.
"""

from __future__ import annotations

import holoviews as hv
import numpy as np
from bokeh.models import HoverTool

from dashboard.common import geometry as g
from pipeline.schema import COORDINATES


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
    table |= {c: p[:, k].copy() for k, c in enumerate(COORDINATES)}
    table |= dict(x3=xyz[:, 0].copy(), y3=xyz[:, 1].copy(), z3=xyz[:, 2].copy())
    types = g.spectral_types(p).astype(np.int32)
    table |= dict(type=types, type_name=np.array([g.TYPE_NAMES[t] for t in types], dtype=object))
    return table


def edge_indices() -> dict[str, list[int]]:
    """The two vertices of each edge, for the browser's projection (project.js: ``ctx.edge_from``, ``edge_to``)."""
    return {"edge_from": [e[0] for e in g.EDGES], "edge_to": [e[1] for e in g.EDGES]}


def simplex_outline(azimuth: float, elevation: float, group: str = "", vertex_size: int = 11,
                    turnable: bool = False) -> tuple[hv.Segments, hv.Points]:
    """The tetrahedron's edges and vertices (``geometry.VERTICES``, ``EDGES``) as the camera sees them, as
    the elements ``{group}Edges`` and ``{group}Vertices``. The vertices' source holds ``label`` and ``dy``
    for ``vertex_labels``, and with ``turnable`` their 3D positions (x3, y3, z3), which the browser turns."""
    vx, vy = g.project(g.VERTICES, azimuth, elevation)
    e = edge_indices()
    i, j = np.array(e["edge_from"]), np.array(e["edge_to"])
    edges = hv.Segments(dict(x0=vx[i], y0=vy[i], x1=vx[j], y1=vy[j]), ["x0", "y0", "x1", "y1"],
                        group=f"{group}Edges").opts(color="#5b6270", line_width=1.5, alpha=0.8, default_tools=[])
    data = dict(x=vx, y=vy, label=list(g.VERTEX_SHORT), full=list(g.VERTEX_LABELS))
    if turnable:
        data |= dict(x3=g.VERTICES[:, 0].copy(), y3=g.VERTICES[:, 1].copy(), z3=g.VERTICES[:, 2].copy())
    data["dy"] = g.label_offsets(vy)
    vertices = hv.Points(data, ["x", "y"], [k for k in data if k not in ("x", "y")], group=f"{group}Vertices").opts(
        color="#222831", marker="diamond", size=vertex_size, default_tools=[],
        tools=[HoverTool(tooltips=[("vertex", "@full")])])
    return edges, vertices


def vertex_labels(fig, vertices, font_size: str, **names) -> None:
    """The vertex labels of ``simplex_outline``'s vertices' source, above or below their vertex (``dy``);
    ``names``: ``name=`` of the labels' renderer, when the page drives it."""
    fig.text("x", "y", text="label", source=vertices, y_offset="dy", text_align="center", text_baseline="middle",
             text_font_size=font_size, text_color="#222831", text_font_style="bold",
             background_fill_color="#ffffff", background_fill_alpha=0.75, **names)
