"""Planning a profiles run: every model opened and validated, and the store checked, before anything is written.

A plan (:class:`ModelPlan`) says what one model's run will do: the checkpoint opened at its pinned revision, its
Layout, the store row to register, the layers still to write, and whether stored values are forgotten first
(``--force``). :func:`plan_run` plans every model of the options; nothing is written.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from pipeline.families import ArchitectureError, check_layer, layout_from_config, qk_tensor_names
from pipeline.families import towers as towers_of
from pipeline.registry.checkpoints import open_checkpoint, resolve
from pipeline.registry.models import SEED_MODELS, compute_command, spec_for
from pipeline.run.destination import check_store, open_store, store_location
from pipeline.run.options import RunOptions, UsageError, check_options
from pipeline.run.tasks import LayerTask
from pipeline.schema import COUNT_FIELDS, ModelRow, bytes_per_head
from pipeline.store import StoreError


@dataclass
class ModelPlan:
    """What one model's run will do, decided before anything is written."""

    ref: object  # pipeline.registry.checkpoints.ModelRef: what the model was asked for as, resolved once
    ckpt: object  # pipeline.sources.base.Checkpoint
    layout: object  # pipeline.families.Layout
    row: object  # the store row to register
    todo: list[int]
    reset: bool  # forget the stored values first (--force on a stored model)

    @property
    def name(self) -> str:
        return self.row.name

    def tasks(self, store: str) -> list[LayerTask]:
        """The tasks of the layers to do, with one new run token."""
        run = uuid.uuid4().hex
        return [LayerTask(store, self.name, self.ref.text, self.ckpt.revision, layer, self.row.layernorm_folded, run,
                          self.layout.tower) for layer in self.todo]


class _ShapesOnly:
    """A checkpoint view whose tensors are zero-stride arrays of the stored shapes: ``check_layer`` on it checks
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
    view = _ShapesOnly(ckpt)
    for layer in range(layout.n_layers):
        check_layer(view, layout, layer, fold_ln)


def _conflict(store, row) -> tuple[bool, str | None]:
    """(already complete with the same values, conflict message or None) for a model already stored."""
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


def checkpoint_layout(ckpt, tower: str | None):
    """The checkpoint's Layout (of ``tower``); a config that is not a usable dict is an ArchitectureError."""
    try:
        return layout_from_config(ckpt.config, tower)
    except ArchitectureError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ArchitectureError(f"the config.json of {ckpt.source} is not a usable config ({type(exc).__name__}: "
                                f"{exc}); fix or re-download it.") from None


def tower_name(name: str, tower: str) -> str:
    """The store name of one tower of a multi-tower checkpoint stored as ``name``: ``NAME/tower``."""
    return f"{name}/{tower}" if tower else name


def plan_model(model_or_path: str, store, fold_ln: bool = False, name: str | None = None, force: bool = False,
               revision: str | None = None, stored: list[str] | None = None, hold=None,
               tower: str | None = None) -> ModelPlan | None:
    """Open and validate one checkpoint (its ``tower``, for a model of several); None if the store already holds
    exactly these values. :func:`plan_checkpoint` plans every tower of a checkpoint.

    ``store`` is an open store (:func:`open_store`); ``stored`` its model names (read once per run);
    ``hold(name)``, when given, takes the model's writer lock before its stored state is read."""
    ref = resolve(model_or_path)
    ckpt = open_checkpoint(ref, revision)
    return _plan(ref, ckpt, checkpoint_layout(ckpt, tower), store, fold_ln, name, force, stored, hold)


def plan_checkpoint(model_or_path: str, store, fold_ln: bool = False, name: str | None = None, force: bool = False,
                    revision: str | None = None, stored: list[str] | None = None,
                    hold=None) -> list[tuple[str, ModelPlan | None]]:
    """(store name, plan or None when already complete) for each model of one checkpoint: one, or one per tower of
    a multi-tower checkpoint (CLIP, Whisper), each stored as ``NAME/tower`` with its own shape. Every tower is
    validated before any is returned."""
    ref = resolve(model_or_path)
    ckpt = open_checkpoint(ref, revision)
    towers = towers_of(ckpt.config) if isinstance(ckpt.config, dict) else ()
    layouts = [checkpoint_layout(ckpt, t or None) for t in towers or ("",)]
    plans = [_plan(ref, ckpt, layout, store, fold_ln, name, force, stored, hold) for layout in layouts]
    base = name or ref.default_name(ckpt.own_name)
    return [(tower_name(base, layout.tower), plan) for layout, plan in zip(layouts, plans, strict=True)]


def _plan(ref, ckpt, layout, store, fold_ln, name, force, stored, hold) -> ModelPlan | None:
    """One model's plan (one tower's, where the checkpoint has several)."""
    spec = ref.spec
    if spec is not None and (bad := spec.mismatches(layout)):
        diff = ", ".join(f"{k}: registry {a!r}, config {b!r}" for k, (a, b) in bad.items())
        raise ArchitectureError(f"{ref.text!r} does not have the shape the registry gives {spec.name!r} ({diff}). "
                                "The checkpoint is not that model, or the registry in pipeline/registry/models.py "
                                "is wrong.")
    validate_checkpoint(ckpt, layout, fold_ln)
    default = ref.default_name(ckpt.own_name)
    base = name or default
    name = tower_name(base, layout.tower)
    if hold is not None:
        hold(name)
    other = spec_for(name) if spec is None else None  # the chosen name, when it is a registry name of another model
    if other is not None and other.name == name and (bad := other.mismatches(layout)):
        raise UsageError(f"{name!r} is the registry's name for {other.hub_id}, and {ref.text!r} has "
                         f"another shape ({', '.join(bad)} differ). Store it under another name with --name NEW.")
    command = compute_command(ref.text, None if base == default else base, fold_ln)
    row = ModelRow.of(name, layout.shape, ckpt.provenance, source=ckpt.source, revision=ckpt.revision,
                      command=command, layernorm_folded=fold_ln, **layout.conventions().fields())
    todo = layers_to_do(store, row, stored if stored is not None else store.names(), force)
    return None if todo is None else ModelPlan(ref, ckpt, layout, row, *todo)


def layers_to_do(store, row, stored: list[str], force: bool) -> tuple[list[int], bool] | None:
    """(the layers of ``row``'s model to write, whether its stored values are forgotten first), or None when the
    store holds it complete with the same values, the same conventions and every layer's values at d = 0.
    ``stored``: the store's model names. StoreError when it holds other values and ``force`` is not given."""
    if row.name not in stored or force:
        return list(range(row.n_layers)), row.name in stored
    complete, conflict = _conflict(store, row)
    if conflict:
        raise StoreError(conflict)
    # layers not written, and layers written without their values at d = 0 (head statistics, spectra of T and L)
    at_zero = store.layers_with_statistics(row.name) & store.layers_with_spectra(row.name)
    todo = [int(i) for i in np.flatnonzero(~at_zero)]
    if complete and not todo and store.row(row.name).conventions == row.conventions:
        return None  # (a complete model whose conventions are not recorded is registered again: no layer is written)
    return todo, False


def check_weights(plan: ModelPlan, progress: bool = True) -> None:
    """Check every Q/K tensor (and gain) the plan will use for NaN/Inf, raising CheckpointError naming the tensor.

    ``Checkpoint.check_finite``: safetensors files are tested on their stored bits without converting
    them (a fifth of a compact read's time on fp16); other formats are read compact once. Hub checkpoints
    are not read twice (that would double the bytes fetched): each layer is checked as it is read."""
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
    return sum(len(p.todo) * p.layout.n_heads * bytes_per_head(p.layout.d_head) for p in plans)


def plan_run(opts: RunOptions, log=print, locks: contextlib.ExitStack | None = None) -> tuple[str, list[ModelPlan]]:
    """Check the options, open and validate every model and the store; nothing is written.

    With ``locks``, each model's writer lock is taken as soon as its name is known and stays in ``locks``."""
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
        for name, plan in plan_checkpoint(m, store, opts.fold_ln, opts.name, opts.force, opts.revision, stored, hold):
            if plan is None:
                log(f"{name}: already complete in {location}; skipped (add --force to recompute)")
            else:
                plans.append(plan)
    for plan in plans:
        check_weights(plan, progress=not opts.quiet)
    check_store(location, bytes_needed(plans))
    return location, plans

