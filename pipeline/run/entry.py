"""The entry points of a profiles run: :func:`run` (plan everything, then execute, then report),
:func:`run_profiles` (the same with keyword arguments) and :func:`register_only` (registry models registered as not
yet computed, no weights read)."""

from __future__ import annotations

import contextlib

from pipeline.registry.models import MODELS, spec_for
from pipeline.run.destination import check_store, open_store, store_location
from pipeline.run.executors import execute
from pipeline.run.frame_executors import run_revisions
from pipeline.run.options import RunOptions, UsageError
from pipeline.run.plan import plan_run
from pipeline.schema import ModelRow


def run(opts: RunOptions, log=print, client=None) -> list[str]:
    """Plan (everything validated), then execute; returns the names written (with ``--revisions``, the revisions
    whose frames are complete: ``pipeline.run.frame_executors.run_revisions``). ``client``: a dask client to run the
    tasks on (else the options' executor)."""
    if opts.revisions is not None:
        return run_revisions(opts, log, client)
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
                 workers: int | None = None, scheduler: str | None = None, client=None,
                 revisions: str | None = None) -> list[str]:
    """Profiles of every head of ``models`` into ``store_path`` (default: ``pipeline.store.default_store_path()``);
    returns the names written. Everything is validated before the store is touched (``pipeline.run``).
    ``revisions``: a SPEC (``pipeline.registry.revisions``): the revisions of the one model, as a run of frames."""
    opts = RunOptions(models=list(models), store=None if store_path is None else str(store_path), fold_ln=fold_ln,
                      name=name, force=force, revision=revision, quiet=not progress, workers=workers,
                      scheduler=scheduler, revisions=revisions)
    return run(opts, log=log, client=client)


def register_only(names: list[str], store_path=None, log=print) -> list[str]:
    """Register registry models as not yet computed (shapes from the registry, no weights read).

    Models already in the store are left as they are. Returns the names registered."""
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
        for name in spec.stored_names:  # a multi-tower model's rows are NAME/TOWER, as its profiles write them
            if name in present:
                log(f"{name}: already in {location}; left as it is")
                continue
            store.register(ModelRow.of(name, spec.shape, source=spec.hub_id, command=spec.command))
            out.append(name)
    if out:
        log(f"registered as not yet computed in {location}: {', '.join(out)}")
    return out
