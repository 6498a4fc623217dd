"""One (model, layer) task of a profiles run: what a worker opens, computes and writes, and what it keeps open
between tasks (one store handle, one checkpoint and one layer writer per run).

A task's source is a checkpoint (``pipeline.registry.checkpoints.open_checkpoint``) or a random baseline
(``pipeline.sources.baseline``), whose layers are made instead of read: :func:`open_source` opens either,
:func:`read_layer` gives a layer's Q/K of either."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from pipeline.families import layer_qk, layout_from_config
from pipeline.families import rotations as rotations_of
from pipeline.profile import head_profiles
from pipeline.registry.checkpoints import open_checkpoint
from pipeline.run.destination import open_store
from pipeline.schema import SPECTRA, STATISTICS
from pipeline.sources.base import CheckpointError
from pipeline.sources.baseline import is_baseline, open_baseline

READ_AHEAD_BYTES = 64 << 20  # run_inline reads the next layer while it profiles one whose Q/K take at most this


def open_source(source: str, revision: str | None = None):
    """A task's source: a random baseline (``BaselineSource``) or a checkpoint at ``revision``."""
    return open_baseline(source) if is_baseline(source) else open_checkpoint(source, revision)


def read_layer(ckpt, layout, layer: int, fold_ln: bool):
    """One layer's Q/K (``pipeline.families.LayerQK``): read from a checkpoint's tensors through the family
    table, or made by a source that makes its heads (a random baseline's ``make_layer``); None for a hybrid model's
    layer without a form (no softmax attention: nothing to read)."""
    if layout.positional_of(layer).kind == "no form":
        return None
    make = getattr(ckpt, "make_layer", None)
    return make(layer) if make is not None else layer_qk(ckpt, layout, layer, fold_ln)


def compute_layer(ckpt, layout, layer: int, fold_ln: bool, rotations=None, qk=None) -> tuple:
    """Profiles and statistics of one layer, in the order ``Store.write_layer`` takes them: profile (H, 4) or
    (H, 129, 4) for rotary models, norm (H,) or (H, 129), and at d = 0 head statistics (H, 17), spectrum (H, k) and
    the spectra of T and L (name -> (H, k)).

    The layer's Q/K are read compact (an exact compact dtype, grouped key heads once; :func:`read_layer`), or
    given as ``qk`` (``pipeline.families.LayerQK``, read already: :func:`read_ahead`), and each head is
    converted to float64 only while it is profiled (``pipeline.profile.head_profiles``).

    A hybrid model's layer without a form (Mamba, a convolution, linear attention: no query-key product) gets every
    value NaN, its spectra of no eigenvalue: written as any layer, so that the model completes and its checksums
    hold, and read as a layer with no heads to draw."""
    if layout.positional_of(layer).kind == "no form":
        return formless_values(layout.n_heads)
    if qk is None:
        qk = read_layer(ckpt, layout, layer, fold_ln)
    if rotations is None:
        rotations = rotations_of(layout, layer=layer)  # per layer: some models' layers differ (SmolLM3, Gemma 3)
    return head_profiles(qk.W_Q, qk.W_K, rotations, kv_of_head=qk.kv_of_head, gain=qk.gain,
                         at_zero=True).layer_values()


def formless_values(heads: int) -> tuple:
    """The values of a layer without a form, in ``compute_layer``'s order: NaN profile (heads, 4), norm, statistics,
    and spectra of length 0 (padded with NaN when written)."""
    return (np.full((heads, 4), np.nan), np.full(heads, np.nan), np.full((heads, len(STATISTICS)), np.nan),
            np.empty((heads, 0)), np.empty((len(SPECTRA), heads, 0)))


@contextlib.contextmanager
def read_ahead(plan):
    """``take(i)``: the Q/K (``pipeline.families.LayerQK``) of ``plan.todo[i]`` (a ``run_plan.ModelPlan``),
    taken in order (:func:`reading_ahead`).

    Why: on the opt-1.3b shape reading is about a tenth of a layer's time, and the read (file pages, conversion)
    and the profile (one BLAS/LAPACK thread) use different cores (benchmarks/scale_bench.py --sections 3 times
    the whole run)."""
    todo = list(plan.todo)
    with reading_ahead(lambda i: read_layer(plan.ckpt, plan.layout, todo[i], plan.row.layernorm_folded),
                       len(todo)) as take:
        yield take


@contextlib.contextmanager
def reading_ahead(read: Callable[[int], object], count: int):
    """``take(i)``: ``read(i)`` (a ``pipeline.families.LayerQK``), for i in 0..count-1 taken in order (an index may
    be passed over). While the caller profiles one layer, a thread reads the next, when a layer's compact Q/K take at
    most READ_AHEAD_BYTES: memory then holds the layer in use and the one being read, at most one layer and
    READ_AHEAD_BYTES (the caller keeps no reference to a layer past its use). A read's error is raised when its
    layer is taken, after the layers before it are written; a layer read ahead and not taken is dropped."""
    ahead = None  # (index, future) of the layer being read ahead, or None

    with ThreadPoolExecutor(1, thread_name_prefix="read-ahead") as pool:
        def take(i: int):
            nonlocal ahead
            index, future = ahead or (None, None)
            qk = future.result() if index == i else read(i)
            small = qk is None or qk.W_Q.nbytes + qk.W_K.nbytes <= READ_AHEAD_BYTES  # None: a layer without a form
            ahead = (i + 1, pool.submit(read, i + 1)) if i + 1 < count and small else None
            return qk

        try:
            yield take
        finally:
            if ahead is not None:
                ahead[1].cancel()


@dataclass(frozen=True)
class LayerTask:
    """One (model, layer): what a worker opens (source at the pinned revision, and the tower of a model of several)
    and where it writes."""

    store: str
    name: str
    source: str
    revision: str | None
    layer: int
    fold_ln: bool
    run: str = ""  # the run's token (ModelPlan.tasks): a worker writes a run's layers through one writer
    tower: str = ""  # the tower of a multi-tower checkpoint (CLIP, Whisper); "" for a model of one


@lru_cache(maxsize=4)
def worker_store(location: str):
    """One store handle per location per worker process."""
    return open_store(location)


@lru_cache(maxsize=8)
def _worker_writer(location: str, name: str, run: str):
    """One layer writer per (store, model, run) per worker process: the model's row and arrays are opened by its
    first task of a run, not by every task (about 20 ms a layer). A writer stays valid while the run holds the
    model's writer lock (``Profiles.layer_writer``); ``run`` (one token per planned run) keeps a later run on a
    long-lived worker from reusing it."""
    return worker_store(location).layer_writer(name)


@lru_cache(maxsize=4)
def worker_checkpoint(source: str, revision: str | None):
    """One open checkpoint (or baseline source) per (source, revision) per worker process (Hub headers are read
    once; a library-initialisation baseline builds its model on the meta device once)."""
    return open_source(source, revision)


def run_task(task: LayerTask, ckpt=None) -> int:
    """Read, profile and write one layer; returns the layer. Opens the checkpoint when ``ckpt`` is None."""
    if ckpt is None:
        ckpt = worker_checkpoint(task.source, task.revision)
        if task.revision and ckpt.revision != task.revision:
            raise CheckpointError(f"{task.source} is at revision {ckpt.revision} on this worker, but the run was "
                                  f"planned for {task.revision}: the checkpoint changed (or differs between "
                                  "machines). Rerun the command to plan it again.")
    values = compute_layer(ckpt, layout_from_config(ckpt.config, task.tower or None), task.layer, task.fold_ln)
    if task.run:
        _worker_writer(task.store, task.name, task.run).write(task.layer, *values)
    else:
        worker_store(task.store).write_layer(task.name, task.layer, *values)
    return task.layer
