"""The training view's HoloViews views over a run's Dataset (``Store.run(name)``, ``pipeline.schema.runs``) or its
:class:`~dashboard.training.frames.RunFrames`: the heads in the 3-simplex at a step with their trails, the type counts
and a statistic's quantiles over the steps, the heads that moved most, one head's path and values over the steps, and
the run's metrics. Every number comes from ``dashboard.training.frames``; the steps lie on a log axis with step 0
placed (``frames.step_axis``). ``step`` is a training step of the run (None: its last frame), ``d`` an offset.

The camera is fixed (``geometry.DEFAULT_AZIMUTH``, ``DEFAULT_ELEVATION``), as on the orbits page: a frame's dots and
their trails are then linear in the profiles (``vertex_xy``), which the browser projects at every d without a 3D
camera of its own.
"""

from __future__ import annotations

import holoviews as hv
import numpy as np
from bokeh.models import FixedTicker, HoverTool
from bokeh.palettes import Viridis256

from dashboard.common import geometry as g
from dashboard.common.render import element_plots, name_models
from dashboard.common.selection import check_statistic
from dashboard.common.simplex import simplex_outline, vertex_labels
from dashboard.training import frames as tf
from pipeline.schema import COORDINATES, STATISTICS

COLOR_MODES = ("layer", "type", "cluster")
COORD_COLORS = ("#1f77b4", "#ff7f0e", "#d62728", "#2ca02c")  # a, b, c, d over the steps
NOT_CLUSTERED = g.CLUSTER_COLORS[-1]
DEFAULT_STATISTIC = "symmetric_energy"


def frames_of(run) -> tf.RunFrames:
    """``run`` as arrays: a RunFrames as it is, a run's Dataset read once (``frames.run_frames``)."""
    return run if isinstance(run, tf.RunFrames) else tf.run_frames(run)


def frame_index(frames: tf.RunFrames, step: int | None) -> int:
    """The frame of training step ``step`` (None: the last); ValueError naming the run's steps otherwise."""
    if step is None:
        return frames.shape[0] - 1
    hits = np.flatnonzero(frames.steps == int(step))
    if not hits.size:
        shown = ", ".join(str(s) for s in frames.steps[:12]) + (" …" if frames.shape[0] > 12 else "")
        raise ValueError(f"step {step} is not a frame of the run {frames.name!r} (its steps: {shown})")
    return int(hits[0])


def vertex_xy() -> np.ndarray:
    """(4, 2): each vertex of the tetrahedron as the fixed camera draws it: a profile p is drawn at p @ vertex_xy."""
    x, y = g.project(g.VERTICES, g.DEFAULT_AZIMUTH, g.DEFAULT_ELEVATION)
    return np.stack([x, y], axis=-1)


def projected(profile: np.ndarray) -> np.ndarray:
    """(..., 2): profiles (..., 4) where the fixed camera draws them (NaN where a profile is NaN)."""
    return np.asarray(profile, dtype=np.float64) @ vertex_xy()


def layer_colours(L: int, H: int) -> list[str]:
    """Each head's layer colour, layer-major: Viridis from the first layer to the last, as the profiles page's."""
    return [Viridis256[int(round(255 * layer / max(L - 1, 1)))] for layer in range(L) for _ in range(H)]


def head_colours(frames: tf.RunFrames, f: int, d: int, color_by: str) -> list[str]:
    """Each head's colour at frame ``f`` and offset ``d``: by layer, by spectral type there, or by its cluster at the
    run's last frame (``frames.cluster_labels``)."""
    F, L, H, D = frames.shape
    if color_by == "layer":
        return layer_colours(L, H)
    if color_by == "type":
        return [g.TYPE_COLORS[t] for t in tf.types(frames.profile[f, :, :, min(d, D - 1)]).reshape(-1)]
    if color_by == "cluster":
        return [g.CLUSTER_COLORS[k] if k >= 0 else NOT_CLUSTERED for k in tf.cluster_labels(frames)]
    raise ValueError(f"color_by must be one of {COLOR_MODES}, got {color_by!r}")


def _step_axis_hook(axis: tf.StepAxis):
    """A render hook: the x axis's ticks at the powers of ten the steps span and at step 0's place, labelled."""
    def hook(plot, element):
        for ax in plot.state.xaxis:
            ax.ticker = FixedTicker(ticks=list(axis.ticks))
            ax.major_label_overrides = {float(t): label for t, label in axis.labels.items()}
    return hook


def _step_opts(frames: tf.RunFrames, title: str, ylabel: str, width: int, height: int, hooks: list) -> hv.opts:
    axis = tf.step_axis(frames.steps)
    top = float(axis.x.max()) if axis.x.size else 1.0
    return hv.opts.Overlay(logx=True, xlim=(axis.zero_at / 1.6, top * 1.6), width=width, height=height, title=title,
                           xlabel="step (log; step 0 placed)", ylabel=ylabel, default_tools=[], toolbar=None,
                           show_grid=True, fontsize={"title": "10pt", "labels": "9pt", "ticks": "8pt"},
                           legend_position="right", hooks=[_step_axis_hook(axis), *hooks])


def _cursor(frames: tf.RunFrames, f: int, group: str) -> hv.VLine:
    return hv.VLine(float(tf.step_axis(frames.steps).x[f]), group=group).opts(color="#222831", line_width=1.2,
                                                                              line_dash="dashed", alpha=0.8)


TETRA_NAMES = name_models({"TrainingDots": {"source": "training_dots", "renderer": "training_dot_glyphs"},
                           "TrainingTrails": {"source": "training_trails"}}, "training_tetrahedron")


def training_tetrahedron(run, step: int | None = None, d: int = 0, trail: int | None = None,
                         color_by: str = "layer", size: int = 400) -> hv.Overlay:
    """Every head at one step as a dot in the 3-simplex, with its trail over the frames before (``trail`` frames;
    None: every frame from the first), coloured by layer, by spectral type at this step and ``d``, or by cluster.

    Sources ``training_dots`` (x, y, layer, head, label, a..d, type_name, color; heads layer-major) and
    ``training_trails`` (xs, ys, color: one line per head, in the dots' order); figure ``training_tetrahedron``.
    """
    frames = frames_of(run)
    F, L, H, D = frames.shape
    f = frame_index(frames, step)
    dd = int(np.clip(d, 0, D - 1))
    at = frames.profile[:, :, :, dd].reshape(F, L * H, 4)
    xy = projected(at)  # (F, heads, 2)
    first = 0 if trail is None else max(0, f - int(trail))
    colour = head_colours(frames, f, dd, color_by)
    kinds = tf.types(at[f])
    dots = dict(x=xy[f, :, 0], y=xy[f, :, 1], layer=np.repeat(np.arange(L), H), head=np.tile(np.arange(H), L),
                label=tf.head_labels(L, H), **{c: at[f, :, k] for k, c in enumerate(COORDINATES)},
                type_name=[g.TYPE_NAMES[t] for t in kinds], color=colour)
    lim = g.VIEW_LIMIT
    paths = [{"x": xy[first:f + 1, i, 0], "y": xy[first:f + 1, i, 1], "color": colour[i]} for i in range(L * H)]
    trails = hv.Contours(paths, kdims=[hv.Dimension("x", range=(-lim, lim)), hv.Dimension("y", range=(-lim, lim))],
                         vdims=[hv.Dimension("color", values=sorted(set(colour)))], group="TrainingTrails").opts(
        color=hv.dim("color"), alpha=0.5, line_width=1.3, default_tools=[])
    hover = HoverTool(tooltips=[("head", "@label"), ("a", "@a{0.000}"), ("b", "@b{0.000}"), ("c", "@c{0.000}"),
                                ("d", "@d{0.000}"), ("type", "@type_name")], name="training_hover")
    points = hv.Points(dots, ["x", "y"], [k for k in dots if k not in ("x", "y")], group="TrainingDots").opts(
        color=hv.dim("color"), line_color="#222831", line_width=0.6, size=9, default_tools=[],
        tools=[hover, "tap"], nonselection_alpha=1.0, selection_line_color="#ff5a1f", selection_line_width=2.5)
    edges, vertices = simplex_outline(g.DEFAULT_AZIMUTH, g.DEFAULT_ELEVATION, "Training", vertex_size=9)
    title = f"{frames.name} at step {int(frames.steps[f])}" + (f", d = {dd}" if frames.rotary else "")

    def labels(plot, element):
        vertex_labels(plot.state, element_plots(plot, element)["TrainingVertices"].handles["cds"], "9pt")

    return (edges * vertices * trails * points).opts(
        hv.opts.Overlay(frame_width=size, frame_height=size, xlim=(-lim, lim), ylim=(-lim, lim), xaxis=None,
                        yaxis=None, show_grid=False, default_tools=[], toolbar=None, show_legend=False, title=title,
                        fontsize={"title": "10pt"},
                        hooks=[TETRA_NAMES, labels]))


TYPE_CURVE_NAMES = [f"training_types_{k}" for k in range(3)]


def type_counts_view(run, d: int = 0, step: int | None = None, width: int = 420, height: int = 220) -> hv.Overlay:
    """How many heads are of each spectral type at every step, at offset ``d`` (sources ``training_types_0`` ..
    ``_2``: I₊, II, I₋), with the step marked (``training_types_cursor``); figure ``training_types``."""
    frames = frames_of(run)
    F, L, H, D = frames.shape
    counts = tf.type_counts(frames.profile)[:, int(np.clip(d, 0, D - 1))]
    x = tf.step_axis(frames.steps).x
    curves = [hv.Curve((x, counts[:, k]), "step", "heads", label=g.TYPE_NAMES[k], group=f"Types{k}").opts(
        color=g.TYPE_COLORS[k], line_width=2) for k in range(3)]
    names = {f"Types{k}.{g.TYPE_NAMES[k]}": {"source": TYPE_CURVE_NAMES[k]} for k in range(3)}
    names["TypesCursor"] = {"glyph": "training_types_cursor"}
    title = "Heads of each type" + (f" (d = {int(np.clip(d, 0, D - 1))})" if frames.rotary else "")
    return hv.Overlay([*curves, _cursor(frames, frame_index(frames, step), "TypesCursor")]).opts(
        _step_opts(frames, title, "heads", width, height, [name_models(names, "training_types")]))


QUANTILE_NAMES = ("training_q_outer", "training_q_inner", "training_q_median")


def quantiles_view(run, statistic: str = DEFAULT_STATISTIC, step: int | None = None, width: int = 420,
                   height: int = 220) -> hv.Overlay:
    """A head statistic (at d = 0) over the steps: its median over the heads (``training_q_median``) within the
    10-90 % (``training_q_outer``) and 25-75 % (``training_q_inner``) bands, with the step marked
    (``training_q_cursor``); figure ``training_quantiles``. A band's source is Bokeh's patch of HoloViews' Area: x
    forward then back, its upper quantile forward then its lower one back."""
    frames = frames_of(run)
    k = STATISTICS.index(check_statistic(statistic))
    q = tf.quantiles(frames.statistics)[k]  # (F, 5)
    x = tf.step_axis(frames.steps).x
    outer = hv.Area((x, q[:, 0], q[:, 4]), "step", [statistic, "upper"], group="QOuter").opts(
        color="#9ecae1", alpha=0.5, line_alpha=0)
    inner = hv.Area((x, q[:, 1], q[:, 3]), "step", [statistic, "upper"], group="QInner").opts(
        color="#4292c6", alpha=0.5, line_alpha=0)
    median = hv.Curve((x, q[:, 2]), "step", statistic, group="QMedian").opts(color="#08306b", line_width=2)
    names = {"QOuter": {"source": QUANTILE_NAMES[0]}, "QInner": {"source": QUANTILE_NAMES[1]},
             "QMedian": {"source": QUANTILE_NAMES[2]}, "QCursor": {"glyph": "training_q_cursor"}}
    return (outer * inner * median * _cursor(frames, frame_index(frames, step), "QCursor")).opts(
        _step_opts(frames, f"{statistic} (d = 0): median, 25-75, 10-90 %", statistic, width, height,
                   [name_models(names, "training_quantiles")]))


MOVER_COLUMNS = ("rank", "head", "path length", "displacement", "displacement rank")


def movers(frames: tf.RunFrames, d: int = 0) -> dict[str, np.ndarray]:
    """The movers table's columns at offset ``d``: every head (``index``: layer-major, ``head``: "layer.head"), by
    path length, longest first, with its displacement and that displacement's rank (1 = farthest)."""
    F, L, H, D = frames.shape
    dd = int(np.clip(d, 0, D - 1))
    path, disp = tf.path_lengths(frames.profile)[dd], tf.displacements(frames.profile)[dd]
    order = np.argsort(-np.nan_to_num(path, nan=-1.0), kind="stable")
    disp_rank = np.empty(L * H, dtype=np.int64)
    disp_rank[np.argsort(-np.nan_to_num(disp, nan=-1.0), kind="stable")] = np.arange(1, L * H + 1)
    labels = np.array(tf.head_labels(L, H), dtype=object)
    return {"index": order.astype(np.int64), "rank": np.arange(1, L * H + 1), "head": labels[order],
            "path length": path[order], "displacement": disp[order], "displacement rank": disp_rank[order]}


def movers_table(run, d: int = 0, width: int = 420, height: int = 260) -> hv.Table:
    """The heads that moved most (``movers``): rank by path length, head, path length, displacement from the first
    frame to the last, displacement rank. Its source ``training_movers_rows`` (with ``index``, each row's head,
    layer-major), its DataTable ``training_movers``."""
    frames = frames_of(run)
    cols = movers(frames, d)

    def heads(plot, element):  # each row's head, layer-major: what a row selects (not a column of the table)
        plot.handles["source"].data["index"] = cols["index"]
        plot.handles["table"].index_position = None
        for column, width in zip(plot.handles["table"].columns, (40, 50, 95, 95, 110), strict=True):
            column.width = width

    return hv.Table({k: cols[k] for k in MOVER_COLUMNS}, kdims=["rank"], vdims=list(MOVER_COLUMNS[1:])).opts(
        width=width, height=height,
        hooks=[name_models({"Table": {"source": "training_movers_rows", "table": "training_movers"}}), heads])


def head_path(run, layer: int, head: int, d: int = 0, step: int | None = None, size: int = 250) -> hv.Overlay:
    """One head's path in the 3-simplex over every frame (``training_path``: x, y), its place at the step
    (``training_path_dot``) and at the first frame (``training_path_start``); figure ``training_path_figure``."""
    frames = frames_of(run)
    F, L, H, D = frames.shape
    i = int(layer) * H + int(head)
    xy = projected(frames.profile[:, int(layer), int(head), int(np.clip(d, 0, D - 1))])
    f = frame_index(frames, step)
    lim = g.VIEW_LIMIT
    edges, vertices = simplex_outline(g.DEFAULT_AZIMUTH, g.DEFAULT_ELEVATION, "Path", vertex_size=7)
    path = hv.Curve((xy[:, 0], xy[:, 1]), "x", "y", group="PathLine").opts(color="#ff5a1f", line_width=1.6)
    start = hv.Points([(xy[0, 0], xy[0, 1])], group="PathStart").opts(color="#ffffff", line_color="#ff5a1f", size=7,
                                                                      marker="square")
    dot = hv.Points([(xy[f, 0], xy[f, 1])], group="PathDot").opts(color="#ff5a1f", line_color="#222831", size=10)

    def labels(plot, element):
        vertex_labels(plot.state, element_plots(plot, element)["PathVertices"].handles["cds"], "8pt")

    names = {"PathLine": {"source": "training_path"}, "PathDot": {"source": "training_path_dot"},
             "PathStart": {"source": "training_path_start"}}
    return (edges * vertices * path * start * dot).opts(
        hv.opts.Overlay(frame_width=size, frame_height=size, xlim=(-lim, lim), ylim=(-lim, lim), xaxis=None,
                        yaxis=None, show_grid=False, default_tools=[], toolbar=None, show_legend=False,
                        title=f"head {tf.head_labels(L, H)[i]}: its path (□ first frame)", fontsize={"title": "10pt"},
                        hooks=[name_models(names, "training_path_figure"), labels]))


HEAD_COORD_NAMES = [f"training_head_{c}" for c in COORDINATES]


def head_over_steps(run, layer: int, head: int, d: int = 0, statistic: str = DEFAULT_STATISTIC,
                    step: int | None = None, width: int = 420, height: int = 200) -> hv.Layout:
    """One head over the steps: its profile's a, b, c, d at offset ``d`` (``training_head_a`` .. ``_d``; figure
    ``training_head_profile``) and a statistic at d = 0 (``training_head_statistic``; figure
    ``training_head_statistics``), with the step marked (``training_head_cursor``, ``training_head_stat_cursor``)."""
    frames = frames_of(run)
    F, L, H, D = frames.shape
    k = STATISTICS.index(check_statistic(statistic))
    x = tf.step_axis(frames.steps).x
    p = frames.profile[:, int(layer), int(head), int(np.clip(d, 0, D - 1))]
    f = frame_index(frames, step)
    label = tf.head_labels(L, H)[int(layer) * H + int(head)]
    coords = [hv.Curve((x, p[:, j]), "step", "coordinate", label=c, group=f"Coord{j}").opts(
        color=COORD_COLORS[j], line_width=1.8) for j, c in enumerate(COORDINATES)]
    names = {f"Coord{j}.{c}": {"source": HEAD_COORD_NAMES[j]} for j, c in enumerate(COORDINATES)}
    names["HeadCursor"] = {"glyph": "training_head_cursor"}
    profile = hv.Overlay([*coords, _cursor(frames, f, "HeadCursor")]).opts(
        _step_opts(frames, f"head {label}: a, b, c, d" + (f" (d = {int(np.clip(d, 0, D - 1))})" if frames.rotary
                                                           else ""), "coordinate", width, height,
                   [name_models(names, "training_head_profile")]))
    line = hv.Curve((x, frames.statistics[:, int(layer), int(head), k]), "step", statistic, group="HeadStatistic").opts(
        color="#08306b", line_width=1.8)
    stats = (line * _cursor(frames, f, "HeadStatCursor")).opts(
        _step_opts(frames, f"head {label}: {statistic} (d = 0)", statistic, width, height,
                   [name_models({"HeadStatistic": {"source": "training_head_statistic"},
                                 "HeadStatCursor": {"glyph": "training_head_stat_cursor"}},
                                "training_head_statistics")]))
    return (profile + stats).cols(1).opts(shared_axes=False, toolbar=None)


METRIC_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")


def run_metrics(run, step: int | None = None, layer: int = 0, head: int = 0, width: int = 420,
                height: int = 200) -> hv.Layout | hv.Div:
    """The metrics the run recorded, on the steps' log axis with the step marked: its scalar metrics in one figure
    (``training_metrics``: sources ``training_metric_<name>``, cursor ``training_metric_cursor``) and each per-head
    metric in a figure of its own (``training_head_metric_<name>_figure``): every head faint, head (``layer``,
    ``head``) drawn over them (``training_head_metric_<name>``), cursor ``training_head_metric_<name>_cursor``. A
    run without metrics gives a line that says so."""
    frames = frames_of(run)
    F, L, H, D = frames.shape
    if not frames.metrics and not frames.head_metrics:
        return hv.Div("<p class='note'>This run recorded no metrics (a checkpoint folder's <code>metrics.json</code>"
                      ").</p>")
    x = tf.step_axis(frames.steps).x
    f = frame_index(frames, step)
    plots = []
    if frames.metrics:
        curves = [hv.Curve((x, v), "step", "value", label=m, group=f"Metric{j}").opts(
            color=METRIC_COLORS[j % len(METRIC_COLORS)], line_width=1.8)
            for j, (m, v) in enumerate(frames.metrics.items())]
        names = {f"Metric{j}.{m}": {"source": f"training_metric_{m}"} for j, m in enumerate(frames.metrics)}
        names["MetricCursor"] = {"glyph": "training_metric_cursor"}
        plots.append(hv.Overlay([*curves, _cursor(frames, f, "MetricCursor")]).opts(
            _step_opts(frames, "The run's metrics", "value", width, height, [name_models(names, "training_metrics")])))
    label = tf.head_labels(L, H)[int(layer) * H + int(head)]
    for m, v in frames.head_metrics.items():
        flat = v.reshape(F, L * H)
        every = hv.Contours([{"x": x, "y": flat[:, i]} for i in range(L * H)], group="Every").opts(
            color="#9aa3b1", alpha=0.5, line_width=1)
        one = hv.Curve((x, flat[:, int(layer) * H + int(head)]), "step", m, group="One").opts(
            color="#ff5a1f", line_width=2.2)
        names = {"One": {"source": f"training_head_metric_{m}"},
                 "Cursor": {"glyph": f"training_head_metric_{m}_cursor"}}
        plots.append((every * one * _cursor(frames, f, "Cursor")).opts(
            _step_opts(frames, f"{m}: head {label} (every head in grey)", m, width, height,
                       [name_models(names, f"training_head_metric_{m}_figure")])))
    return hv.Layout(plots).cols(1).opts(shared_axes=False, toolbar=None)
