"""The dashboard's browser code: JavaScript files in the ``js/`` folder of each page's package
(``dashboard/<page>/js/``; what pages share in ``dashboard/common/js/``), read once and joined.

Every client-side behaviour (rotation, the d slider, selections, the orbits movie) lives in a ``.js``
file of its own, named once across the folders; a CustomJS callback's code is the concatenation of the
files it needs, the last one being the entry point that acts on the callback's arguments.
"""

from __future__ import annotations

import functools
from pathlib import Path

DASHBOARD = Path(__file__).resolve().parents[1]


@functools.cache
def files() -> dict[str, Path]:
    """Every browser file by name (without .js); a name in two folders is an error."""
    out: dict[str, Path] = {}
    for path in sorted(DASHBOARD.glob("*/js/*.js")):
        if path.stem in out:
            raise ValueError(f"browser code {path.name} is in {out[path.stem].parent} and {path.parent}: "
                             "a name may be used once")
        out[path.stem] = path
    return out


@functools.cache
def _read(name: str) -> str:
    path = files().get(name)
    if path is None:
        raise FileNotFoundError(f"no browser code {name}.js in dashboard/*/js/")
    return path.read_text(encoding="utf-8")


def code(*names: str) -> str:
    """The text of ``<name>.js`` for each name, joined in order."""
    return "\n".join(_read(n) for n in names)


def names() -> list[str]:
    """Every browser file's name (without .js)."""
    return sorted(files())
