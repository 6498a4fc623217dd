"""The one run path of ``python -m pipeline profiles``: options -> plan -> tasks -> executor -> store.

1. **Options** (:class:`RunOptions`, the dataclass the CLI is generated from; ``pipeline.run.options``) are
   checked: ``--workers`` at least 1, a well-formed and reachable ``--scheduler`` address, ``--name`` with one
   model only.
2. **Plan** (``pipeline.run.plan``): every model is opened and validated before the store is touched: its config
   (a Layout with at least one layer), the registry's shape for registry models, the Q/K tensor names and
   shapes of every layer against the config (from the files' headers, no tensor data read), and, for local
   checkpoints, every Q/K tensor once for NaN/Inf. The store is checked too (``pipeline.run.destination``): a Zarr
   v3 store (or a folder that can hold one), writable, with room for the new rows. A model already complete with
   the same values is skipped (unless layers lack their head statistics: those are recomputed); one held with
   other values needs ``--force``. A checkpoint of several towers (CLIP, Whisper) is planned as one model per
   tower, stored as ``NAME/tower`` (``plan_checkpoint``).
3. **Tasks** (``pipeline.run.tasks``): one :class:`LayerTask` per (model, layer) still to write; each opens its
   checkpoint (at the pinned revision), profiles the layer one head at a time and writes its own region of the
   store.
4. **Executor** (``pipeline.run.executors``): in this process (the default), a process pool (``--workers N``) or a
   dask.distributed cluster (``--scheduler ADDRESS``; ``pipeline.run.cluster``). The model's row is registered
   just before its tasks run and marked complete only after all of them succeeded; a failure leaves finished
   layers written (a rerun resumes) and the model incomplete.

A run of revisions (``--revisions SPEC``: a training run's checkpoints, each a frame of the store's group
``runs/NAME``) takes the same steps: ``pipeline.run.frames`` plans it (every chosen revision opened and validated
first), each (frame, layer) is a task (``pipeline.run.frame_tasks``), and ``pipeline.run.frame_executors`` runs them
inline, on the pool or on the cluster.

:func:`run_profiles` is the public entry (``pipeline.run.entry``). This package names the run path's public parts
and holds none of its own. They are imported on first use (PEP 562 ``__getattr__``), so that a module which needs
one part (the CLI's ``RunOptions`` for ``--help``) does not import the whole run path.
"""

from __future__ import annotations

import importlib

_WHERE = {  # the module of the run path that holds each public name
    "cluster": ("Cluster", "open_cluster"),
    "entry": ("register_only", "run", "run_profiles"),
    "executors": ("begin_model", "execute", "run_dask", "run_inline", "run_pool"),
    "options": ("ClusterError", "RevisionsFailed", "RunOptions", "UsageError", "check_options", "check_scheduler"),
    "frames": ("PlannedFrame", "RunPlan", "plan_frames"),
    "frame_tasks": ("FrameTask", "qk_digest", "run_frame_task"),
    "frame_executors": ("execute_frames", "run_revisions"),
    "plan": ("ModelPlan", "bytes_needed", "check_weights", "plan_checkpoint", "plan_model", "plan_run",
             "validate_checkpoint"),
    "destination": ("check_store", "open_store", "store_location"),
    "tasks": ("LayerTask", "compute_layer", "read_ahead", "reading_ahead", "run_task"),
}
_MODULE_OF = {name: module for module, names in _WHERE.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
