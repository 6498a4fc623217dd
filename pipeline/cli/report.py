"""``python -m pipeline report`` and ``python -m pipeline baseline``: their parsers and commands.

:func:`register` adds both parsers the way every command module of ``pipeline/__main__.py`` does. ``report`` reads
the store and prints :mod:`pipeline.analyses.report` (:func:`run_report`), for a model or a run's frame (``--step``),
or :mod:`pipeline.analyses.over_steps` for a run (``--over-steps``); ``baseline`` writes baselines through the
run path (:func:`run_baseline`, :mod:`pipeline.analyses.baseline_run`).
"""

from __future__ import annotations

import argparse
import sys

from pipeline.sources.baseline import KIND_HELP, KINDS, baseline_heads
from pipeline.store.location import DEFAULT_HELP

REPORT_HELP = """\
Print the paper's summaries of one model from the store: the pairing law (the beta law of the pairing score P and
its Kolmogorov-Smirnov p, the bound 1 - (1 - r)/sqrt(1 + r^2) at r = min(rho, 1/rho) with its correlation with P
and the share of heads where it holds, the gap, rho, and the balance count n_pos = n_neg), the effective-rank
counts, the type counts as the type rule's thresholds move, k-means clusters of the spectra with their silhouettes
and their agreement with the types, the goodness of fit of the spectra (generalised gamma against lognormal), the
spectral geometry of T when the store holds its spectrum, and the trained heads against random ones (medians of
symmetric_energy, pairing and rho, and the trained heads' percentiles among the baseline's).

The baseline is the model's stored baseline entry (`python -m pipeline baseline MODEL` makes one; the
library-initialisation one first, then the i.i.d. one, the lowest seed first), or the one --baseline names: a model
of the store, or a kind (iid or init): the model's stored baseline of that kind and --seed, else one computed here at
d = 0 from the model's shape with --seed (for init, by transformers' own initialisation of each attention module).
Without any, the report says how to make one.

A run of checkpoints (`python -m pipeline profiles MODEL --revisions SPEC --name RUN` writes the group runs/RUN):
  --step S      the report above for the run's frame of training step S. Its baseline is the run's own frame of
                step 0 when the run has one: the first frame of a run that starts at initialisation is its own
                random baseline (the report says so); --baseline a model of the store or a kind (computed at d = 0
                from the run's shape) instead. The report of step 0 itself has no baseline.
  --over-steps  one line per frame, in step order: the type counts at d = 0 (Type I+ / II / I- by the project's rule,
                imbalance > 0.2 and c + d > 0.01, as the tetrahedron colours them), the medians of symmetric_energy,
                pairing and rho, the beta law of the pairing score (a, b), and the mean displacement of the heads
                from the first frame: the mean over heads of the Euclidean distance between a head's (a, b, c, d)
                at d = 0 in that frame and in the run's first frame. When the run starts at initialisation (step 0),
                that first frame is its own random baseline and the displacement is the distance from it; the
                output says which step the first frame is. A frame not complete is listed without numbers.

Exit status: 0, or 2 on bad input (no store, an unknown model, run or step, a baseline that cannot be made).

examples:
  python -m pipeline report all-MiniLM-L6-v2
  python -m pipeline report SmolLM2-135M-Instruct --baseline init --json > smollm2.json
  python -m pipeline report induction-s0 --step 500
  python -m pipeline report induction-s0 --over-steps --json > induction-s0.json
"""

BASELINE_HELP = """\
Make a random baseline of a model: heads of the model's own shape, profiled at every offset like trained ones
(with their statistics and the spectra of T and L at d = 0) and stored as their own model entry, tagged with the
model they are the baseline of, their kind and their seed. `python -m pipeline list` shows baselines apart from
trained models; `python -m pipeline report MODEL` compares the model with its stored baseline.

kinds:
""" + "".join(f"  {k:<5} {v}\n" for k, v in KIND_HELP.items()) + """
MODEL_OR_CONFIG is, in this order: a config.json file; a checkpoint folder, .gguf or .onnx file (its config; no
weights are read); a registry name (the registry's shape with the family's defaults and its rotary base: no weights
needed); a model of the store (the config of its checkpoint folder or file when that is here, else its stored shape);
else a Hub id (its config.json only). The baseline is stored as MODEL~KIND-seedS unless --name says otherwise, and
its stored command is the command that recomputes it. It goes through the profiles run path: an interrupted run
resumes, --workers and --scheduler spread its layers, --force recomputes a complete one.

Seeding: layer l of seed s is drawn alone (iid: numpy's default_rng([s, l]); init: torch.manual_seed of a seed made
from (s, l) before the attention module of layer l is initialised), so a baseline is reproducible by seed and a
24B shape never needs the whole model in memory.

--seed-models makes the baselines of the 14 seed models' shapes from the registry, without any weights.

Exit status: 0, or 2 on bad input (an unknown model, a family without a config or an initialisation here, a store
that cannot be written).

examples:
  python -m pipeline baseline all-MiniLM-L6-v2                  # the init baseline, seed 0
  python -m pipeline baseline gpt2 --kind iid --seed 3
  python -m pipeline baseline ./my-checkpoint/config.json --name my-model~init
  python -m pipeline baseline --seed-models --kind init --workers 2
"""


def register(sub) -> None:
    """Add the ``report`` and ``baseline`` parsers to ``sub`` (the subparsers of ``python -m pipeline``)."""
    p = sub.add_parser("report", help="the paper's summaries of one model, as text or JSON",
                       description=REPORT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="MODEL|RUN", help="a model of the store, or with --step or --over-steps a run "
                   "(its group runs/RUN)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--step", type=int, default=None, metavar="S",
                       help="the report of the run's frame of training step S (baseline: the run's step 0, its own "
                       "random baseline, when it has one)")
    which.add_argument("--over-steps", action="store_true",
                       help="per frame of the run: type counts at d = 0, medians of symmetric_energy, pairing and rho, "
                       "the pairing law's beta a and b, the heads' mean displacement from the first frame (Euclidean "
                       "distance of (a, b, c, d) at d = 0; the first frame is step 0, the run's own random "
                       "baseline, when the run starts at initialisation)")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of text")
    p.add_argument("--baseline", default=None, metavar="NAME|iid|init",
                   help="compare with this stored model, or with the model's baseline of this kind (stored, else "
                   "computed at d = 0); default: the model's stored baseline")
    p.add_argument("--seed", type=int, default=0, help="seed of a computed baseline and of the clusters (default 0)")
    p.add_argument("--store", default=None, help=f"Zarr store (path or fsspec URL; default: {DEFAULT_HELP})")
    p.set_defaults(func=run_report)

    b = sub.add_parser("baseline", help="random heads of a model's shape, stored as their own entry",
                       description=BASELINE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    b.add_argument("models", nargs="*", metavar="MODEL_OR_CONFIG", help="whose shape (see above)")
    b.add_argument("--kind", choices=KINDS, default="init", help="iid or init (default init)")
    b.add_argument("--seed", type=int, default=0, help="the baseline's seed, a non-negative integer (default 0)")
    b.add_argument("--seed-models", action="store_true", help="the baselines of the 14 seed models' shapes")
    b.add_argument("--name", default=None, help="store name of the baseline (one model only; default: "
                   "MODEL~KIND-seedSEED)")
    b.add_argument("--store", default=None, help=f"Zarr store to write (default: {DEFAULT_HELP})")
    b.add_argument("--force", action="store_true", help="recompute a baseline the store already holds complete")
    b.add_argument("--workers", type=int, default=None, metavar="N",
                   help="run the (model, layer) tasks on a pool of N local worker processes")
    b.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run the tasks on an existing dask cluster (e.g. tcp://host:8786)")
    b.add_argument("--quiet", action="store_true", help="no progress bars")
    b.set_defaults(func=run_baseline)


def _baseline(store, ds, args):
    """(the HeadData of the baseline, or None, and what to say when there is none): --baseline as the help says."""
    from pipeline.analyses import baselines, head_data
    from pipeline.analyses.baseline_run import baseline_command, baseline_target
    from pipeline.schema import baselines_of

    rows = store.models()
    row = next(r for r in rows if r.name == args.model)
    stored = [r for r in baselines_of(rows, args.model) if r.computed]
    if args.baseline in KINDS:
        stored = [r for r in stored if r.baseline_kind == args.baseline and r.baseline_seed == args.seed]
        if not stored:
            # the config `baseline MODEL` takes: its checkpoint's where the source is at hand (latent attention,
            # a tower, what no shape states), else its shape's
            config = baselines.config_for_shape(row.shape) if row.is_baseline else baseline_target(args.model,
                                                                                                  store)[0]
            heads = baseline_heads(config, args.baseline, args.seed, row.tower or None)
            print(f"computing the {args.baseline} baseline of {args.model} (seed {args.seed}) at d = 0 ...",
                  file=sys.stderr)
            return baselines.head_data(heads, f"{args.model} ({args.baseline}, seed {args.seed})"), ""
    elif args.baseline is not None:
        return head_data.from_dataset(ds, args.baseline), ""
    if stored:
        return head_data.from_dataset(ds, stored[0].name), ""
    if row.is_baseline:
        return None, ""
    try:
        baselines.config_for_shape(row.shape)
    except ValueError:  # no Hugging Face config of its family (the orbit experiment's layer): no baseline to make
        return None, (f"no baseline of {args.model}: its family {row.family!r} has no transformers config to "
                      "initialise or shape a baseline from")
    return None, (f"no baseline of {args.model} in the store; make one with "
                  f"`{baseline_command(args.model, 'init', 0)}`")


def _run_baseline(store, run, args):
    """(the HeadData of a run step's baseline, or None, what it is, what to say when there is none): --baseline's
    model or kind, else the run's own frame of step 0 (module docstring of pipeline.analyses.over_steps)."""
    from pipeline.analyses import baselines, head_data
    from pipeline.analyses.over_steps import INITIALISATION, first_note
    from pipeline.schema import SHAPE_FIELDS, ModelShape

    name = run.attrs["run_name"]
    if args.baseline in KINDS:
        shape = ModelShape(**{f: run.attrs[f] for f in SHAPE_FIELDS})
        config = baselines.config_for_shape(shape)
        heads = baseline_heads(config, args.baseline, args.seed)
        print(f"computing the {args.baseline} baseline of the run {name}'s shape (seed {args.seed}) at d = 0 ...",
              file=sys.stderr)
        return baselines.head_data(heads, f"{name} ({args.baseline}, seed {args.seed})"), "", ""
    if args.baseline is not None:
        return head_data.from_dataset(store.dataset("profiles"), args.baseline), "", ""
    if args.step == INITIALISATION:
        return None, "", ""
    if INITIALISATION in _complete_steps(run):
        return head_data.from_run(run, INITIALISATION), first_note(INITIALISATION), ""
    return None, "", (f"no baseline of the run {name}: it has no complete frame of step 0 (initialisation), its own "
                      "random baseline; compare with --baseline init, iid or a model of the store")


def _complete_steps(run) -> list[int]:
    """The run's steps whose every layer is written."""
    done = run["layer_done"].values.all(axis=1)
    return [int(s) for s, ok in zip(run["step"].values, done, strict=True) if ok]


def _step_report(store, args) -> dict:
    """The report of one frame of a run (--step), its baseline as the help says."""
    from pipeline.analyses import head_data
    from pipeline.analyses.over_steps import INITIALISATION
    from pipeline.analyses.report import report

    run = store.run(args.model)
    data = head_data.from_run(run, args.step)
    base, what, note = _run_baseline(store, run, args)
    rep = report(data, base, seed=args.seed, baseline_note=what)
    rep["run"], rep["step"] = args.model, args.step
    if args.step == INITIALISATION and args.baseline is None:
        rep["notes"] = ["step 0 is the run's initialisation: it is the run's own random baseline, the one its other "
                        "steps' reports compare with"]
    if args.step not in _complete_steps(run):
        rep["missing"].append(f"the frame of step {args.step} is not complete (layers not written are NaN and left "
                              f"out); finish it with `{run.attrs.get('command', 'its run command')}`")
    if note:
        rep["missing"].append(note)
    return rep


def _over_steps(store, args) -> dict:
    """Every frame of a run in step order through :func:`pipeline.analyses.head_data.from_run`, summarised."""
    from pipeline.analyses import head_data
    from pipeline.analyses.over_steps import over_steps

    run = store.run(args.model)
    # what the summary reads, loaded at once (a frame's other variables are not needed)
    values = run[["profile", "head_statistics", "layer_done", "revision", "repeat_of"]].isel(d=slice(0, 1)).load()
    complete = set(_complete_steps(values))
    frames = [{"step": int(s), "revision": str(values["revision"].values[i]),
               "repeat_of": int(values["repeat_of"].values[i]),
               "data": head_data.from_run(values, int(s)) if int(s) in complete else None}
              for i, s in sorted(enumerate(values["step"].values), key=lambda x: int(x[1]))]
    return over_steps(args.model, frames)


def _not_a_model(store, args) -> None:
    """StoreError telling how to read a run, when MODEL names a run of the store and no model."""
    from pipeline.store import StoreError

    if args.model in store.run_names():
        raise StoreError(f"{args.model!r} is a run of the store (runs/{args.model}): give --step S for one frame's "
                         "report or --over-steps for the summary by step")


def run_report(args: argparse.Namespace) -> int:
    """Read the store, print the report; errors are one line on stderr with exit status 2."""
    from pipeline.analyses import head_data
    from pipeline.analyses import over_steps as over_steps_module
    from pipeline.analyses.report import format_text, report, to_json
    from pipeline.store import Store, StoreError

    try:
        store = Store.open(args.store, mode="r")
        if args.over_steps:
            if args.baseline is not None:
                raise ValueError("--over-steps takes no --baseline: its reference is the run's first frame")
            rep = _over_steps(store, args)
            print(to_json(rep) if args.json else over_steps_module.format_text(rep))
            return 0
        if args.step is not None:
            rep = _step_report(store, args)
        else:
            try:
                ds = store.dataset("profiles")
                data = head_data.from_dataset(ds, args.model)
            except (StoreError, KeyError):
                _not_a_model(store, args)
                raise
            base, note = _baseline(store, ds, args)
            rep = report(data, base, seed=args.seed)
            if note:
                rep["missing"].append(note)
    except (StoreError, KeyError, ValueError, OSError) as exc:
        print(f"error: {exc.args[0] if isinstance(exc, KeyError) and exc.args else exc}", file=sys.stderr)
        return 2
    print(to_json(rep) if args.json else format_text(rep))
    return 0


def run_baseline(args: argparse.Namespace) -> int:
    """Write the baselines (:func:`pipeline.analyses.baseline_run.run_baselines`); errors are one line on stderr with
    exit status 2, the store as it was."""
    from pipeline.analyses.baseline_run import run_baselines
    from pipeline.cli.profiles import fail, user_errors
    from pipeline.sources.baseline import BaselineError
    from pipeline.sources.init_heads import InitBaselineError

    try:
        run_baselines(args.models, args.kind, args.seed, args.store, args.name, args.force, args.seed_models,
                      progress=not args.quiet, workers=args.workers, scheduler=args.scheduler)
    except (BaselineError, InitBaselineError, *user_errors()) as exc:
        return fail(exc)
    return 0
