"""The dashboard's browser code: JavaScript files in the ``js/`` folder of each page's package
(``dashboard/<page>/js/``; what pages share in ``dashboard/common/js/``), read once and joined.

Every client-side behaviour (rotation, the d slider, selections, the orbits movie) lives in a ``.js``
file of its own, named once across the folders; a CustomJS callback's code is the concatenation of the
files it needs, the last one being the entry point that acts on the callback's arguments.

Each file states its contract in its first lines::

    // defines: project_all
    // uses: ctx

``defines``: the functions and constants it declares for other files; ``uses``: every name it reads that
it does not declare, but the browser's own (``GLOBALS``): the callback's arguments, what BokehJS gives
every callback (``PROVIDED``: the object that changed), other files' definitions. ``callback`` joins files
into a CustomJS only when every name they use is defined by one of them or given (an argument,
``PROVIDED``), so the files a callback needs are named, not found by trial;
``tests/dashboard/test_dashboard_js_contracts.py`` holds every file to its header.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from bokeh.models import CustomJS

DASHBOARD = Path(__file__).resolve().parents[1]
# the JavaScript and browser globals the files read without declaring them in ``uses``; and what BokehJS gives
# every CustomJS besides its arguments
GLOBALS = frozenset("""Array Bokeh Float64Array Infinity JSON Math NaN Number Object String URLSearchParams
clearInterval clearTimeout encodeURIComponent isFinite performance setInterval setTimeout window""".split())
PROVIDED = frozenset({"cb_obj", "cb_data"})
_HEADER = re.compile(r"^// (defines|uses): *(.*)$", re.MULTILINE)


@dataclass(frozen=True)
class Contract:
    """What a browser file declares for others (``defines``) and reads from outside (``uses``)."""

    defines: frozenset[str]
    uses: frozenset[str]


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


@functools.cache
def contract(name: str) -> Contract:
    """The ``defines`` and ``uses`` lines at the top of ``<name>.js`` (names separated by commas)."""
    head = _read(name).split("\n\n", 1)[0]
    lines = {key: frozenset(n.strip() for n in value.split(",") if n.strip()) for key, value in _HEADER.findall(head)}
    return Contract(lines.get("defines", frozenset()), lines.get("uses", frozenset()))


def unmet(names: tuple[str, ...] | list[str], given) -> list[str]:
    """What the files ``names`` use that none of them defines and ``given`` (the callback's argument names)
    and BokehJS do not provide; sorted."""
    defined = set(given) | PROVIDED
    for n in names:
        defined |= contract(n).defines
    return sorted({u for n in names for u in contract(n).uses} - defined)


def callback(args: dict, *names: str, **props) -> CustomJS:
    """A CustomJS over ``args`` running the files ``names`` joined (``code``); ``props``: its other properties
    (``name=``). ValueError when a file uses a name that none of them defines and no argument gives."""
    missing = unmet(names, args)
    if missing:
        raise ValueError(f"browser code {' + '.join(names)} uses {', '.join(missing)}: no file given defines it "
                         f"and the callback has no such argument (it has {', '.join(sorted(args)) or 'none'})")
    return CustomJS(**({"args": args} if args else {}), code=code(*names), **props)


def code(*names: str) -> str:
    """The text of ``<name>.js`` for each name, joined in order."""
    return "\n".join(_read(n) for n in names)


def names() -> list[str]:
    """Every browser file's name (without .js)."""
    return sorted(files())
