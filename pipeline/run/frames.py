"""Planning a run of revisions (``profiles MODEL --revisions SPEC``): every chosen checkpoint of a training run
opened and validated, and the store checked, before anything is written; each checkpoint becomes a frame of the
store's group ``runs/NAME`` (``pipeline.schema.runs``).

:func:`plan_frames` lists MODEL's revisions and picks those SPEC names (``pipeline.registry.revisions``), opens each
(Hub revisions at once, in threads: each is a few small requests), checks that they share one shape and one set of
conventions (a checkpoint of another shape is refused, naming it: nothing is written), checks every layer's Q/K
names and shapes from the files' headers, reads each local checkpoint's ``metrics.json``, and compares them with
what the store already holds of the run: a frame whose layers are all written is not read again, one whose
checkpoint changed since (another commit) needs ``--force``.

A Hub revision that cannot be read (missing, stalled past ``HEADGEOMETRY_HUB_TIMEOUT``, failing) is not a reason to
refuse the others: it is planned as a frame to do with no checkpoint (so ``list`` shows it missing), and the run
ends naming it (``RevisionsFailed``). A local checkpoint that cannot be read is refused like any bad input: the user
can fix it. Decision: local checkpoints are not scanned for NaN/Inf before the run, as a plain profiles run's are
(that scan reads every Q/K once more); a layer that holds one fails its revision when read, naming it, and the
other revisions complete: a run's last checkpoints may be those of a diverged run, and its earlier ones still count.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.cli_args import command
from pipeline.families import ArchitectureError
from pipeline.families import towers as towers_of
from pipeline.registry.checkpoints import open_checkpoint, resolve
from pipeline.registry.revisions import Revision, list_revisions, select
from pipeline.run.destination import check_store, open_store, store_location
from pipeline.run.frame_tasks import FrameTask
from pipeline.run.metrics import read_metrics
from pipeline.run.options import RevisionsFailed, RunOptions, UsageError, check_options
from pipeline.run.plan import checkpoint_layout, validate_checkpoint
from pipeline.schema import SHAPE_FIELDS, bytes_per_head
from pipeline.schema.runs import run_group, run_name_problems
from pipeline.sources.base import CheckpointError
from pipeline.store import StoreError

OPEN_AT_ONCE = 8  # revisions opened at once while planning (Hub revisions: a few small requests each)
# What a run records once and every frame must share (the run group's attributes): the shape, the conventions,
# the folding and where the checkpoints come from.
SHARED = (*SHAPE_FIELDS, "tower", "qk_norm", "scale", "scale_rule", "softcap", "layernorm_folded", "source")


@dataclass
class PlannedFrame:
    """One chosen revision: its checkpoint (None when it could not be opened: ``error`` says why), its metrics, the
    layers to write, whether its stored values are forgotten first, and its index along ``step`` once the run's
    frames are added (:meth:`RunPlan.begin`)."""

    revision: Revision
    ckpt: object | None
    error: str = ""
    metrics: dict | None = None
    todo: list[int] = field(default_factory=list)
    reset: bool = False
    index: int = -1

    @property
    def name(self) -> str:
        return self.revision.name

    @property
    def step(self) -> int:
        return self.revision.step

    def entry(self) -> dict:
        """What the store records of it (``Store.add_frames``)."""
        return {"step": self.step, "revision": self.name, "commit": self.ckpt.revision if self.ckpt else "",
                "metrics": self.metrics}


@dataclass
class RunPlan:
    """What a run of revisions will do, decided before anything is written."""

    name: str
    source: str  # MODEL as the run records it: a folder's absolute path, or the text given (a Hub id)
    layout: object  # pipeline.families.Layout, shared by every frame
    fold_ln: bool
    header: dict  # the run group's attributes and per-layer conventions (``Store.add_frames``)
    frames: list[PlannedFrame]
    token: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def lock(self) -> str:
        """The writer lock a run of it holds (``Store.writer``): one per run group."""
        return run_group(self.name)

    @property
    def failed(self) -> dict[str, str]:
        """revision -> why, for the revisions that could not be opened."""
        return {f.name: f.error for f in self.frames if f.error}

    def begin(self, store) -> None:
        """Add the frames to the store (the run's group made when it has none) and learn their indices."""
        at = store.add_frames(self.name, self.header, [f.entry() for f in self.frames],
                              [f.step for f in self.frames if f.reset])
        for f in self.frames:
            f.index = at[f.step]

    def tasks(self, location: str) -> list[FrameTask]:
        """A task per (frame, layer) to write, frame by frame in step order (after :meth:`begin`)."""
        return [FrameTask(location, self.name, f.ckpt.source, f.ckpt.revision, f.name, f.index, layer, self.fold_ln,
                          self.token) for f in self.frames if f.ckpt is not None for layer in f.todo]


def run_source(model: str) -> str:
    """MODEL as a run records it (and its repair commands name it): a folder's absolute path, else as given."""
    return os.path.abspath(os.path.expanduser(model)) if Path(model).expanduser().is_dir() else model


def run_command(source: str, spec: str, name: str, default: str, fold_ln: bool) -> str:
    """The command that computes the run's frames (stored in its group)."""
    return command("python -m pipeline profiles", [source],
                   {"revisions": spec, "name": name if name != default else None, "fold_ln": fold_ln or None})


def _open(revision: Revision, fold_ln: bool) -> tuple[object | None, object | None, str]:
    """(checkpoint, layout, "") of one revision, shapes checked from the headers; (None, None, why) for a Hub
    revision that cannot be read (its files missing, the Hub failing or stalling). Anything else, a local checkpoint
    that cannot be read and a checkpoint of a family or shape that does not fit, is raised: the user can fix it."""
    try:
        ckpt = open_checkpoint(revision.ref)
        if isinstance(ckpt.config, dict) and towers_of(ckpt.config):
            towers = towers_of(ckpt.config)  # one where an encoder was saved alone: still stored as NAME/encoder
            raise ArchitectureError(f"revision {revision.name!r} ({revision.ref}) is a checkpoint stored by tower "
                                    f"({', '.join(towers)}, each a model NAME/TOWER); a run of revisions takes models "
                                    "stored whole: profile its revisions one by one without --revisions.")
        layout = checkpoint_layout(ckpt, None)
        validate_checkpoint(ckpt, layout, fold_ln)
        return ckpt, layout, ""
    except CheckpointError as exc:  # HubError among them
        if Path(revision.ref).is_dir():
            raise
        return None, None, " ".join(str(exc).split())


def _shared(layout, fold_ln: bool, source: str) -> dict:
    conventions = layout.conventions()
    return (layout.shape.shape_fields() | {k: getattr(conventions, k) for k in SHARED if hasattr(conventions, k)}
            | {"layernorm_folded": bool(fold_ln), "source": source})


def _differences(a: dict, b: dict) -> list[str]:
    return [f"{k} {a.get(k)!r} against {b.get(k)!r}" for k in SHARED if a.get(k) != b.get(k)]


def plan_frames(opts: RunOptions, log=print, locks: contextlib.ExitStack | None = None) -> tuple[str, RunPlan | None]:
    """Check the options, list and choose the revisions, open and validate each, and compare them with the store's
    run; nothing is written. None when the store holds every chosen frame whole already. With ``locks``, the run's
    writer lock is taken before its stored state is read and stays in ``locks``."""
    check_options(opts)
    if opts.revisions is None:
        raise UsageError("plan_frames plans a run of revisions: give --revisions SPEC")
    location = store_location(opts.store)
    model = opts.models[0]
    chosen = select(list_revisions(model), opts.revisions)
    default = resolve(model).default_name()
    name = opts.name or default
    if bad := run_name_problems(name):
        raise UsageError(f"{name!r} cannot name a run: {'; '.join(bad)}. Choose another with --name.")
    check_store(location)
    with ThreadPoolExecutor(min(OPEN_AT_ONCE, max(1, len(chosen))), thread_name_prefix="open-revision") as pool:
        opened = list(pool.map(lambda r: _open(r, opts.fold_ln), chosen))
    source = run_source(model)
    frames = [PlannedFrame(r, ckpt, error) for r, (ckpt, _layout, error) in zip(chosen, opened, strict=True)]
    layouts = [(f, layout) for f, (_ckpt, layout, _e) in zip(frames, opened, strict=True) if layout is not None]
    if not layouts:
        raise RevisionsFailed(f"no revision of {model} could be read, so nothing was written: "
                              + "; ".join(f"{f.name}: {f.error}" for f in frames))
    first, layout = layouts[0]
    want = _shared(layout, opts.fold_ln, source)
    for f, other in layouts[1:]:
        if diff := _differences(_shared(other, opts.fold_ln, source), want):
            raise ArchitectureError(f"revision {f.name!r} of {model} is not of the shape and conventions of "
                                    f"{first.name!r} ({', '.join(diff)}); a run's checkpoints share one shape: profile "
                                    "it apart, without --revisions.")
    for f in frames:
        if f.ckpt is not None and Path(f.revision.ref).is_dir():
            f.metrics = read_metrics(f.revision.ref, layout.n_layers, layout.n_heads)
    store = open_store(location)
    if locks is not None:
        locks.enter_context(store.writer(run_group(name)))
    state = store.run_state(name)
    if state is not None and (diff := _differences(want, {k: state.attrs.get(k) for k in SHARED})):
        raise StoreError(f"the store's run {name!r} holds frames of {state.attrs.get('source')} of another shape or "
                         f"conventions ({', '.join(diff)}; this run's first, the store's second). Store this one "
                         "under another --name.")
    everything = list(range(layout.n_layers))
    for f in frames:
        i = None if state is None else state.index(f.step)
        if i is not None and state.revisions[i] != f.name:
            raise StoreError(f"the store's run {name!r} holds revision {state.revisions[i]!r} at step {f.step}, and "
                             f"{f.name!r} is step {f.step} too; a run holds one revision per step. Store this one "
                             "under another --name.")
        if f.ckpt is None:
            if i is not None and state.done[i].all():
                f.error = ""  # complete in the store already: nothing to read (its checkpoint is not compared)
            continue
        stored = "" if i is None else state.commits[i]
        if i is None:
            f.todo = everything
        elif stored and stored != f.ckpt.revision and not opts.force:
            raise StoreError(f"the store's frame {f.name!r} of the run {name!r} was computed from {stored}, and "
                             f"{f.name} is now {f.ckpt.revision}. Add --force to recompute the chosen frames, or "
                             "--name NEW to store this run beside it.")
        elif opts.force:
            f.todo, f.reset = everything, True
        else:
            f.todo = [layer for layer in everything if not state.done[i, layer]]
    fresh = state is None or any(state.index(f.step) is None for f in frames)
    if not fresh and not any(f.todo or f.error for f in frames):
        log(f"{name}: every chosen frame ({len(frames)}) is complete in {location}; skipped (add --force to "
            "recompute)")
        return location, None
    header = {"attrs": want | {"format": first.ckpt.provenance.format,
                               "command": run_command(source, opts.revisions, name, default, opts.fold_ln)},
              "layers": {k: list(getattr(layout.conventions(), k))
                         for k in ("layer_positional", "layer_rope_theta", "layer_rope_scaling")}}
    check_store(location, sum(len(f.todo) for f in frames) * layout.n_heads * bytes_per_head(layout.d_head))
    return location, RunPlan(name, source, layout, opts.fold_ln, header, frames)
