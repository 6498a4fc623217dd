"""dashboard.page_models: every name the browser code reads as ``ctx.X`` is a field of PageModels, and a
page's CustomJS argument holds exactly the fields it set."""

from __future__ import annotations

import re

import pytest
from bokeh.models import ColumnDataSource, CustomJS

from dashboard.common import jscode
from dashboard.common.page_models import PageModels, names

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


GUARDED = re.compile(r"\bctx\.([A-Za-z_$][A-Za-z0-9_$]*)\s*(?:[!=]=\s*null|&&)")


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """The profiles pages of a rotary and an absolute-position model (static, with their tabs and
    navigation) and the compare page, over the browser tests' synthetic store."""
    from dashboard import data
    from dashboard.compare.page import compare_view
    from dashboard.profiles.page import profiles_view
    from tests.browser.conftest import ABSOLUTE_MODEL, ROPE_MODEL, write_synthetic_store

    store = write_synthetic_store(tmp_path_factory.mktemp("page_models") / "store.zarr")
    nav = {ROPE_MODEL: "a.html", ABSOLUTE_MODEL: "b.html"}
    out = [profiles_view(data.model_data(store, n), data.profiles(store).sel(model=n), nav=nav, current_url=nav[n],
                         tabs={"profiles": "", "compare": "compare.html"}) for n in nav]
    out.append(profiles_view(data.model_data(store, ROPE_MODEL)))  # served: no navigation, no statistics
    out.append(compare_view(data.profiles(store)))
    return out


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
