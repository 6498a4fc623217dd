"""``python -m pipeline.induction train OUT_DIR [--seed S] ...``: the command line (torch loads only to train)."""

from __future__ import annotations

import argparse
import sys

from ..cli_args import add_dataclass_arguments
from ..version import PrintVersion
from .settings import Settings

DESCRIPTION = """\
Train a small rotary decoder (transformers' Llama: 2 layers of 4 heads, residual width 64, no MLP) on
sequences whose second half repeats the first (uniform random tokens from a vocabulary of 64), so copying
from context is the only way to predict the second half. Each training batch has its own half length (8 to
24), so no fixed offset finds the copied token: the model must match content. Induction heads form in a
phase change, when the repeated half's loss falls sharply (Olsson et al. 2022).

What it writes in OUT_DIR (a new or empty folder):
  checkpoint-N/     the weights after N steps, in transformers' format: config.json, model.safetensors
                    (save_pretrained), trainer_state.json (global_step), and metrics.json:
                    {"scalars": {"loss_first_half", "loss_repeated_half"},
                     "heads": {"induction_score", "previous_token_score"}}   (per layer, per head)
  run.json          the command, the settings, the versions, which rule kept each checkpoint, the losses at
                    every step, and the seconds the run took

The losses and scores are measured on a fixed evaluation batch (half length --half) at every step. Kept as
checkpoints: step 0, the last, --log-checkpoints steps log-spaced between, and every step at which the lowest
repeated-half loss so far has fallen by --loss-step since the last kept step (so they crowd around the phase
change). Losses are mean cross-entropy in nats; the induction score is the mean attention from a token of the
repeated half to the token after its earlier occurrence, the previous-token score the mean attention to the
token just before (pipeline/induction/scores.py defines both).

The same settings and seed give the same bytes on the same torch build (and CPU kind) at the same --threads.
The default run keeps 94 checkpoints (16 MB) and takes about 90 s of one core's time (one thread).

Examples:
  python -m pipeline.induction train runs/induction-s0
  python -m pipeline.induction train runs/induction-s1 --seed 1 --steps 3000
  python -m pipeline profiles runs/induction-s0 --revisions all    # the checkpoints' profiles, as frames
"""


class Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The description as written, and each option's default in its help."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pipeline.induction",
                                     description="A run in which induction heads form: train it, from a seed.")
    parser.add_argument("--version", action=PrintVersion)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    train = sub.add_parser("train", help="train a run into OUT_DIR", description=DESCRIPTION,
                           formatter_class=Formatter)
    train.add_argument("out_dir", metavar="OUT_DIR", help="new or empty folder for the checkpoints")
    add_dataclass_arguments(train, Settings)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command != "train":
        parser.print_help()
        return 2
    values = {k: v for k, v in vars(args).items() if k in Settings.__dataclass_fields__}
    try:
        settings = Settings(**values)
    except ValueError as exc:
        parser.exit(2, f"error: {exc}\n")
    from .train import train

    try:
        train(settings, args.out_dir)
    except FileExistsError as exc:
        parser.exit(1, f"error: {exc}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
