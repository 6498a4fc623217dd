"""The orbits page: a client-side movie of every head's dot in each Fourier plane over training.

``orbits_view(ds)`` returns a pure Bokeh layout; all interaction runs in the browser (CustomJS over
shared ColumnDataSources), so it works served by Panel and in a static HTML file opened with file://.
All frames' positions ship once as one float32 column (binary, base64 in a static file); each frame
the JavaScript rewrites the dots, the trails, the axis ranges and the metrics line.

Named models for tests and benchmarks (``Bokeh.documents[0].get_model_by_name(NAME)``):
``orbits_frame`` (Slider, value = current frame index), ``orbits_play`` (Toggle), ``orbits_step``,
``orbits_step_back`` (Buttons), ``orbits_interval_ms`` (Spinner, ms per frame, read at every tick),
``orbits_dots_{p}``, ``orbits_trails_{p}`` (the per-panel sources), ``orbits_info`` (Div).
``page.evaluate(RECORD_FRAMES_JS)`` (playwright) then logs ``[frame, performance.now()]`` of every frame
shown in ``window.__orbitsFrames``: the frame interval is the difference of successive times.
"""

from __future__ import annotations

import html

import numpy as np
import xarray as xr
from bokeh.layouts import column, row
from bokeh.models import (
    Button,
    ColumnDataSource,
    CustomJS,
    Div,
    HoverTool,
    LayoutDOM,
    LinearAxis,
    Range1d,
    Slider,
    Span,
    Spinner,
    Title,
    Toggle,
)
from bokeh.plotting import figure

from dashboard import orbits_frames as of

PANEL_PX = 240
SIDE_PX = 430

WHAT_TO_LOOK_FOR = (
    "As training goes on, the heads of one orbit (one colour) settle on the vertices of a regular polygon "
    "centred at the origin: a shift by s turns a dot by rotation·s·360°/24, so a plane with rotation r shows "
    "24/gcd(r, 24) vertices. Gray heads belong to no orbit, and the equivariance error falls as the polygons form. "
    "The error “at 2× QK” is that of the same layer with every QK circuit doubled: heads in exact orbits are "
    "equivariant at any scale, so it stays as small only when the equivariance comes from orbits, not from "
    "tuning to the layer's own scale."
)

# Rewrites every per-frame view from the frame in the slider.
UPDATE_JS = """
const F = frames.data.epoch.length;
const f = Math.max(0, Math.min(F - 1, Math.round(slider.value)));
const s = frames.data.start[f];
const pos = store.data.pos;
for (let p = 0; p < P; p++) {
  const heads = dots[p].data.head;
  const n = heads.length;
  const x = new Float64Array(n), y = new Float64Array(n);
  const xs = [], ys = [];
  for (let i = 0; i < n; i++) {
    const h = heads[i];
    const o = ((f * H + h) * P + p) * 2;
    x[i] = pos[o]; y[i] = pos[o + 1];
    const tx = new Float64Array(f - s + 1), ty = new Float64Array(f - s + 1);
    for (let g = s; g <= f; g++) {
      const q = ((g * H + h) * P + p) * 2;
      tx[g - s] = pos[q]; ty[g - s] = pos[q + 1];
    }
    xs.push(tx); ys.push(ty);
  }
  dots[p].data = Object.assign({}, dots[p].data, {x: x, y: y});
  trails[p].data = Object.assign({}, trails[p].data, {xs: xs, ys: ys});
  let r = 1.1 * frames.data['r' + p][f];
  if (!(r > 0)) { r = 1; }
  xr[p].setv({start: -r, end: r});
  yr[p].setv({start: -r, end: r});
}
const d = frames.data;
const pct = (v) => Number.isFinite(v) ? (100 * v).toFixed(1) + '%' : '—';
const num = (v) => !Number.isFinite(v) ? '—' : (v !== 0 && Math.abs(v) < 1e-3 ? v.toExponential(2) : v.toFixed(4));
info.text = '<b>epoch ' + d.epoch[f] + '</b> &nbsp;(frame ' + f + ' / ' + (F - 1) + ')'
  + ' &nbsp;·&nbsp; train acc <b>' + pct(d.train_accuracy[f]) + '</b>'
  + ' &nbsp;·&nbsp; held-out acc <b>' + pct(d.heldout_accuracy[f]) + '</b>'
  + ' &nbsp;·&nbsp; equivariance error <b>' + num(d.equivariance_error[f]) + '</b>'
  + ' (at 2× QK ' + num(d.sharpened_error[f]) + ')'
  + ' &nbsp;·&nbsp; loss ' + num(d.loss[f]);
cursor.location = d.epoch[f];
"""

# Play / pause: a setTimeout chain on a window-level handle; the last frame is held hold_ms before looping.
PLAY_JS = """
window.__orbitsMovie = window.__orbitsMovie || {};
const st = window.__orbitsMovie[slider.id] = window.__orbitsMovie[slider.id] || {timer: null};
if (st.timer !== null) { clearTimeout(st.timer); st.timer = null; }
const delay = () => Math.max(1, Number(speed.value) || 100);
function tick() {
  if (slider.value >= slider.end) { slider.value = slider.start; } else { slider.value = slider.value + 1; }
  st.timer = setTimeout(tick, slider.value >= slider.end ? Math.max(hold_ms, delay()) : delay());
}
if (play.active) {
  play.label = '⏸ Pause';
  if (slider.value >= slider.end) { slider.value = slider.start; }
  st.timer = setTimeout(tick, delay());
} else {
  play.label = '▶ Play';
}
"""

STEP_JS = """
play.active = false;
const F = slider.end - slider.start + 1;
slider.value = slider.start + (((slider.value - slider.start + step) % F) + F) % F;
"""

# For tests and benchmarks: records every frame shown, with its time, in window.__orbitsFrames.
RECORD_FRAMES_JS = """() => {
  const s = Bokeh.documents[0].get_model_by_name('orbits_frame');
  window.__orbitsFrames = [];
  if (!window.__orbitsRecording) {
    window.__orbitsRecording = true;
    s.property('value').change.connect(() => window.__orbitsFrames.push([s.value, performance.now()]));
  }
}"""

# Click on the metrics chart: jump to the frame nearest the clicked epoch.
TAP_JS = """
const e = frames.data.epoch;
let best = 0;
for (let i = 1; i < e.length; i++) { if (Math.abs(e[i] - cb_obj.x) < Math.abs(e[best] - cb_obj.x)) best = i; }
play.active = false;
slider.value = Math.min(best, slider.end);
"""


def message_view(text: str) -> Div:
    """The page shown instead of the movie when the store cannot feed it (text is plain, escaped here)."""
    parts = html.escape(text).split("`")  # `code` spans become <code>
    body = "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))
    return Div(text=f"<h3>Orbits</h3><p>{body}</p>", name="orbits_message", width=700)


def frame_state(pos: np.ndarray, starts: np.ndarray, radii: np.ndarray, f: int, p: int):
    """What frame f shows in panel p: dots (H, 2), trails [H arrays (n, 2)], half-width of the axes.

    The JavaScript (UPDATE_JS) computes the same thing in the browser; this is its Python twin, used
    for the initial render and as the oracle of the browser test.
    """
    dots = pos[f, :, p, :]
    trails = [pos[starts[f]: f + 1, h, p, :] for h in range(pos.shape[1])]
    r = 1.1 * radii[f, p]
    return dots, trails, (r if r > 0 else 1.0)


def _info_html(epoch, f: int, F: int, metrics: dict[str, np.ndarray]) -> str:
    def pct(v):
        return f"{100 * v:.1f}%" if np.isfinite(v) else "—"

    def num(v):
        return "—" if not np.isfinite(v) else (f"{v:.2e}" if v != 0 and abs(v) < 1e-3 else f"{v:.4f}")

    return (f"<b>epoch {epoch}</b> &nbsp;(frame {f} / {F - 1}) &nbsp;·&nbsp; train acc "
            f"<b>{pct(metrics['train_accuracy'][f])}</b> &nbsp;·&nbsp; held-out acc "
            f"<b>{pct(metrics['heldout_accuracy'][f])}</b> &nbsp;·&nbsp; equivariance error "
            f"<b>{num(metrics['equivariance_error'][f])}</b> (at 2× QK {num(metrics['sharpened_error'][f])})"
            f" &nbsp;·&nbsp; loss {num(metrics['loss'][f])}")


def _verification_html(ds: xr.Dataset, orbit: np.ndarray) -> str:
    checks = of.orbit_checks(ds)
    n_none = int((orbit < 0).sum())
    if not checks:
        return (f"<p><b>Orbit verification:</b> no orbits found ({n_none} heads, none in an orbit).</p>")
    head = ("<tr><th></th><th>orbit</th><th>heads</th><th>worst error over 24 shifts</th>"
            "<th>closed</th></tr>")
    rows = []
    for c in checks:
        err = f"{c.worst_error:.2e}" if np.isfinite(c.worst_error) else "not stored"
        closed = "—" if c.closed is None else ("yes" if c.closed else "<b>no</b>")
        rows.append(f"<tr><td><span style='color:{c.colour};font-size:16px'>●</span></td><td>{c.label}</td>"
                    f"<td title='heads {', '.join(map(str, c.heads))}'>{len(c.heads)}</td>"
                    f"<td>{err}</td><td>{closed}</td></tr>")
    if n_none:
        rows.append(f"<tr><td><span style='color:{of.NO_ORBIT};font-size:16px'>●</span></td><td>none</td>"
                    f"<td>{n_none}</td><td></td><td></td></tr>")
    style = "border-collapse:collapse;font-size:12px"
    return ("<b>Orbit verification</b>: for every shift s and head h, s·h is the head matching "
            "M<sub>s·h</sub> = T<sub>s</sub> M<sub>h</sub> T<sub>s</sub><sup>−1</sup> and "
            "R<sub>s·h</sub> = T<sub>2s</sub> R<sub>h</sub> T<sub>s</sub><sup>−1</sup>; below, the worst "
            "relative Frobenius error over the 24 shifts and the orbit's heads, and whether every shift maps "
            f"the orbit into itself.<table style='{style}' cellpadding='3'>{head}{''.join(rows)}"
            "</table>")


def _metrics_figure(frames: ColumnDataSource, metrics: dict[str, np.ndarray], epochs: np.ndarray):
    fig = figure(width=SIDE_PX, height=205, tools="", toolbar_location=None, x_axis_label="epoch",
                 y_range=Range1d(0, 1.02), title="click to jump to an epoch")
    fig.title.text_font_size = "10px"
    fig.title.text_font_style = "normal"
    fig.yaxis.axis_label = "accuracy"
    fig.line("epoch", "train_accuracy", source=frames, color="#1f77b4", legend_label="train acc")
    fig.line("epoch", "heldout_accuracy", source=frames, color="#2ca02c", legend_label="held-out acc")
    eq = metrics["equivariance_error"]
    if np.isfinite(eq).any():
        top = float(np.nanmax(eq)) * 1.05 or 1.0
        fig.extra_y_ranges = {"eq": Range1d(0, top)}
        fig.add_layout(LinearAxis(y_range_name="eq", axis_label="equivariance error"), "right")
        fig.line("epoch", "equivariance_error", source=frames, color="#d62728", y_range_name="eq",
                 legend_label="equivariance error")
    legend = fig.legend[0]  # below the plot, out of the way of the lines
    fig.center.remove(legend)
    legend.orientation = "horizontal"
    legend.label_text_font_size = "9px"
    legend.padding = 2
    legend.margin = 2
    fig.add_layout(legend, "below")
    cursor = Span(location=float(epochs[-1]), dimension="height", line_color="#555", line_width=1)
    fig.add_layout(cursor)
    return fig, cursor


def orbits_view(ds: xr.Dataset | None, interval_ms: int = 120, hold_ms: int = 1500,
                panel_px: int = PANEL_PX) -> LayoutDOM:
    """The orbits movie as a Bokeh layout (pure client-side; works in a static file with no server).

    Parameters
    ----------
    ds : the ``orbits`` group (``pipeline.store.open_orbits``): ``position`` (frame, head, panel, xy),
        coord ``epoch`` (frame), per-panel metadata, per-frame metrics, ``orbit`` (head),
        ``shift_error`` / ``shift_image`` (shift, head). None or an unusable dataset gives a message.
    interval_ms : initial milliseconds per frame while playing (the ``orbits_interval_ms`` spinner).
    hold_ms : how long the last frame stays before the movie loops to the first.
    panel_px : width and height of each square panel.
    """
    problem = of.orbits_problem(ds)
    if problem:
        return message_view(problem)
    ds = of.sorted_by_epoch(of.run_panels(ds))
    pos = of.positions(ds)  # (F, H, P, 2)
    F, H, P, _ = pos.shape
    epochs = np.asarray(ds["epoch"].values)
    starts = of.trail_starts(epochs, of.trail_epochs(ds))
    radii = of.view_radii(pos, starts)
    metrics = of.metric_columns(ds)
    orbit = of.orbit_labels(ds)
    _, head_colour = of.orbit_colours(orbit)
    f0 = F - 1  # open on the last frame: the orbits as trained

    store = ColumnDataSource({"pos": of.pack_positions(pos)}, name="orbits_positions")
    frames = ColumnDataSource({"epoch": epochs, "start": starts, **metrics,
                               **{f"r{p}": radii[:, p] for p in range(P)}}, name="orbits_frames")
    draw_order = np.argsort(orbit >= 0, kind="stable")  # gray heads first, so orbits draw on top
    orbit_name = [str(o) if o >= 0 else "none" for o in orbit[draw_order]]
    figs, dots, trails, xranges, yranges = [], [], [], [], []
    for p in range(P):
        d, tr, r = frame_state(pos, starts, radii, f0, p)
        xr_, yr_ = Range1d(-r, r), Range1d(-r, r)
        fig = figure(frame_width=panel_px, frame_height=panel_px, x_range=xr_, y_range=yr_, tools="",
                     toolbar_location=None, title=of.panel_title(ds, p), min_border=4)
        fig.title.text_font_size = "10.5px"
        sub = of.panel_subtitle(ds, p)
        if sub:
            fig.add_layout(Title(text=sub, text_font_size="9.5px", text_font_style="normal", text_color="#555"),
                           "above")
        fig.axis.major_label_text_font_size = "8px"
        fig.grid.grid_line_alpha = 0.3
        for dim in ("width", "height"):
            fig.add_layout(Span(location=0, dimension=dim, line_color="#444", line_width=0.7, line_alpha=0.7))
        src_t = ColumnDataSource({"xs": [tr[h][:, 0] for h in draw_order], "ys": [tr[h][:, 1] for h in draw_order],
                                  "colour": [head_colour[h] for h in draw_order],
                                  "alpha": np.where(orbit[draw_order] >= 0, 0.55, 0.22)}, name=f"orbits_trails_{p}")
        fig.multi_line("xs", "ys", source=src_t, line_color="colour", line_alpha="alpha", line_width=1.3)
        src_d = ColumnDataSource({"x": d[draw_order, 0], "y": d[draw_order, 1], "head": draw_order.astype(np.int32),
                                  "orbit": orbit_name, "colour": [head_colour[h] for h in draw_order]},
                                 name=f"orbits_dots_{p}")
        glyph = fig.scatter("x", "y", source=src_d, fill_color="colour", line_color="white", line_width=0.5,
                            size=8)
        fig.add_tools(HoverTool(renderers=[glyph], tooltips=[("head", "@head"), ("orbit", "@orbit")]))
        figs.append(fig)
        dots.append(src_d)
        trails.append(src_t)
        xranges.append(xr_)
        yranges.append(yr_)
    # rows of two in a column, not gridplot: a GridPlot nested in Panel's layouts renders empty (bokeh#13384)
    grid = column(*[row(*figs[i:i + 2]) for i in range(0, len(figs), 2)], name="orbits_panels")

    info = Div(text=_info_html(epochs[f0], f0, F, metrics), name="orbits_info", width=2 * panel_px + SIDE_PX)
    slider = Slider(start=0, end=max(F - 1, 1), value=f0, step=1, title="frame", name="orbits_frame",
                    disabled=F < 2, width=2 * panel_px - 250, show_value=False)
    play = Toggle(label="▶ Play", active=False, name="orbits_play", width=80, disabled=F < 2)
    back = Button(label="◀", name="orbits_step_back", width=40, disabled=F < 2)
    step = Button(label="▶|", name="orbits_step", width=40, disabled=F < 2)
    speed = Spinner(value=interval_ms, low=1, step=10, width=70, name="orbits_interval_ms")
    chart, cursor = _metrics_figure(frames, metrics, epochs)

    update = CustomJS(args=dict(frames=frames, store=store, dots=dots, trails=trails, xr=xranges, yr=yranges,
                                info=info, cursor=cursor, slider=slider, H=H, P=P), code=UPDATE_JS)
    slider.js_on_change("value", update)
    play.js_on_change("active", CustomJS(args=dict(slider=slider, play=play, speed=speed, hold_ms=hold_ms),
                                         code=PLAY_JS))
    back.js_on_click(CustomJS(args=dict(slider=slider, play=play, step=-1), code=STEP_JS))
    step.js_on_click(CustomJS(args=dict(slider=slider, play=play, step=1), code=STEP_JS))
    chart.js_on_event("tap", CustomJS(args=dict(frames=frames, slider=slider, play=play), code=TAP_JS))

    n_orbits = len(of.orbit_order(orbit))
    header = Div(text=(f"<h3 style='margin:0'>Orbits of C<sub>24</sub>: {H} heads, {n_orbits} orbit"
                       f"{'s' if n_orbits != 1 else ''}, {F} frames (trails: last "
                       f"{of.trail_epochs(ds):g} epochs)</h3>"), width=2 * panel_px + SIDE_PX)
    look = Div(text=f"<p style='font-size:12px;margin:0'><b>What to look for.</b> {WHAT_TO_LOOK_FOR}</p>",
               width=SIDE_PX)
    table = Div(text=_verification_html(ds, orbit), width=SIDE_PX, name="orbits_verification")
    controls = row(play, back, step, slider, Div(text="ms per frame", width=80), speed)
    side = column(look, chart, table, width=SIDE_PX)
    return column(header, controls, info, row(grid, side), name="orbits_view")


def orbits_panel(ds: xr.Dataset | None, **kwargs):
    """``orbits_view`` wrapped in a Panel pane, for the served app."""
    import panel as pn

    return pn.pane.Bokeh(orbits_view(ds, **kwargs))
