"""dashboard.page_models: every name the browser code reads as ``ctx.X`` is a field of PageModels, and a
page's CustomJS argument holds exactly the fields it set."""

from __future__ import annotations

import re

import pytest
from bokeh.models import ColumnDataSource, CustomJS

from dashboard import jscode
from dashboard.page_models import PageModels, names

CTX_NAME = re.compile(r"\bctx\.([A-Za-z_$][A-Za-z0-9_$]*)")


def ctx_names() -> dict[str, set[str]]:
    """{browser file: the names it reads as ctx.X}, from the files' text."""
    return {f: set(CTX_NAME.findall(jscode.code(f))) for f in jscode.names()}


def test_the_pattern_reads_member_names_only():
    text = "const f = ctx.fig, cam = ctx.camera.data; if (ctx.box && ctx.box.active) {} myctx.nope; ctx2.no"
    assert set(CTX_NAME.findall(text)) == {"fig", "camera", "box"}


def test_every_ctx_name_in_the_browser_code_is_a_field():
    read = ctx_names()
    assert sum(len(v) for v in read.values()) > 50  # the pages' code reads ctx (the pattern finds them)
    missing = {f: sorted(v - set(names())) for f, v in read.items() if v - set(names())}
    assert not missing, f"ctx names the browser code reads that PageModels lacks: {missing}"


def test_args_leaves_out_what_a_page_did_not_set():
    src = ColumnDataSource({"x": [1]})
    models = PageModels(heads=src, n_bins=20, type_names=["I+", "II", "I-"], box=None)
    assert models.args() == {"heads": src, "n_bins": 20, "type_names": ["I+", "II", "I-"]}
    wider = models.but(dslider=src)
    assert wider.args() == {"heads": src, "n_bins": 20, "type_names": ["I+", "II", "I-"], "dslider": src}
    assert "dslider" not in models.args()  # the copy leaves the page's models as they were
    cb = CustomJS(args=dict(ctx=models.args()), code="ctx.heads")
    assert set(cb.args["ctx"]) == {"heads", "n_bins", "type_names"}


def test_an_unknown_name_is_refused():
    with pytest.raises(TypeError):
        PageModels(not_a_field=1)
