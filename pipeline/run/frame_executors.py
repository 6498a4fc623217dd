"""Running a run of revisions (:class:`pipeline.run.frames.RunPlan`): its (frame, layer) tasks in this process, on a
local process pool or on a dask cluster, the executors of any profiles run.

The frames are added to the store first (``RunPlan.begin``: the run's group made or grown), then each task writes
its layer. A revision whose read fails (a Hub revision missing or stalled past ``HEADGEOMETRY_HUB_TIMEOUT``, a
tensor with NaN) fails alone: its other layers are not tried (so a stalled revision costs one timeout, not one per
layer), the other revisions complete, and :func:`run_revisions` ends with ``RevisionsFailed`` naming it. Then each
frame's ``repeat_of`` is recorded (``Store.finish_run``). Progress shows the layers, the revisions done of those
chosen, and the bytes read (fetched from the Hub, or of the Q/K read from local files).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

from tqdm.auto import tqdm

from pipeline import optional_imports
from pipeline.families import ArchitectureError
from pipeline.run.cluster import open_cluster
from pipeline.run.destination import open_store
from pipeline.run.frame_tasks import fetched, qk_bytes, run_frame_task, write_frame_layer
from pipeline.run.frames import RunPlan, plan_frames
from pipeline.run.options import RevisionsFailed, RunOptions
from pipeline.run.tasks import read_layer, reading_ahead
from pipeline.sources.base import CheckpointError

# what fails one revision, not the run: its checkpoint could not be read as planned
REVISION_ERRORS = (CheckpointError, ArchitectureError)


def _line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split()) if not isinstance(exc, REVISION_ERRORS) \
        else " ".join(str(exc).split())


class Progress:
    """The progress of a run of revisions: a bar over its layers to write, with the revisions done of those chosen
    and the bytes read."""

    def __init__(self, plan: RunPlan, show: bool):
        self.left = {f.name: len(f.todo) for f in plan.frames}
        self.total = len(plan.frames)
        self.done = sum(1 for f in plan.frames if not f.todo and not f.error)
        self.bytes = 0
        self.copied = 0
        self.bar = tqdm(total=sum(self.left.values()), desc=plan.name, unit="layer", disable=not show)
        self._show()

    def _show(self) -> None:
        self.bar.set_postfix_str(f"revisions {self.done}/{self.total}, {self.bytes / 1e6:.1f} MB read", refresh=False)

    def layer(self, revision: str, nbytes: int, copied: bool) -> None:
        self.left[revision] -= 1
        self.done += self.left[revision] == 0
        self.bytes += nbytes
        self.copied += copied
        self._show()
        self.bar.update(1)

    def skip(self, n: int) -> None:
        self.bar.update(n)

    def close(self) -> None:
        self._show()
        self.bar.close()


def frames_inline(plan: RunPlan, store, progress: Progress) -> dict[str, str]:
    """Every task in this process, with the checkpoints opened while planning; the next layer is read while one is
    profiled (``pipeline.run.tasks.reading_ahead``). Returns revision -> why, for those that failed."""
    writer = store.frame_writer(plan.name)
    items = [(f, layer) for f in plan.frames if f.ckpt is not None for layer in f.todo]
    failed: dict[str, str] = {}
    counted: dict[int, int] = {}  # id(checkpoint) -> the Hub bytes counted so far

    def read(i: int):
        f, layer = items[i]
        return read_layer(f.ckpt, plan.layout, layer, plan.fold_ln)

    with reading_ahead(read, len(items)) as take:
        for i, (f, layer) in enumerate(items):
            if f.name in failed:
                progress.skip(1)
                continue
            try:
                qk = take(i)
                copied = write_frame_layer(writer, f.ckpt, plan.layout, f.index, layer, plan.fold_ln, qk)
            except REVISION_ERRORS as exc:
                failed[f.name] = _line(exc)
                progress.skip(1)
                continue
            now = fetched(f.ckpt)
            if now is None:
                nbytes = qk_bytes(qk)
            else:  # the Hub's count, read ahead included
                nbytes, counted[id(f.ckpt)] = now - counted.get(id(f.ckpt), 0), now
            del qk
            progress.layer(f.name, nbytes, copied)
    return failed


def _spawn_pool(workers: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))


def frames_pool(plan: RunPlan, store, workers: int, progress: Progress) -> dict[str, str]:
    """The tasks on a pool of ``workers`` spawned processes; a failed revision's tasks not yet started are
    cancelled."""
    failed: dict[str, str] = {}
    with _spawn_pool(workers) as pool:
        futures = {pool.submit(run_frame_task, t): t for t in plan.tasks(store.location)}
        for fut in as_completed(futures):
            t = futures[fut]
            if fut.cancelled():
                progress.skip(1)
                continue
            exc = fut.exception()
            if exc is None:
                label, _layer, nbytes, copied = fut.result()
                progress.layer(label, nbytes, copied)
                continue
            progress.skip(1)
            if t.label not in failed:
                failed[t.label] = _line(exc)
                for other, ot in futures.items():
                    if ot.label == t.label:
                        other.cancel()
    return failed


def frames_dask(plan: RunPlan, store, client, progress: Progress, retries: int = 2) -> dict[str, str]:
    """The tasks on the dask cluster of ``client``, each retried ``retries`` times if it fails or its worker dies; a
    failed revision's other tasks are cancelled."""
    distributed = optional_imports.distributed()
    futures, owner = [], {}
    for t in plan.tasks(store.location):
        fut = client.submit(run_frame_task, t, key=f"frame-{t.name}-{t.label}-{t.layer}-{time.time_ns()}",
                            retries=retries, pure=False)
        futures.append(fut)
        owner[fut.key] = t
    failed: dict[str, str] = {}
    for fut in distributed.as_completed(futures):
        t = owner[fut.key]
        if fut.status == "finished":
            label, _layer, nbytes, copied = fut.result()
            progress.layer(label, nbytes, copied)
            continue
        progress.skip(1)
        if fut.status == "cancelled" or t.label in failed:
            continue
        failed[t.label] = _line(fut.exception())
        for other in futures:
            if owner[other.key].label == t.label and not other.done():
                other.cancel()
    return failed


def execute_frames(opts: RunOptions, location: str, plan: RunPlan, client=None) -> dict[str, str]:
    """The plan's frames added to the store, its tasks run on the executor the options ask for, the repeats
    recorded; returns revision -> why for the revisions that failed (those that could not be opened included)."""
    store = open_store(location)
    plan.begin(store)
    progress = Progress(plan, show=not opts.quiet)
    try:
        if client is not None:
            failed = frames_dask(plan, store, client, progress)
        elif opts.scheduler:
            with open_cluster(scheduler=opts.scheduler) as cluster:
                failed = frames_dask(plan, store, cluster.client, progress)
        elif opts.workers:
            failed = frames_pool(plan, store, opts.workers, progress)
        else:
            failed = frames_inline(plan, store, progress)
    finally:
        progress.close()
    store.finish_run(plan.name)
    return plan.failed | failed


def run_revisions(opts: RunOptions, log=print, client=None) -> list[str]:
    """Plan a run of revisions (everything validated), then execute it; returns the revisions whose frames are
    complete. RevisionsFailed, naming each failed revision and why, when some failed (the others are written)."""
    with contextlib.ExitStack() as locks:  # the run's writer lock, from its plan to its end
        location, plan = plan_frames(opts, log, locks)
        if plan is None:
            return []
        failed = execute_frames(opts, location, plan, client)
        summary = next(r for r in open_store(location).runs() if r.name == plan.name)
    done = [f.name for f in plan.frames if f.name not in failed]
    missing = ", ".join(f.revision for f in summary.missing) or "none"
    log(f"{plan.name}: {len(summary.frames) - len(summary.missing)} of {len(summary.frames)} frames complete in "
        f"{location} (group runs/{plan.name}; steps {summary.steps[0]} to {summary.steps[-1]}; missing: {missing}; "
        f"{len(summary.repeats)} repeat earlier frames)")
    if failed:
        raise RevisionsFailed(f"{len(failed)} of {len(plan.frames)} revisions of {plan.source} failed, the others are "
                              "written; rerun the same command to retry them. "
                              + "; ".join(f"{name}: {why.rstrip('.')}" for name, why in failed.items()) + ".")
    return done
