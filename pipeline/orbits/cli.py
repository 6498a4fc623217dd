"""``python -m pipeline orbits``: train the 32-head layer on addition mod 24, find its orbits, write the store."""

from __future__ import annotations

import argparse
import os

from ..store.location import DEFAULT_HELP
from .malloc import keep_freed_memory
from .runs import FINDER, MODEL_NAME, NEAR_TOL, RANK_ORDER, store_run, train_run

DESCRIPTION = """\
Train a single 32-head self-attention layer (embedding W_E -> attention -> unembedding W_U, no
positions) on (x1, x2, x3) -> (x2+x3, x3+x1, x1+x2) mod 24 with cross-entropy plus an exact
equivariance penalty (shifting all inputs by s must shift all outputs by 2s), then look for orbits
of the shift group C_24 among its heads and write the movie to the store's `orbits` group.

What it writes:
  store `orbits` group   frames of every head in four Fourier panels, metrics per frame, the final
                         24x24 QK (M) and OV (R) circuits, the orbits found and their check per shift
  store `profiles` group one more model (--model-name, default orbits-c24): the heads' bilinear forms
                         W_K^T W_Q in the residual space
  --save-run PATH        the whole run (frames, weights) as .npz, to rewrite the store later

Examples:
  python -m pipeline orbits --epochs 300                     # a quick look (300 AdamW epochs)
  python -m pipeline orbits --recipe long --seed 9           # the stored run (long-s9-p650)
  python -m pipeline orbits --from-run RUN.npz               # store a run saved with --save-run, no training
  python -m pipeline orbits search --seeds 0-255 --recipe long --device cuda --store S.zarr   # see search --help

Every Config field is a flag (the defaults below are the "base" recipe's; --recipe sets others, and flags
given change the recipe). The store records the run's seed, recipe, commit and the command that made it.
The sweep behind docs/orbits_sweep.md is `python -m pipeline.orbits.sweep --help`.
"""

SEARCH_DESCRIPTION = f"""\
Train many seeds of a recipe (or of a grid of recipes) in batches on one device or a dask cluster, analyse
every run (orbit finder at 2/5/10/20%, frequency families), rank them, polish the best of each batch with
the recipe's LBFGS steps, and write the store's `orbits_search` table after every batch. A killed search
resumes: runs already in the table are skipped. When the best run ranks above the run in the store's
`orbits` group ({RANK_ORDER}), it is
retrained with `train` (the movie's frames) and written there, with its seed, recipe and commit.

Examples:
  python -m pipeline orbits search --seeds 0-255 --recipe long --device cuda --batch-size 256 --store S.zarr
  python -m pipeline orbits search --seeds 0-15 --recipe long --epochs 1500 --grid init_scale=0.5,1,2 \\
      --device cpu --time-budget 60 --store S.zarr
  python -m pipeline orbits search --seeds 0-63 --scheduler tcp://HOST:8786 --store S.zarr
"""


def add_config_arguments(parser: argparse.ArgumentParser, search: bool = False) -> None:
    """One flag per Config field (``pipeline.cli_args``), grouped by what it sets.

    Flags default to "not given" (the recipe's value applies); the help shows the base recipe's default.
    ``search``: leave out the fields marked ``search=False`` (the seed: the search takes a range).
    """
    from ..cli_args import add_dataclass_arguments
    from .config import Config

    def include(f) -> bool:
        return f.metadata.get("cli", True) is not False and not (search and f.metadata.get("search", True) is False)

    add_dataclass_arguments(parser, Config, given_only=True, include=include, section=_section)


def _section(f) -> str:
    if f.name in ("n_heads", "d_model", "d_head", "init_scale", "learn_embed", "onehot"):
        return "model"
    if f.name.startswith(("penalty", "ramp", "context")):
        return "equivariance penalty"
    return "movie frames" if f.name.startswith("frame") else "task and training"


def config_from_args(args, parser: argparse.ArgumentParser | None = None):
    """The Config of --recipe with the Config flags given; a bad setting is a usage error (exit 2)."""
    from dataclasses import fields

    from .config import Config, recipe_config

    given = {f.name: getattr(args, f.name) for f in fields(Config) if hasattr(args, f.name)}
    for k in ("context_lengths", "penalty_scales"):
        if k in given:
            given[k] = tuple(given[k])
    cfg = recipe_config(args.recipe, **given)
    bad = cfg.problems()
    if bad:
        _usage_error(parser, "; ".join(bad))
    return cfg


def _usage_error(parser, msg: str):
    if parser is not None:
        parser.error(msg)  # exits 2 with the usage line
    raise SystemExit(msg)


def register(subparsers) -> None:
    from .config import GRID_KEYS, RECIPES

    p = subparsers.add_parser("orbits", help="train the 32-head layer on addition mod 24 and find its C_24 orbits",
                              description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", default=None,
                   help=f"Zarr store to write (default: {DEFAULT_HELP})")
    p.add_argument("--from-run", default=None, metavar="NPZ",
                   help="write this saved run (from --save-run or the sweep) instead of training")
    p.add_argument("--save-run", default=None, metavar="NPZ", help="also save the run's frames and weights here")
    p.add_argument("--no-store", action="store_true", help="train and report only; write nothing to the store")
    p.add_argument("--model-name", default=MODEL_NAME, help="name of the layer in the profiles group")
    p.add_argument("--recipe", default="base", choices=sorted(RECIPES),
                   help="named settings the Config flags start from: " + "; ".join(
                       f"{k}: {v or 'the defaults'}" for k, v in RECIPES.items()))
    add_config_arguments(p)
    g = p.add_argument_group("orbit finder")
    g.add_argument("--tol", type=float, default=FINDER["tol"],
                   help=f"largest matching error inside an orbit (default {FINDER['tol']})")
    g.add_argument("--dead-tol", type=float, default=FINDER["dead_tol"],
                   help="heads with ||R|| below this x the largest are dead")
    g.add_argument("--merge-tol", type=float, default=FINDER["merge_tol"],
                   help="heads with M this close (relative) are merged")
    g.add_argument("--near-tol", type=float, default=NEAR_TOL,
                   help="looser tolerance for the near-orbits also stored (variable near_orbit; "
                   f"default {NEAR_TOL:.2f}); they choose the panels when no orbit closes within --tol")
    p.set_defaults(func=run, parser=p)
    sub = p.add_subparsers(dest="orbits_command", metavar="search")
    s = sub.add_parser("search", help="train many seeds in batches, rank their orbits, write the orbits_search table",
                       description=SEARCH_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("--store", default=argparse.SUPPRESS,
                   help=f"Zarr store for the table (default: {DEFAULT_HELP})")
    s.add_argument("--seeds", default=None, metavar="A-B|A,B,...",
                   help="the seeds: a range 0-255 (inclusive) or a comma list (required unless --merge)")
    s.add_argument("--merge", action="append", default=[], metavar="STORE",
                   help="train nothing: add the orbits_search rows of another store (e.g. a scratch or another "
                   "machine's search) to --store's table (repeatable), then store the best run as below")
    s.add_argument("--recipe", default="long", choices=sorted(RECIPES), help="named settings (default long)")
    s.add_argument("--grid", action="append", default=[], metavar="FIELD=V1,V2",
                   help="also vary a Config setting (repeatable; every combination runs; runs are named "
                   "RECIPE+FIELD=V-sSEED): " + ", ".join(GRID_KEYS) + "; context_lengths and penalty_scales take "
                   "V1/V2 lists, e.g. context_lengths=4/8,4/16; split takes orbit,random; qk_bias takes true,false")
    s.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="auto: CUDA if present")
    s.add_argument("--batch-size", type=int, default=32, help="seeds trained at once (default 32; 256 on an H200)")
    s.add_argument("--time-budget", type=float, default=None, metavar="MIN",
                   help="start no batch after this many minutes (default: no limit)")
    s.add_argument("--polish-top", type=int, default=2,
                   help="polish this many best runs of each batch with the recipe's LBFGS steps (default 2)")
    s.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="dask.distributed scheduler address (tcp://host:8786): batches run on its workers")
    s.add_argument("--no-store-best", action="store_true",
                   help="do not replace the orbits group even when the best run ranks above the stored one")
    s.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    add_config_arguments(s, search=True)
    s.set_defaults(func=run_search, parser=s)


def parse_seeds(text: str) -> list[int]:
    """'0-255' (inclusive) or '1,5,9' (or a mix: '0-3,9') -> sorted distinct seeds; ValueError if malformed."""
    seeds = set()
    for part in text.split(","):
        part = part.strip()
        lo, dash, hi = part.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise ValueError(f"--seeds {text!r}: give a range such as 0-255 or a list such as 1,5,9")
        a, b = int(lo), int(hi) if dash else int(lo)
        if b < a:
            raise ValueError(f"--seeds {text!r}: the range {part} is empty")
        seeds.update(range(a, b + 1))
    return sorted(seeds)


def parse_grid(items: list[str]) -> dict[str, list]:
    from dataclasses import fields

    from .config import GRID_KEYS, Config

    base = Config()
    grid = {}
    for item in items:
        key, eq, values = item.partition("=")
        if not eq or key not in GRID_KEYS or not values:
            raise ValueError(f"--grid {item!r}: give FIELD=V1,V2 with FIELD one of {', '.join(GRID_KEYS)}")
        default = getattr(base, key)
        try:
            if isinstance(default, tuple):
                conv = int if key == "context_lengths" else float
                vals = [tuple(conv(x) for x in v.split("/")) for v in values.split(",")]
            elif isinstance(default, bool):
                words = {"true": True, "1": True, "false": False, "0": False}
                vals = [words[v.lower()] for v in values.split(",")]
            elif isinstance(default, str):
                vals = values.split(",")
                choices = dict((f.name, f.metadata.get("choices")) for f in fields(Config))[key]
                if choices and not set(vals) <= set(choices):
                    raise ValueError
            else:
                conv = int if isinstance(default, int) else float
                vals = [conv(v) for v in values.split(",")]
        except (ValueError, KeyError):
            raise ValueError(f"--grid {item!r}: the values do not parse as {key}'s type") from None
        grid[key] = vals
    return grid


def run_search(args) -> int:
    from ..store import StoreError
    from .search import distribution, grid_recipes, search

    parser = args.parser
    if args.merge:
        return merge_search(args)
    if args.seeds is None:
        parser.error("give --seeds (a range such as 0-255 or a list such as 1,5,9), or --merge STORE")
    try:
        seeds = parse_seeds(args.seeds)
        grid = parse_grid(args.grid)
    except ValueError as exc:
        parser.error(str(exc))
    cfg = config_from_args(args, parser)
    recipes = grid_recipes(args.recipe, cfg, grid)
    for r in recipes:
        if r.config.problems():
            parser.error(f"grid point {r.label}: " + "; ".join(r.config.problems()))
    if args.batch_size < 1 or args.polish_top < 0:
        parser.error("--batch-size must be at least 1 and --polish-top at least 0")
    from .batch import resolve_device

    if not args.scheduler:  # with a scheduler the workers' devices count, not this machine's
        try:
            resolve_device(args.device)
        except ValueError as exc:
            parser.error(str(exc))
    store_path = _store_path(args.store)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    command = search_command(args)
    budget = None if args.time_budget is None else 60 * args.time_budget
    keep_freed_memory()  # this process trains (and its dask workers set it themselves: search.batch_on_worker)
    try:
        rows = search(store_path, recipes, seeds, device=args.device, batch_size=args.batch_size,
                      time_budget=budget, polish_top=args.polish_top, scheduler=args.scheduler,
                      command=command)
    except ValueError as exc:  # a bad --scheduler address
        parser.error(str(exc))
    except (OSError, StoreError) as exc:
        raise SystemExit(f"python -m pipeline orbits search: cannot write the store {store_path!r}: {exc} "
                         "(runs already in its table are kept)") from None
    print(distribution(rows))
    if not args.no_store_best and rows:
        from .search import store_best

        print(store_best(store_path, rows, model_name=MODEL_NAME))
    return 0


def merge_search(args) -> int:
    from .search import distribution, merge_tables, store_best

    for src in args.merge:
        if not os.path.exists(os.path.join(src, "zarr.json")):
            args.parser.error(f"--merge {src!r} is not a Zarr store")
    store_path = _store_path(args.store)
    rows = merge_tables(store_path, args.merge, "python -m pipeline orbits search --merge STORE")
    print(distribution(rows))
    if not args.no_store_best and rows:
        print(store_best(store_path, rows, model_name=MODEL_NAME))
    return 0


def search_command(args) -> str:
    """The search as one command line, from the parsed options (what the table's ``command`` attribute says)."""
    import shlex
    from dataclasses import fields

    from ..cli_args import flags
    from .config import Config

    parts = ["python -m pipeline orbits search", f"--seeds {args.seeds}", f"--recipe {args.recipe}"]
    parts += flags({f.name: getattr(args, f.name) for f in fields(Config) if hasattr(args, f.name)})
    parts += [f"--grid {shlex.quote(g)}" for g in args.grid]
    parts += [f"--device {args.device}", f"--batch-size {args.batch_size}", f"--polish-top {args.polish_top}"]
    if args.time_budget is not None:
        parts.append(f"--time-budget {args.time_budget:g}")
    if args.scheduler:
        parts.append(f"--scheduler {args.scheduler}")
    return " ".join(parts)


def _store_path(given: str | None) -> str:
    if given:
        return given
    from ..store import default_store_path

    return default_store_path()


def run(args) -> int:
    if args.from_run:
        from .store_io import load_run

        if not os.path.exists(args.from_run):
            args.parser.error(f"--from-run {args.from_run!r} does not exist; give an .npz saved by --save-run "
                              "or by the sweep")
        run_ = load_run(args.from_run)
    else:
        keep_freed_memory()  # this process trains: its malloc keeps freed memory (pipeline.orbits.malloc)
        run_ = train_run(config_from_args(args, args.parser), args.save_run)
    finder = {"tol": args.tol, "dead_tol": args.dead_tol, "merge_tol": args.merge_tol}
    for line in store_run(run_, None if args.no_store else _store_path(args.store), finder, args.near_tol,
                          args.model_name):
        print(line)
    return 0
