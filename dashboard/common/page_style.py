"""The pages' CSS, read from its one home, ``dashboard/common/page.css``.

Every page builder styles its Divs with ``style()`` (the orbits page with ``style("orbits")``); the
served app (Panel's raw_css) and the exported pages (a ``<style>`` element) take
``page_css(..., document=True)``. The file's sections and who takes which are described at its top.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from bokeh.models import InlineStyleSheet

CSS_PATH = Path(__file__).resolve().parent / "page.css"
_SECTION = re.compile(r"^/\* == (\w+) == \*/$", re.MULTILINE)


@functools.cache
def sections() -> dict[str, str]:
    """The sections of ``page.css`` by name, each its rules as written (read once per process)."""
    parts = _SECTION.split(CSS_PATH.read_text(encoding="utf-8"))
    return {name: body.strip() + "\n" for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def page_css(*names: str, document: bool = False) -> str:
    """The named sections of ``page.css``, joined in the order given. ``document``: for a whole page's
    document rather than a Div's shadow root (``:host`` becomes ``body``)."""
    known = sections()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"page.css has no section {', '.join(map(repr, unknown))}; it has {', '.join(known)}")
    css = "".join(known[n] for n in names)
    return css.replace(":host", "body") if document else css


def style(section: str = "text") -> InlineStyleSheet:
    """A section of ``page.css`` (by default ``text``, the pages' typography) as a fresh stylesheet model (a
    model belongs to one document only; the Divs of one page share one)."""
    return InlineStyleSheet(css=page_css(section))
