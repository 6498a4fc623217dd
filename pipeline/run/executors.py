"""The executors of a profiles run: the planned tasks in this process, on a local process pool, or on a dask
cluster. Each registers its models just before their tasks run, writes through the ``Store`` handle, and marks a
model complete only after all of its layers succeeded; a failure leaves finished layers written (a rerun resumes)
and the model incomplete."""

from __future__ import annotations

import contextlib
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

from tqdm.auto import tqdm

from pipeline import optional_imports
from pipeline.run.cluster import open_cluster
from pipeline.run.destination import open_store
from pipeline.run.options import ClusterError, RunOptions
from pipeline.run.plan import ModelPlan
from pipeline.run.tasks import compute_layer, read_ahead, run_task


def begin_model(store, plan: ModelPlan) -> None:
    """Register the plan's model row (its stored values forgotten first with ``--force``)."""
    if plan.reset:
        store.reset(plan.name)
    store.register(plan.row)


@contextlib.contextmanager
def _writing(store, plans: list[ModelPlan]):
    """Hold the store's writer lock of every planned model (another run of one of them is refused)."""
    with contextlib.ExitStack() as stack:
        for plan in plans:
            stack.enter_context(store.writer(plan.name))
        yield


def run_inline(plans: list[ModelPlan], store, progress: bool = True) -> list[str]:
    """Every task in this process, with the checkpoints already open."""
    for plan in plans:
        with store.writer(plan.name):
            begin_model(store, plan)
            writer = store.layer_writer(plan.name)  # the model's row and arrays opened once for all its layers
            with read_ahead(plan) as take:
                for i, layer in enumerate(tqdm(plan.todo, desc=plan.name, unit="layer", disable=not progress)):
                    values = compute_layer(plan.ckpt, plan.layout, layer, plan.row.layernorm_folded, qk=take(i))
                    writer.write(layer, *values)
            store.mark_complete(plan.name, revision=plan.ckpt.revision)
    return [p.name for p in plans]


def _finish(store, plans: list[ModelPlan], failed: dict[str, list[tuple[int, str]]]) -> list[str]:
    done = []
    for plan in plans:
        if plan.name not in failed:
            store.mark_complete(plan.name, revision=plan.ckpt.revision)
            done.append(plan.name)
    if failed:
        lines = [f"{name}: layers {sorted(layer for layer, _ in errs)} failed (first: {errs[0][1]})"
                 for name, errs in failed.items()]
        raise ClusterError("profiling failed on the workers; finished layers are kept and those models are not "
                           "marked complete. Rerun the same command to resume. " + "; ".join(lines))
    return done


def run_pool(plans: list[ModelPlan], store, workers: int, progress: bool = True) -> list[str]:
    """The tasks on a pool of ``workers`` local processes (spawned: no state shared with this one)."""
    with _writing(store, plans):
        for plan in plans:
            begin_model(store, plan)
        tasks = [t for plan in plans for t in plan.tasks(store.location)]
        failed: dict[str, list[tuple[int, str]]] = {}
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = {pool.submit(run_task, t): t for t in tasks}
            for fut in tqdm(as_completed(futures), total=len(futures), desc="layers", unit="layer",
                            disable=not progress):
                exc = fut.exception()
                if exc is not None:
                    t = futures[fut]
                    failed.setdefault(t.name, []).append((t.layer, f"{type(exc).__name__}: {exc}"))
        return _finish(store, plans, failed)


def run_dask(plans: list[ModelPlan], store, client, retries: int = 2, progress: bool = True) -> list[str]:
    """The tasks on the dask cluster of ``client``, each retried ``retries`` times if it fails or its worker dies."""
    distributed = optional_imports.distributed()
    with _writing(store, plans):
        for plan in plans:
            begin_model(store, plan)
        futures, owner = [], {}
        for plan in plans:
            for t in plan.tasks(store.location):
                fut = client.submit(run_task, t, key=f"profile-{t.name}-{t.layer}-{time.time_ns()}",
                                    retries=retries, pure=False)
                futures.append(fut)
                owner[fut.key] = t
        failed: dict[str, list[tuple[int, str]]] = {}
        for fut in tqdm(distributed.as_completed(futures), total=len(futures), desc="layers", unit="layer",
                        disable=not progress):
            if fut.status != "finished":
                exc, t = fut.exception(), owner[fut.key]
                failed.setdefault(t.name, []).append((t.layer, f"{type(exc).__name__}: {exc}"))
        return _finish(store, plans, failed)


def execute(opts: RunOptions, location: str, plans: list[ModelPlan], client=None) -> list[str]:
    """Run the plans' tasks on the executor the options ask for (``client``: a dask client to run them on)."""
    store = open_store(location)
    progress = not opts.quiet
    if client is not None:
        return run_dask(plans, store, client, progress=progress)
    if opts.scheduler:
        with open_cluster(scheduler=opts.scheduler) as cluster:
            return run_dask(plans, store, cluster.client, progress=progress)
    if opts.workers:
        return run_pool(plans, store, opts.workers, progress=progress)
    return run_inline(plans, store, progress=progress)
