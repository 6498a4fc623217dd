"""The one run path of ``python -m pipeline profiles``: options -> plan -> tasks -> executor -> store.

1. **Options** (:class:`RunOptions`, the dataclass the CLI is generated from; ``pipeline.run_options``) are
   checked: ``--workers`` at least 1, a well-formed and reachable ``--scheduler`` address, ``--name`` with one
   model only.
2. **Plan** (``pipeline.run_plan``): every model is opened and validated before the store is touched: its config
   (a Layout with at least one layer), the registry's shape for registry models, the Q/K tensor names and
   shapes of every layer against the config (from the files' headers, no tensor data read), and,
   for local checkpoints, every Q/K tensor once for NaN/Inf. The store is checked too (``pipeline.run_store``): a
   Zarr v3 store (or a folder that can hold one), writable, with room for the new rows. A model already complete
   with the same values is skipped (unless layers lack their head statistics: those are recomputed); one
   held with other values needs ``--force``.
3. **Tasks** (``pipeline.run_tasks``): one :class:`LayerTask` per (model, layer) still to write; each opens its
   checkpoint (at the pinned revision), profiles the layer one head at a time and writes its own region of the
   store.
4. **Executor** (``pipeline.run_executors``): in this process (the default), a process pool (``--workers N``) or a
   dask.distributed cluster (``--scheduler ADDRESS``; ``pipeline.run_cluster``). The model's row is registered
   just before its tasks run and marked complete only after all of them succeeded; a failure leaves finished
   layers written (a rerun resumes) and the model incomplete.

:func:`run_profiles` is the public entry (``pipeline.run_entry``). This module names the run path's public parts;
it holds none of its own.
"""

from pipeline.run_cluster import Cluster, open_cluster
from pipeline.run_entry import register_only, run, run_profiles
from pipeline.run_executors import begin_model, execute, run_dask, run_inline, run_pool
from pipeline.run_options import ClusterError, RunOptions, UsageError, check_options, check_scheduler
from pipeline.run_plan import ModelPlan, bytes_needed, check_weights, plan_model, plan_run, validate_checkpoint
from pipeline.run_store import check_store, open_store, store_location
from pipeline.run_tasks import LayerTask, compute_layer, read_ahead, run_task

__all__ = ["Cluster", "ClusterError", "LayerTask", "ModelPlan", "RunOptions", "UsageError", "begin_model",
           "bytes_needed", "check_options", "check_scheduler", "check_store", "check_weights", "compute_layer",
           "execute", "open_cluster", "open_store", "plan_model", "plan_run", "read_ahead", "register_only", "run",
           "run_dask", "run_inline", "run_pool", "run_profiles", "run_task", "store_location",
           "validate_checkpoint"]
