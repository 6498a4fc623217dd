"""The pages of the new kinds of family in Chromium (issue 33), over the store of ``tests.dashboard.families_store``:
SmolLM3's exported page says which layer its d slider does not move, and moving the slider moves every other layer's
heads to their stored profiles at that d; a deep link to a tower model (``?model=tiny-clip%2Fvision``) opens that
tower's page, exported and served."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest

from dashboard.export import profile_page_name
from pipeline.schema import PROFILES
from pipeline.store import Store
from tests.browser.conftest import (
    POLL_MS,
    console_errors,
    js,
    model_data,
    model_prop,
    route_offline,
    serve_app,
    set_prop,
    stop,
    wait_for_bokeh,
)
from tests.dashboard.families_store import families_site

pytestmark = pytest.mark.browser
VIEWPORT = {"width": 1500, "height": 1100}


@pytest.fixture(scope="module")
def families(tmp_path_factory):
    """(store, the folder of its static export)."""
    store, out, _ = families_site(tmp_path_factory)
    return store, out


def open_page(browser, url: str):
    page = browser.new_page(viewport=VIEWPORT)
    errors = console_errors(page)
    route_offline(page)
    page.goto(url)
    wait_for_bokeh(page, "heads")
    return page, errors


def served_state(page, proc) -> str:
    """The served app's log and the start of the page's document JSON (its values set away from the defaults:
    with the defaults, a function among them stops the serialization), for a console error's message."""
    from playwright.sync_api import Error

    try:
        doc = page.evaluate("() => JSON.stringify(Bokeh.documents[0].to_json(false))")[:4000]
    except Error as e:
        doc = f"(not read: {str(e).splitlines()[0]})"
    return f"app log:\n{Path(proc.log_path).read_text(errors='replace')}\ndocument JSON, first 4000 characters:\n{doc}"


def test_the_slider_of_smollm3_names_its_static_layer_and_moves_the_others(browser, families):
    store, out = families
    m = Store.open(str(store), "r").dataset(PROFILES).sel(model="tiny-smollm3")
    L, H = int(m.n_layers), int(m.n_heads)
    stored = m.profile.transpose("layer", "head", "d", "coordinate").values[:L, :H]
    page, errors = open_page(browser, (out / profile_page_name("tiny-smollm3")).as_uri())
    assert model_prop(page, "static_layers_note", "visible") and model_prop(page, "d_slider", "visible")
    note = page.get_by_text("does not move with d").first  # drawn, not only in the document
    note.wait_for(state="visible")
    assert "layer 3 does not move with d" in note.inner_text()
    d = 40
    set_prop(page, "d_slider", "value", d)
    page.wait_for_function("(d) => new URLSearchParams(window.location.search).get('d') === String(d)", arg=d,
                           polling=POLL_MS)
    drawn = np.stack([np.array(model_data(page, "heads", c), dtype=float) for c in "abcd"], 1).reshape(L, H, 4)
    np.testing.assert_allclose(drawn, stored[:, :, d], atol=0.5 / 65534)  # every layer at d = 40
    np.testing.assert_allclose(drawn[3], stored[3, :, 0], atol=0.5 / 65534)  # layer 3: as at d = 0
    assert np.abs(drawn[:3] - stored[:3, :, 0]).max() > 1e-3  # the rotary layers moved
    assert errors == []
    page.close()


def test_a_link_to_a_tower_opens_its_page_exported_and_served(browser, families):
    store, out = families
    link = "?model=tiny-clip%2Fvision"
    page, errors = open_page(browser, (out / profile_page_name("tiny-clip/text")).as_uri() + link)

    def on_the_vision_page(url: str) -> bool:  # its restore then writes the rest of its state into the query
        parts = urlsplit(url)
        return (parts.path.endswith("/" + profile_page_name("tiny-clip/vision"))
                and parse_qs(parts.query).get("model") == ["tiny-clip/vision"])

    page.wait_for_url(on_the_vision_page)
    wait_for_bokeh(page, "heads")
    assert js(page, "return find('profile_meta').data.model[0];") == "tiny-clip/vision"
    assert "<b>tiny-clip/vision</b>" in model_prop(page, "model_line", "text")
    assert errors == []
    page.close()
    proc, url = serve_app(store)
    try:
        for link in ("tiny-clip%2Fvision", "tiny-clip/vision"):
            page, errors = open_page(browser, f"{url}?model={link}")
            assert js(page, "return find('profile_meta').data.model[0];") == "tiny-clip/vision"
            assert not model_prop(page, "url_note", "visible")
            assert errors == [], served_state(page, proc)
            page.close()
    finally:
        stop(proc)
