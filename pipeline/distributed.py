"""Run the (model, layer) profile tasks on a dask.distributed cluster.

    python -m pipeline profiles MODEL ... --workers 4             # a LocalCluster of 4 processes
    python -m pipeline profiles MODEL ... --scheduler tcp://h:8786 # an existing cluster

The client (this process) opens each checkpoint for its config only (a Hub id costs config.json and the
index, see ``pipeline.hub``), pins its revision, registers the model in the store and submits one task
per layer not yet written. Each task, on a worker, opens the checkpoint at that pinned revision, reads
the layer's Q/K tensors, computes the profiles and writes its own (model, layer) region of the store;
no two layers share a chunk, so workers never collide. Tasks are retried (``retries``, default 2) if
they fail or their worker dies. ``complete`` is set by the client only after every layer of the model
succeeded; a failure leaves the finished layers written (a rerun resumes) and the model incomplete.

The store is a local path or an fsspec URL that zarr accepts and every worker can reach (``s3://...``,
``gs://...``; ``file://PATH`` is used as the local path PATH). ``memory://`` is only shared by workers
that are threads of this process.

Test hook: ``HEADGEOMETRY_TEST_TASK_DELAY`` (seconds, default 0) makes every task sleep first, so a
test can kill a worker while tasks are running.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from pipeline.store import ModelInfo, layers_done, mark_complete, register_model, reset_model, write_layer


class ClusterError(RuntimeError):
    """The cluster could not be reached or the tasks failed; the message says what to do."""


def store_location(store: str | os.PathLike) -> str:
    """The store as zarr should open it: ``file://PATH`` becomes PATH (zarr's fsspec route does not create
    folders on a local filesystem), other URLs and paths are kept."""
    s = str(store)
    return s[len("file://"):] if s.startswith("file://") else s


# ------------------------------------------------------------------------------------------ one task


@lru_cache(maxsize=4)
def _checkpoint(source: str, revision: str | None):
    """One open checkpoint per (source, revision) per worker process (Hub shard headers are read once)."""
    from pipeline.checkpoints import open_checkpoint

    return open_checkpoint(source, revision)


def layer_profiles(checkpoint, layer: int, fold_ln: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Profile (H, 4) or (H, 129, 4) and norm of one layer of an open checkpoint (profile_tasks.compute_layer)."""
    from pipeline.architectures import layout_from_config
    from pipeline.profile_tasks import compute_layer

    return compute_layer(checkpoint, layout_from_config(checkpoint.config), layer, fold_ln)


def layer_task(source: str, revision: str | None, store: str, name: str, layer: int, fold_ln: bool = False) -> int:
    """Runs on a worker: read one layer's Q/K tensors, profile its heads, write its store region.

    Same work as ``pipeline.profile_tasks.profile_layer``, but the checkpoint stays open in the worker
    between tasks, so a Hub checkpoint's config, index and shard headers are fetched once per worker.
    """
    delay = float(os.environ.get("HEADGEOMETRY_TEST_TASK_DELAY", "0") or 0)
    if delay:
        time.sleep(delay)
    profile, norm = layer_profiles(_checkpoint(source, revision), layer, fold_ln)
    write_layer(store, name, layer, profile, norm)
    return layer


# ------------------------------------------------------------------------------------------ planning


@dataclass
class Job:
    """One model to profile: what the tasks open (source at the pinned revision) and its store row."""

    name: str
    source: str  # what the tasks pass to open_checkpoint: the folder, registry name or Hub id as given
    revision: str | None  # the revision the client resolved (Hub commit); every task opens exactly it
    info: ModelInfo
    fold_ln: bool = False
    reset: bool = False  # --force on a stored model: forget its values first


def plan_job(model_or_path: str, store, name: str | None = None, fold_ln: bool = False, force: bool = False,
             revision: str | None = None) -> Job | None:
    """Open and validate one model with ``profile_tasks.plan_model`` (a Hub id costs its config and index
    only); None if the store already holds exactly these values."""
    from pipeline.profile_tasks import plan_model

    store = store_location(store)
    if "://" in store:  # a fresh URL store has no root group yet, which plan_model would take for a non-store
        import zarr

        zarr.open_group(store, mode="a")
    plan = plan_model(model_or_path, store, fold_ln, name, force, revision)
    if plan is None:
        return None
    return Job(plan.name, str(model_or_path), plan.ckpt.revision, plan.info, fold_ln, plan.reset)


# ------------------------------------------------------------------------------------------ cluster


def make_client(workers: int | None = None, scheduler: str | None = None, processes: bool = True,
                timeout: str = "20s"):
    """A dask Client: on an existing scheduler, or on a new loopback LocalCluster of ``workers`` processes
    with one thread each. The caller closes it (``client.close()``; a LocalCluster closes with it)."""
    from distributed import Client, LocalCluster

    if scheduler:
        try:
            return Client(scheduler, timeout=timeout)
        except (OSError, TimeoutError) as exc:
            raise ClusterError(f"cannot reach the dask scheduler at {scheduler!r} ({exc}). Start it with "
                               "`dask scheduler` (and workers with `dask worker ADDRESS`), or use --workers N "
                               "for a local cluster.") from exc
    if not workers or workers < 1:
        raise ClusterError(f"--workers must be a positive number of processes; got {workers!r}")
    where = {"host": "127.0.0.1"} if processes else {}  # loopback only; threads talk in-process
    cluster = LocalCluster(n_workers=int(workers), threads_per_worker=1, processes=processes,
                           dashboard_address=None, **where)
    client = Client(cluster)
    client._headgeometry_cluster = cluster  # closed together (see close_client)
    return client


def close_client(client) -> None:
    cluster = getattr(client, "_headgeometry_cluster", None)
    client.close()
    if cluster is not None:
        cluster.close()


def run_jobs(client, jobs: Sequence[Job], store, retries: int = 2, progress: bool = True) -> dict[str, str]:
    """Profile every layer of every job on the cluster; returns {name: revision} of the models completed.

    Layers already written (``layer_done``) are skipped. Raises ClusterError naming the failed layers if
    any task fails after its retries; the models it touched stay incomplete, finished layers stay written.
    """
    from distributed import as_completed
    from tqdm.auto import tqdm

    store = store_location(store)
    futures, owner = [], {}
    for job in jobs:
        if job.reset:
            reset_model(store, job.name)
        register_model(store, job.info)
        for layer in np.flatnonzero(~layers_done(store, job.name)).tolist():
            fut = client.submit(layer_task, job.source, job.revision, store, job.name, int(layer), job.fold_ln,
                                key=f"profile-{job.name}-{layer}-{job.revision or 'local'}-{time.time_ns()}",
                                retries=retries, pure=False)
            futures.append(fut)
            owner[fut.key] = (job.name, int(layer))
    failed: dict[str, list[tuple[int, str]]] = {}
    bar = tqdm(total=len(futures), desc="layers", unit="layer", disable=not progress)
    for fut in as_completed(futures):
        name, layer = owner[fut.key]
        if fut.status != "finished":
            exc = fut.exception()
            failed.setdefault(name, []).append((layer, f"{type(exc).__name__}: {exc}"))
        bar.update(1)
    bar.close()
    done = {}
    for job in jobs:
        if job.name in failed:
            continue
        mark_complete(store, job.name, revision=job.info.revision)
        done[job.name] = job.info.revision
    if failed:
        lines = [f"{name}: layers {sorted(layer for layer, _ in errs)} failed (first: {errs[0][1]})"
                 for name, errs in failed.items()]
        raise ClusterError("profiling failed on the cluster after retries; finished layers are kept and those "
                           "models are not marked complete. Rerun the same command to resume.\n" + "\n".join(lines))
    return done


def run_distributed(models: Sequence[str], store, workers: int | None = None, scheduler: str | None = None,
                    fold_ln: bool = False, name: str | None = None, force: bool = False,
                    revision: str | None = None, progress: bool = True, log=print) -> list[str]:
    """``run_profiles`` on a cluster: plan every model here (nothing written if one is wrong), then one task
    per layer on ``scheduler`` or on a new LocalCluster of ``workers`` processes. Returns the names written.

    Unlike the single-process run, the client does not read every Q/K tensor up front to check it is
    finite (that would pull all weights to the client); a task that meets NaN/Inf fails with the tensor's
    name and its model stays incomplete.
    """
    from pipeline.profile_tasks import UsageError

    if name is not None and len(models) != 1:
        raise UsageError("--name names one model; give exactly one MODEL_OR_PATH with it")
    store = store_location(store)
    jobs = []
    for m in models:
        job = plan_job(m, store, name, fold_ln, force, revision)
        if job is None:
            log(f"{name or m}: already complete in {store}; skipped (add --force to recompute)")
        else:
            jobs.append(job)
    if not jobs:
        return []
    client = make_client(workers, scheduler)
    try:
        log(f"dask cluster: {len(client.scheduler_info()['workers'])} workers at {client.scheduler.address}")
        done = run_jobs(client, jobs, store, progress=progress)
    finally:
        close_client(client)
    for job in jobs:
        log(f"{job.name}: {job.info.n_layers} layers x {job.info.n_heads} heads complete in {store} "
            f"(source {job.info.source}, revision {job.info.revision})")
    return list(done)
