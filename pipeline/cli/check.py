"""``python -m pipeline check``: a checkpoint's attention run by transformers against the forms the profiles read.

The work is in :mod:`pipeline.check` (the one-layer forward pass, the comparison, the store's row); this module
parses the options, prints a line per layer and per stored row, and sets the exit status.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

from pipeline.store.location import DEFAULT_HELP

EXIT_FAILS = 1  # a layer over the tolerance or not comparable, or a stored row stale or damaged
EXIT_USER_ERROR = 2  # bad options, no such checkpoint, a family the table lacks

HELP = """\
Check that the profiles of a checkpoint describe its attention: run each layer's attention through
transformers' own code and compare the scores with those of the forms L(d) the profiles are computed from.

For each layer, transformers builds the model of the checkpoint's config (eager attention, float64) with only
that layer's attention loaded from the checkpoint, so memory holds about one layer. The attention runs on
random vectors x of full rank (72 tokens, fewer where a learned position table is shorter; a vision tower's
patches, Whisper's audio frames) and its pre-softmax scores are captured. They are compared with

    c x_j^T L(i - j) x_i,   L(d) = W_K^T R(d) W_Q,

at the offsets d = i - j = 0, 1, 7 and 64, where W_Q, W_K are the weights the profiles read (QK-norm gain
folded in; no --fold-ln), R(d) the layer's rotation (the identity without rotary) and c the softmax scale.
What is no form is taken off the scores first: the QK-norm's divisors, a query temperature (Llama 4,
Ministral 3), a tanh soft-cap (Gemma 2), attention sinks (gpt-oss), and an ALiBi or T5 relative position
bias (the layer's scores with its Q/K weights zero). Biases of the projections are set to zero: they add
terms linear in x, which the form leaves out. A layer without rotary is compared at every pair; Hunyuan's
(QK-norm gains after the rotation) with the key at position 0, the form its profile states; latent attention
(DeepSeek) at its key latent's divisors. Each layer's line gives the largest error relative to the largest
score, and whether it is within --tolerance; a failing layer's next line says where it differs.

Then the store's row for the model (its name as `profiles` gives it, or --name) is compared with a fresh
computation of the checked layers: a row written from another revision or shape, or a layer whose values
differ (stale or damaged), is named with the command that recomputes it. A model the store lacks is only
noted. A model of several towers (CLIP, Whisper, ...) is checked tower by tower, stored rows NAME/TOWER.

A model_type without an entry in the family table is not checked: the command lists the parts of its
attention it found and could not map (Q/K projections, norms, positions, other parameters).

Exit status: 0 when every checked layer holds and the stored rows match; 1 when a layer is over the
tolerance or could not be compared, or a stored row is stale or damaged; 2 on bad input (options, a
checkpoint that cannot be opened, a family the table lacks).
"""

EPILOG = """\
examples:
  python -m pipeline check ./my-checkpoint
  python -m pipeline check Qwen/Qwen3-0.6B --layers 0,13,27
  python -m pipeline check gpt2 --layers 0-3 --tolerance 1e-8 --store out.zarr
  python -m pipeline check openai/clip-vit-base-patch32 --tower vision --layers 0
"""


def register(sub) -> None:
    p = sub.add_parser("check", help="check a checkpoint's attention (transformers' forward pass) against its "
                                     "profiles' forms L(d), and the store's values against a fresh computation",
                       description=HELP, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="MODEL_OR_PATH",
                   help="checkpoint folder, registry name or Hub id (as `python -m pipeline profiles` takes them)")
    p.add_argument("--layers", metavar="L,...", default=None,
                   help="layers to check, e.g. 0,5,31 or 0-3,31 (default: every layer)")
    p.add_argument("--tolerance", metavar="T", default=None,
                   help="largest relative error a layer may have (default 1e-05: transformers computes rotation "
                        "angles and QK-norms in float32)")
    p.add_argument("--tower", default=None, help="check one tower of a multi-tower model (default: every tower)")
    p.add_argument("--name", default=None, help="the model's name in the store (default: as `profiles` names it)")
    p.add_argument("--store", default=None, help=f"Zarr store whose row is compared (default: {DEFAULT_HELP})")
    p.add_argument("--revision", default=None, help="Hub branch, tag or commit to read (Hub ids only)")
    p.set_defaults(func=main)


class UsageError(ValueError):
    """An option that cannot work; the message says how to write it."""


def parse_layers(text: str | None, n_layers: int) -> list[int]:
    """The layers of ``--layers`` (numbers and ranges a-b, comma-separated), each in 0..n_layers-1; every layer for
    None."""
    if text is None:
        return list(range(n_layers))
    out = []
    for part in text.split(","):
        part = part.strip()
        lo, dash, hi = part.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise UsageError(f"--layers takes layer numbers and ranges separated by commas (e.g. 0,5,31 or 0-3); "
                             f"got {text!r}")
        first, last = int(lo), int(hi) if dash else int(lo)
        if first > last:
            raise UsageError(f"--layers range {part!r} runs backwards; write it low-high")
        out += range(first, last + 1)
    bad = sorted({i for i in out if i >= n_layers})
    if bad:
        raise UsageError(f"--layers {', '.join(map(str, bad))}: out of range; the model has {n_layers} layers "
                         f"(0-{n_layers - 1})")
    return sorted(set(out))


def parse_tolerance(text: str | None) -> float:
    from pipeline.check.layers import DEFAULT_TOLERANCE

    if text is None:
        return DEFAULT_TOLERANCE
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"--tolerance must be a positive number (a relative error, e.g. 1e-5); got {text!r}")
    return value


def _fail(message: str) -> int:
    print(f"error: {' '.join(str(message).split())}", file=sys.stderr)
    return EXIT_USER_ERROR


def _open(args):
    """(ref, checkpoint) of MODEL_OR_PATH; a path that does not exist is named as such."""
    from pipeline.registry.checkpoints import open_checkpoint, resolve

    text = args.model
    if text.startswith(("/", "./", "../", "~")) and not os.path.exists(os.path.expanduser(text)):
        raise UsageError(f"no checkpoint folder or file at {text!r}")
    ref = resolve(text)
    return ref, open_checkpoint(ref, args.revision)


def main(args: argparse.Namespace) -> int:
    from pipeline.families import FAMILIES, ArchitectureError
    from pipeline.families import towers as towers_of
    from pipeline.sources.base import CheckpointError

    try:
        tolerance = parse_tolerance(args.tolerance)
        if args.layers is not None:
            parse_layers(args.layers, sys.maxsize)  # the form now, the range once the model's layers are known
        ref, ckpt = _open(args)
        config = ckpt.config
        if not isinstance(config, dict) or config.get("model_type") not in FAMILIES:
            from pipeline.check.unmapped import unmapped_parts

            for line in unmapped_parts(config if isinstance(config, dict) else {}):
                print(line, file=sys.stderr)
            return EXIT_USER_ERROR
        towers = towers_of(config) or ("",)
        if args.tower is not None:
            if args.tower not in towers:
                raise UsageError(f"--tower {args.tower!r}: this {config['model_type']} checkpoint has "
                                 + (f"the towers {', '.join(towers)}" if towers != ("",) else "no towers"))
            towers = (args.tower,)
        from pipeline.run.plan import checkpoint_layout

        layouts = [checkpoint_layout(ckpt, t or None) for t in towers]
        chosen = [parse_layers(args.layers, layout.n_layers) for layout in layouts]
    except (UsageError, CheckpointError, ArchitectureError) as exc:
        return _fail(exc)
    failed = False
    base = args.name or ref.default_name(ckpt.own_name)
    for layout, layers in zip(layouts, chosen, strict=True):
        failed |= check_model(ckpt, layout, layers, tolerance, base, args.store)
    return EXIT_FAILS if failed else 0


def check_model(ckpt, layout, layers: list[int], tolerance: float, base: str, store: str | None) -> bool:
    """Check one model (one tower) and print its lines; True when something fails."""
    import transformers

    from pipeline.check.forward import CheckError, LayerRunner
    from pipeline.check.layers import check_layer
    from pipeline.run.plan import tower_name

    name = tower_name(base, layout.tower)
    print(f"{name}: {layout.family}, {layout.n_layers} layers x {layout.n_heads} heads; transformers "
          f"{transformers.__version__}, eager attention, float64; tolerance {tolerance:.0e}")
    try:
        runner = LayerRunner(ckpt, layout)
    except CheckError as exc:
        print(f"FAILS  {' '.join(str(exc).split())}")
        return True
    results = []
    for layer in layers:
        results.append(check_layer(runner, layer, tolerance))
        print("\n".join(results[-1].lines()), flush=True)
    if runner.missing:
        print(f"note: the checkpoint has no {', '.join(sorted(runner.missing))} of the attention; set to zero (no "
              "score depends on them unless a layer fails)")
    over = [r.layer for r in results if not r.holds]
    stale = _store_lines(name, ckpt, layout, layers, store)
    verdict = (f"{len(over)} of {len(results)} layer(s) fail: {', '.join(map(str, over))}" if over
               else "every checked layer holds")
    print(f"{name}: {verdict}" + ("; the store's row is stale or damaged" if stale else ""))
    return bool(over) or stale


def _store_lines(name: str, ckpt, layout, layers: list[int], location: str | None) -> bool:
    from pipeline.check.stored import check_store
    from pipeline.run.destination import store_location
    from pipeline.store import Store, StoreError, default_store_path

    where = store_location(default_store_path() if location is None else location)
    if "://" not in where and not os.path.exists(where):
        print(f"store: none at {where}; nothing stored to compare")
        return False
    try:
        store = Store.open(where, "r")
    except StoreError as exc:
        print(f"store: {' '.join(str(exc).split())}")
        return True
    result = check_store(store, name, ckpt, layout, layers, "" if location is None else f" --store {location}")
    for line in result.lines:
        print(line)
    return result.stale
