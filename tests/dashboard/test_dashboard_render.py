"""dashboard.common.render.Named: a page's named models by name, from one walk, checked against Bokeh's own query
(``select`` by name) on every page, and its errors for a missing and a doubled name."""

from __future__ import annotations

import pytest
from bokeh.core.query import IN
from bokeh.layouts import column
from bokeh.models import ColumnDataSource, Div
from bokeh.plotting import figure

from dashboard.common.render import Named
from tests.shared import SYNTHETIC_PAGES

pytestmark = SYNTHETIC_PAGES


def test_every_name_of_every_page_is_the_model_bokeh_selects(pages):
    """Bokeh's query (``select`` with ``IN``: one walk of the page for every name in it) is the reference."""
    for page in pages:
        names = {m.name for m in page.references() if m.name}
        by_bokeh: dict[str, list] = {}
        for m in page.select({"name": {IN: sorted(names)}}):
            by_bokeh.setdefault(m.name, []).append(m)
        assert len(names) > 20 and set(by_bokeh) == names
        named = Named(page)
        for name, want in by_bokeh.items():
            if len(want) > 1:  # two models of that name: select_one refuses, and so does Named
                with pytest.raises(ValueError, match="models are named"):
                    named.get(name)
            else:
                assert named[name] is want[0] and named.get(name) is want[0]


def test_a_missing_name_raises_with_the_names_there_and_get_gives_none():
    fig = figure(name="fig")
    fig.scatter("x", "y", source=ColumnDataSource(dict(x=[0], y=[0]), name="dots_source"), name="dots")
    layout = column(fig, Div(text="", name="note"))
    named = Named(layout)
    assert named["dots"] is fig.renderers[0] and named["note"].text == ""
    assert named.get("dot") is None
    with pytest.raises(KeyError, match=r"no model named 'dot'; named here: \['dots', 'dots_source', 'fig', 'note'\]"):
        named["dot"]


def test_several_roots_are_one_index_and_a_name_in_two_raises():
    a, b = Div(text="a", name="same"), Div(text="b", name="same")
    named = Named(column(a, name="left"), column(b, Div(name="only"), name="right"))
    assert named["left"].children == [a] and named["only"].name == "only"
    with pytest.raises(ValueError, match="2 models are named 'same'"):
        named["same"]
