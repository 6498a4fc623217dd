"""The run groups (``runs/NAME``): a run's frames added (journalled, under the store lock), read back, finished and
checked; each frame's layers are written by :class:`~pipeline.store.frame_writer.FrameWriter`.

A run group is made whole in the writer folder's staging area and moved into place, like the profiles group; frames
added later grow it along ``step``: every other variable first, the ``step`` coordinate last, so that ``step``'s
length is the number of frames (a longer variable is what a killed append left: the replay cuts it back). Plain
xarray readers read the root's consolidated metadata, written again at the end of each change, so they see the
frames of the last finished change; a layer written meanwhile is visible at once (its chunks replace whole files).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xarray as xr
import zarr

from pipeline.schema import (
    COORDINATES,
    N_OFFSETS,
    PROFILE_COORD_ARRAYS,
    SCHEMA_VERSION,
    STATISTICS,
    spectrum_width,
)
from pipeline.schema.runs import (
    FRAME_DATA,
    HEAD_METRIC_PREFIX,
    LAYER_DATA,
    METRIC_PREFIX,
    NO_REPEAT,
    RUN_ATTRS,
    RUNS,
    STEP_CHUNK,
    STEP_DATA,
    RunSummary,
    run_group,
    summary_of,
)
from pipeline.store.errors import Damage, StoreError, writing
from pipeline.store.frame_writer import FrameWriter
from pipeline.store.profile_arrays import resize_array_rows
from pipeline.store.quiet import quiet_listing

RUNS_ATTRS = {"schema_version": SCHEMA_VERSION,
              "runs": "one subgroup per run of a model's checkpoints, runs/NAME: "
                      "xr.open_zarr(store, group='runs/NAME')"}


@dataclass(frozen=True)
class RunState:
    """A run group as a planner reads it: its attributes and, per frame (in store order), step, revision, commit,
    the layers written (frames, layers) and their Q/K hashes."""

    attrs: dict
    steps: list[int]
    revisions: list[str]
    commits: list[str]
    done: np.ndarray
    hashes: np.ndarray

    def index(self, step: int) -> int | None:
        return self.steps.index(step) if step in self.steps else None


class RunGroups:
    """Reads and writes of the run groups (through ``hierarchy``; structural changes under the store lock and
    journalled: :meth:`replay_frames` finishes an addition of frames a kill interrupted)."""

    def __init__(self, backend, mode: str, hierarchy, locks, journal):
        self.backend, self.mode = backend, mode
        self.hierarchy, self.locks, self.journal = hierarchy, locks, journal
        self.location = backend.location

    # reads

    def names(self) -> list[str]:
        """The runs of the store, by name ([] when there are none)."""
        if not self.hierarchy.has(RUNS):
            return []
        g = zarr.open_group(self.location, path=RUNS, mode="r", use_consolidated=False, zarr_format=3)
        with quiet_listing():
            return sorted(name for name, _ in g.groups())

    def has(self, name: str) -> bool:
        return self.hierarchy.has(run_group(name))

    def open(self, name: str, mode: str = "r") -> zarr.Group:
        """The group of run ``name``, its schema version checked (StoreError naming the runs there when absent)."""
        if not self.has(name):
            raise StoreError(f"no run {name!r} in the store {self.location!r} (its runs: "
                             f"{', '.join(self.names()) or 'none'}).")
        return self.hierarchy.open(run_group(name), mode)

    def dataset(self, name: str) -> xr.Dataset:
        """Run ``name`` as a lazy xarray Dataset, validated against ``pipeline.schema.runs``."""
        self.open(name)
        return self.hierarchy.dataset(run_group(name))

    def state(self, name: str) -> RunState | None:
        """What a planner needs of run ``name``, or None when the store has no such run."""
        if not self.has(name):
            return None
        g = self.open(name)
        n, L = g["step"].shape[0], int(g.attrs["n_layers"])
        return RunState(dict(g.attrs), [int(s) for s in g["step"][:]], [str(r) for r in g["revision"][:n]],
                        [str(c) for c in g["commit"][:n]], np.asarray(g["layer_done"][:n, :L], dtype=bool),
                        np.asarray(g["qk_sha256"][:n, :L], dtype=object))

    def summaries(self) -> list[RunSummary]:
        """Every run: its frames in step order, with the layers each has written."""
        out = []
        for name in self.names():
            g = self.open(name)
            n, L = g["step"].shape[0], int(g.attrs["n_layers"])
            out.append(summary_of(name, dict(g.attrs), g["step"][:], g["revision"][:n], g["commit"][:n],
                                  np.asarray(g["layer_done"][:n, :L], dtype=bool), g["repeat_of"][:n]))
        return out

    # writes

    def add_frames(self, name: str, header: dict, frames: list[dict], reset: list[int] = ()) -> dict[int, int]:
        """Add ``frames`` (each ``{"step", "revision", "commit", "metrics"}``) to run ``name``, making its group from
        ``header`` (``attrs``: the run's attributes; ``layers``: its per-layer conventions) when there is none; a
        frame of a step already there has its commit and metrics refreshed, and the frames of the steps in ``reset``
        are forgotten first (their layers to do again). Returns step -> the frame's index along ``step``. Journalled:
        a kill at any point is finished by the next open."""
        entry = {"op": "run_frames", "run": name, "header": header, "frames": frames, "reset": [int(s) for s in reset]}
        with writing(self.location, self.mode, f"the frames of the run {name!r}", "every other run and model"), \
                self.locks.store_lock():
            with self.journal.recording(entry):
                return self.apply_frames(entry)

    def replay_frames(self, entry: dict) -> str:
        """The journal's replay of a ``run_frames`` entry."""
        self.apply_frames(entry)
        return f"finished adding {len(entry['frames'])} frames to the run {entry['run']!r}"

    def apply_frames(self, entry: dict) -> dict[int, int]:
        """Idempotent: replaying it after a kill at any point gives the same group."""
        name, header, frames = entry["run"], entry["header"], entry["frames"]
        self._runs_group()
        if not self.has(name):
            self._create(name, header, frames)
            return {int(f["step"]): i for i, f in enumerate(frames)}
        g = zarr.open_group(self.location, path=run_group(name), mode="r+", use_consolidated=False, zarr_format=3)
        steps = [int(s) for s in g["step"][:]]
        n = len(steps)
        for a in _step_arrays(g):
            resize_array_rows(a, n)  # what a killed append left past the last frame
        for step in entry["reset"]:
            if step in steps:
                _clear_frame(g, steps.index(step))
        new = [f for f in frames if int(f["step"]) not in steps]
        if new:
            for a in _step_arrays(g):
                resize_array_rows(a, n + len(new))
        at = {int(s): i for i, s in enumerate(steps)} | {int(f["step"]): n + k for k, f in enumerate(new)}
        for f in frames:
            _put_frame(g, at[int(f["step"])], f, int(g.attrs["n_layers"]), int(g.attrs["n_heads"]))
        if new:  # last: a frame is one once the step coordinate holds it
            g["step"].resize((n + len(new),))
            g["step"][n:] = np.array([int(f["step"]) for f in new], dtype=np.int64)
        return at

    def _runs_group(self) -> None:
        """The group ``runs``, made (with its attributes) when the store has none."""
        self.backend.create_root()
        if not self.hierarchy.has(RUNS):
            zarr.open_group(self.location, path=RUNS, mode="a", zarr_format=3).update_attributes(RUNS_ATTRS)

    def _create(self, name: str, header: dict, frames: list[dict]) -> None:
        """Run ``name``'s group holding ``frames``, every layer to do: built in staging and moved into place whole
        (a kill before the move leaves staging, which the next open removes, and no group)."""
        attrs = header["attrs"]
        L, H, n = int(attrs["n_layers"]), int(attrs["n_heads"]), len(frames)
        width = spectrum_width(int(attrs["d_head"]))
        target, path = self.backend.new_group(run_group(name))
        g = zarr.open_group(target, path=path, mode="w", zarr_format=3)
        coords = {"layer": np.arange(L), "head": np.arange(H), "d": np.arange(N_OFFSETS), "coordinate": COORDINATES,
                  "statistic": STATISTICS, "eigen": np.arange(width)}
        for coord, values in coords.items():
            dtype = PROFILE_COORD_ARRAYS[coord][0]
            a = g.create_array(coord, shape=(len(values),), chunks=(max(1, len(values)),),
                               dtype=str if dtype == "str" else dtype, fill_value=PROFILE_COORD_ARRAYS[coord][1],
                               dimension_names=[coord])
            a[:] = np.array(values, dtype=object) if dtype == "str" else np.asarray(values)
        sizes = {"step": n, "layer": L, "head": H, "d": N_OFFSETS, "coordinate": len(COORDINATES),
                 "statistic": len(STATISTICS), "eigen": width}
        for var, (dims, dtype, fill) in FRAME_DATA.items():
            _create_array(g, var, dims, dtype, fill, sizes)
        for var, (dims, dtype, fill) in STEP_DATA.items():
            _create_array(g, var, dims, dtype, fill, sizes)
        for var, (dims, dtype, fill) in LAYER_DATA.items():
            a = _create_array(g, var, dims, dtype, fill, sizes)
            values = header["layers"].get(var) or []
            if values:
                a[:len(values)] = np.array(values, dtype=object) if dtype == "str" else np.asarray(values, dtype=dtype)
        for i, f in enumerate(frames):
            _put_frame(g, i, f, L, H)
        step = g.create_array("step", shape=(n,), chunks=(STEP_CHUNK,), dtype="int64", fill_value=0,
                              dimension_names=["step"])
        if n:
            step[:] = np.array([int(f["step"]) for f in frames], dtype=np.int64)
        g.update_attributes({"schema_version": SCHEMA_VERSION, "run_name": name} | dict(attrs) | RUN_ATTRS)
        self.backend.place_group(target, run_group(name))

    def frame_writer(self, name: str) -> FrameWriter:
        """A writer of run ``name``'s frames, its group and arrays opened once."""
        return FrameWriter(self, name)

    def finish(self, name: str) -> None:
        """Set each frame's ``repeat_of``: the earliest step of a complete frame whose every layer has the same Q/K
        hash, for a complete frame; -1 otherwise (under the store lock: it writes a per-frame variable)."""
        with writing(self.location, self.mode, f"the repeats of the run {name!r}", "every frame"), \
                self.locks.store_lock():
            g = self.open(name, "a")
            state = self.state(name)
            first: dict[tuple, int] = {}
            keys = []
            for i in np.argsort(state.steps, kind="stable"):
                done, sums = state.done[i], state.hashes[i]
                key = tuple(str(s) for s in sums) if done.all() and all(str(s) for s in sums) else None
                keys.append((i, key))
                if key is not None:
                    first.setdefault(key, state.steps[i])
            repeat = np.full(len(state.steps), NO_REPEAT, dtype=np.int64)
            for i, key in keys:
                if key is not None and first[key] != state.steps[i]:
                    repeat[i] = first[key]
            if not np.array_equal(g["repeat_of"][:len(repeat)], repeat):
                g["repeat_of"][:len(repeat)] = repeat

    # damage

    def damage(self, name: str, layer_problems, mark: bool, repair) -> list[Damage]:
        """Every written layer of run ``name`` against its checksums (``layer_problems``: the profiles group's check,
        which reads the same variables along ``step``); with ``mark``, the damaged layers are cleared (to do again).
        ``repair(revisions)`` is the command that recomputes those revisions."""
        g = self.open(name)
        state = self.state(name)
        L, H = int(g.attrs["n_layers"]), int(g.attrs["n_heads"])
        width = spectrum_width(int(g.attrs["d_head"]))
        n = len(state.steps)
        sums = np.asarray(g["layer_checksum"][:n, :L])
        extra = {c: np.asarray(g[c][:n, :L]) for c in ("statistics_checksum", "spectra_checksum")}
        bad: dict[int, dict[int, str]] = {}
        for i in range(n):
            found = layer_problems(g, i, L, H, width, state.done[i], sums[i], {c: s[i] for c, s in extra.items()})
            if found:
                bad[i] = found
        if not bad:
            return []
        frames = sorted(bad, key=lambda i: state.steps[i])
        command = repair([state.revisions[i] for i in frames])
        out = [Damage(run_group(name), "", layer, why, command, frame=state.revisions[i])
               for i in frames for layer, why in sorted(bad[i].items())]
        if mark:
            with writing(self.location, self.mode, f"the damage record of the run {name!r}", "the undamaged frames"), \
                    self.locks.store_lock():
                w = self.open(name, "a")
                for i, found in bad.items():
                    for layer in found:
                        _clear_layer(w, i, layer)
        return out


def _create_array(g: zarr.Group, var: str, dims: tuple[str, ...], dtype: str, fill, sizes: dict) -> zarr.Array:
    """A variable of a run group: a chunk per (step, layer) (whole along the other dimensions) for the per-layer
    ones, ``STEP_CHUNK`` frames for the per-frame ones, whole for the per-layer conventions."""
    shape = tuple(sizes[d] for d in dims)
    if dims[:2] == ("step", "layer"):
        chunks = (1, 1) + shape[2:]
    elif dims == ("step",):
        chunks = (STEP_CHUNK,)
    elif dims[0] == "step":
        chunks = (1,) + shape[1:]
    else:
        chunks = tuple(max(1, s) for s in shape)
    return g.create_array(var, shape=shape, chunks=tuple(max(1, c) for c in chunks),
                          dtype=str if dtype == "str" else dtype, fill_value=fill, dimension_names=list(dims))


def _step_arrays(g: zarr.Group) -> list[zarr.Array]:
    """Every array along ``step`` but the coordinate itself."""
    with quiet_listing():
        arrays = [a for _, a in g.arrays()]
    return [a for a in arrays if a.metadata.dimension_names and a.metadata.dimension_names[0] == "step"
            and a.basename != "step"]


def _put_frame(g: zarr.Group, i: int, frame: dict, L: int, H: int) -> None:
    """Frame ``i``'s per-frame values: its revision, commit (when known) and metrics (variables made as needed)."""
    g["revision"][i] = str(frame["revision"])
    if frame.get("commit"):
        g["commit"][i] = str(frame["commit"])
    metrics = frame.get("metrics") or {}
    n = g["revision"].shape[0]
    for key, value in (metrics.get("scalars") or {}).items():
        var = METRIC_PREFIX + key
        if var not in g:
            _create_array(g, var, ("step",), "float64", np.nan, {"step": n})
        g[var][i] = float(value)
    for key, value in (metrics.get("heads") or {}).items():
        var = HEAD_METRIC_PREFIX + key
        if var not in g:
            _create_array(g, var, ("step", "layer", "head"), "float64", np.nan, {"step": n, "layer": L, "head": H})
        g[var][i] = np.asarray(value, dtype=np.float64)


def _clear_layer(g: zarr.Group, i: int, layer: int) -> None:
    """Forget one layer of frame ``i``: not done first, then its values and checksums."""
    g["layer_done"][i, layer] = False
    for var, (_dims, _dtype, fill) in FRAME_DATA.items():
        if var != "layer_done":
            g[var][i, layer] = fill


def _clear_frame(g: zarr.Group, i: int) -> None:
    for layer in range(g["layer_done"].shape[1]):
        _clear_layer(g, i, layer)
