"""The Bokeh and Panel releases the dashboard is tested with, and a check that fails early outside them.

The served pages use private Bokeh and Panel internals (property descriptors, model registration, Panel's
model cache), which change between minor releases without notice; they are all in
``dashboard.bokeh_internals``, whose import runs :func:`check_versions` first. ``TESTED`` is the one home of
the tested range: pyproject.toml's bounds on ``bokeh`` and ``panel`` spell the same range (a test compares
them), and :func:`check_versions` refuses any other installed release with a message naming the range.
"""

from __future__ import annotations

import re
from importlib import metadata

# distribution -> (lowest tested minor release, first untested minor release)
TESTED: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "bokeh": ((3, 9), (3, 10)),
    "panel": ((1, 9), (1, 10)),
}


class VersionError(RuntimeError):
    """An installed Bokeh or Panel release is outside the tested range."""


def requirement(name: str) -> str:
    """The pip requirement of the tested range, e.g. ``bokeh>=3.9,<3.10``."""
    (lo_major, lo_minor), (hi_major, hi_minor) = TESTED[name]
    return f"{name}>={lo_major}.{lo_minor},<{hi_major}.{hi_minor}"


def installed_version(name: str) -> str | None:
    """The installed release of a distribution, or None if it is not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def minor(version: str) -> tuple[int, int] | None:
    """(major, minor) of a release string such as ``3.9.2`` or ``3.10.0rc1``; None if it has no such prefix."""
    m = re.match(r"\s*v?(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else None


def problems() -> list[str]:
    """One sentence per distribution of ``TESTED`` that is missing or outside its tested range."""
    out = []
    for name, (lowest, first_untested) in TESTED.items():
        version = installed_version(name)
        if version is None:
            out.append(f"{name} is not installed")
            continue
        got = minor(version)
        if got is None or not lowest <= got < first_untested:
            out.append(f"{name} {version} is installed, outside the tested range {requirement(name)}")
    return out


def check_versions() -> None:
    """Raise VersionError naming the tested range if Bokeh or Panel is missing or of an untested release."""
    found = problems()
    if found:
        wanted = " ".join(f"'{requirement(n)}'" for n in TESTED)
        raise VersionError(f"{'; '.join(found)}. The dashboard relies on Bokeh and Panel internals that change "
                           f"between minor releases, so it runs only with the tested releases: "
                           f"pip install {wanted}")
