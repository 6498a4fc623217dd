"""``python -m pipeline baseline``: random baselines of models' shapes, written through the one run path as model
entries of their own.

A baseline's plan (:func:`plan_baseline`) is a ``pipeline.run.plan.ModelPlan`` whose checkpoint is a
:class:`pipeline.sources.baseline.BaselineSource`: the run path's executors (in this process, ``--workers``,
``--scheduler``), its writers, its resumption (a rerun writes the layers not done, and adds missing statistics or
spectra) and its writer locks take it as they take a checkpoint's. Its row carries ``baseline_of``,
``baseline_kind`` and ``baseline_seed`` (``pipeline.schema.BASELINE_STATE``) and, as ``command``, the command that
recomputes it (:func:`baseline_command`).

What a baseline is made for (:func:`baseline_target`), in this order: a ``config.json`` file (that config); a
checkpoint folder, ``.gguf`` or ``.onnx`` file (its config, no weights read); a registry name (the registry's shape
with the family's defaults and its rotary base, ``baselines.config_for_shape``: the same config with or without
the weights, as ``--seed-models`` needs); a model of the store (the config of its checkpoint when its source is a
local path, else its stored shape with the family's defaults); else a Hub id (its config, from the Hugging Face
cache or the Hub).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from pipeline.analyses.baselines import config_for_shape
from pipeline.cli_args import command
from pipeline.families import towers
from pipeline.registry.models import SEED_MODELS, spec_for
from pipeline.run.destination import check_store, open_store, store_location
from pipeline.run.executors import execute
from pipeline.run.options import RunOptions, UsageError, check_options
from pipeline.run.plan import ModelPlan, bytes_needed, layers_to_do, tower_name
from pipeline.schema import ModelRow
from pipeline.sources.baseline import BaselineError, BaselineSource


def baseline_name(of: str, kind: str, seed: int) -> str:
    """The store name of a baseline by default: ``MODEL~KIND-seedS`` (e.g. ``gpt2~init-seed0``)."""
    return f"{of}~{kind}-seed{seed}"


def baseline_command(target: str, kind: str, seed: int, name: str | None = None) -> str:
    """The command that computes a baseline (stored as its row's ``command``)."""
    return command("python -m pipeline baseline", [target], {"kind": kind, "seed": seed, "name": name})


def _checkpoint_config(text: str) -> tuple[dict, str]:
    """(config, default store name) of a checkpoint folder, file or Hub id; no weights read."""
    from pipeline.registry.checkpoints import open_checkpoint, resolve

    ref = resolve(text)
    ckpt = open_checkpoint(ref)
    return dict(ckpt.config), ref.default_name(ckpt.own_name)


def baseline_target(text: str, store) -> tuple[dict, str]:
    """(the config, the name of the model) a baseline of ``text`` is made for (module docstring: the order).
    BaselineError for a model that is itself a baseline, or a stored shape no config can be written for."""
    path = Path(text).expanduser()
    if path.is_file() and path.suffix.lower() == ".json":
        try:
            config = json.loads(path.read_text())
        except ValueError as exc:
            raise BaselineError(f"{text} is not a JSON config ({exc})") from None
        if not isinstance(config, dict) or "model_type" not in config:
            raise BaselineError(f"{text} is not a Hugging Face config.json: it has no model_type")
        return config, os.path.basename(os.path.dirname(os.path.abspath(path))) or path.stem
    if path.exists():
        return _checkpoint_config(text)
    spec = spec_for(text)
    if spec is not None:
        return config_for_shape(spec, spec.rope_theta), spec.name
    if text in store.names():
        row = store.row(text)
        if row.is_baseline:
            raise BaselineError(f"{text!r} is itself a baseline (of {row.baseline_of!r}); give the model it is the "
                                "baseline of")
        if row.source and Path(row.source).expanduser().exists():  # a tower's entry NAME/tower: the model NAME
            return _checkpoint_config(row.source)[0], row.name.removesuffix(f"/{row.tower}" if row.tower else "")
        try:
            return config_for_shape(row.shape), row.name
        except ValueError as exc:
            raise BaselineError(f"no baseline of {text!r}: {exc}") from None
    return _checkpoint_config(text)


def baseline_towers(target: str, store) -> tuple[str, ...]:
    """The towers of the model a baseline of ``target`` is made for (``pipeline.families.towers``: CLIP's text and
    vision, T5's encoder and decoder, an image-text model's text tower), () for a model of one."""
    if not Path(target).expanduser().exists() and spec_for(target) is None and target in store.names() and \
            (tower := store.row(target).tower):
        return (tower,)  # a tower's entry of the store (baseline_target's order): that tower alone
    return towers(baseline_target(target, store)[0])


def plan_baseline(target: str, kind: str, seed: int, store, name: str | None = None, force: bool = False,
                  stored: list[str] | None = None, hold=None, tower: str | None = None) -> ModelPlan | None:
    """The plan of one baseline (None when the store holds it complete already). ``store`` is an open store,
    ``stored`` its model names (read once per run), ``hold(name)`` takes the model's writer lock. ``tower``: the
    tower of a model of several (:func:`baseline_towers`), the baseline of its store entry NAME/tower, stored as
    NAME/tower~KIND-seedS (``--name``: NAME/tower), as the profiles command stores each tower.

    Everything is checked before the store is touched: the config (a Layout), the kind's library (for ``init`` the
    model is built on the meta device and its first layer with a form initialised), and that ``name`` is not a
    trained model of the store."""
    config, of = baseline_target(target, store)
    of = tower_name(of, tower or "")
    source = BaselineSource(kind, seed, config, of, tower or "")
    source.check()
    default = baseline_name(of, kind, seed)
    name = tower_name(name, tower or "") if name else default
    if hold is not None:
        hold(name)
    stored = store.names() if stored is None else stored
    if name in stored and not store.row(name).is_baseline:
        raise UsageError(f"{name!r} is a trained model in the store; store the baseline under another --name")
    # the conventions of the model's layout, as its own row records them (a tower, a hybrid's layers without a form)
    row = ModelRow.of(name, source.layout.shape, source.provenance, source=target, revision=source.revision,
                      command=baseline_command(target, kind, seed, None if name == default else name),
                      baseline_of=of, baseline_kind=kind, baseline_seed=source.seed,
                      **source.layout.conventions().fields())
    todo = layers_to_do(store, row, stored, force)
    return None if todo is None else ModelPlan(source, source, source.layout, row, *todo)


def run_baselines(targets: list[str], kind: str = "init", seed: int = 0, store_path=None, name: str | None = None,
                  force: bool = False, seed_models: bool = False, progress: bool = True, workers: int | None = None,
                  scheduler: str | None = None, log=print) -> list[str]:
    """The baselines of ``targets`` (and of the seed models with ``seed_models``) into the store through the run
    path; returns the names written. Every baseline is planned (and its writer lock taken) before any is written."""
    targets = list(targets) + (list(SEED_MODELS) if seed_models else [])
    if not targets:
        raise UsageError("no model given: name at least one MODEL_OR_CONFIG, or --seed-models")
    opts = RunOptions(models=targets, store=store_path, name=name, force=force, quiet=not progress, workers=workers,
                      scheduler=scheduler)
    check_options(opts)
    location = store_location(store_path)
    check_store(location)
    store = open_store(location)
    stored = store.names()
    with contextlib.ExitStack() as locks:
        plans = []
        for t in targets:
            for tower in baseline_towers(t, store) or (None,):
                plan = plan_baseline(t, kind, seed, store, name, force, stored,
                                     hold=lambda n: locks.enter_context(store.writer(n)), tower=tower)
                if plan is None:
                    log(f"{tower_name(name or t, tower or '')}: its {kind} baseline (seed {seed}) is complete in "
                        f"{location}; skipped (add --force to recompute)")
                else:
                    plans.append(plan)
        if not plans:
            return []
        check_store(location, bytes_needed(plans))
        names = execute(opts, location, plans)
    for plan in plans:
        log(f"{plan.name}: the {kind} baseline of {plan.row.baseline_of} (seed {seed}), {plan.layout.n_layers} layers "
            f"x {plan.layout.n_heads} heads, complete in {location}")
    return names
