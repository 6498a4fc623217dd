"""The store's run groups: one Zarr group per run of a model's checkpoints, each checkpoint a frame along ``step``.

**Naming.** A run named NAME (``--name``, else the folder's or the Hub id's last part) is the group
``runs/NAME`` (:func:`run_group`): the group ``runs`` holds one subgroup per run and nothing else, so
``Store.runs()`` (or ``zarr.open_group(store, path="runs")``'s subgroups) lists them, and
``xr.open_zarr(store, group="runs/NAME")`` opens one as a Dataset. A run name holds no ``/``, does not start with
``.`` or ``__`` and has no control characters (:func:`run_name_problems`): one name, one group.

**Dimensions**: ``step`` (one entry per frame: the training step of the checkpoint, in the order the frames were
first planned, which is step order within one command: ``ds.sortby("step")`` orders a run that a later command
extended with earlier steps), ``layer``, ``head``, ``d`` (0..128), ``coordinate`` (a, b, c, d), ``statistic`` and
``eigen`` (0..2n - 1): a run has one shape, fixed when its group is made.

**Per frame and layer** (``FRAME_DATA``, written region by region by each layer's task, a chunk per (step, layer)):
the profiles group's per-layer variables with ``step`` in place of ``model`` (``profile``, ``norm``, the head
statistics, the spectrum of S and the spectra of T and L, ``layer_done`` and the three checksums, same dtypes,
fills and meaning) and ``qk_sha256``, the hash of the layer's Q/K as read (:data:`RUN_ATTRS`). A layer is written
values, checksums, hash, then ``layer_done``, exactly as a model's layer is.

**Per frame** (``STEP_DATA``, written under the store lock): ``revision`` (the checkpoint's name: ``stepN``,
``checkpoint-N``, a branch), ``commit`` (the Hub commit the branch resolved to, or the local folder's
``local-<hash>``; "" while the checkpoint could not be opened) and ``repeat_of`` (the earliest step whose every
layer has the same Q/K hash, whose values this frame repeats; -1 for none). Metrics a checkpoint folder carries in
``metrics.json`` are stored by step too: a scalar ``x`` as ``metric_x`` (step), a per-head value ``y`` as
``head_metric_y`` (step, layer, head); NaN where a frame has none.

**Once per run**: the model's shape, provenance format, source, command and conventions as the group's attributes
(``RUN_MODEL_ATTRS``), and its per-layer conventions as variables of ``layer`` (``LAYER_DATA``: kind, rotary base,
scaling), as the profiles group records them per model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from pipeline.schema.analyses import SPECTRA_DATA, STATISTICS_DATA
from pipeline.schema.conventions import CONVENTIONS_DATA
from pipeline.schema.core import COORDINATES, N_OFFSETS, PROFILE_DATA, SCHEMA_VERSION

RUNS = "runs"
RUN_COMMAND = "python -m pipeline profiles MODEL --revisions SPEC"
NO_REPEAT = -1  # repeat_of of a frame that repeats no other
STEP_CHUNK = 256  # per-frame variables: written only under the store lock, so frames share a chunk
METRIC_PREFIX = "metric_"  # metrics.json's scalars: metric_<name> (step)
HEAD_METRIC_PREFIX = "head_metric_"  # metrics.json's per-head values: head_metric_<name> (step, layer, head)
_METRIC_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def run_group(name: str) -> str:
    """The group of the run ``name``: ``runs/NAME``."""
    return f"{RUNS}/{name}"


def is_run_group(group: str) -> bool:
    return group.startswith(RUNS + "/") and len(group) > len(RUNS) + 1


def run_name_problems(name: str) -> list[str]:
    """Why ``name`` cannot name a run's group (empty when it can)."""
    out = []
    if not name or not name.strip():
        out.append("it is empty")
    if "/" in name or "\\" in name:
        out.append("it holds a slash (one run is one group, runs/NAME)")
    if name.startswith(".") or name.startswith("__"):
        out.append("it starts with '.' or '__' (names Zarr reserves)")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        out.append("it holds a control character")
    return out


def metric_name_problems(name: str) -> list[str]:
    """Why a metrics.json name cannot be stored (empty when it can: letters, digits, ``_``, ``.``, ``-``)."""
    return [] if _METRIC_NAME.match(str(name)) else [f"{name!r} is not a name of letters, digits, _ . -"]


def _per_step(variables: dict) -> dict:
    """The profiles group's (model, layer, ...) variables with ``step`` in place of ``model``."""
    return {name: (("step",) + dims[1:], dtype, fill) for name, (dims, dtype, fill) in variables.items()
            if dims[:2] == ("model", "layer")}


# Per (frame, layer): name -> (dims, dtype, fill), the profiles group's per-layer variables along ``step``, and
# ``qk_sha256``.
FRAME_DATA = _per_step(PROFILE_DATA | STATISTICS_DATA | SPECTRA_DATA) | {"qk_sha256": (("step", "layer"), "str", "")}

STEP_DATA = {
    "revision": (("step",), "str", ""),
    "commit": (("step",), "str", ""),
    "repeat_of": (("step",), "int64", NO_REPEAT),
}
# The per-layer conventions, once per run (the profiles group's (model, layer) ones along ``layer`` alone).
LAYER_DATA = {name: (dims[1:], dtype, fill) for name, (dims, dtype, fill) in CONVENTIONS_DATA.items()
              if dims == ("model", "layer")}
# What the group's attributes record once (the shape, the per-model conventions, where the weights came from).
RUN_MODEL_ATTRS = ("family", "n_layers", "n_heads", "n_kv_heads", "d_model", "d_head", "positional", "rotary_dim",
                   "tower", "qk_norm", "scale", "scale_rule", "softcap", "layernorm_folded", "source", "format",
                   "command")
RUN_COORDS = ("step", "layer", "head", "d", "coordinate", "statistic", "eigen")

RUN_ATTRS = {
    "run": "one frame per checkpoint of a training run, along step (the checkpoint's training step); each frame "
    "holds what the profiles group holds for a model, per layer, and is written layer by layer with the same "
    "checksums",
    "qk_sha256": "sha256 (hex) of the layer's Q/K as the run read them (W_Q, W_K and any folded gain, with their "
    "dtypes and shapes): equal hashes, equal weights",
    "revision": "the checkpoint's name (stepN, checkpoint-N, a Hub branch)",
    "commit": "the commit the Hub branch resolved to, or local-<hash> of a local checkpoint folder; '' while the "
    "checkpoint could not be opened",
    "repeat_of": "the earliest step whose every layer has the same qk_sha256: this frame's values are that one's "
    "(copied, not computed again); -1 = it repeats no other frame",
    "metrics": "metric_<name> (step): a scalar of the checkpoint folder's metrics.json; head_metric_<name> (step, "
    "layer, head): a per-head value of it; NaN where a frame has none",
    "order": "frames are stored in the order they were first planned (step order within one command); "
    "ds.sortby('step') orders a run extended later with earlier steps",
}


def run_problems(ds) -> list[str]:
    """What is wrong with an opened run group (empty list when it follows the schema)."""
    out = []
    if ds.attrs.get("schema_version") != SCHEMA_VERSION:
        out.append(f"the run group has schema version {ds.attrs.get('schema_version')}, this code reads version "
                   f"{SCHEMA_VERSION}")
    for name in RUN_COORDS:
        if name not in ds.coords:
            out.append(f"coordinate {name!r} is missing")
    for name, (dims, _dtype, _fill) in (FRAME_DATA | STEP_DATA | LAYER_DATA).items():
        if name not in ds.variables:
            out.append(f"variable {name!r} is missing")
        elif tuple(ds[name].dims) != tuple(dims):
            out.append(f"variable {name!r} has dimensions {tuple(ds[name].dims)}, expected {tuple(dims)}")
    for name in ds.data_vars:
        want = (("step",) if name.startswith(METRIC_PREFIX) else ("step", "layer", "head")
                if name.startswith(HEAD_METRIC_PREFIX) else None)
        if want is not None and tuple(ds[name].dims) != want:
            out.append(f"variable {name!r} has dimensions {tuple(ds[name].dims)}, expected {want}")
    if "d" in ds.sizes and ds.sizes["d"] != N_OFFSETS:
        out.append(f"dimension d has {ds.sizes['d']} offsets, expected {N_OFFSETS}")
    if "coordinate" in ds.coords and [str(c) for c in ds["coordinate"].values] != list(COORDINATES):
        out.append(f"coordinate values are {list(ds['coordinate'].values)}, expected {list(COORDINATES)}")
    missing = [a for a in RUN_MODEL_ATTRS if a not in ds.attrs]
    if missing:
        out.append(f"attributes {missing} are missing")
    return out


@dataclass(frozen=True)
class Frame:
    """One frame of a run as stored: its training step, revision, how many of its layers are written, and what it
    repeats."""

    step: int
    revision: str
    commit: str
    layers_done: int
    n_layers: int
    repeat_of: int = NO_REPEAT

    @property
    def complete(self) -> bool:
        return self.layers_done == self.n_layers


@dataclass(frozen=True)
class RunSummary:
    """One run of the store as ``list`` shows it: its name, where its checkpoints came from, its shape and its
    frames in step order."""

    name: str
    source: str
    command: str
    n_layers: int
    n_heads: int
    frames: tuple[Frame, ...]

    @property
    def group(self) -> str:
        return run_group(self.name)

    @property
    def steps(self) -> tuple[int, ...]:
        return tuple(f.step for f in self.frames)

    @property
    def missing(self) -> tuple[Frame, ...]:
        """The frames not complete (a layer not written: a failed or interrupted revision, or damage cleared)."""
        return tuple(f for f in self.frames if not f.complete)

    @property
    def repeats(self) -> tuple[Frame, ...]:
        return tuple(f for f in self.frames if f.repeat_of != NO_REPEAT)


def summary_of(name: str, attrs: dict, steps, revisions, commits, done: np.ndarray, repeat_of) -> RunSummary:
    """A :class:`RunSummary` from the run group's attributes and per-frame columns (``done``: (frames, layers)),
    its frames sorted by step."""
    L = int(attrs.get("n_layers", done.shape[1] if done.ndim == 2 else 0))
    frames = sorted((Frame(int(s), str(r), str(c), int(np.asarray(d[:L], dtype=bool).sum()), L, int(p))
                     for s, r, c, d, p in zip(steps, revisions, commits, done, repeat_of, strict=True)),
                    key=lambda f: f.step)
    return RunSummary(name, str(attrs.get("source", "")), str(attrs.get("command", "")), L,
                      int(attrs.get("n_heads", 0)), tuple(frames))
