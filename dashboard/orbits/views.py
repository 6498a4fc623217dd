"""The orbit experiment's views over the ``orbits`` group: every head's dot in each Fourier plane with its
trail, every head's W_K^T W_Q profile in the tetrahedron, the training metrics, and what the stored run
reproduces of the original work. The frames are packed by ``dashboard.orbits.frames``."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import xarray as xr
from bokeh.models import HoverTool

from dashboard.common import geometry as g
from dashboard.common.render import element_plots, name_models
from dashboard.common.simplex import heads_table, simplex_outline, vertex_labels
from dashboard.orbits import frames as of
from pipeline.schema import COORDINATES, orbits_problems


def _orbits_ready(orbits: xr.Dataset) -> xr.Dataset:
    problems = orbits_problems(orbits, check_version=False)
    if problems:
        raise ValueError("; ".join(problems))
    return of.sorted_by_epoch(of.run_panels(orbits))


def _trails(xy: np.ndarray, starts: np.ndarray, f: int, order: np.ndarray, colour: list[str], orbit: np.ndarray,
            group: str, r: float) -> hv.Contours:
    """One line per head (in ``order``) through its positions ``xy`` (F, H, 2) at frames start[f] .. f, in its
    orbit's colour (no orbit: fainter), in a panel of half-width ``r``. Contours, not Path: Path splits a line with
    its own colour into segments. Every dimension declares its range or its values, the panel's axes and what the
    heads are drawn in: HoloViews then reads no path to find them (a quarter of the orbits page's build)."""
    paths = [{"x": xy[starts[f]: f + 1, h, 0], "y": xy[starts[f]: f + 1, h, 1], "colour": colour[h],
              "alpha": 0.55 if orbit[h] >= 0 else 0.22} for h in order]
    return hv.Contours(paths, kdims=[hv.Dimension("x", range=(-r, r)), hv.Dimension("y", range=(-r, r))],
                       vdims=[hv.Dimension("colour", values=sorted(set(colour))), hv.Dimension("alpha", range=(0, 1))],
                       group=group).opts(color=hv.dim("colour"), alpha=hv.dim("alpha"), line_width=1.3,
                                         default_tools=[])


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
        trails = _trails(pos[:, :, p, :], starts, f, order, colour, orbit, "Trails", r)
        dots = _dots(pos[f, order, p, 0], pos[f, order, p, 1], order, colour, orbit, "Dots")
        title = of.panel_title(ds, p)
        plots.append((trails * dots * hv.HLine(0) * hv.VLine(0)).opts(
            hv.opts.HLine(color="#444", line_width=0.7, alpha=0.7, default_tools=[]),
            hv.opts.VLine(color="#444", line_width=0.7, alpha=0.7, default_tools=[]),
            hv.opts.Overlay(frame_width=panel_px, frame_height=panel_px, xlim=(-r, r), ylim=(-r, r), title=title,
                            fontsize={"title": "9.5pt", "ticks": "7pt"}, default_tools=[], toolbar=None,
                            xlabel="", ylabel="", show_legend=False,
                            hooks=[name_models({"Trails": {"source": f"orbits_trails_{p}"},
                                                "Dots": {"source": f"orbits_dots_{p}"}}, f"orbits_panel_{p}")])))
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


TETRA_NAMES = name_models({"TetraDots": {"source": "orbits_tetra_dots"},
                           "TetraTrails": {"source": "orbits_tetra_trails"}}, "orbits_tetrahedron")


def _vertex_labels(plot, element) -> None:
    """A render hook: the vertex labels of the tetrahedron's vertices, above or below their vertex."""
    vertex_labels(plot.state, element_plots(plot, element)["TetraVertices"].handles["cds"], "9pt")


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
    edges, vertices = simplex_outline(azimuth, elevation, "Tetra", vertex_size=9)
    lim = g.VIEW_LIMIT
    trails = _trails(xy, starts, f, order, colour, orbit, "TetraTrails", lim)
    coords = {c: prof[f, order, k] for k, c in enumerate(COORDINATES)}
    dots = _dots(xy[f, order, 0], xy[f, order, 1], order, colour, orbit, "TetraDots", coords,
                 tuple((c, f"@{c}{{0.000}}") for c in COORDINATES))
    return (edges * vertices * trails * dots).opts(
        hv.opts.Overlay(frame_width=size, frame_height=size, xlim=(-lim, lim), ylim=(-lim, lim), xaxis=None,
                        yaxis=None, show_grid=False, default_tools=[], toolbar=None, show_legend=False,
                        title="each head's W_Kᵀ W_Q profile", fontsize={"title": "9.5pt"},
                        hooks=[TETRA_NAMES, _vertex_labels]))


def training_metrics(orbits: xr.Dataset, width: int = 430) -> hv.Layout:
    """Train and held-out accuracy (linear axis) over the epochs, and the equivariance errors on a log axis:
    the figures ``orbits_accuracy`` and ``orbits_equivariance``."""
    ds = _orbits_ready(orbits)
    epochs = np.asarray(ds["epoch"].values, dtype=float)
    m = of.metric_columns(ds)
    acc = (hv.Curve((epochs, m["train_accuracy"]), "epoch", "accuracy", label="train").opts(color="#1f77b4")
           * hv.Curve((epochs, m["heldout_accuracy"]), "epoch", "accuracy", label="held-out").opts(color="#2ca02c"))
    acc = acc.opts(hv.opts.Overlay(width=width, height=170, ylim=(0, 1.02), legend_position="bottom_right",
                                   default_tools=[], toolbar=None, title="accuracy",
                                   hooks=[name_models({}, "orbits_accuracy")]))
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
                                                  title="equivariance error (log axis)",
                                                  hooks=[name_models({}, "orbits_equivariance")]))
    return (acc + err).cols(1).opts(shared_axes=False)


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


