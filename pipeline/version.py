"""The version of headgeometry: one source, the installed package's metadata (``pyproject.toml``'s ``version``)."""

from __future__ import annotations

import argparse
from importlib import metadata

DISTRIBUTION = "headgeometry"
UNKNOWN = "0+unknown"  # the source folder imported without an install: no metadata to read


def version() -> str:
    """``importlib.metadata.version("headgeometry")``, or ``0+unknown`` where the package is not installed."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return UNKNOWN


def version_line(prog: str) -> str:
    """What ``--version`` prints: ``PROG (headgeometry VERSION)``."""
    return f"{prog} ({DISTRIBUTION} {version()})"


class PrintVersion(argparse.Action):
    """``--version``: print :func:`version_line` and exit; the metadata is read only when asked, not when the parser
    is built (``--help`` stays fast)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="print the version of headgeometry and exit"):
        super().__init__(option_strings, dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line(parser.prog))
        parser.exit()
