"""``python -m pipeline profiles ...`` and ``python -m pipeline list``.

The ``profiles`` options are generated from :class:`pipeline.run.options.RunOptions` by
``pipeline.cli_args.add_dataclass_arguments`` (one argparse option per field, its help from the field's
metadata). Errors a user can cause end with one line on stderr saying what to do, exit status 2, and the
store as it was: everything is checked before the first write (``pipeline.run``).

Every ``python -m pipeline`` command imports this module to build its parser, so it imports only the light
options module at the top; the run path, the store and the registry are imported when a command runs.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from dataclasses import fields

from pipeline.cli_args import add_dataclass_arguments
from pipeline.run.options import ClusterError, RevisionsFailed, RunOptions, UsageError
from pipeline.store.location import DEFAULT_HELP

EXIT_USER_ERROR = 2
EXIT_REVISIONS_FAILED = 1  # a run of revisions wrote the others: some failed (named), rerunning retries them
USER_OS_ERRORS = (errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT)

PROFILES_HELP = """\
Compute the profile (a, b, c, d) of every attention head of each model and write it to the store.

MODEL_OR_PATH is a local checkpoint folder (config.json + safetensors or pytorch_model.bin), a .gguf or
.onnx file, a registry name (see `python -m pipeline list`), or a Hugging Face Hub id (read from the
local Hugging Face cache when it is there, else only its config, index, shard headers and Q/K bytes are
range-read from the Hub, pinned to the commit the revision resolves to; with HF_HUB_OFFLINE=1 nothing is
fetched). A model is stored under the checkpoint's own name when it has one (GGUF general.name), else
its registry name, else its folder or file name, else the part of the Hub id after the slash, unless
--name says otherwise.

Everything (config, index, every layer's tensor names and shapes, the weights' values, the store, the
options) is checked before the store is touched. A model is then written layer by layer and marked
complete at the end: rerunning an interrupted command resumes where it stopped, and a complete model is
skipped unless --force is given. A model with more layers or heads than the store has room for grows
the store; nothing already in it is lost.

With --revisions SPEC, MODEL is a training run: a folder whose subfolders are checkpoints (checkpoint-N as
the Trainer writes them, or stepN), or a Hub id whose branches are its revisions (Pythia's step0 ...
step143000). Each chosen revision is a frame of one group of the store, runs/NAME (NAME: --name, else the
folder's or the Hub id's last part), which xarray opens as one Dataset with profile (step, layer, head, d,
coordinate): xr.open_zarr(STORE, group="runs/NAME"). Only the Q/K bytes of each revision are read, the
frames are written layer by layer like a model, a rerun computes only what is missing, a revision whose
Q/K equal an earlier one's is stored as its repeat, and a checkpoint folder's metrics.json is stored by
step. A revision that cannot be read fails alone: the others are written, and the command ends naming it
(exit status 1). `python -m pipeline list` shows each run's steps and what is missing.
"""

PROFILES_EPILOG = """\
examples:
  python -m pipeline profiles gpt2 pythia-70m-deduped
  python -m pipeline profiles ./my-checkpoint --name my-model --store out.zarr
  python -m pipeline profiles all-MiniLM-L6-v2 --fold-ln --name all-MiniLM-L6-v2-folded
  python -m pipeline profiles --seed-models --register-only   # list the seed models as not yet computed
  python -m pipeline profiles --registry llama                 # every registered model of the llama family
  python -m pipeline profiles --all-registered --register-only  # the whole registry, as not yet computed
  python -m pipeline profiles opt-1.3b --workers 2             # a pool of 2 local worker processes
  python -m pipeline profiles ./trainer-out --revisions all      # every checkpoint-N of a run, as runs/trainer-out
  python -m pipeline profiles EleutherAI/pythia-70m --revisions log:10 --workers 2
"""

STORE_HELP = f"Zarr store (default: {DEFAULT_HELP})"


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "profiles", help="profiles of every attention head of models into the store",
        description=PROFILES_HELP + families_help(), epilog=PROFILES_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_dataclass_arguments(p, RunOptions)
    p.add_argument("--registry", action="append", default=None, metavar="FAMILY",
                   help="add the registry's models of FAMILY (a family column of `python -m pipeline list`, e.g. "
                        "llama or gpt2); may be given several times")
    p.add_argument("--all-registered", action="store_true",
                   help="add every model of the registry (`python -m pipeline list`)")
    p.set_defaults(func=profiles_command)

    q = subparsers.add_parser(
        "list", help="the registry of known models and what the store holds",
        description="Print the registry of known models and, per model in the store, whether it is complete. "
        "Every written layer is checked against its checksums (read-only): a model with a garbled or missing "
        "chunk is shown damaged, with the command that repairs it. Then each run of revisions (runs/NAME): its "
        "frames, its steps first to last, and the frames not complete (`python -m pipeline verify` checks their "
        "layers against their checksums).",
    )
    q.add_argument("--store", default=None, help=STORE_HELP)
    q.set_defaults(func=list_command)


def families_help() -> str:
    """The supported families (config.json ``model_type``), from the family table, as a paragraph of --help."""
    import textwrap

    from pipeline.families import ADDING_A_FAMILY, supported

    text = (f"Supported families (config.json model_type): {supported(towered=False)}; and models of several "
            f"towers, {supported(towered=True)}, stored as one model per tower named NAME/TOWER (e.g. my-clip/vision; "
            "Whisper's cross-attention is left out: it pairs vectors of two different residual spaces). "
            f"Adding a family: {ADDING_A_FAMILY}.")
    return "\n" + textwrap.fill(text, width=104, break_on_hyphens=False) + "\n"


def user_errors() -> tuple[type[Exception], ...]:
    from pipeline.families import ArchitectureError
    from pipeline.registry.revisions import RevisionError
    from pipeline.sources.base import CheckpointError
    from pipeline.store import StoreError

    return ArchitectureError, CheckpointError, StoreError, UsageError, ClusterError, RevisionError, OSError


def fail(exc: BaseException) -> int:
    """One line on stderr (the message with its whitespace collapsed) and the user-error exit status."""
    if isinstance(exc, OSError) and not _is_user_os_error(exc):
        raise exc
    text = " ".join(str(exc).split())
    if isinstance(exc, OSError):
        where = f" ({exc.filename})" if exc.filename else ""
        text = (f"{exc.strerror or text}{where}: free space or make the store writable, then rerun the same command "
                "(layers already written are kept)")
    print(f"error: {text}", file=sys.stderr)
    return EXIT_USER_ERROR


def _is_user_os_error(exc: OSError) -> bool:
    return exc.errno in USER_OS_ERRORS


def registry_selection(families: list[str] | None, all_registered: bool) -> list[str]:
    """The registry names that ``--registry FAMILY`` (each of ``families``) and ``--all-registered`` add, in registry
    order without repeats; UsageError naming the registry's families for a family it has no model of."""
    from pipeline.registry.models import registered

    if all_registered:
        return list(registered())
    out: list[str] = []
    for family in families or ():
        try:
            out += [n for n in registered(family) if n not in out]
        except ValueError as exc:
            raise UsageError(f"--registry: {exc}") from None
    return out


def profiles_command(args) -> int:
    from pipeline.registry.models import SEED_MODELS
    from pipeline.run.entry import register_only, run

    opts = RunOptions(**{f.name: getattr(args, f.name) for f in fields(RunOptions)})
    try:
        selected = registry_selection(getattr(args, "registry", None), getattr(args, "all_registered", False))
        # the registry's models after those named, each once; the named ones as given (the run's checks see them)
        opts.models = [*opts.models, *(name for name in selected if name not in opts.models)]
        if opts.register_only and opts.revisions is None:  # with --revisions: refused by the run's own checks
            models = list(opts.models) + (list(SEED_MODELS) if opts.seed_models else [])
            if not models:
                raise UsageError("--register-only needs registry names, --seed-models, --registry FAMILY or "
                                 "--all-registered")
            register_only(models, opts.store)
        else:
            run(opts)
    except RevisionsFailed as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_REVISIONS_FAILED
    except user_errors() as exc:
        return fail(exc)
    return 0


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()  # noqa: E731
    return "\n".join([line(header), *map(line, rows)])


def list_command(args) -> int:
    from pipeline.registry.models import MODELS, SEED_MODELS
    from pipeline.run.destination import store_location
    from pipeline.store import Store
    from pipeline.store.demo import listed_stores

    rows = [[s.name + (" *" if s.name in SEED_MODELS else ""), s.family, s.n_layers, s.n_heads, s.d_model, s.d_head,
             s.positional + (f" {s.rotary_dim}/{s.d_head}" if s.rotary_dim and s.rotary_dim != s.d_head else ""),
             s.hub_id] for s in MODELS.values()]
    print("Registry (* = seed model; compute with `python -m pipeline profiles NAME`):")
    print(_table(rows, ["name", "family", "layers", "heads", "N", "n", "positional", "hub id"]))
    print()
    try:
        listed = listed_stores(args.store)  # the chosen store, then the demo when it is shown in its place
    except user_errors() as exc:
        return fail(exc)
    for n, store in enumerate(listed):
        if n:
            print()
        location = store_location(store.location)
        try:
            exists = "://" in location or os.path.exists(location)
            opened = Store.open(location, "r") if exists else None
            models = opened.checked_models() if opened is not None else []
            runs = opened.runs() if opened is not None else []
        except user_errors() as exc:
            return fail(exc)
        print_models(store, models)
        print_runs(runs, location)
    return 0


def _status(m) -> str:
    return ("damaged" if m.damaged else "complete" if m.complete
            else "not computed" if m.layers_done == 0 else f"{m.layers_done}/{m.n_layers} layers")


def print_models(store, models) -> None:
    """The table of ``models`` under ``store.heading`` (``pipeline.store.demo.Listed``), or its empty line: trained
    models, then the random baselines apart (``pipeline.schema.trained_and_baselines``), then a line per model that
    is damaged or lacks its statistics or spectra."""
    from pipeline.schema import trained_and_baselines

    if not models:
        print(store.empty)
        return
    trained, baselines = trained_and_baselines(models)
    print(store.heading)
    if trained:
        rows = [[m.name, _status(m), m.n_layers, m.n_heads, "yes" if m.layernorm_folded else "no", m.format or "-",
                 m.source, m.revision or "-"] for m in trained]
        print(_table(rows, ["model", "status", "layers", "heads", "fold-ln", "format", "source", "revision"]))
    if baselines:
        if trained:
            print()
        print("Random baselines (python -m pipeline baseline MODEL; report compares a model with its own):")
        rows = [[m.name, _status(m), m.baseline_of, m.baseline_kind, m.baseline_seed, m.n_layers, m.n_heads]
                for m in baselines]
        print(_table(rows, ["baseline", "status", "of", "kind", "seed", "layers", "heads"]))
    for m in models:
        note = m.damaged or m.statistics_note or m.spectra_note
        if note:
            print(f"{m.name}: {note}")


def print_runs(runs, location: str) -> None:
    """The table of the store's runs of revisions (``pipeline.schema.RunSummary``): frames, steps first to last,
    how many are complete, and the frames that are not (with their layers written)."""
    if not runs:
        return
    print()
    print(f"Runs of revisions (xr.open_zarr({location!r}, group='runs/NAME'); python -m pipeline profiles MODEL "
          "--revisions SPEC):")
    rows = []
    for r in runs:
        steps = f"{r.steps[0]} to {r.steps[-1]}" if r.steps else "-"
        missing = ", ".join(f"{f.revision} ({f.layers_done}/{f.n_layers} layers)" for f in r.missing) or "none"
        rows.append([r.name, len(r.frames), steps, f"{len(r.frames) - len(r.missing)}/{len(r.frames)}",
                     len(r.repeats), r.n_layers, r.n_heads, missing, r.source])
    print(_table(rows, ["run", "frames", "steps", "complete", "repeats", "layers", "heads", "missing", "source"]))
