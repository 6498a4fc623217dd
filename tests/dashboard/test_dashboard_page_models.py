"""dashboard.common.page_models: every name the browser code reads as ``ctx.X`` is a field of PageModels and
every field is read by some browser code; a page's CustomJS argument holds exactly the fields it set, with the
types the fields declare."""

from __future__ import annotations

import re
import types
import typing

import pytest
from bokeh.models import ColumnDataSource, CustomJS

from dashboard.common import jscode
from dashboard.common.page_models import PageModels, names
from tests.shared import SYNTHETIC_PAGES

pytestmark = SYNTHETIC_PAGES

CTX_NAME = re.compile(r"\bctx\.([A-Za-z_$][A-Za-z0-9_$]*)")


def ctx_names() -> dict[str, set[str]]:
    """{browser file: the names it reads as ctx.X}, from the files' text."""
    return {f: set(CTX_NAME.findall(jscode.code(f))) for f in jscode.names()}


def test_the_pattern_reads_member_names_only():
    text = ("const f = ctx.tetrahedron, cam = ctx.camera.data; if (ctx.box_select && ctx.box_select.active) {} "
            "myctx.nope; ctx2.no")
    assert set(CTX_NAME.findall(text)) == {"tetrahedron", "camera", "box_select"}


def test_every_ctx_name_in_the_browser_code_is_a_field_and_every_field_is_read():
    read = ctx_names()
    assert sum(len(v) for v in read.values()) > 50  # the pages' code reads ctx (the pattern finds them)
    missing = {f: sorted(v - set(names())) for f, v in read.items() if v - set(names())}
    assert not missing, f"ctx names the browser code reads that PageModels lacks: {missing}"
    unread = set(names()) - set().union(*read.values())
    assert not unread, f"PageModels fields no browser code reads: {sorted(unread)}"


def test_args_leaves_out_what_a_page_did_not_set():
    src = ColumnDataSource({"x": [1]})
    models = PageModels(heads=src, n_bins=20, type_names=["I+", "II", "I-"], box_select=None)
    assert models.args() == {"heads": src, "n_bins": 20, "type_names": ["I+", "II", "I-"]}
    wider = models.but(d_slider=src)
    assert wider.args() == {"heads": src, "n_bins": 20, "type_names": ["I+", "II", "I-"], "d_slider": src}
    assert "d_slider" not in models.args()  # the copy leaves the page's models as they were
    cb = CustomJS(args=dict(ctx=models.args()), code="ctx.heads")
    assert set(cb.args["ctx"]) == {"heads", "n_bins", "type_names"}


def test_an_unknown_name_is_refused():
    with pytest.raises(TypeError):
        PageModels(not_a_field=1)


GUARDED = re.compile(r"\bctx\.([A-Za-z_$][A-Za-z0-9_$]*)\s*(?:[!=]=\s*null|&&)")


def test_every_callback_gets_each_ctx_name_its_code_reads(pages):
    """Each CustomJS with a ``ctx`` gets every name its code reads from it, but those the code tests for
    null first (``ctx.X != null``, ``ctx.X &&``): a page that leaves a field unset must mean it."""
    seen = 0
    for page in pages:
        for cb in page.select({"type": CustomJS}):
            if "ctx" not in cb.args:
                continue
            seen += 1
            given = set(cb.args["ctx"])
            assert given <= set(names())
            read, optional = set(CTX_NAME.findall(cb.code)), set(GUARDED.findall(cb.code))
            assert read - optional <= given, (cb.code.splitlines()[0], sorted(read - optional - given))
    assert seen >= 4 * 5  # the drag, angle, selection, d-slider, colour, link callbacks of every page


def _has_type(value, annotation) -> bool:
    """Whether ``value`` is of the field type ``annotation`` (a class, ``X | None``, ``list[X]``, ``dict[K, V]``)."""
    if isinstance(annotation, types.UnionType):
        return any(_has_type(value, a) for a in typing.get_args(annotation))
    if annotation is type(None):
        return value is None
    origin = typing.get_origin(annotation)
    if origin is list:
        (item,) = typing.get_args(annotation)
        return isinstance(value, list) and all(_has_type(v, item) for v in value)
    if origin is dict:
        k, v = typing.get_args(annotation)
        return isinstance(value, dict) and all(_has_type(a, k) and _has_type(b, v) for a, b in value.items())
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, annotation)


def test_every_value_a_page_gives_has_its_fields_type(pages):
    hints = typing.get_type_hints(PageModels)
    assert not _has_type("a", hints["heads"]) and not _has_type([1, "x"], hints["edge_from"])  # the checker
    assert _has_type(None, hints["heads"]) and _has_type([[]], hints["model_bars"])
    checked = set()
    for page in pages:
        for cb in page.select({"type": CustomJS}):
            for name, value in cb.args.get("ctx", {}).items():
                assert _has_type(value, hints[name]), (name, type(value).__name__, hints[name])
                checked.add(name)
    assert len(checked) > 0.9 * len(names())  # nearly every field is given by some page built here
