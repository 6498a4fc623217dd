"""The dashboard's browser code: JavaScript files under ``dashboard/js/``, read once and joined.

Every client-side behaviour (rotation, the d slider, selections, the orbits movie) lives in a ``.js``
file of its own; a CustomJS callback's code is the concatenation of the files it needs, the last one
being the entry point that acts on the callback's arguments.
"""

from __future__ import annotations

import functools
from pathlib import Path

JS_DIR = Path(__file__).resolve().parent / "js"


@functools.cache
def _read(name: str) -> str:
    path = JS_DIR / f"{name}.js"
    if not path.is_file():
        raise FileNotFoundError(f"no browser code {path.name} in {JS_DIR.name}/")
    return path.read_text(encoding="utf-8")


def code(*names: str) -> str:
    """The text of ``dashboard/js/<name>.js`` for each name, joined in order."""
    return "\n".join(_read(n) for n in names)


def names() -> list[str]:
    """Every browser file's name (without .js)."""
    return sorted(p.stem for p in JS_DIR.glob("*.js"))
