"""The per-coordinate views of one model, four panels side by side (a, b, c, d): the heads of each layer per
value bin (heat maps) and the fraction of all heads, and of the selected ones, per value bin (histograms)."""

from __future__ import annotations

import holoviews as hv
import numpy as np
from bokeh.models import FixedTicker

from dashboard.common import geometry as g
from dashboard.common.render import name_models
from dashboard.common.selection import at_offset, layer_counts, profile_array, scales
from dashboard.common.simplex import heads_table
from pipeline.schema import COORDINATES

PANEL_STEP = 1.2  # x offset between the four coordinate panels of the per-layer views (each spans [0, 1])


def _panel_axis(plot, element) -> None:
    """Render hook: ticks 0, 0.5, 1 under each of the four coordinate panels, no grid."""
    fig = plot.state
    labels = {k * PANEL_STEP + t: text for k in range(4) for t, text in ((0.0, "0"), (0.5, "0.5"), (1.0, "1"))}
    fig.xaxis.ticker = FixedTicker(ticks=list(labels))
    fig.xaxis.major_label_overrides = labels
    fig.xgrid.visible = False
    fig.ygrid.visible = False


def _panel_titles(y: float) -> hv.Labels:
    return hv.Labels({"x": [k * PANEL_STEP + 0.5 for k in range(4)], "y": [y] * 4, "text": list(g.COORD_TITLES)},
                     ["x", "y"], "text", group="PanelTitles").opts(text_font_size="10pt", text_baseline="bottom",
                                                                   text_font_style="bold", text_color="#222831",
                                                                   default_tools=[])


def layer_heatmaps(sel, d: int = 0, bins: int = g.N_BINS, width: int = 800, high: float | None = None) -> hv.Overlay:
    """Per coordinate (four panels side by side), the number of heads of each layer in each value bin.

    One colour scale, shown by the colour bar, covers the four panels and every offset d, so a colour
    keeps its meaning while d moves (``high``: its top, computed by ``scales`` when not given). The heads
    are drawn on top as dots that show only when selected (box-select them here).

    Coordinate c's heat map has the source ``heat_{c}``, image glyph ``heat_image_{c}`` and colour mapper
    ``heat_colours_{c}`` (the colour bar shows d's); its dots the renderer ``layer_dots_{c}``.
    """
    profile = profile_array(sel)
    dd = int(np.clip(d, 0, profile.shape[2] - 1))
    counts = layer_counts(profile[:, :, dd: dd + 1], bins)  # (1, L, 4, B)
    dd = 0
    L = max(profile.shape[0], 1)
    high = scales(sel, bins)[0] if high is None else high
    heads = heads_table(at_offset(profile, d))
    for k, c in enumerate(COORDINATES):
        heads[f"{c}_x"] = heads[c] + k * PANEL_STEP
    layers, names = [], {}
    for k, c in enumerate(COORDINATES):
        x0 = k * PANEL_STEP
        layers.append(hv.Image(counts[dd, ::-1, k].copy(), bounds=(x0, -0.5, x0 + 1, L - 0.5), kdims=["value", "layer"],
                               vdims=["heads"], group="Heat", label=c).opts(
            cmap="Blues", clim=(0, high), colorbar=k == 3, clabel="heads per layer and bin",
            colorbar_opts={"width": 10}, default_tools=[]))
        layers.append(hv.Points(heads, [f"{c}_x", "lj"], ["layer", "head"], group="LayerDots", label=c).opts(
            size=6, color=g.SELECTED, fill_alpha=0.0, line_alpha=0.0, line_color="#222831", selection_fill_alpha=1.0,
            selection_line_alpha=1.0, nonselection_fill_alpha=0.0, nonselection_line_alpha=0.0,
            tools=["box_select"], default_tools=[]))
        names[f"Heat.{c}"] = {"source": f"heat_{c}", "glyph": f"heat_image_{c}", "mapper": f"heat_colours_{c}"}
        names[f"LayerDots.{c}"] = {"renderer": f"layer_dots_{c}"}
    top = L - 0.5 + max(1.0, 0.06 * L)
    layers.append(_panel_titles(L - 0.5))
    return hv.Overlay(layers).opts(hv.opts.Overlay(
        width=width, height=max(280, min(560, 14 * L + 100)), xlim=(-0.04, 3 * PANEL_STEP + 1.04), ylim=(-0.5, top),
        xlabel="value of the coordinate", ylabel="layer", default_tools=["reset"], active_tools=["box_select"],
        toolbar="above", show_legend=False, hooks=[name_models(names), _panel_axis],
        title="Per layer: heads per value bin; selected heads in orange (box-select here too)"))


def histograms(sel, d: int = 0, bins: int = g.N_BINS, selected=None, width: int = 800,
               top: float | None = None) -> hv.Overlay:
    """Per coordinate (four panels side by side), the fraction of all heads in each value bin, and of the
    ``selected`` heads (an orange outline, drawn only when some are selected).

    ``selected``: indices into the heads in layer-major order (as the tetrahedron's selection gives them).
    The height (``top``, computed by ``scales`` when not given) covers every offset d. Each kind is one
    ``hv.Rectangles`` of 4 x ``bins`` bars, coordinate-major (the bars of a, then of b, ...): one glyph
    for the four panels; every head's is the renderer ``hist_bars`` over the source ``hist_all``.
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
    at = at_offset(profile, d).reshape(-1, 4)
    chosen = np.asarray(selected if selected is not None else [], dtype=int)
    layers = [bars(fractions(at), "All").opts(color=g.ALL, alpha=0.55, line_color=None, default_tools=[])]
    if chosen.size:
        s = fractions(at[chosen])
        top = max(top, float(s.max()))
        layers.append(bars(s, "Selected").opts(fill_alpha=0.0, line_color=g.SELECTED, line_width=2, default_tools=[]))
    return hv.Overlay(layers).opts(hv.opts.Overlay(
        width=width, height=170, xlim=(-0.04, 3 * PANEL_STEP + 1.04), ylim=(0, top * 1.05), default_tools=[],
        toolbar=None, show_legend=False, hooks=[name_models({"All": {"renderer": "hist_bars", "source": "hist_all"}}),
                                                _panel_axis],
        xlabel="value of the coordinate", ylabel="fraction of heads", title=""))
