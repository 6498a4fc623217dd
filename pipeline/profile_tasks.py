"""The (model, layer) task and the runs built from it: plan, check, register, compute, mark complete.

Work is split in (model, layer) tasks. :func:`profile_layer` is the task: a plain function of strings
and ints that opens the checkpoint itself, so a cluster runner (e.g. dask.distributed) can map it over
layers unchanged; every layer is its own region of the store, so tasks never share a chunk.

:func:`run_profiles` runs one or more models locally. Everything a user can get wrong (unknown model,
unsupported family, shapes that contradict the registry, a missing Q/K tensor, NaN/Inf weights, a
store holding other values under that name) is found *before* the store is touched: the run opens
each checkpoint, matches every layer's tensors and reads every Q/K tensor it will use once to check
it is finite. Then per model: register (grows the store if needed), write the layers not yet written
(resume), mark complete. ``force`` forgets the stored values of the model first.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from pipeline import store
from pipeline.architectures import ArchitectureError, Layout, layer_qk, layout_from_config, qk_tensor_names
from pipeline.architectures import rotations as rotations_of
from pipeline.checkpoints import Checkpoint, open_checkpoint
from pipeline.models import MODELS, ModelSpec, spec_for
from pipeline.profile import head_profiles

DEFAULT_STORE = "store.zarr"


class UsageError(ValueError):
    """Options that do not go together; the message says how to call it."""


# ------------------------------------------------------------------------------------------- task


def compute_layer(ckpt: Checkpoint, layout: Layout, layer: int, fold_ln: bool,
                  rotations: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Profiles of one layer: profile (H, 4) or (H, 129, 4) for rotary models, norm (H,) or (H, 129)."""
    qk = layer_qk(ckpt, layout, layer, fold_ln)  # compact: key heads once, float32 where exact
    if rotations is None:
        rotations = rotations_of(layout)
    return head_profiles(qk.W_Q, qk.W_K, rotations, kv_of_head=qk.kv_of_head, gain=qk.gain)


def profile_layer(source: str, layer: int, fold_ln: bool, store_path: str, name: str,
                  revision: str | None = None) -> int:
    """The (model, layer) task: read W_Q, W_K of ``layer`` from ``source``, profile it, write its region.

    ``source`` is anything :func:`pipeline.checkpoints.open_checkpoint` accepts; ``revision`` pins a Hub
    commit. The model must already be registered in the store under ``name``. Returns ``layer``.
    """
    ckpt = open_checkpoint(source, revision)
    profile, norm = compute_layer(ckpt, layout_from_config(ckpt.config), layer, fold_ln)
    store.write_layer(store_path, name, layer, profile, norm)
    return layer


# ------------------------------------------------------------------------------------------- plan


@dataclass
class Plan:
    """What one model's run will do, decided before anything is written."""

    model_or_path: str
    ckpt: Checkpoint
    layout: Layout
    info: store.ModelInfo
    todo: list[int]
    reset: bool  # forget the stored values first (--force on a stored model)

    @property
    def name(self) -> str:
        return self.info.name


def stored_models(store_path) -> list[str]:
    """Names of the models in the store's profiles group; [] when there is no store or no group yet."""
    path = str(store_path)
    if "://" not in path and not os.path.exists(path):
        return []
    import zarr

    try:
        root = zarr.open_group(path, mode="r")
    except Exception as exc:  # noqa: BLE001 - zarr raises several types for a non-store
        raise store.StoreError(f"{path!r} exists but is not a Zarr store ({exc}); choose another --store.") from exc
    if store.PROFILES not in root:
        return []
    return [str(m) for m in store.open_profiles(path)["model"].values]


def default_name(model_or_path: str, ckpt: Checkpoint, spec: ModelSpec | None) -> str:
    """Registry name, else the folder's name for a local checkpoint, else the Hub id's last part."""
    if spec is not None:
        return spec.name
    if os.path.isdir(os.path.expanduser(model_or_path)):
        return os.path.basename(os.path.normpath(os.path.abspath(os.path.expanduser(model_or_path))))
    return model_or_path.rstrip("/").split("/")[-1]


def command_for(model_or_path: str, name: str, default: str, fold_ln: bool) -> str:
    cmd = f"python -m pipeline profiles {model_or_path}"
    if name != default:
        cmd += f" --name {name}"
    return cmd + (" --fold-ln" if fold_ln else "")


def _state_conflict(store_path, info: store.ModelInfo) -> tuple[bool, str | None]:
    """(already complete with the same values, conflict message or None) for a model already stored."""
    old = store.model_info(store_path, info.name)
    done = store.layers_done(store_path, info.name)
    shape = ("n_layers", "n_heads", "n_kv_heads", "d_model", "d_head")
    same = (all(getattr(old, f) == getattr(info, f) for f in shape) and old.layernorm_folded == info.layernorm_folded
            and old.revision == info.revision)
    if store.is_complete(store_path, info.name):
        if same:
            return True, None
        what = "complete values"
    elif done.any() and not same:
        what = f"partial values ({int(done.sum())} of {len(done)} layers)"
    else:
        return False, None  # registered only, or an interrupted run of the same checkpoint: resume
    return False, (
        f"the store already holds {what} for {info.name!r} from {old.source} revision {old.revision or '?'} "
        f"(fold-ln {old.layernorm_folded}, {old.n_layers} layers x {old.n_heads} heads); this run reads "
        f"{info.source} revision {info.revision} (fold-ln {info.layernorm_folded}, {info.n_layers} x "
        f"{info.n_heads}). Add --force to recompute it, or --name NEW to store this one beside it."
    )


def plan_model(model_or_path: str, store_path, fold_ln: bool = False, name: str | None = None,
               force: bool = False, revision: str | None = None) -> Plan | None:
    """Open and validate one checkpoint; None if the store already holds exactly these values."""
    ckpt = open_checkpoint(model_or_path, revision)
    layout = layout_from_config(ckpt.config)
    spec = spec_for(model_or_path) or spec_for(ckpt.source)
    if spec is not None and (bad := spec.mismatches(layout)):
        diff = ", ".join(f"{k}: registry {a!r}, config {b!r}" for k, (a, b) in bad.items())
        raise ArchitectureError(f"{model_or_path!r} does not have the shape the registry gives {spec.name!r} ({diff}). "
                                "The checkpoint is not that model, or the registry in pipeline/models.py is wrong.")
    names = ckpt.tensor_names()
    for layer in range(layout.n_layers):
        qk_tensor_names(layout, names, layer, fold_ln)  # raises naming the missing tensor
    default = default_name(model_or_path, ckpt, spec)
    name = name or default
    if spec is None and name in MODELS and (bad := MODELS[name].mismatches(layout)):
        raise UsageError(f"{name!r} is the registry's name for {MODELS[name].hub_id}, and {model_or_path!r} has "
                         f"another shape ({', '.join(bad)} differ). Store it under another name with --name NEW.")
    info = store.ModelInfo(
        name=name, n_layers=layout.n_layers, n_heads=layout.n_heads, d_model=layout.d_model, d_head=layout.d_head,
        positional=layout.positional, source=ckpt.source, revision=ckpt.revision, family=layout.family,
        command=command_for(model_or_path, name, default, fold_ln), n_kv_heads=layout.n_kv_heads,
        rotary_dim=layout.rotary_dim, layernorm_folded=fold_ln,
    )
    todo, reset = list(range(layout.n_layers)), False
    if name in stored_models(store_path):
        if force:
            reset = True
        else:
            complete, conflict = _state_conflict(store_path, info)
            if conflict:
                raise store.StoreError(conflict)
            if complete:
                return None
            todo = [int(i) for i in np.flatnonzero(~store.layers_done(store_path, name))]
    return Plan(model_or_path, ckpt, layout, info, todo, reset)


def check_weights(plan: Plan, progress: bool = True) -> None:
    """Read every Q/K tensor (and gain) the plan will use once; raises on NaN/Inf naming the tensor."""
    from tqdm.auto import tqdm

    if getattr(plan.ckpt, "hub_snapshot", None) is not None:
        return  # range-read from the Hub: reading twice would double the bytes; Checkpoint.read checks each layer
    names = plan.ckpt.tensor_names()
    wanted = {t for layer in plan.todo
              for t in qk_tensor_names(plan.layout, names, layer, plan.info.layernorm_folded).values()}
    for t in tqdm(sorted(wanted), desc=f"{plan.name}: checking weights", unit="tensor", disable=not progress,
                  leave=False):
        plan.ckpt.read(t)


# -------------------------------------------------------------------------------------------- run


def execute(plan: Plan, store_path, progress: bool = True) -> None:
    """Register, write the layers still to do, mark complete."""
    from tqdm.auto import tqdm

    if plan.reset:
        store.reset_model(store_path, plan.name)
    store.register_model(store_path, plan.info)
    R = rotations_of(plan.layout)
    for layer in tqdm(plan.todo, desc=plan.name, unit="layer", disable=not progress):
        profile, norm = compute_layer(plan.ckpt, plan.layout, layer, plan.info.layernorm_folded, R)
        store.write_layer(store_path, plan.name, layer, profile, norm)
    store.mark_complete(store_path, plan.name, revision=plan.ckpt.revision)


def run_profiles(models: list[str], store_path=DEFAULT_STORE, fold_ln: bool = False, name: str | None = None,
                 force: bool = False, revision: str | None = None, progress: bool = True, log=print) -> list[str]:
    """Profiles of every head of ``models`` into ``store_path``; returns the names written.

    All models are opened and checked before the store is touched (see the module docstring).
    """
    if name is not None and len(models) != 1:
        raise UsageError("--name names one model; give exactly one MODEL_OR_PATH with it")
    plans = []
    for m in models:
        plan = plan_model(m, store_path, fold_ln, name, force, revision)
        if plan is None:
            log(f"{name or m}: already complete in {store_path}; skipped (add --force to recompute)")
            continue
        plans.append(plan)
    for plan in plans:
        check_weights(plan, progress)
    for plan in plans:
        execute(plan, store_path, progress)
        log(f"{plan.name}: {plan.layout.n_layers} layers x {plan.layout.n_heads} heads complete in {store_path} "
            f"(source {plan.ckpt.source}, revision {plan.ckpt.revision})")
    return [p.name for p in plans]


def register_only(names: list[str], store_path=DEFAULT_STORE, log=print) -> list[str]:
    """Register registry models as not yet computed (shapes from the registry, no weights read).

    Models already in the store are left as they are. Returns the names registered.
    """
    unknown = [n for n in names if spec_for(n) is None]
    if unknown:
        raise UsageError(f"--register-only takes registry names; unknown: {', '.join(unknown)}. "
                         f"Registry names: {', '.join(MODELS)}")
    present, out = set(stored_models(store_path)), []
    for n in names:
        spec = spec_for(n)
        if spec.name in present:
            log(f"{spec.name}: already in {store_path}; left as it is")
            continue
        store.register_model(store_path, store.ModelInfo(
            name=spec.name, n_layers=spec.n_layers, n_heads=spec.n_heads, d_model=spec.d_model, d_head=spec.d_head,
            positional=spec.positional, source=spec.hub_id, revision="", family=spec.family, command=spec.command,
            n_kv_heads=spec.kv_heads, rotary_dim=spec.rotary_dim))
        out.append(spec.name)
    if out:
        log(f"registered as not yet computed in {store_path}: {', '.join(out)}")
    return out
