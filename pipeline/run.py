"""The one run path of ``python -m pipeline profiles``: options -> plan -> tasks -> executor -> store.

1. **Options** (:class:`RunOptions`, the dataclass the CLI is generated from) are checked: ``--workers``
   at least 1, a well-formed and reachable ``--scheduler`` address, ``--name`` with one model only.
2. **Plan**: every model is opened and validated before the store is touched: its config (a Layout
   with at least one layer), the registry's shape for registry models, the Q/K tensor names and
   shapes of every layer against the config (from the files' headers, no tensor data read), and,
   for local checkpoints, every Q/K tensor once for NaN/Inf. The store is checked too: a Zarr v3 store
   (or a folder that can hold one), writable, with room for the new rows. A model already complete
   with the same values is skipped (unless layers lack their head statistics: those are recomputed); one
   held with other values needs ``--force``.
3. **Tasks**: one :class:`LayerTask` per (model, layer) still to write; each opens its checkpoint (at
   the pinned revision), profiles the layer one head at a time and writes its own region of the store.
4. **Executor**: in this process (the default), a process pool (``--workers N``) or a dask.distributed
   cluster (``--scheduler ADDRESS``). The model's row is registered just before its tasks run and
   marked complete only after all of them succeeded; a failure leaves finished layers written (a rerun
   resumes) and the model incomplete.

:func:`run_profiles` is the public entry.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import stat
import uuid
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from pipeline.location import DEFAULT_HELP, make_user_folder


class UsageError(ValueError):
    """Options that do not go together; the message says how to call it."""


class ClusterError(RuntimeError):
    """The cluster could not be reached or its tasks failed; the message says what to do."""


# ------------------------------------------------------------------------------------------ options


def _opt(default, help: str, **meta):
    """A RunOptions field: its default and its ``--help`` line (plus argparse hints in ``meta``)."""
    if isinstance(default, list):
        return field(default_factory=list, metadata={"help": help, **meta})
    return field(default=default, metadata={"help": help, **meta})


@dataclass
class RunOptions:
    """Everything a profiles run can be told. ``python -m pipeline profiles`` is generated from these fields."""

    models: list[str] = _opt([], "checkpoint folder, .gguf/.onnx file, registry name or Hub id",
                             positional=True, metavar="MODEL_OR_PATH")
    seed_models: bool = _opt(False, "add the seed models of the registry")
    store: str | None = _opt(None, f"Zarr store to write (default: {DEFAULT_HELP}); a path or an fsspec URL")
    fold_ln: bool = _opt(False, "fold the gain g of the layer norm whose output enters attention: L -> diag(g) L "
                                "diag(g) (pre-norm: the norm in front of attention; post-norm OPT/BERT: the previous "
                                "layer's output norm, or BERT's embedding norm for layer 0). Default: raw weights")
    name: str | None = _opt(None, "name in the store (one model only; default: see above)")
    force: bool = _opt(False, "recompute a model the store already holds")
    revision: str | None = _opt(None, "Hub branch, tag or commit to read (Hub ids only)")
    register_only: bool = _opt(False, "only register registry models in the store as not yet computed (shapes "
                                      "from the registry, the command that computes them; no weights read)")
    quiet: bool = _opt(False, "no progress bars")
    workers: int | None = _opt(None, "run the (model, layer) tasks on a pool of N local worker processes",
                               metavar="N")
    scheduler: str | None = _opt(None, "run the tasks on an existing dask cluster (e.g. tcp://host:8786); the store "
                                       "must be a path or fsspec URL that every worker can write", metavar="ADDRESS")


def store_location(location) -> str:
    """The store to use: ``location``, else ``pipeline.store.default_store_path()``; ``file://PATH`` -> PATH."""
    from pipeline import store

    s = str(location) if location is not None else store.default_store_path()
    return s[len("file://"):] if s.startswith("file://") else s


def check_options(opts: RunOptions) -> None:
    """Options that cannot work, refused before anything is opened."""
    if opts.workers is not None and opts.workers < 1:
        raise UsageError(f"--workers must be at least 1 (worker processes); got {opts.workers}")
    if opts.workers is not None and opts.scheduler:
        raise UsageError("--workers starts local worker processes and --scheduler uses an existing cluster; "
                         "give one of them")
    if opts.name is not None and len(opts.models) != 1:
        raise UsageError("--name names one model; give exactly one MODEL_OR_PATH with it")
    if opts.name is not None and not opts.name.strip():
        raise UsageError("--name must not be empty")
    if opts.scheduler:
        check_scheduler(opts.scheduler)


def check_scheduler(address: str, timeout: float = 5.0) -> None:
    """A dask scheduler address ``[tcp://|tls://]host:port`` that accepts a connection, else ClusterError."""
    from urllib.parse import urlsplit

    scheme = address.split("://", 1)[0] if "://" in address else "tcp"
    rest = address.split("://", 1)[-1]
    try:
        parts = urlsplit(f"//{rest}")
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if scheme not in ("tcp", "tls") or not host or port is None or parts.path not in ("", "/"):
        raise ClusterError(f"--scheduler {address!r} is not a dask scheduler address; write it as "
                           "tcp://HOST:PORT (e.g. tcp://127.0.0.1:8786)")
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        raise ClusterError(f"cannot reach the dask scheduler at {address!r} ({exc.strerror or exc}). Start it with "
                           "`dask scheduler` (and workers with `dask worker ADDRESS`), or use --workers N for "
                           "local worker processes.") from None


# ------------------------------------------------------------------------------------------ store


def _read_only(path: str) -> bool:
    """Not writable, or marked read-only (no owner write bit: respected even when running as root)."""
    return not os.access(path, os.W_OK) or not os.stat(path).st_mode & stat.S_IWUSR


def check_store(location: str, bytes_needed: int = 0) -> None:
    """A local store this run can write: writable (store folder and its groups, or the folder it goes in) and
    with room for ``bytes_needed``; StoreError otherwise. What kind of store it is, Store.open checks."""
    from pipeline.store import StoreError

    if "://" in location:
        return
    make_user_folder(location)  # the default user store's folder is made on its first write
    if os.path.isdir(location):
        folders = [location] + [e.path for e in os.scandir(location) if e.is_dir()]
        for folder in folders:
            if _read_only(folder):
                raise StoreError(f"the store {location!r} is read-only ({folder} cannot be written); make it "
                                 "writable or choose another --store.")
        where = location
    else:
        parent = os.path.dirname(os.path.abspath(location))
        if not os.path.isdir(parent):
            raise StoreError(f"cannot create the store {location!r}: the folder {parent} does not exist.")
        if _read_only(parent):
            raise StoreError(f"cannot create the store {location!r}: the folder {parent} is read-only.")
        where = parent
    free = shutil.disk_usage(where).free
    if bytes_needed and free < bytes_needed:
        raise StoreError(f"not enough disk space for the store {location!r}: this run writes about "
                         f"{bytes_needed / 1e6:.1f} MB and {free / 1e6:.1f} MB are free. Free some space or choose "
                         "another --store.")


def open_store(location: str):
    """The :class:`pipeline.store.Store` at ``location``, opened for writing."""
    from pipeline.store import Store

    return Store.open(location, mode="a")


@lru_cache(maxsize=4)
def _worker_store(location: str):
    """One store handle per location per worker process."""
    return open_store(location)


@lru_cache(maxsize=8)
def _worker_writer(location: str, name: str, run: str):
    """One layer writer per (store, model, run) per worker process: the model's row and arrays are opened by its
    first task of a run, not by every task (about 20 ms a layer). A writer stays valid while the run holds the
    model's writer lock (``Profiles.layer_writer``); ``run`` (one token per planned run) keeps a later run on a
    long-lived worker from reusing it."""
    return _worker_store(location).layer_writer(name)


# ------------------------------------------------------------------------------------------ task


def compute_layer(ckpt, layout, layer: int, fold_ln: bool, rotations=None, qk=None) -> tuple[np.ndarray, ...]:
    """Profiles and statistics of one layer, in the order ``Store.write_layer`` takes them: profile (H, 4) or
    (H, 129, 4) for rotary models, norm (H,) or (H, 129), head statistics (H, 17) and spectrum (H, k) at d = 0.

    The layer's Q/K are read compact (float32 where exact, grouped key heads once), or given as ``qk``
    (``pipeline.architectures.LayerQK``, read already: :func:`read_ahead`), and each head is converted to float64
    only while it is profiled (``pipeline.profile.head_profiles``)."""
    from pipeline.architectures import layer_qk
    from pipeline.architectures import rotations as rotations_of
    from pipeline.profile import head_profiles

    if qk is None:
        qk = layer_qk(ckpt, layout, layer, fold_ln)
    if rotations is None:
        rotations = rotations_of(layout)
    return head_profiles(qk.W_Q, qk.W_K, rotations, kv_of_head=qk.kv_of_head, gain=qk.gain, statistics=True)


READ_AHEAD_BYTES = 64 << 20  # run_inline reads the next layer while it profiles one whose Q/K take at most this


@contextlib.contextmanager
def read_ahead(plan: ModelPlan):
    """``take(i)``: the Q/K (``pipeline.architectures.LayerQK``) of ``plan.todo[i]``, taken in order. While the caller
    profiles one layer, a thread reads the next, when a layer's compact Q/K take at most READ_AHEAD_BYTES: memory
    then holds the layer in use and the one being read, at most one layer and READ_AHEAD_BYTES (the caller keeps
    no reference to a layer past its use).

    Why: on the opt-1.3b shape reading is about a tenth of a layer's time, and the read (file pages, conversion)
    and the profile (one BLAS/LAPACK thread) use different cores (benchmarks/scale_bench.py --sections 3 times
    the whole run). A read's error is raised when its layer is taken, after the layers before it are written."""
    from concurrent.futures import ThreadPoolExecutor

    from pipeline.architectures import layer_qk

    todo = list(plan.todo)
    ahead = None  # (index, future) of the layer being read ahead, or None

    def read(i: int):
        return layer_qk(plan.ckpt, plan.layout, todo[i], plan.row.layernorm_folded)

    with ThreadPoolExecutor(1, thread_name_prefix="read-ahead") as pool:
        def take(i: int):
            nonlocal ahead
            index, future = ahead or (None, None)
            qk = future.result() if index == i else read(i)  # a layer read ahead and not taken is dropped
            small = qk.W_Q.nbytes + qk.W_K.nbytes <= READ_AHEAD_BYTES
            ahead = (i + 1, pool.submit(read, i + 1)) if i + 1 < len(todo) and small else None
            return qk

        try:
            yield take
        finally:
            if ahead is not None:
                ahead[1].cancel()


@dataclass(frozen=True)
class LayerTask:
    """One (model, layer): what a worker opens (source at the pinned revision) and where it writes."""

    store: str
    name: str
    source: str
    revision: str | None
    layer: int
    fold_ln: bool
    delay: float = 0.0  # seconds the task waits before it starts (tests kill a worker inside a task with it)
    run: str = ""  # the run's token (ModelPlan.tasks): a worker writes a run's layers through one writer


@lru_cache(maxsize=4)
def _worker_checkpoint(source: str, revision: str | None):
    """One open checkpoint per (source, revision) per worker process (Hub headers are read once)."""
    from pipeline.checkpoints import open_checkpoint

    return open_checkpoint(source, revision)


def run_task(task: LayerTask, ckpt=None) -> int:
    """Read, profile and write one layer; returns the layer. Opens the checkpoint when ``ckpt`` is None."""
    from pipeline.architectures import layout_from_config

    if task.delay:
        import time

        time.sleep(task.delay)
    if ckpt is None:
        ckpt = _worker_checkpoint(task.source, task.revision)
        if task.revision and ckpt.revision != task.revision:
            from pipeline.sources.base import CheckpointError

            raise CheckpointError(f"{task.source} is at revision {ckpt.revision} on this worker, but the run was "
                                  f"planned for {task.revision}: the checkpoint changed (or differs between "
                                  "machines). Rerun the command to plan it again.")
    values = compute_layer(ckpt, layout_from_config(ckpt.config), task.layer, task.fold_ln)
    if task.run:
        _worker_writer(task.store, task.name, task.run).write(task.layer, *values)
    else:
        _worker_store(task.store).write_layer(task.name, task.layer, *values)
    return task.layer


# ------------------------------------------------------------------------------------------ plan


@dataclass
class ModelPlan:
    """What one model's run will do, decided before anything is written."""

    ref: object  # pipeline.checkpoints.ModelRef: what the model was asked for as, resolved once
    ckpt: object  # pipeline.sources.base.Checkpoint
    layout: object  # pipeline.architectures.Layout
    row: object  # the store row to register
    todo: list[int]
    reset: bool  # forget the stored values first (--force on a stored model)

    @property
    def name(self) -> str:
        return self.row.name

    def tasks(self, store: str, delay: float = 0.0) -> list[LayerTask]:
        """The tasks of the layers to do, with one new run token."""
        run = uuid.uuid4().hex
        return [LayerTask(store, self.name, self.ref.text, self.ckpt.revision, layer, self.row.layernorm_folded, delay,
                          run) for layer in self.todo]


class _ShapesOnly:
    """A checkpoint view whose tensors are zero-stride arrays of the stored shapes: ``layer_qk`` on it checks
    every name and shape against the config without reading tensor data."""

    def __init__(self, ckpt):
        self.ckpt = ckpt

    def tensor_names(self) -> list[str]:
        return self.ckpt.tensor_names()

    def _shape(self, name: str) -> tuple[int, ...]:
        src = self.ckpt.sources[name]
        shape = getattr(src, "shape", None)
        return tuple(shape(name)) if shape is not None else tuple(np.shape(self.ckpt.read_compact(name)))

    def read_compact(self, name: str) -> np.ndarray:
        return np.broadcast_to(np.zeros((), np.float32), self._shape(name))

    def read(self, name: str) -> np.ndarray:
        return np.broadcast_to(np.zeros((), np.float64), self._shape(name))


def validate_checkpoint(ckpt, layout, fold_ln: bool) -> None:
    """Every layer's Q/K tensors exist and have the shapes the config gives (ArchitectureError otherwise)."""
    from pipeline.architectures import ArchitectureError, layer_qk

    if layout.n_layers < 1:
        raise ArchitectureError(f"{ckpt.source}: the config gives {layout.n_layers} layers; a model needs at least "
                                "one attention layer to profile.")
    view = _ShapesOnly(ckpt)
    for layer in range(layout.n_layers):
        layer_qk(view, layout, layer, fold_ln)


def _conflict(store, row) -> tuple[bool, str | None]:
    """(already complete with the same values, conflict message or None) for a model already stored."""
    from pipeline.schema import COUNT_FIELDS

    old, done = store.row(row.name), store.layers_done(row.name)
    same = (all(getattr(old, f) == getattr(row, f) for f in COUNT_FIELDS)
            and old.layernorm_folded == row.layernorm_folded and old.revision == row.revision)
    if store.is_complete(row.name):
        if same:
            return True, None
        what = "complete values"
    elif done.any() and not same:
        what = f"partial values ({int(done.sum())} of {len(done)} layers)"
    else:
        return False, None  # registered only, or an interrupted run of the same checkpoint: resume
    return False, (
        f"the store already holds {what} for {row.name!r} from {old.source} revision {old.revision or '?'} "
        f"(fold-ln {old.layernorm_folded}, {old.n_layers} layers x {old.n_heads} heads); this run reads "
        f"{row.source} revision {row.revision} (fold-ln {row.layernorm_folded}, {row.n_layers} x "
        f"{row.n_heads}). Add --force to recompute it, or --name NEW to store this one beside it."
    )


def plan_model(model_or_path: str, store, fold_ln: bool = False, name: str | None = None, force: bool = False,
               revision: str | None = None, stored: list[str] | None = None, hold=None) -> ModelPlan | None:
    """Open and validate one checkpoint; None if the store already holds exactly these values.

    ``store`` is an open store (:func:`open_store`); ``stored`` its model names (read once per run);
    ``hold(name)``, when given, takes the model's writer lock before its stored state is read."""
    from pipeline.architectures import ArchitectureError, layout_from_config
    from pipeline.checkpoints import open_checkpoint, resolve
    from pipeline.models import compute_command, spec_for
    from pipeline.schema import ModelRow, Provenance
    from pipeline.store import StoreError

    ref = resolve(model_or_path)
    ckpt = open_checkpoint(ref, revision)
    try:
        layout = layout_from_config(ckpt.config)
    except ArchitectureError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ArchitectureError(f"the config.json of {ckpt.source} is not a usable config ({type(exc).__name__}: "
                                f"{exc}); fix or re-download it.") from None
    spec = ref.spec
    if spec is not None and (bad := spec.mismatches(layout)):
        diff = ", ".join(f"{k}: registry {a!r}, config {b!r}" for k, (a, b) in bad.items())
        raise ArchitectureError(f"{ref.text!r} does not have the shape the registry gives {spec.name!r} ({diff}). "
                                "The checkpoint is not that model, or the registry in pipeline/models.py is wrong.")
    validate_checkpoint(ckpt, layout, fold_ln)
    default = ref.default_name(ckpt.provenance.get("name"))
    name = name or default
    if hold is not None:
        hold(name)
    other = spec_for(name) if spec is None else None  # the chosen name, when it is a registry name of another model
    if other is not None and other.name == name and (bad := other.mismatches(layout)):
        raise UsageError(f"{name!r} is the registry's name for {other.hub_id}, and {ref.text!r} has "
                         f"another shape ({', '.join(bad)} differ). Store it under another name with --name NEW.")
    command = compute_command(ref.text, None if name == default else name, fold_ln)
    row = ModelRow.of(name, layout.shape, Provenance.of(ckpt.provenance), source=ckpt.source,
                      revision=ckpt.revision, command=command, layernorm_folded=fold_ln)
    todo, reset = list(range(layout.n_layers)), False
    if name in (stored if stored is not None else store.names()):
        if force:
            reset = True
        else:
            complete, conflict = _conflict(store, row)
            if conflict:
                raise StoreError(conflict)
            # layers not written, and layers written without their head statistics
            todo = [int(i) for i in np.flatnonzero(~store.layers_with_statistics(name))]
            if complete and not todo:
                return None
    return ModelPlan(ref, ckpt, layout, row, todo, reset)


def check_weights(plan: ModelPlan, progress: bool = True) -> None:
    """Check every Q/K tensor (and gain) the plan will use for NaN/Inf, raising CheckpointError naming the tensor.

    ``Checkpoint.check_finite``: safetensors files are tested on their stored bits without converting
    them (a fifth of a compact read's time on fp16); other formats are read compact once. Hub checkpoints
    are not read twice (that would double the bytes fetched): each layer is checked as it is read."""
    from tqdm.auto import tqdm

    from pipeline.architectures import qk_tensor_names

    if getattr(plan.ckpt, "hub_snapshot", None) is not None:
        return
    names = plan.ckpt.tensor_names()
    wanted = {t for layer in plan.todo
              for t in qk_tensor_names(plan.layout, names, layer, plan.row.layernorm_folded).values()}
    for t in tqdm(sorted(wanted), desc=f"{plan.name}: checking weights", unit="tensor", disable=not progress,
                  leave=False):
        plan.ckpt.check_finite(t)


def bytes_needed(plans: list[ModelPlan]) -> int:
    """About what the plans write: the profile, norm and statistics regions of every layer to do."""
    from pipeline.schema import bytes_per_head

    return sum(len(p.todo) * p.layout.n_heads * bytes_per_head(p.layout.d_head) for p in plans)


# ------------------------------------------------------------------------------------------ executors


def _begin(store, plan: ModelPlan) -> None:
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
    from tqdm.auto import tqdm

    from pipeline.architectures import rotations as rotations_of

    for plan in plans:
        with store.writer(plan.name):
            _begin(store, plan)
            R = rotations_of(plan.layout)
            writer = store.layer_writer(plan.name)  # the model's row and arrays opened once for all its layers
            with read_ahead(plan) as take:
                for i, layer in enumerate(tqdm(plan.todo, desc=plan.name, unit="layer", disable=not progress)):
                    values = compute_layer(plan.ckpt, plan.layout, layer, plan.row.layernorm_folded, R, qk=take(i))
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
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from tqdm.auto import tqdm

    with _writing(store, plans):
        for plan in plans:
            _begin(store, plan)
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


def make_client(workers: int | None = None, scheduler: str | None = None, processes: bool = True,
                timeout: str = "20s"):
    """A dask Client on an existing scheduler, or on a new loopback LocalCluster of ``workers`` processes (one
    thread each). Close it with :func:`close_client`."""
    from distributed import Client, LocalCluster

    if scheduler:
        try:
            return Client(scheduler, timeout=timeout)
        except (OSError, TimeoutError, ValueError) as exc:
            raise ClusterError(f"cannot reach the dask scheduler at {scheduler!r} ({exc}). Start it with "
                               "`dask scheduler` (and workers with `dask worker ADDRESS`), or use --workers N "
                               "for local worker processes.") from None
    if not workers or workers < 1:
        raise UsageError(f"--workers must be at least 1 (worker processes); got {workers!r}")
    where = {"host": "127.0.0.1"} if processes else {}
    cluster = LocalCluster(n_workers=int(workers), threads_per_worker=1, processes=processes,
                           dashboard_address=None, **where)
    client = Client(cluster)
    client._headgeometry_cluster = cluster
    return client


def close_client(client) -> None:
    cluster = getattr(client, "_headgeometry_cluster", None)
    client.close()
    if cluster is not None:
        cluster.close()


def run_dask(plans: list[ModelPlan], store, client, retries: int = 2, progress: bool = True,
             task_delay: float = 0.0) -> list[str]:
    """The tasks on a dask cluster, each retried ``retries`` times if it fails or its worker dies (each waits
    ``task_delay`` seconds before it starts)."""
    import time

    from distributed import as_completed
    from tqdm.auto import tqdm

    with _writing(store, plans):
        for plan in plans:
            _begin(store, plan)
        futures, owner = [], {}
        for plan in plans:
            for t in plan.tasks(store.location, task_delay):
                fut = client.submit(run_task, t, key=f"profile-{t.name}-{t.layer}-{time.time_ns()}",
                                    retries=retries, pure=False)
                futures.append(fut)
                owner[fut.key] = t
        failed: dict[str, list[tuple[int, str]]] = {}
        for fut in tqdm(as_completed(futures), total=len(futures), desc="layers", unit="layer",
                        disable=not progress):
            if fut.status != "finished":
                exc, t = fut.exception(), owner[fut.key]
                failed.setdefault(t.name, []).append((t.layer, f"{type(exc).__name__}: {exc}"))
        return _finish(store, plans, failed)


# ------------------------------------------------------------------------------------------ entry


def plan_run(opts: RunOptions, log=print, locks: contextlib.ExitStack | None = None) -> tuple[str, list[ModelPlan]]:
    """Check the options, open and validate every model and the store; nothing is written.

    With ``locks``, each model's writer lock is taken as soon as its name is known and stays in ``locks``."""
    from pipeline.models import SEED_MODELS

    check_options(opts)
    location = store_location(opts.store)
    models = list(opts.models) + (list(SEED_MODELS) if opts.seed_models else [])
    if not models:
        raise UsageError("no model given: name at least one MODEL_OR_PATH, or --seed-models. `python -m pipeline "
                         "list` shows the registry.")
    check_store(location)
    store = open_store(location)
    stored = store.names()
    plans = []
    for m in models:
        hold = None if locks is None else (lambda name: locks.enter_context(store.writer(name)))
        plan = plan_model(m, store, opts.fold_ln, opts.name, opts.force, opts.revision, stored, hold)
        if plan is None:
            log(f"{opts.name or m}: already complete in {location}; skipped (add --force to recompute)")
        else:
            plans.append(plan)
    for plan in plans:
        check_weights(plan, progress=not opts.quiet)
    check_store(location, bytes_needed(plans))
    return location, plans


def execute(opts: RunOptions, location: str, plans: list[ModelPlan], client=None) -> list[str]:
    """Run the plans' tasks on the executor the options ask for."""
    store = open_store(location)
    progress = not opts.quiet
    if client is not None:
        return run_dask(plans, store, client, progress=progress)
    if opts.scheduler:
        client = make_client(scheduler=opts.scheduler)
        try:
            return run_dask(plans, store, client, progress=progress)
        finally:
            close_client(client)
    if opts.workers:
        return run_pool(plans, store, opts.workers, progress=progress)
    return run_inline(plans, store, progress=progress)


def run(opts: RunOptions, log=print, client=None) -> list[str]:
    """Plan (everything validated), then execute; returns the names written."""
    with contextlib.ExitStack() as locks:  # each model's writer lock, from its plan to its completion
        location, plans = plan_run(opts, log, locks)
        if not plans:
            return []
        names = execute(opts, location, plans, client)
    for plan in plans:
        log(f"{plan.name}: {plan.layout.n_layers} layers x {plan.layout.n_heads} heads complete in {location} "
            f"(source {plan.ckpt.source}, revision {plan.ckpt.revision})")
    return names


def run_profiles(models: list[str], store_path=None, fold_ln: bool = False, name: str | None = None,
                 force: bool = False, revision: str | None = None, progress: bool = True, log=print,
                 workers: int | None = None, scheduler: str | None = None, client=None) -> list[str]:
    """Profiles of every head of ``models`` into ``store_path`` (default: ``pipeline.store.default_store_path()``);
    returns the names written. Everything is validated before the store is touched (module docstring)."""
    opts = RunOptions(models=list(models), store=None if store_path is None else str(store_path), fold_ln=fold_ln,
                      name=name, force=force, revision=revision, quiet=not progress, workers=workers,
                      scheduler=scheduler)
    return run(opts, log=log, client=client)


def register_only(names: list[str], store_path=None, log=print) -> list[str]:
    """Register registry models as not yet computed (shapes from the registry, no weights read).

    Models already in the store are left as they are. Returns the names registered."""
    from pipeline.models import MODELS, spec_for
    from pipeline.schema import ModelRow

    specs = [spec_for(n) for n in names]
    unknown = [n for n, s in zip(names, specs, strict=True) if s is None]
    if unknown:
        raise UsageError(f"--register-only takes registry names; unknown: {', '.join(unknown)}. "
                         f"Registry names: {', '.join(MODELS)}")
    location = store_location(store_path)
    check_store(location)
    store = open_store(location)
    present, out = set(store.names()), []
    for spec in specs:
        if spec.name in present:
            log(f"{spec.name}: already in {location}; left as it is")
            continue
        store.register(ModelRow.of(spec.name, spec.shape, source=spec.hub_id, command=spec.command))
        out.append(spec.name)
    if out:
        log(f"registered as not yet computed in {location}: {', '.join(out)}")
    return out
