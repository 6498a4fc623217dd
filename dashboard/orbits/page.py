"""The orbits page: a client-side movie of every head's dot in each Fourier plane over training, and of
every head's profile in the tetrahedron beside them.

``orbits_view(ds)`` returns a Bokeh layout built from ``dashboard.orbits``' views (``orbit_polygons``,
``orbit_tetrahedron``, ``training_metrics``, the search's views, rendered with ``common.render.render``); all
interaction runs in the browser (CustomJS over shared ColumnDataSources, arguments in one ``ctx``,
``page_models.PageModels``), so it works served by Panel and in a static HTML file opened with file://.
All frames' positions ship once as float32 columns (binary, base64 in a static file); each frame the
JavaScript rewrites the dots, the trails, the axis ranges and the metrics line.

Named models for tests and benchmarks (``Bokeh.documents[0].get_model_by_name(NAME)``):
``orbits_frame`` (Slider, value = current frame index), ``orbits_play`` (Toggle), ``orbits_step``,
``orbits_step_back`` (Buttons), ``orbits_interval_ms`` (Spinner, ms per frame, read at every tick),
``orbits_dots_{p}``, ``orbits_trails_{p}`` (the per-panel sources), ``orbits_info`` (Div),
``orbits_tetra_dots``, ``orbits_tetra_trails`` (the tetrahedron's sources, moved from every frame's
``orbits_tetra_positions``; a run stored without ``head_profile`` has the Div ``orbits_tetra_message``
instead), ``orbits_hypotheses`` (the search's
hypotheses table, when the store has a search).
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
    Div,
    InlineStyleSheet,
    LayoutDOM,
    Plot,
    Slider,
    Span,
    Spinner,
    Title,
    Toggle,
)

from dashboard import data
from dashboard.common import jscode
from dashboard.common.page_models import PageModels
from dashboard.common.page_style import style
from dashboard.common.page_widgets import header, lean, message
from dashboard.common.render import Named, render
from dashboard.orbits import frames as of
from dashboard.orbits.search import NO_SEARCH, family_heads, hypotheses, hypotheses_table, search_families
from dashboard.orbits.views import (
    orbit_polygons,
    orbit_profile_positions,
    orbit_tetrahedron,
    reproduction,
    training_metrics,
)
from pipeline.schema import orbits_problems

PANEL_PX = 240
SIDE_PX = 430
SEARCH_PX = 330  # each of the two search plots beside the reproduction table
TETRA_PX = 320  # the tetrahedron's column beside the planes
HYPOTHESES_PX = 1200

WHAT_TO_LOOK_FOR = (
    "As training goes on, the heads of one orbit (one colour) settle on the vertices of a regular polygon "
    "centred at the origin: a shift by s turns a dot by rotation·s·360°/24, so a plane with rotation r shows "
    "24/gcd(r, 24) vertices. Gray heads belong to no orbit, and the equivariance error falls as the polygons form. "
    "The error “at 2× QK” is that of the same layer with every QK circuit doubled: heads in exact orbits are "
    "equivariant at any scale, so it stays as small only when the equivariance comes from orbits, not from "
    "tuning to the layer's own scale."
)

PROFILES_NOTE = (
    "The run's heads are also on the profiles page, as the model <b>orbits-c24</b> (trained in this project: "
    "orbit experiment): each head's QK form on the 3-simplex."
)

TETRA_CAPTION = (
    "Each head's profile (a, b, c, d) of W<sub>K</sub><sup>T</sup>W<sub>Q</sub> on the residual stream at the "
    "frame shown, on the 3-simplex as on the profiles page, coloured as in the planes, with its trail."
)

HYPOTHESES_CAPTION = (
    "<b>The search's hypotheses</b>, one row per recipe over its seeds: the heads of the frequency families at "
    "k = 2 and 10 (a 12-orbit needs 12) and k = 6 (a 4-orbit needs 4), as max/mean over the runs, and each "
    "run's distance from those counts, |12 − heads at k = 2 or 10 (the nearer)| + |4 − heads at k = 6|."
)

# For tests and benchmarks: page.evaluate(RECORD_FRAMES_JS) logs every frame shown in window.__orbitsFrames.
RECORD_FRAMES_JS = jscode.code("record_frames")

EPSILON = (
    "<b>ε in the panel titles.</b> A panel's position is the Fourier coefficient "
    "z = Σ<sub>a,b</sub> M[a, b] e<sup>iθ(f<sub>a</sub>a + ε f<sub>b</sub>b)</sup> of the head's QK matrix M "
    "(OV: its R), θ = 2π/24: ε = +1 pairs the two frequencies in the same sense of rotation, ε = −1 in "
    "opposite senses. Which sign a plane uses sets how a shift turns it, hence the polygon an orbit draws."
)

def message_view(text: str) -> Div:
    """The page shown instead of the movie when the store cannot feed it (text is plain, escaped here)."""
    return Div(text=f"<h3>Orbits</h3><p>{of.code_html(text)}</p>", name="orbits_message", width=700)


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
        rows.append(f"<tr><td><span class='dot' style='color:{c.colour}'>●</span></td><td>{c.label}</td>"
                    f"<td title='heads {', '.join(map(str, c.heads))}'>{len(c.heads)}</td>"
                    f"<td>{err}</td><td>{closed}</td></tr>")
    if n_none:
        rows.append(f"<tr><td><span class='dot' style='color:{of.NO_ORBIT}'>●</span></td><td>none</td>"
                    f"<td>{n_none}</td><td></td><td></td></tr>")
    return ("<b>Orbit verification</b>: for every shift s and head h, s·h is the head matching "
            "M<sub>s·h</sub> = T<sub>s</sub> M<sub>h</sub> T<sub>s</sub><sup>−1</sup> and "
            "R<sub>s·h</sub> = T<sub>2s</sub> R<sub>h</sub> T<sub>s</sub><sup>−1</sup>; below, the worst "
            "relative Frobenius error over the 24 shifts and the orbit's heads, and whether every shift maps "
            f"the orbit into itself.<table class='compact' cellpadding='3'>{head}{''.join(rows)}"
            "</table>")


def _metrics_figures(ds: xr.Dataset, epochs: np.ndarray) -> tuple[list, list[Span]]:
    """``training_metrics`` rendered (accuracy; equivariance error on a log axis), each with a cursor
    at the frame shown; a click jumps to the nearest frame."""
    grid = render(training_metrics(ds, width=SIDE_PX))
    named = Named(grid)
    figs = [named[n] for n in ("orbits_accuracy", "orbits_equivariance")]
    cursors = []
    for fig in figs:
        cursor = Span(location=float(epochs[-1]), dimension="height", line_color="#555", line_width=1)
        fig.add_layout(cursor)
        cursors.append(cursor)
    figs[0].title.text = "accuracy (click to jump to an epoch)"
    return figs, cursors


def _search_and_reproduction(ds: xr.Dataset, search: xr.Dataset | None, sheet: InlineStyleSheet) -> list:
    """What the stored run reproduces of the original work (a table), and the search's family sizes."""
    rows = reproduction(ds)
    colour = {"yes": "#2e7d32", "no": "#c62828", "partly": "#ef6c00"}
    body = "".join(f"<tr><td>{html.escape(r['result'])}</td><td>{html.escape(r['original'])}</td>"
                   f"<td>{html.escape(r['stored'])}</td><td style='color:{colour[r['reproduced']]}'>"
                   f"<b>{r['reproduced']}</b></td></tr>" for r in rows)
    table = Div(text=("<b>What the stored run reproduces</b><table class='compact'"
                      " cellpadding='3'><tr><th>result</th><th>original</th><th>stored run</th><th>reproduced</th>"
                      f"</tr>{body}</table>"), width=SIDE_PX, name="orbits_reproduction", stylesheets=[sheet])
    if search is None or "orbit_count" not in search:
        plot = Div(text=NO_SEARCH, width=SIDE_PX, name="orbits_search")
    else:
        plot = render(search_families(search, width=SEARCH_PX))
        plot.name = "orbits_search"
        if "family_heads" in search:
            families = render(family_heads(search, width=SEARCH_PX))
            families.name = "orbits_search_families"
            return [table, plot, families]
    return [table, plot]


def _tetrahedron(ds: xr.Dataset, f0: int, movie: PageModels, sheet: InlineStyleSheet) -> LayoutDOM:
    """``orbit_tetrahedron`` at frame f0, moved with the slider (orbits_tetra.js) from every frame's
    projected profiles, shipped once (``orbits_tetra_positions``); the message when the run has no profiles."""
    xy = orbit_profile_positions(ds)
    if xy is None:
        return Div(text=f"<p class='small'><b>The heads on the 3-simplex.</b> "
                        f"{of.code_html(of.no_profiles_note(ds))}</p>", width=TETRA_PX, name="orbits_tetra_message",
                   stylesheets=[sheet])
    fig = render(orbit_tetrahedron(ds, frame=f0, size=TETRA_PX - 20))
    both = np.concatenate([xy, of.head_profiles(ds)], axis=-1)  # (F, H, 6): x, y, a, b, c, d
    positions = ColumnDataSource({"pos": of.pack_positions(both)}, name="orbits_tetra_positions")
    named = Named(fig)
    movie.frame_slider.js_on_change("value", jscode.callback(dict(ctx=movie.but(
        tetra_positions=positions, tetra_dots=named["orbits_tetra_dots"],
        tetra_trails=named["orbits_tetra_trails"]).args()), "orbits_tetra"))
    caption = Div(text=f"<p class='small tight'>{TETRA_CAPTION}</p>", width=TETRA_PX,
                  name="orbits_tetra_caption", stylesheets=[sheet])
    return column(fig, caption, width=TETRA_PX)


def _hypotheses(search: xr.Dataset | None, sheet: InlineStyleSheet) -> list:
    """The search's hypotheses, one row per recipe (``search.hypotheses_table``), under a one-line caption;
    nothing without a search (the search plots above say so)."""
    if not hypotheses(search):
        return []
    table = render(hypotheses_table(search, width=HYPOTHESES_PX))
    table.name = "orbits_hypotheses"
    caption = Div(text=f"<p class='small tight'>{HYPOTHESES_CAPTION}</p>", width=HYPOTHESES_PX,
                  name="orbits_hypotheses_caption", stylesheets=[sheet])
    return [caption, table]


def _panels(ds: xr.Dataset, f0: int, panel_px: int) -> tuple[list[Plot], LayoutDOM]:
    """The Fourier planes at frame f0 (``orbit_polygons``) with their subtitles, in rows of two."""
    figs = [render(panel) for panel in orbit_polygons(ds, frame=f0, panel_px=panel_px)]
    for p, fig in enumerate(figs):
        sub = of.panel_subtitle(ds, p)
        if sub:
            fig.add_layout(Title(text=sub, text_font_size="9.5px", text_font_style="normal", text_color="#555"),
                           "above")
        fig.title.text_font_size = "10.5px"
        # sized by HoloViews' frame_width / frame_height; Bokeh's validation flags "fixed" without width and height
        fig.sizing_mode = None
        fig.grid.grid_line_alpha = 0.3
        fig.min_border = 4
    # rows of two in a column, not gridplot: a GridPlot nested in Panel's layouts renders empty (bokeh#13384)
    return figs, column(*[row(*figs[i:i + 2]) for i in range(0, len(figs), 2)], name="orbits_panels")


def _controls(F: int, f0: int, panel_px: int, interval_ms: int) -> tuple[Slider, Toggle, Button, Button, Spinner]:
    """The movie's frame slider, play toggle, step buttons (back, forward) and ms-per-frame spinner."""
    slider = Slider(start=0, end=max(F - 1, 1), value=f0, step=1, title="frame", name="orbits_frame",
                    disabled=F < 2, width=2 * panel_px - 250, show_value=False)
    play = Toggle(label="▶ Play", active=False, name="orbits_play", width=80, disabled=F < 2)
    back = Button(label="◀", name="orbits_step_back", width=40, disabled=F < 2)
    step = Button(label="▶|", name="orbits_step", width=40, disabled=F < 2)
    speed = Spinner(value=interval_ms, low=1, step=10, width=70, name="orbits_interval_ms")
    return slider, play, back, step, speed


def _play(movie: PageModels, speed: Spinner, hold_ms: int, back: Button, step: Button, charts: list[Plot]) -> None:
    """Play and pause (``speed``: ms per frame; ``hold_ms``: the last frame's hold), one frame back or
    forward, and a click on a metrics chart to jump to its epoch."""
    playing = movie.but(interval_spinner=speed, hold_ms=hold_ms)
    movie.play_toggle.js_on_change("active", jscode.callback(dict(ctx=playing.args()), "movie_play"))
    back.js_on_click(jscode.callback(dict(ctx=movie.but(step_by=-1).args()), "movie_step"))
    step.js_on_click(jscode.callback(dict(ctx=movie.but(step_by=1).args()), "movie_step"))
    tap = jscode.callback(dict(ctx=movie.args()), "orbits_tap")
    for chart in charts:
        chart.js_on_event("tap", tap)


def orbits_view(ds: xr.Dataset | None, interval_ms: int = 120, hold_ms: int = 1500,
                panel_px: int = PANEL_PX, search: xr.Dataset | None = None) -> LayoutDOM:
    """The orbits movie as a Bokeh layout (pure client-side; works in a static file with no server).

    Parameters
    ----------
    ds : the ``orbits`` group (``dashboard.data.orbits``): ``position`` (frame, head, panel, xy),
        coord ``epoch`` (frame), per-panel metadata, per-frame metrics, ``orbit`` (head),
        ``shift_error`` / ``shift_image`` (shift, head). None or an unusable dataset gives a message.
    interval_ms : initial milliseconds per frame while playing (the ``orbits_interval_ms`` spinner).
    hold_ms : how long the last frame stays before the movie loops to the first.
    panel_px : width and height of each square panel.
    """
    problems = orbits_problems(ds, check_version=False)  # the version is checked where the store is read
    if problems:
        return message_view(f"The orbits group cannot be shown: {'; '.join(problems)}. Recompute it with "
                            f"`{of.FIX_COMMAND}`.")
    ds = of.sorted_by_epoch(of.run_panels(ds))
    pos = of.positions(ds)  # (F, H, P, 2)
    F, H, P, _ = pos.shape
    epochs = np.asarray(ds["epoch"].values)
    starts = of.trail_starts(epochs, of.trail_epochs(ds))
    radii = of.view_radii(pos, starts)
    metrics = of.metric_columns(ds)
    orbit = of.orbit_labels(ds)
    f0 = F - 1  # open on the last frame: the orbits as trained
    sheet = style("orbits")  # the page's one stylesheet model (dashboard/common/page.css)
    wide = 2 * panel_px + TETRA_PX + SIDE_PX

    frames = ColumnDataSource({"epoch": epochs, "start": starts, **metrics,
                               **{f"r{p}": radii[:, p] for p in range(P)}}, name="orbits_frames")
    figs, grid = _panels(ds, f0, panel_px)
    named = Named(*figs)
    info = Div(text=_info_html(epochs[f0], f0, F, metrics), name="orbits_info", width=wide)
    slider, play, back, step, speed = _controls(F, f0, panel_px, interval_ms)
    charts, cursors = _metrics_figures(ds, epochs)
    movie = PageModels(frame_data=frames, frame_slider=slider, play_toggle=play, n_heads=H)
    slider.js_on_change("value", jscode.callback(dict(ctx=movie.but(
        positions=ColumnDataSource({"pos": of.pack_positions(pos)}, name="orbits_positions"),
        panel_dots=[named[f"orbits_dots_{p}"] for p in range(len(figs))],
        panel_trails=[named[f"orbits_trails_{p}"] for p in range(len(figs))],
        panel_x_ranges=[f.x_range for f in figs], panel_y_ranges=[f.y_range for f in figs], frame_info=info,
        metric_cursors=cursors, n_panels=P).args()), "orbits_update"))
    tetra = _tetrahedron(ds, f0, movie, sheet)
    _play(movie, speed, hold_ms, back, step, charts)

    n_orbits = len(of.orbit_order(orbit))
    title = Div(text=(f"<h3 class='tight'>Orbits of C<sub>24</sub>: {H} heads, {n_orbits} orbit"
                      f"{'s' if n_orbits != 1 else ''}, {F} frames (trails: last "
                      f"{of.trail_epochs(ds):g} epochs)</h3>"), width=wide, stylesheets=[sheet])
    look = Div(text=f"<p class='small tight'><b>What to look for.</b> {WHAT_TO_LOOK_FOR}</p>",
               width=SIDE_PX, stylesheets=[sheet])
    table = Div(text=_verification_html(ds, orbit), width=SIDE_PX, name="orbits_verification", stylesheets=[sheet])
    label = Div(text="<span class='nowrap'>ms per frame</span>", width=95, name="orbits_interval_label",
                stylesheets=[sheet])
    notes = Div(text=f"<p class='small'>{EPSILON}</p><p class='small'>{PROFILES_NOTE}</p>", width=wide,
                name="orbits_notes", stylesheets=[sheet])
    page = column(title, row(play, back, step, slider, label, speed), info,
                  row(grid, tetra, column(look, *charts, table, width=SIDE_PX)),
                  row(*_search_and_reproduction(ds, search, sheet)), *_hypotheses(search, sheet), notes,
                  name="orbits_view")
    for plot in page.select({"type": Plot}):
        lean(plot, [])  # nothing on this page is selected: no glyph copies for selections (85 models fewer)
    return page


def orbits_content(store, shown: str | None = None):
    """The orbits page: ``orbits_view`` over the store's orbits (and orbits_search) groups,
    or a message with the fixing command. ``shown`` replaces the store's path in messages."""
    try:
        ds = data.orbits(store)
        search = data.orbits_search(store)
    except data.StoreError as exc:
        text = str(exc).replace(str(store), shown) if shown else str(exc)  # no local paths in published pages
        return column(header("Orbits of attention heads", name="orbits_header"),
                      message(html.escape(text), "error", name="orbits_store_error"), name="orbits_page")
    return orbits_view(ds, search=search)
