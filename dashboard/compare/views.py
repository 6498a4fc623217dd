"""The models of the store side by side: per-layer medians of a coordinate or a statistic against relative
depth, one line per model, and two models' coordinate histograms overlaid."""

from __future__ import annotations

import warnings

import holoviews as hv
import numpy as np
import xarray as xr
from bokeh.models import Legend, LegendItem

from dashboard.common import geometry as g
from dashboard.common.render import element_plots, name_models
from dashboard.common.selection import at_offset, profile_array, statistics_table
from pipeline.schema import COORDINATES, STATISTICS, model_rows

QUANTITIES = (*COORDINATES, *STATISTICS)  # what compare_depth draws: a coordinate (at d) or a statistic (d = 0)
RANGE_PAD = 0.1  # compare_depth's y range: the medians' span and a tenth of it on each side
HIST_FRAME_PX = (160, 130)  # compare_histograms: each panel's frame (width, height), the legend beside the last


def median_column(quantity: str) -> str:
    """The column (and the y axis' label) of ``compare_depth``'s lines: 'median <quantity>'."""
    return f"median {quantity}"


def median_range(medians) -> tuple[float, float]:
    """The y range of ``compare_depth`` over ``medians`` (every model's, NaN for a layer without a value): their
    span padded by ``RANGE_PAD`` of it on each side; a single value ± 0.5; (0, 1) without any value."""
    values = np.concatenate([np.ravel(np.asarray(m, dtype=float)) for m in medians] or [np.zeros(0)])
    values = values[np.isfinite(values)]
    if values.size == 0:
        return 0.0, 1.0
    lo, hi = float(values.min()), float(values.max())
    pad = RANGE_PAD * (hi - lo) if hi > lo else 0.5
    return lo - pad, hi + pad


def _quantity_values(sel, quantity: str, d: int = 0) -> np.ndarray | None:
    """(L, H) of a coordinate (a..d at d) or a statistic (d = 0) of one model; None without statistics."""
    if quantity in COORDINATES:
        return at_offset(profile_array(sel), d)[:, :, COORDINATES.index(quantity)]
    _check_quantity(quantity)
    stats = statistics_table(sel)
    return None if stats is None else stats[quantity]


def _check_quantity(quantity: str) -> None:
    if quantity not in QUANTITIES:
        raise ValueError(f"unknown quantity {quantity!r}; known: the coordinates {', '.join(COORDINATES)} and the "
                         f"statistics {', '.join(STATISTICS)}")


def _check_models(ds: xr.Dataset, names) -> None:
    held = [str(m) for m in ds["model"].values] if "model" in ds.dims else []
    unknown = [n for n in names if n not in held]
    if unknown:
        raise ValueError(f"no model {unknown} in the store; it holds {held} (pass the profiles Dataset with its "
                         "model dimension)")


def computed_models(ds: xr.Dataset, rows=None) -> list[str]:
    """The models of a profiles Dataset with something to draw (computed, not damaged, not a baseline), in store
    order; ``rows``: its ``ModelRow``s where the caller holds them (``dashboard.data.rows``, checked against the
    checksums), else read from ``ds``."""
    return [r.name for r in (model_rows(ds) if rows is None else rows)
            if r.computed and not r.damaged and not r.baseline_of]


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
    the models (default: every computed one). Models without statistics are named in the title; the y axis
    spans the medians drawn (``median_range``). The figure is ``compare_depth``; model k of ``names`` draws its
    line over the source ``compare_line_{k}`` and its dots over ``compare_dots_{k}``, both with the column
    ``median_column(quantity)``."""
    _check_quantity(quantity)
    names = computed_models(ds) if names is None else list(names)
    _check_models(ds, names)
    curves, missing, parts, drawn = [], [], {}, []
    for k, name in enumerate(names):
        got = depth_medians(ds, name, quantity, d)
        if got is None:
            missing.append(name)
            continue
        curves.append(hv.Curve(got, "relative depth", median_column(quantity), label=name).opts(line_width=2))
        curves.append(hv.Scatter(got, "relative depth", median_column(quantity), label=name).opts(size=4))
        parts |= {f"Curve.{name}": {"source": f"compare_line_{k}"}, f"Scatter.{name}": {"source": f"compare_dots_{k}"}}
        drawn.append(got[1])
    title = f"median {quantity} per layer" + (f" (statistics not computed: {', '.join(missing)})" if missing else "")
    if not curves:
        curves = [hv.Curve([], "relative depth", median_column(quantity))]
    return hv.Overlay(curves).opts(hv.opts.Overlay(width=width, height=300, xlim=(-0.02, 1.02),
                                                   ylim=median_range(drawn), title=title,
                                                   legend_position="right", toolbar=None, default_tools=[],
                                                   hooks=[name_models(parts, "compare_depth")]))


def _legend_beside(plot, element) -> None:
    """A render hook: the legend naming the two models (``compare_legend``, items ``compare_legend_item0`` and
    ``1``) beside the panel's frame, where it covers no bar."""
    parts = element_plots(plot, element)
    items = [LegendItem(label=parts[group].current_frame.label, renderers=[parts[group].handles["glyph_renderer"]],
                        name=f"compare_legend_item{j}") for j, group in enumerate(("First", "Second"))]
    plot.state.add_layout(Legend(items=items, location="top_left", name="compare_legend", label_text_font_size="9pt",
                                 border_line_color=None, background_fill_alpha=0.0), "right")


def compare_histograms(ds: xr.Dataset, name1: str, name2: str, d: int = 0, bins: int = g.N_BINS,
                       frame_px: tuple[int, int] = HIST_FRAME_PX) -> hv.Layout:
    """The four coordinate histograms (fraction of heads per bin, at offset d) of two models overlaid, each
    panel's frame ``frame_px`` (width, height) and the legend naming the models beside the last one (outside
    the frames: it covers no bar). Panel c is the figure ``compare_hist_{c}``; its bars of model j (0, 1) are
    over the source ``compare_hist_{c}_{j}``."""
    _check_models(ds, [name1, name2])
    panels = []
    profiles = [at_offset(profile_array(ds.sel(model=n)), d).reshape(-1, 4) for n in (name1, name2)]
    edges = np.linspace(0, 1, bins + 1)
    for k, c in enumerate(COORDINATES):
        layers = []
        for p, name, colour, group in zip(profiles, (name1, name2), (g.ALL, g.SELECTED), ("First", "Second"),
                                          strict=True):
            counts = g.histogram_counts(p[:, k], bins)
            frac = counts / counts.sum() if counts.sum() else counts
            layers.append(hv.Histogram((edges, frac), kdims=[c], vdims=["fraction of heads"], group=group,
                                       label=name).opts(fill_alpha=0.45, color=colour, line_color=colour))
        names = name_models({"First": {"source": f"compare_hist_{c}_0"}, "Second": {"source": f"compare_hist_{c}_1"}},
                            f"compare_hist_{c}")
        panels.append(hv.Overlay(layers).opts(hv.opts.Overlay(
            frame_width=frame_px[0], frame_height=frame_px[1], title=g.COORD_TITLES[k], toolbar=None,
            default_tools=[], show_legend=False, hooks=[names, _legend_beside] if k == 3 else [names])))
    return hv.Layout(panels).cols(4).opts(shared_axes=False)
