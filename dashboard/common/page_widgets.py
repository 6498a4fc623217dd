"""What every page builder uses on its Bokeh models: the page header and messages, a figure kept to the models
it draws (``lean``, ``static``), ranges and titles named for the served app's in-place switch, and the
deep-link restore run once the document is ready."""

from __future__ import annotations

import html

from bokeh.models import (
    Axis,
    BoxSelectTool,
    CustomJS,
    Div,
    GlyphRenderer,
    Grid,
    InlineStyleSheet,
    LassoSelectTool,
    Legend,
)

from dashboard.common.page_style import style


def header(title: str, body_html: str = "", name: str = "page_header", width: int = 1340,
           sheet: InlineStyleSheet | None = None) -> Div:
    """The page's title (and ``body_html`` under it)."""
    return Div(text=f"<h1>{html.escape(title)}</h1>{body_html}", stylesheets=[sheet or style()], width=width,
               name=name)


def message(text_html: str, kind: str = "warn", name: str = "message") -> Div:
    """A box with a warning (``kind`` "warn") or an error ("error")."""
    return Div(text=f'<div class="{kind}">{text_html}</div>', stylesheets=[style()], width=1100, name=name)


def restore_on_ready(doc, page) -> None:
    """Run the deep-link restore of ``page`` (a page's layout or a copy) when ``doc`` is ready: the CustomJS
    named ``url_restore`` in the layout's ``tags``."""
    for tag in page.tags:
        if isinstance(tag, CustomJS) and tag.name == "url_restore":
            doc.js_on_event("document_ready", tag)


def lean(fig, selectable: list) -> None:
    """Only the ``selectable`` renderers (the heads) take part in box and lasso selections, and the figure
    keeps only the glyphs it draws: every other renderer drops the copies of its glyph for selected,
    unselected and muted data, the selectable ones their muted copy, and what draws nothing goes (empty
    legends, hidden axes, grids without lines). About 60 fewer models for every session to build, walk and
    send (``benchmarks/dashboard_bench.py``)."""
    for tool in fig.tools:
        if isinstance(tool, (BoxSelectTool, LassoSelectTool)):
            tool.renderers = list(selectable)
    for r in fig.renderers:
        if isinstance(r, GlyphRenderer):
            r.muted_glyph = "auto"
            if r not in selectable:
                r.selection_glyph = r.nonselection_glyph = "auto"
    for side in ("center", "above", "below", "left", "right"):
        kept = [x for x in getattr(fig, side) if not _draws_nothing(x)]
        if len(kept) != len(getattr(fig, side)):
            setattr(fig, side, kept)


def _draws_nothing(annotation) -> bool:
    """An empty legend, a hidden axis, or a grid with neither lines nor bands (the tetrahedron's)."""
    if isinstance(annotation, Legend):
        return not annotation.items
    if isinstance(annotation, Axis):
        return not annotation.visible
    if isinstance(annotation, Grid):
        return not annotation.visible or (annotation.grid_line_color is None and annotation.minor_grid_line_color
                                          is None and annotation.band_fill_color is None)
    return False


def static(fig) -> None:
    """A figure that only shows numbers (no selection, no zoom): no tools, and only the glyphs it draws
    (``lean``): fewer models for every served session to copy, walk and send."""
    fig.tools = []
    fig.toolbar_location = None
    lean(fig, [])


def name_ranges(fig, prefix: str) -> None:
    """Name a figure's ranges and title, so the served app's in-place model switch gives them the new values."""
    fig.x_range.name, fig.y_range.name = f"{prefix}_x", f"{prefix}_y"
    if fig.title is not None:
        fig.title.name = f"{prefix}_title"
