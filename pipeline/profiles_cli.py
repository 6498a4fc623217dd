"""``python -m pipeline profiles ...`` and ``python -m pipeline list``.

Errors a user can cause end with a message on stderr saying what to do, exit code 2, and the store as
it was (everything is checked before the first write; see pipeline.profile_tasks).
"""

from __future__ import annotations

import argparse
import sys

EXIT_USER_ERROR = 2

PROFILES_HELP = """\
Compute the profile (a, b, c, d) of every attention head of each model and write it to the store.

MODEL_OR_PATH is a local checkpoint folder (config.json + safetensors or pytorch_model.bin), a registry
name (see `python -m pipeline list`), or a Hugging Face Hub id (read from the local Hugging Face cache
when it is there, else only its config, index, shard headers and Q/K bytes are range-read from the Hub;
with HF_HUB_OFFLINE=1 nothing is fetched). A local folder is stored under its folder name unless
--name says otherwise; registry models under their registry name; other Hub ids under the part after
the slash.

A model is written layer by layer and marked complete at the end: rerunning an interrupted command
resumes where it stopped, and a complete model is skipped unless --force is given. A model with more
layers or heads than the store has room for grows the store; nothing already in it is lost.
"""

PROFILES_EPILOG = """\
examples:
  python -m pipeline profiles gpt2 pythia-70m-deduped
  python -m pipeline profiles ./my-checkpoint --name my-model --store out.zarr
  python -m pipeline profiles all-MiniLM-L6-v2 --fold-ln --name all-MiniLM-L6-v2-folded
  python -m pipeline profiles --seed-models --register-only   # list the 14 seed models as not yet computed
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "profiles", help="profiles of every attention head of models into the store",
        description=PROFILES_HELP, epilog=PROFILES_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("models", nargs="*", metavar="MODEL_OR_PATH", help="checkpoint folder, registry name or Hub id")
    p.add_argument("--seed-models", action="store_true", help="add the 14 seed models of the registry")
    p.add_argument("--store", default="store.zarr", help="Zarr store to write (default: store.zarr)")
    p.add_argument("--fold-ln", action="store_true",
                   help="fold the gain g of the layer norm whose output enters attention: L -> diag(g) L diag(g) "
                        "(pre-norm: the norm in front of attention; post-norm OPT/BERT: the previous layer's output "
                        "norm, or BERT's embedding norm for layer 0). Default: raw weights")
    p.add_argument("--name", help="name in the store (one model only; default: see above)")
    p.add_argument("--force", action="store_true", help="recompute a model the store already holds")
    p.add_argument("--revision", help="Hub branch, tag or commit to read (Hub ids only)")
    p.add_argument("--register-only", action="store_true",
                   help="only register registry models in the store as not yet computed (shapes from the "
                        "registry, the command that computes them; no weights read), for the dashboard")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--workers", type=int, metavar="N",
                   help="run the (model, layer) tasks on a new local dask cluster of N worker processes")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="run the tasks on an existing dask cluster (e.g. tcp://host:8786); the store must be a "
                        "path or fsspec URL that every worker can write")
    p.set_defaults(func=profiles_command)

    q = subparsers.add_parser(
        "list", help="the registry of known models and what the store holds",
        description="Print the registry of known models and, per model in the store, whether it is complete.",
    )
    q.add_argument("--store", default="store.zarr", help="Zarr store to read (default: store.zarr)")
    q.set_defaults(func=list_command)


def _user_errors() -> tuple[type[Exception], ...]:
    from pipeline.architectures import ArchitectureError
    from pipeline.checkpoints import CheckpointError
    from pipeline.distributed import ClusterError
    from pipeline.profile_tasks import UsageError
    from pipeline.store import StoreError

    return ArchitectureError, CheckpointError, StoreError, UsageError, ClusterError


def _fail(exc: BaseException) -> int:
    print(f"error: {exc}", file=sys.stderr)
    return EXIT_USER_ERROR


def profiles_command(args) -> int:
    from pipeline import profile_tasks
    from pipeline.models import SEED_MODELS

    models = list(args.models) + (list(SEED_MODELS) if args.seed_models else [])
    if not models:
        return _fail(profile_tasks.UsageError(
            "no model given: name at least one MODEL_OR_PATH, or --seed-models. `python -m pipeline list` shows "
            "the registry."))
    try:
        if args.register_only:
            profile_tasks.register_only(models, args.store)
        elif args.workers or args.scheduler:
            from pipeline.distributed import run_distributed

            run_distributed(models, args.store, workers=args.workers, scheduler=args.scheduler, fold_ln=args.fold_ln,
                            name=args.name, force=args.force, revision=args.revision, progress=not args.quiet)
        else:
            profile_tasks.run_profiles(models, args.store, fold_ln=args.fold_ln, name=args.name, force=args.force,
                                       revision=args.revision, progress=not args.quiet)
    except _user_errors() as exc:
        return _fail(exc)
    return 0


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()  # noqa: E731
    return "\n".join([line(header), *map(line, rows)])


def list_command(args) -> int:
    from pipeline import store
    from pipeline.models import MODELS, SEED_MODELS
    from pipeline.profile_tasks import stored_models

    rows = [[s.name + (" *" if s.name in SEED_MODELS else ""), s.family, s.n_layers, s.n_heads, s.d_model, s.d_head,
             s.positional + (f" {s.rotary_dim}/{s.d_head}" if s.rotary_dim and s.rotary_dim != s.d_head else ""),
             s.hub_id] for s in MODELS.values()]
    print("Registry (* = seed model; compute with `python -m pipeline profiles NAME`):")
    print(_table(rows, ["name", "family", "layers", "heads", "N", "n", "positional", "hub id"]))
    print()
    try:
        names = stored_models(args.store)
        rows = []
        for n in names:
            info = store.model_info(args.store, n)
            done = int(store.layers_done(args.store, n).sum())
            status = ("complete" if store.is_complete(args.store, n)
                      else "not computed" if done == 0 else f"{done}/{info.n_layers} layers")
            rows.append([n, status, info.n_layers, info.n_heads, "yes" if info.layernorm_folded else "no",
                         info.source, info.revision or "-"])
    except _user_errors() as exc:
        return _fail(exc)
    if not names:
        print(f"The store {args.store} holds no profiles yet.")
    else:
        print(f"The store {args.store}:")
        print(_table(rows, ["model", "status", "layers", "heads", "fold-ln", "source", "revision"]))
    return 0
