"""The training view of a run as a tab of the profiles page: ``training_tab(frames)`` renders the views of
``dashboard.training.views`` and links them in the browser (code in ``dashboard/training/js/``), so the same layout
works served and in a static file.

Every frame ships once, with the page: every head's profile at every frame and offset, quantised to 12 bits and
packed for gzip (``frames.frame_cube``), decoded in the browser one offset at a time (at a d change,
``training_decode.js``). A step
change then only indexes arrays (``training_show.js``): the dots of one frame, and each head's trail as a view into
the decoded arrays; the sources it rewrites are not synced to a server (``syncable`` False), so on the served page a
step change sends the slider's new value and nothing else. What the views draw over the steps ships with the page
as well: the type counts at every offset, every statistic's quantiles, every head's statistics and per-head metrics,
every head's path length and displacement at every offset.

Named models (tests, benchmarks, deep links): ``training_step`` (Slider: the frame shown, 0 .. F - 1),
``training_play`` (Toggle), ``training_step_back``, ``training_step_next`` (Buttons), ``training_interval_ms``
(Spinner: ms per frame while playing), ``training_trail`` (Spinner: the trails' frames, 0 = every frame from the
first), ``training_d`` (Slider, shown for a rotary run), ``training_colour`` (RadioButtonGroup: layer, type, cluster),
``training_statistic`` (Select), ``training_info`` (a Label on the canvas ``training_info_line``),
``training_legend_layer``, ``training_legend_type``, ``training_legend_cluster`` (the tetrahedron's legends),
``training_head_title``, ``training_url_note`` (Divs), the views' sources and figures (``views``), and the data
sources ``training_frames``, ``training_meta``, ``training_steps``, ``training_heads``, ``training_type_counts``,
``training_moved``, ``training_quantile_values``, ``training_statistic_values``, ``training_head_metric_values``.
"""

from __future__ import annotations

import dataclasses
import html
from typing import NamedTuple

import numpy as np
from bokeh.layouts import column, row
from bokeh.models import (
    Button,
    ColumnDataSource,
    CustomJS,
    Div,
    Label,
    LayoutDOM,
    Legend,
    LegendItem,
    Plot,
    RadioButtonGroup,
    Range1d,
    Select,
    Slider,
    Spinner,
    Toggle,
)

from dashboard.common import geometry as g
from dashboard.common import jscode
from dashboard.common.page_models import PageModels
from dashboard.common.page_style import style
from dashboard.common.page_widgets import lean
from dashboard.common.render import Named, render
from dashboard.training import frames as tf
from dashboard.training import views as tv
from pipeline.schema import STATISTICS

TETRA_PX = 380
CHART_PX = 430
INTERVAL_MS = 250  # ms per frame while playing, at first
HOLD_MS = 1500  # the last frame's hold before the movie loops


class TrainingTab(NamedTuple):
    """The tab's name in a deep link, its title, its content, and the CustomJS that applies the deep link's step and
    head once the document is ready (named ``url_restore``: the page puts it into its ``tags``,
    ``page_widgets.restore_on_ready``; the same callback follows the tab's widgets)."""

    name: str
    title: str
    child: LayoutDOM
    restore: CustomJS


def _source(data: dict, name: str) -> ColumnDataSource:
    """A source the page's browser code only reads or rewrites: not synced back to a server."""
    return ColumnDataSource(data, name=name, syncable=False)


def _data_sources(frames: tf.RunFrames, name: str) -> dict[str, ColumnDataSource]:
    """Everything the browser code indexes (the module doc), by PageModels field."""
    F, L, H, D = frames.shape
    HH = L * H
    axis = tf.step_axis(frames.steps)
    kinds = tf.cluster_labels(frames)
    # the inspected head at first: the one that moved most at d = 0
    first = int(tv.movers(frames, 0)["index"][0]) if HH else 0
    steps = {"step": frames.steps, "x": axis.x, "revision": list(frames.revisions),
             **{f"metric_{m}": v for m, v in frames.metrics.items()}}
    hm = {m: v.reshape(F, HH).reshape(-1).astype(np.float32) for m, v in frames.head_metrics.items()}
    return dict(
        training_frames=_source({"q": tf.frame_cube(frames.profile)}, "training_frames"),
        training_meta=_source({"name": [name], "n_layers": [L], "n_heads": [H], "n_frames": [F], "n_offsets": [D],
                               "head": [first]}, "training_meta"),
        training_steps=_source(steps, "training_steps"),
        training_heads=_source({"label": tf.head_labels(L, H), "layer_colour": tv.layer_colours(L, H),
                                "cluster": kinds.astype(np.int32),
                                "cluster_colour": [g.CLUSTER_COLORS[k] if k >= 0 else tv.NOT_CLUSTERED
                                                   for k in kinds]}, "training_heads"),
        training_type_counts=_source({"n": np.transpose(tf.type_counts(frames.profile), (1, 0, 2)).reshape(-1)
                                      .astype(np.int32)}, "training_type_counts"),
        training_moved=_source({"path": tf.path_lengths(frames.profile).reshape(-1),
                                "displacement": tf.displacements(frames.profile).reshape(-1)}, "training_moved"),
        training_quantile_values=_source({"q": tf.quantiles(frames.statistics).reshape(-1).astype(np.float32)},
                                         "training_quantile_values"),
        training_statistic_values=_source({"v": frames.statistics.reshape(-1).astype(np.float32)},
                                          "training_statistic_values"),
        training_head_metric_values=_source(hm or {"none": np.zeros(0, np.float32)}, "training_head_metric_values"),
    )


def _unsynced(*models) -> None:
    for m in models:
        m.syncable = False


def _controls(frames: tf.RunFrames, f0: int, interval_ms: int) -> dict:
    """The movie's controls: the step slider, play, one frame back or forward, ms per frame, the trails' frames, the d
    slider (hidden for a run without rotary), the colours and the statistic."""
    F, L, H, D = frames.shape
    return dict(
        frame_slider=Slider(start=0, end=max(F - 1, 1), value=f0, step=1, title="frame (step in the line below)",
                            name="training_step", disabled=F < 2, width=380, show_value=False),
        play_toggle=Toggle(label="▶ Play", active=False, name="training_play", width=80, disabled=F < 2),
        back=Button(label="◀", name="training_step_back", width=40, disabled=F < 2),
        step=Button(label="▶|", name="training_step_next", width=40, disabled=F < 2),
        interval_spinner=Spinner(value=interval_ms, low=1, step=10, width=90, name="training_interval_ms",
                                 title="ms per frame"),
        training_trail=Spinner(value=0, low=0, high=max(F - 1, 0), step=1, width=110, name="training_trail",
                               title="trail frames (0: all)"),
        training_d_slider=Slider(start=0, end=max(D - 1, 1), value=0, step=1, width=300, name="training_d",
                                 title="d = query position − key position", visible=frames.rotary),
        training_colour=RadioButtonGroup(labels=["colour by layer", "colour by type", "colour by cluster"], active=0,
                                         name="training_colour", width=360),
        training_statistic=Select(title="statistic (d = 0)", options=list(STATISTICS), value=tv.DEFAULT_STATISTIC,
                                  width=220, name="training_statistic"),
    )


def _figures(frames: tf.RunFrames, step: int, head: tuple[int, int]) -> dict:
    """The views rendered: the tetrahedron, the type counts, the quantiles, the movers table, the inspector's path and
    curves, the metrics."""
    layer, h = head
    return dict(
        tetra=render(tv.training_tetrahedron(frames, step, size=TETRA_PX)),
        types=render(tv.type_counts_view(frames, 0, step, width=CHART_PX)),
        quantiles=render(tv.quantiles_view(frames, tv.DEFAULT_STATISTIC, step, width=CHART_PX)),
        movers=render(tv.movers_table(frames, 0, width=CHART_PX - 20, height=min(40 + 25 * frames.shape[1]
                                                                                  * frames.shape[2], 300))),
        path=render(tv.head_path(frames, layer, h, 0, step, size=250)),
        head=render(tv.head_over_steps(frames, layer, h, 0, tv.DEFAULT_STATISTIC, step, width=CHART_PX)),
        metrics=render(tv.run_metrics(frames, step, layer, h, width=CHART_PX)),
    )


def _info_line() -> tuple[Plot, Label]:
    """The line that names the step shown, its checkpoint and the run's metrics there: a label on a canvas of its own
    (``training_info_line``), whose text a step change rewrites without laying out the page again, as a Div's would
    (in Chromium that cost some 80 ms a step, most of a step change's time)."""
    label = Label(x=4, y=6, x_units="screen", y_units="screen", text="", text_font_size="10pt", text_color="#222831",
                  name="training_info")
    line = Plot(width=1000, height=24, toolbar_location=None, outline_line_color=None, min_border=0,
                x_range=Range1d(0, 1), y_range=Range1d(0, 1), name="training_info_line")
    line.add_layout(label)
    return line, label


def _legends(fig, frames: tf.RunFrames, heads: ColumnDataSource) -> list[Legend]:
    """The colours' legends in the tetrahedron, by layer (at most 8 of its layers, spread), by type and by cluster
    (``training_legend_layer``, ``_type``, ``_cluster``), the first shown: items of empty renderers in each colour,
    labels the browser rewrites (the type counts at the step: ``training_show.js``) on the canvas."""
    F, L, H, D = frames.shape
    shown = sorted({int(round(k * (L - 1) / 7)) for k in range(8)}) if L > 8 else list(range(L))
    clusters = sorted(set(heads.data["cluster"]), key=lambda k: (k < 0, k))
    groups = {"layer": [(f"layer {layer}", heads.data["layer_colour"][layer * H]) for layer in shown],
              "type": [(name, colour) for name, colour in zip(g.TYPE_NAMES, g.TYPE_COLORS, strict=True)],
              "cluster": [("not clustered" if k < 0 else f"cluster {k}",
                           heads.data["cluster_colour"][list(heads.data["cluster"]).index(k)]) for k in clusters]}
    out = []
    for mode, items in groups.items():
        # one point at NaN each: a legend draws its item's glyph from the renderer's first point; NaN draws nothing
        renderers = [fig.scatter([np.nan], [np.nan], fill_color=colour, line_color="#222831", size=8)
                     for _, colour in items]
        legend = Legend(items=[LegendItem(label=label, renderers=[r]) for (label, _), r in zip(items, renderers,
                                                                                          strict=True)],
                        location="top_left", name=f"training_legend_{mode}", visible=mode == "layer",
                        label_text_font_size="8pt", background_fill_alpha=0.7, padding=4, spacing=0,
                        glyph_height=12, label_height=12)
        fig.add_layout(legend)
        out.append(legend)
    return out


def _cursors(named: Named, frames: tf.RunFrames) -> list:
    """The step's line on every chart over the steps, drawn on the figures' overlay layer: a step change moves them,
    and Bokeh then repaints that layer alone, not the figures' lines beneath."""
    names = ["training_types_cursor", "training_q_cursor", "training_head_cursor", "training_head_stat_cursor"]
    if frames.metrics:
        names.append("training_metric_cursor")
    names += [f"training_head_metric_{m}_cursor" for m in frames.head_metrics]
    out = [named[n] for n in names]
    for line in out:
        line.level = "overlay"
    return out


def training_tab(frames: tf.RunFrames, d0_only: bool = False, interval_ms: int = INTERVAL_MS,
                 hold_ms: int = HOLD_MS) -> TrainingTab:
    """The Training tab of the run ``frames`` (``frames.run_frames``): the module doc. ``d0_only``: ship the frames
    at d = 0 alone (the exporter's ``--run-d0-only``, for large runs: the tab then says what it left out, and has no
    d slider)."""
    full = frames.shape[3]
    if d0_only and full > 1:
        frames = dataclasses.replace(frames, profile=tf.at_offsets(frames.profile, 1))
    F, L, H, D = frames.shape
    sheet = style()
    f0 = F - 1  # the trained model first
    step = int(frames.steps[f0])
    sources = _data_sources(frames, frames.name)
    first = int(sources["training_meta"].data["head"][0])
    figs = _figures(frames, step, divmod(first, H))
    named = Named(*figs.values())
    controls = _controls(frames, f0, interval_ms)
    back, forward = controls.pop("back"), controls.pop("step")
    dots = named["training_dots"]
    url_note = Div(text="", stylesheets=[sheet], width=1100, name="training_url_note", visible=False)
    tetra = figs["tetra"]
    info_line, info_label = _info_line()
    metric_curves = [named[f"training_head_metric_{m}"] for m in frames.head_metrics]
    models = PageModels(
        **controls, **sources, hold_ms=hold_ms,
        type_names=list(g.TYPE_NAMES), type_colors=list(g.TYPE_COLORS), url_note=url_note,
        training_vertex_xy=tv.vertex_xy().ravel().tolist(),
        training_info=info_label, training_legends=_legends(tetra, frames, sources["training_heads"]),
        training_tetra_title=tetra.title, training_dots=dots, training_trails=named["training_trails"],
        training_cursors=_cursors(named, frames),
        training_type_curves=[named[n] for n in tv.TYPE_CURVE_NAMES],
        training_quantile_curves=[named[n] for n in tv.QUANTILE_NAMES],
        training_quantile_title=figs["quantiles"].title, training_quantile_y=figs["quantiles"].y_range,
        training_movers_rows=named["training_movers_rows"],
        training_head_title=Div(text="", stylesheets=[sheet], width=1000, name="training_head_title"),
        training_path=named["training_path"], training_path_start=named["training_path_start"],
        training_path_dot=named["training_path_dot"],
        training_head_curves=[named[n] for n in tv.HEAD_COORD_NAMES],
        training_head_statistic=named["training_head_statistic"],
        training_head_statistic_title=named["training_head_statistics"].title,
        training_head_statistic_y=named["training_head_statistics"].y_range,
        training_head_metric_curves=metric_curves)
    # the inspector's heading names the head it shows (training_inspect.js): its figures' titles say what they draw
    named["training_path_figure"].title.text = "its path in the simplex (□ its first frame)"
    named["training_head_profile"].title.text = "its a, b, c, d" + (" (at the d slider's d)" if frames.rotary else "")
    for m in frames.head_metrics:
        named[f"training_head_metric_{m}_figure"].title.text = f"{m}: the head (every head in grey)"
    figs["quantiles"].title.name = "training_quantile_title"
    named["training_head_statistics"].title.name = "training_head_statistic_title"
    tetra.title.name = "training_tetra_title"
    figs["quantiles"].y_range.name = "training_quantile_y"
    named["training_head_statistics"].y_range.name = "training_head_statistic_y"
    # the models the browser code rewrites (and the metrics' lines beside them): nothing a server reads
    _unsynced(dots, models.training_trails, models.training_path, models.training_path_start,
              models.training_path_dot, *models.training_cursors, *models.training_type_curves,
              *models.training_quantile_curves, *models.training_head_curves, models.training_head_statistic,
              *metric_curves, models.training_info, *models.training_legends, models.training_head_title,
              models.training_tetra_title, models.training_quantile_title, models.training_head_statistic_title,
              models.training_quantile_y, models.training_head_statistic_y, models.training_movers_rows,
              *(named[f"training_metric_{m}"] for m in frames.metrics))
    # one callback for every change the view follows (training_event.js), so its code is on the page once; named
    # url_restore, it is also the tab's deep-link restore when the document is ready
    follow = jscode.callback(dict(ctx=models.args()), "type_rule", "training_decode", "training_show",
                             "training_inspect", "training_rows", "training_quantiles", "url_note", "training_url",
                             "training_event", name="url_restore")
    for widget, prop in ((models.frame_slider, "value"), (models.training_trail, "value"),
                         (models.training_colour, "active"), (models.training_d_slider, "value"),
                         (models.training_statistic, "value"), (dots.selected, "indices"),
                         (models.training_movers_rows.selected, "indices")):
        widget.js_on_change(prop, follow)
    models.play_toggle.js_on_change("active", jscode.callback(dict(ctx=models.args()), "movie_play"))
    back.js_on_click(jscode.callback(dict(ctx=models.but(step_by=-1).args()), "movie_step"))
    forward.js_on_click(jscode.callback(dict(ctx=models.but(step_by=1).args()), "movie_step"))
    for plot in [p for fig in figs.values() for p in fig.select({"type": Plot})]:
        lean(plot, [named["training_dot_glyphs"]] if plot is tetra else [])
    layout = _layout(frames, figs, models, back, forward, url_note, info_line, full, sheet)
    return TrainingTab("training", "Training", layout, follow)


def _title_html(frames: tf.RunFrames, full: int) -> str:
    """The tab's heading: the run, its frames, what was left out of it."""
    F, L, H, D = frames.shape
    out = (f"<h2 class='tight'>Training: {html.escape(frames.name)}</h2><p class='note tight'>{F} frames from step "
           f"{int(frames.steps[0])} to {int(frames.steps[-1])}, {L} layers × {H} heads. Each head's profile at the "
           "step with its trail over the frames before it; the charts mark the step on a log axis (step 0 placed).</p>")
    if frames.left_out:
        shown = ", ".join(str(s) for s in frames.left_out[:10]) + (" …" if len(frames.left_out) > 10 else "")
        out += (f"<p class='note tight'>Left out: the frames of step {shown}, whose layers are not all written "
                f"(<code>{html.escape(str(frames.attrs.get('command', '')))}</code> writes them).</p>")
    if D < full:
        out += (f"<p class='note tight'>Exported at d = 0 alone (<code>--run-d0-only</code>): the frames at d = 1 to "
                f"{full - 1} ({F} frames × {L * H} heads × {full - 1} offsets) are left out of this page.</p>")
    return out


def _layout(frames: tf.RunFrames, figs: dict, m: PageModels, back: Button, forward: Button, url_note: Div,
            info_line: Plot, full: int, sheet) -> LayoutDOM:
    movers_title = Div(text="<h3 class='tight'>The heads that moved most</h3><p class='note tight'>By path length "
                            "over the frames (at the d slider's d); displacement: from the first frame to the last. "
                            "Click a column to sort by it, a row to inspect its head.</p>", stylesheets=[sheet],
                       width=CHART_PX, name="training_movers_title")
    heading = Div(text=_title_html(frames, full), stylesheets=[sheet], width=1300, name="training_heading")
    return column(
        heading, url_note,
        row(m.play_toggle, back, forward, m.frame_slider, m.interval_spinner, m.training_trail, m.training_d_slider,
            name="training_controls"),
        row(m.training_colour, m.training_statistic, name="training_view_controls"), info_line,
        row(figs["tetra"], column(figs["types"], figs["quantiles"]),
            column(movers_title, figs["movers"]), name="training_main"),
        m.training_head_title,
        row(figs["path"], figs["head"], figs["metrics"], name="training_inspector"),
        name="training")

