"""python -m pipeline: the command line.

Subcommands live in their own modules, each exposing ``register(subparsers)`` which adds a parser
whose ``func`` default runs the command. They are imported lazily so ``--help`` stays fast and
importing ``pipeline`` never imports torch.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from pipeline.store.location import DEFAULT_HELP
from pipeline.version import PrintVersion

# (module, subcommand names it registers), in the order shown by --help
COMMANDS = (
    ("pipeline.cli.profiles", ("profiles", "list")),
    ("pipeline.orbits.cli", ("orbits",)),
    ("pipeline.cli.verify", ("verify",)),
    ("pipeline.cli.check", ("check",)),
    ("pipeline.cli.real", ("real",)),
    ("pipeline.cli.report", ("report", "baseline")),
    ("pipeline.cli.demo", ("demo",)),
)


class OneLineErrors(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr (exit status 2), like every other error."""

    def error(self, message: str):
        self.exit(2, f"error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrors(
        prog="python -m pipeline",
        description="Offline pipeline: profiles of attention heads (the 3-simplex point (a, b, c, d) of "
        "L = W_K^T W_Q for every head) and the orbit experiment (a 32-head layer learning addition mod 24). "
        f"Results go to a Zarr store (default: {DEFAULT_HELP}) that the dashboard reads.",
        epilog="Run `python -m pipeline COMMAND --help` for each command's options.",
    )
    parser.add_argument("--version", action=PrintVersion)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module, _names in COMMANDS:
        importlib.import_module(module).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
