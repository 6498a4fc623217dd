"""A run packed for the training view: plain numpy, no Bokeh.

:func:`run_frames` reads a run's Dataset (``Store.run(name)``, ``pipeline.schema.runs``) once: its complete frames
in step order (a frame whose layers are not all written is left out, and named), every head's profile at every frame
and offset, the head statistics at d = 0, the metrics the run recorded. Every number the view draws is computed here,
from those arrays: the type counts per frame and offset (:func:`type_counts`, the spectral type rule of
``pipeline.analyses.types``), how far each head moved (:func:`path_lengths`, :func:`displacements`), the statistics'
quantiles over the heads per frame (:func:`quantiles`), and where each step sits on the log-step axis
(:func:`step_axis`). :func:`frame_cube` packs the profiles for the browser, which decodes one offset at a time
and then only indexes arrays.

**Distances.** How far a head moved is measured between its profiles (a, b, c, d) as points of R^4, Euclidean: on
the simplex this is the distance in the drawn tetrahedron up to one factor (its vertices lie at distance sqrt(8/3) of
each other, the profile's at sqrt(2)), so the ranking is the one the eye sees at any camera. The path length is the
sum of the distances between consecutive frames (a step into or out of a frame where the head has no profile counts
nothing); the displacement is the distance from the first frame to the last.

**Step 0 on a log axis.** A run's first checkpoint is usually step 0, which a log axis cannot hold. It is drawn at
half the smallest positive step (0.5 when that is 1), its tick labelled 0: every frame is on the axis, and step 0
keeps the place the step before the first positive one would take.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import xarray as xr

from dashboard.common import geometry as g
from pipeline.analyses import clusters
from pipeline.schema import COORDINATES, STATISTICS
from pipeline.schema.runs import HEAD_METRIC_PREFIX, METRIC_PREFIX

QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)  # the bands drawn: 10-90 %, 25-75 %, and the median


@dataclass(frozen=True)
class RunFrames:
    """One run's complete frames in step order (:func:`run_frames`)."""

    name: str
    attrs: dict
    steps: np.ndarray  # (F,) int64, increasing
    revisions: tuple[str, ...]
    profile: np.ndarray  # (F, L, H, D, 4) float64: D = 129 for a rotary run, else 1
    statistics: np.ndarray  # (F, L, H, len(STATISTICS)) float64 at d = 0; NaN where not computed
    spectrum: np.ndarray  # (L, H, E) the last frame's S spectrum at d = 0 (NaN-padded; NaN where not computed)
    metrics: dict[str, np.ndarray]  # the run's scalar metrics, name -> (F,)
    head_metrics: dict[str, np.ndarray]  # its per-head metrics, name -> (F, L, H)
    left_out: tuple[int, ...] = ()  # the steps of the frames left out (not every layer written)

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(frames, layers, heads per layer, offsets)."""
        F, L, H, D, _ = self.profile.shape
        return F, L, H, D

    @property
    def rotary(self) -> bool:
        """The form moves with d: a d slider."""
        return self.profile.shape[3] > 1

    @property
    def has_statistics(self) -> bool:
        return bool(np.isfinite(self.statistics).any())


def _names(ds: xr.Dataset, prefix: str, dims: tuple[str, ...]) -> list[str]:
    return sorted(str(v)[len(prefix):] for v in ds.data_vars if str(v).startswith(prefix) and ds[v].dims == dims)


def run_frames(ds: xr.Dataset, name: str | None = None) -> RunFrames:
    """The run ``ds`` (``Store.run(name)``, or any Dataset that follows ``pipeline.schema.runs``) as arrays: its
    complete frames sorted by step, without the padding past its layers and heads; ``name``: the run's (default: the
    group's ``run_name`` attribute)."""
    ds = ds.sortby("step")
    attrs = dict(ds.attrs)
    L, H = int(attrs["n_layers"]), int(attrs["n_heads"])
    done = np.asarray(ds["layer_done"].values, dtype=bool)[:, :L].all(axis=1)
    steps = np.asarray(ds["step"].values, dtype=np.int64)
    kept = np.flatnonzero(done)
    cut = ds.isel(step=kept, layer=slice(0, L), head=slice(0, H))
    rotary = str(attrs.get("positional", "")) == "rope"
    profile = cut["profile"].transpose("step", "layer", "head", "d", "coordinate")
    profile = profile.sel(coordinate=list(COORDINATES)) if "coordinate" in profile.coords else profile
    profile = np.asarray(profile.values, dtype=np.float64)
    if not rotary:
        profile = profile[:, :, :, :1]
    if "head_statistics" in cut:
        stats = cut["head_statistics"].transpose("step", "layer", "head", "statistic")
        stats = np.asarray(stats.sel(statistic=list(STATISTICS)).values, dtype=np.float64)
    else:
        stats = np.full((len(kept), L, H, len(STATISTICS)), np.nan)
    if "spectrum" in cut and len(kept):
        spectrum = np.asarray(cut["spectrum"].isel(step=-1).transpose("layer", "head", "eigen").values,
                              dtype=np.float64)
    else:
        spectrum = np.full((L, H, 1), np.nan)
    metrics = {m: np.asarray(cut[METRIC_PREFIX + m].values, dtype=np.float64)
               for m in _names(ds, METRIC_PREFIX, ("step",))}
    head_metrics = {m: np.asarray(cut[HEAD_METRIC_PREFIX + m].transpose("step", "layer", "head").values,
                                  dtype=np.float64) for m in _names(ds, HEAD_METRIC_PREFIX, ("step", "layer", "head"))}
    revisions = tuple(str(r) for r in np.asarray(cut["revision"].values)) if "revision" in cut else ("",) * len(kept)
    return RunFrames(str(name if name is not None else attrs.get("run_name", "run")), attrs, steps[kept], revisions,
                     profile, stats, spectrum, metrics, head_metrics,
                     tuple(int(s) for s in steps[np.flatnonzero(~done)]))


def types(profile: np.ndarray) -> np.ndarray:
    """The spectral type code of every profile (``geometry.spectral_types``, the rule of
    ``pipeline.analyses.types``): 0 = I₊, 1 = II, 2 = I₋; a profile of NaN is II."""
    p = np.asarray(profile, dtype=np.float64)
    return g.spectral_types(p.reshape(-1, 4)).reshape(p.shape[:-1])


def type_counts(profile: np.ndarray) -> np.ndarray:
    """(F, D, 3) int: how many heads are of each type (I₊, II, I₋) at every frame and offset; ``profile``:
    (F, L, H, D, 4)."""
    t = types(profile)  # (F, L, H, D)
    return np.stack([(t == k).sum(axis=(1, 2)) for k in range(3)], axis=-1)


def path_lengths(profile: np.ndarray) -> np.ndarray:
    """(D, L * H): each head's path length over the frames at every offset, heads layer-major (module doc)."""
    F, L, H, D, _ = profile.shape
    if F < 2:
        return np.zeros((D, L * H))
    steps = np.linalg.norm(np.diff(profile, axis=0), axis=-1)  # (F - 1, L, H, D)
    return np.nansum(steps, axis=0).reshape(L * H, D).T


def displacements(profile: np.ndarray) -> np.ndarray:
    """(D, L * H): each head's distance from its first frame to its last at every offset (NaN where either has no
    profile), heads layer-major."""
    F, L, H, D, _ = profile.shape
    return np.linalg.norm(profile[-1] - profile[0], axis=-1).reshape(L * H, D).T


def quantiles(statistics: np.ndarray, qs=QUANTILES) -> np.ndarray:
    """(S, F, len(qs)): each statistic's quantiles ``qs`` over the heads at every frame (NaN heads left out; NaN where
    no head has a value); ``statistics``: (F, L, H, S)."""
    F, L, H, S = statistics.shape
    flat = statistics.reshape(F, L * H, S)
    with warnings.catch_warnings():  # a frame or statistic without values: NaN, said by the view
        warnings.simplefilter("ignore", RuntimeWarning)
        out = np.nanquantile(flat, list(qs), axis=1) if L * H else np.full((len(qs), F, S), np.nan)
    return np.transpose(out, (2, 1, 0))


@dataclass(frozen=True)
class StepAxis:
    """Where the steps sit on a log axis (module doc): ``x`` per frame, step 0 at ``zero_at``; ``ticks`` and their
    ``labels`` (the powers of ten the steps span, and "0" at ``zero_at`` when a frame is step 0)."""

    x: np.ndarray
    zero_at: float
    ticks: list[float]
    labels: dict[float, str]


def step_axis(steps: np.ndarray) -> StepAxis:
    """The log-step axis of ``steps`` (non-negative integers)."""
    steps = np.asarray(steps, dtype=np.float64)
    positive = steps[steps > 0]
    zero_at = float(positive.min()) / 2 if positive.size else 0.5
    x = np.where(steps > 0, steps, zero_at)
    top = float(positive.max()) if positive.size else 1.0
    ticks = [10.0 ** k for k in range(int(np.floor(np.log10(max(zero_at, 1e-300)))), int(np.ceil(np.log10(top))) + 1)
             if zero_at < 10.0 ** k <= top * 1.0001]
    labels = {t: f"{t:g}" if t < 1e5 else f"1e{int(round(np.log10(t)))}" for t in ticks}
    if (steps == 0).any():
        ticks = [zero_at, *ticks]
        labels[zero_at] = "0"
    return StepAxis(x, zero_at, ticks, labels)


def cluster_labels(frames: RunFrames) -> np.ndarray:
    """(L * H,) each head's cluster among the k-means clusters of the heads' unit S spectra at the run's last frame
    (``pipeline.analyses.clusters``, its K and seed, as the profiles page clusters a model's heads): the colour stays
    with the head over the frames. -1 for a head without a spectrum, and for every head where they cannot be
    clustered (no statistics, fewer heads than clusters)."""
    F, L, H, _ = frames.shape
    labels = np.full(L * H, -1)
    spectrum = frames.spectrum.reshape(L * H, -1)
    if not np.isfinite(spectrum).any():
        return labels
    X, kept = clusters.unit_spectra(spectrum)
    try:
        labels[kept] = clusters.kmeans(X, clusters.K, clusters.SEED)[0]
    except ValueError:  # fewer heads than clusters, or too few distinct spectra
        pass
    return labels


FRAME_SCALE = 4094  # a coordinate's code: round(v * 4094), 12 bits
FRAME_NAN = 4095  # the code of a head without a profile
WRAP = 1 << 16


def frame_codes(profile: np.ndarray) -> np.ndarray:
    """(F, L, H, D, 4) profiles -> int64 codes round(v * FRAME_SCALE) in [0, 4094], FRAME_NAN where NaN: steps of
    1/4094, a quarter of a thousandth (under a hundredth of a pixel of the drawn tetrahedron)."""
    p = np.asarray(profile, dtype=np.float64)
    codes = np.rint(np.clip(np.nan_to_num(p, nan=0.0), 0.0, 1.0) * FRAME_SCALE).astype(np.int64)
    codes[np.isnan(p)] = FRAME_NAN
    return codes


def frame_cube(profile: np.ndarray) -> np.ndarray:
    """Every head's profile at every frame and offset for the browser (``training_decode.js``), uint8 of
    8 * heads * F * D, packed so that gzip (Bokeh's, on a page's arrays) compresses it well: the codes of
    :func:`frame_codes`, the fourth replaced by the sum of the four less FRAME_SCALE (a + b + c + d = 1: a rounding,
    -1, 0 or 1); coordinate-major, then head (layer-major), then frame, then offset; each value the difference from
    the head's value at the frame before (the first as it is), then each the difference from the one at the offset
    before (the first as it is), modulo 2^16 (a head moves little from one checkpoint and one offset to the next);
    those uint16 values as bytes, every high byte, then every low byte. ``profile``: (F, L, H, D, 4)."""
    F, L, H, D, _ = profile.shape
    codes = np.transpose(frame_codes(profile), (1, 2, 0, 3, 4)).reshape(L * H, F, D, 4)
    r = (codes.sum(axis=-1) - FRAME_SCALE) % WRAP
    planes = np.moveaxis(np.concatenate([codes[..., :3], r[..., None]], axis=-1), -1, 0)  # (4, heads, F, D)
    planes[:, :, 1:] = (planes[:, :, 1:] - planes[:, :, :-1]) % WRAP
    planes[..., 1:] = (planes[..., 1:] - planes[..., :-1]) % WRAP
    v = planes.reshape(-1)
    return np.concatenate([v >> 8, v & 0xFF]).astype(np.uint8)


def unpack_frame_cube(packed: np.ndarray, heads: int, frames: int) -> np.ndarray:
    """The inverse of :func:`frame_cube`: the codes (heads, F, D, 4) of :func:`frame_codes`."""
    p = np.asarray(packed, dtype=np.int64)
    v = (p[:p.size // 2] << 8) | p[p.size // 2:]
    planes = v.reshape(4, heads, frames, -1)
    planes = np.cumsum(np.cumsum(planes, axis=-1) % WRAP, axis=2) % WRAP
    planes[3] = (planes[3] + FRAME_SCALE - planes[0] - planes[1] - planes[2]) % WRAP
    return np.moveaxis(planes, 0, -1)


def at_offsets(profile: np.ndarray, offsets: int) -> np.ndarray:
    """``profile`` (F, L, H, D, 4) cut to its first ``offsets`` offsets (the exporter's d = 0 alone: 1)."""
    return profile[:, :, :, :max(1, min(int(offsets), profile.shape[3]))]


def head_labels(L: int, H: int) -> list[str]:
    """"layer.head" of every head, layer-major: the deep link's spelling."""
    return [f"{layer}.{head}" for layer in range(L) for head in range(H)]

