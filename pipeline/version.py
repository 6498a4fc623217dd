"""The version of headgeometry: one source, the installed package's metadata (``pyproject.toml``'s ``version``)."""

from __future__ import annotations

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
