"""Pack the ``orbits`` group for the client-side movie: plain numpy, no Bokeh.

Everything the browser needs per frame is computed here once, so the JavaScript only indexes arrays:
the flat float32 positions, the first frame of each frame's trail, the radius in view per frame and
panel, the colour of each head, the per-orbit verification rows and each head's profile per frame
(``head_profiles``; ``views.orbit_profile_positions`` projects them into the tetrahedron).

Flat position layout: ``pos[((f * H + h) * P + p) * 2 + k]`` = coordinate k (0 = x, 1 = y) of head h
in panel p at frame f (F frames, H heads, P panels).
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import numpy as np
import xarray as xr

from pipeline.schema import COORDINATES

DEFAULT_TRAIL_EPOCHS = 250
FIX_COMMAND = "python -m pipeline orbits --store PATH"
METRICS = ("train_accuracy", "heldout_accuracy", "equivariance_error", "sharpened_error", "loss")
# Category10 without its gray: the first orbit blue, the second orange, then other distinct colours.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf",
           "#393b79", "#ad494a", "#637939", "#7b4173", "#3182bd", "#e6550d", "#31a354")
NO_ORBIT = "#a6a6a6"


def run_panels(ds: xr.Dataset) -> xr.Dataset:
    """The panels the run itself uses, where the store marks them (``panel_role`` == "run").

    The orbits group may also keep the seed page's frequency-10/6 planes for comparison (role "seed");
    the movie shows the planes chosen from the run's own energy spectrum, where its orbits live.
    """
    if "panel_role" not in ds:
        return ds
    mask = np.array([str(r) == "run" for r in np.asarray(ds["panel_role"].values)], dtype=bool)
    return ds.isel(panel=np.flatnonzero(mask)) if mask.any() else ds


def sorted_by_epoch(ds: xr.Dataset) -> xr.Dataset:
    """The frames in increasing epoch order (the frame index when there is no epoch coordinate)."""
    if "epoch" not in ds.coords and "epoch" not in ds:
        ds = ds.assign_coords(epoch=("frame", np.arange(ds.sizes["frame"])))
    epochs = np.asarray(ds["epoch"].values)
    if np.all(np.diff(epochs) >= 0):
        return ds
    return ds.isel(frame=np.argsort(epochs, kind="stable"))


def positions(ds: xr.Dataset) -> np.ndarray:
    """(F, H, P, 2) float64 positions, xy ordered (x, y) whatever the stored order."""
    pos = ds["position"]
    if "xy" in pos.coords and set(map(str, pos["xy"].values)) == {"x", "y"}:
        pos = pos.sel(xy=["x", "y"])
    return np.asarray(pos.transpose("frame", "head", "panel", "xy").values, dtype=np.float64)


def pack_positions(pos: np.ndarray) -> np.ndarray:
    """(F, H, P, 2) positions -> flat float32 array of length F * H * P * 2 (C order, see module doc); any
    other shape is flattened the same way (the tetrahedron's (F, H, 6): x, y, a, b, c, d)."""
    return np.ascontiguousarray(pos, dtype=np.float32).reshape(-1)


def trail_epochs(ds: xr.Dataset) -> float:
    """The trail length in epochs from the attrs (``trail_epochs``), 250 when absent or unusable."""
    value = ds.attrs.get("trail_epochs", DEFAULT_TRAIL_EPOCHS)
    try:
        value = float(value)
    except (TypeError, ValueError):
        return float(DEFAULT_TRAIL_EPOCHS)
    return value if np.isfinite(value) and value >= 0 else float(DEFAULT_TRAIL_EPOCHS)


def trail_starts(epochs: np.ndarray, trail: float) -> np.ndarray:
    """(F,) int: the first frame whose epoch is within ``trail`` epochs before frame f (epochs increasing).

    The trail of frame f is frames ``start[f] .. f`` inclusive: every g <= f with epoch[f] - epoch[g] <= trail.
    """
    epochs = np.asarray(epochs, dtype=np.float64)
    return np.searchsorted(epochs, epochs - trail, side="left").astype(np.int32)


def view_radii(pos: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """(F, P) largest distance from the origin of any head over its trail (frames start[f] .. f); NaN -> 0."""
    r = np.hypot(pos[..., 0], pos[..., 1])  # (F, H, P)
    per_frame = np.max(np.where(np.isfinite(r), r, 0.0), axis=1)  # (F, P)
    out = np.empty_like(per_frame)
    for f, s in enumerate(starts):
        out[f] = per_frame[s: f + 1].max(axis=0)
    return out


def head_profiles(ds: xr.Dataset) -> np.ndarray | None:
    """(F, H, 4) float64 profile (a, b, c, d) of every head at every frame (``head_profile``), coordinates in
    that order whatever the stored order; None when the group has none (a run stored before it)."""
    if "head_profile" not in ds:
        return None
    prof = ds["head_profile"]
    if "coordinate" in prof.coords and set(map(str, prof["coordinate"].values)) == set(COORDINATES):
        prof = prof.sel(coordinate=list(COORDINATES))
    return np.asarray(prof.transpose("frame", "head", "coordinate").values, dtype=np.float64)


def regenerate_command(ds: xr.Dataset) -> str:
    """The command that wrote the run (the group's ``command`` attribute), or the generic one."""
    command = ds.attrs.get("command")
    return str(command) if isinstance(command, str) and command.strip() else FIX_COMMAND


def code_html(text: str) -> str:
    """Plain text as HTML: escaped, and each `backquoted` span a <code> span."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def no_profiles_note(ds: xr.Dataset) -> str:
    """What the tetrahedron shows for a run stored without ``head_profile``; `code` marks the command."""
    return f"This run was stored without frame profiles; regenerate it with `{regenerate_command(ds)}`."


def orbit_labels(ds: xr.Dataset) -> np.ndarray:
    """(H,) int orbit label per head; all -1 when the group has no ``orbit`` (head) variable."""
    if "orbit" not in ds or ds["orbit"].dims != ("head",):
        return np.full(ds.sizes["head"], -1, dtype=np.int64)
    return np.asarray(ds["orbit"].values, dtype=np.int64)


def orbit_order(orbit: np.ndarray) -> list[int]:
    """Orbit labels (excluding -1), largest orbit first, ties by label: the order of the palette."""
    labels, counts = np.unique(orbit[orbit >= 0], return_counts=True)
    return [int(lab) for _, lab in sorted(zip(-counts, labels, strict=True))]


def orbit_colours(orbit: np.ndarray) -> tuple[dict[int, str], list[str]]:
    """({label: colour}, per-head colour list); -1 (no orbit) is gray."""
    colours = {lab: PALETTE[i % len(PALETTE)] for i, lab in enumerate(orbit_order(orbit))}
    return colours, [colours.get(int(o), NO_ORBIT) for o in orbit]


@dataclass
class OrbitCheck:
    """One row of the verification table."""

    label: int
    colour: str
    heads: list[int]
    worst_error: float  # max over the 24 shifts and the orbit's heads of shift_error; NaN if not stored
    closed: bool | None  # every shift maps the orbit's heads into the orbit (None if shift_image absent)


def orbit_checks(ds: xr.Dataset) -> list[OrbitCheck]:
    """Per orbit (palette order): its heads, the worst relative error over all shifts, closure under shifts."""
    orbit = orbit_labels(ds)
    colours, _ = orbit_colours(orbit)
    err = np.asarray(ds["shift_error"].transpose("shift", "head").values, dtype=float) if "shift_error" in ds else None
    img = np.asarray(ds["shift_image"].transpose("shift", "head").values) if "shift_image" in ds else None
    rows = []
    for lab in orbit_order(orbit):
        heads = np.flatnonzero(orbit == lab)
        worst = float(np.nanmax(err[:, heads])) if err is not None and np.isfinite(err[:, heads]).any() else np.nan
        closed = bool(np.isin(img[:, heads], heads).all()) if img is not None else None
        rows.append(OrbitCheck(lab, colours[lab], heads.tolist(), worst, closed))
    return rows


def metric_columns(ds: xr.Dataset) -> dict[str, np.ndarray]:
    """Per-frame metrics as float64 (F,) arrays; NaN where the group lacks one."""
    F = ds.sizes["frame"]
    out = {}
    for name in METRICS:
        if name in ds and ds[name].dims == ("frame",):
            out[name] = np.asarray(ds[name].values, dtype=np.float64)
        else:
            out[name] = np.full(F, np.nan)
    return out


def _panel_value(ds: xr.Dataset, name: str, p: int):
    if name in ds and ds[name].dims == ("panel",):
        return ds[name].values[p]
    return None


def panel_title(ds: xr.Dataset, p: int) -> str:
    """e.g. "QK: query freq 0 × key 10 (rotation 10)" (short enough for a 240 px panel); the stored label when
    metadata is missing."""
    label = str(ds["panel"].values[p]) if "panel" in ds.coords else f"panel {p}"
    kind, a, b = (_panel_value(ds, n, p) for n in ("panel_kind", "freq_a", "freq_b"))
    rot = _panel_value(ds, "rotation", p)
    if kind is None or a is None or b is None:
        return label
    kind = str(kind)
    names = ("query", "key") if kind == "QK" else ("output", "input") if kind == "OV" else ("freq a", "freq b")
    title = f"{kind}: {names[0]} freq {int(a)} × {names[1]} {int(b)}"
    return title + (f" (rotation {int(rot)})" if rot is not None else "")


def panel_subtitle(ds: xr.Dataset, p: int) -> str:
    """e.g. "a full orbit draws a 12-gon · ε = +1" (empty when the panel records neither)."""
    rot, eps = _panel_value(ds, "rotation", p), _panel_value(ds, "eps", p)
    parts = []
    if rot is not None:
        n = vertex_count(int(rot))
        parts.append(f"a full orbit draws a {n}-gon" if n > 2 else "an orbit's dots coincide" if n == 1
                     else "a full orbit draws a segment through 0")
    if eps is not None:
        parts.append(f"ε = {'+1' if int(eps) > 0 else '−1'}")
    return " · ".join(parts)


def vertex_count(rotation: int, n: int = 24) -> int:
    """Vertices of the polygon a full C_n orbit draws in a plane that a shift by 1 turns by rotation·2π/n."""
    return n // int(np.gcd(int(rotation), n))
