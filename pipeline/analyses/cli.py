"""``python -m pipeline report`` and ``python -m pipeline baseline``: their parsers, and the report's command.

:func:`register` adds both parsers the way every command module of ``pipeline/__main__.py`` does. ``report`` runs
(:func:`run_report`: it reads the store and prints :mod:`pipeline.analyses.report`); ``baseline`` is its parser
alone: writing a baseline into the store goes through the run path and the store's model entries.
"""

from __future__ import annotations

import argparse
import sys

from pipeline.analyses.baselines import KIND_HELP, KINDS

REPORT_HELP = """\
Print the paper's summaries of one model from the store: the pairing law (the beta law of the pairing score P and
its Kolmogorov-Smirnov p, the bound 1 - (1 - r)/sqrt(1 + r^2) at r = min(rho, 1/rho) with its correlation with P
and the share of heads where it holds, the gap, rho, and the balance count n_pos = n_neg), the effective-rank
counts, the type counts as the type rule's thresholds move, k-means clusters of the spectra with their silhouettes
and their agreement with the types, the goodness of fit of the spectra (generalised gamma against lognormal), the
spectral geometry of T when the store holds its spectrum, and with --baseline, the trained heads against random
ones (medians of symmetric_energy, pairing and rho, and the trained heads' percentiles among the baseline's).

--baseline takes a model of the store (its baseline entry) or a kind: iid or init, computed here at d = 0 from the
model's shape with --seed (for init, by transformers' own initialisation of each attention module).

Exit status: 0, or 2 on bad input (no store, an unknown model, a baseline that cannot be made).

examples:
  python -m pipeline report all-MiniLM-L6-v2
  python -m pipeline report SmolLM2-135M-Instruct --baseline init --json > smollm2.json
"""

BASELINE_HELP = """\
Make a random baseline of a model: heads of the model's own shape, profiled at every offset like trained ones and
stored as their own model entry, tagged with the model they are the baseline of, their kind and their seed.

kinds:
""" + "".join(f"  {k:<5} {v}\n" for k, v in KIND_HELP.items()) + """
MODEL_OR_CONFIG is a model of the registry or of the store, a checkpoint folder or a config.json; no weights are
read. --seed-models makes the baselines of the 14 seed models' shapes from the registry.

examples:
  python -m pipeline baseline gpt2 --kind init --seed 0
  python -m pipeline baseline --seed-models --kind init
"""


def register(sub) -> None:
    """Add the ``report`` and ``baseline`` parsers to ``sub`` (the subparsers of ``python -m pipeline``)."""
    p = sub.add_parser("report", help="the paper's summaries of one model, as text or JSON",
                       description=REPORT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="MODEL", help="a model of the store")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of text")
    p.add_argument("--baseline", default=None, metavar="NAME|iid|init",
                   help="compare with this stored model, or with a baseline of this kind computed at d = 0")
    p.add_argument("--seed", type=int, default=0, help="seed of a computed baseline and of the clusters (default 0)")
    p.add_argument("--store", default=None,
                   help="Zarr store (path or fsspec URL; default: $HEADGEOMETRY_STORE, else the committed store.zarr)")
    p.set_defaults(func=run_report)

    b = sub.add_parser("baseline", help="random heads of a model's shape, stored as their own entry",
                       description=BASELINE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    b.add_argument("model", nargs="?", metavar="MODEL_OR_CONFIG", help="whose shape (see above)")
    b.add_argument("--kind", choices=KINDS, default="init", help="iid or init (default init)")
    b.add_argument("--seed", type=int, default=0, help="the baseline's seed (default 0)")
    b.add_argument("--seed-models", action="store_true", help="the baselines of the 14 seed models' shapes")
    b.add_argument("--name", default=None, help="store name of the baseline (default: MODEL, KIND and SEED)")
    b.add_argument("--store", default=None,
                   help="Zarr store (path or fsspec URL; default: $HEADGEOMETRY_STORE, else the committed store.zarr)")


def _baseline(store, ds, args):
    """The HeadData of --baseline: a stored model, or a baseline computed at d = 0 from the model's row."""
    from pipeline.analyses import baselines, head_data

    if args.baseline in KINDS:
        row = store.row(args.model)
        config = baselines.config_for_shape(row.shape)
        heads = baselines.baseline_heads(config, args.baseline, args.seed)
        print(f"computing the {args.baseline} baseline of {args.model} (seed {args.seed}) at d = 0 ...",
              file=sys.stderr)
        return baselines.head_data(heads, f"{args.model} ({args.baseline}, seed {args.seed})")
    return head_data.from_dataset(ds, args.baseline)


def run_report(args: argparse.Namespace) -> int:
    """Read the store, print the report; errors are one line on stderr with exit status 2."""
    from pipeline.analyses import head_data
    from pipeline.analyses.report import format_text, report, to_json
    from pipeline.store import Store, StoreError

    try:
        store = Store.open(args.store, mode="r")
        ds = store.dataset("profiles")
        data = head_data.from_dataset(ds, args.model)
        base = None if args.baseline is None else _baseline(store, ds, args)
        rep = report(data, base, seed=args.seed)
    except (StoreError, KeyError, ValueError, OSError) as exc:
        print(f"error: {exc.args[0] if isinstance(exc, KeyError) and exc.args else exc}", file=sys.stderr)
        return 2
    print(to_json(rep) if args.json else format_text(rep))
    return 0
