"""The dashboard's tests draw HoloViews views: Bokeh is HoloViews' backend for them, as the entry points make
it (``dashboard.common.render.use_bokeh``). ``pages``: every kind of page, built once for the tests that read
their callbacks."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def bokeh_backend():
    from dashboard.common.render import use_bokeh

    use_bokeh()


@pytest.fixture(scope="session")
def pages(tmp_path_factory):
    """The profiles pages of a rotary and an absolute-position model (static, with their tabs and navigation),
    a served profiles page (no navigation, no statistics), the compare page and the orbits page, over the
    browser tests' synthetic store."""
    from dashboard import data
    from dashboard.compare.page import compare_view
    from dashboard.orbits.page import orbits_content
    from dashboard.profiles.page import profiles_view
    from tests.browser.conftest import ABSOLUTE_MODEL, ROPE_MODEL, write_synthetic_store

    store = write_synthetic_store(tmp_path_factory.mktemp("pages") / "store.zarr")
    nav = {ROPE_MODEL: "a.html", ABSOLUTE_MODEL: "b.html"}
    out = [profiles_view(data.model_data(store, n), data.profiles(store).sel(model=n), nav=nav, current_url=nav[n],
                         tabs={"profiles": "", "compare": "compare.html"}) for n in nav]
    out.append(profiles_view(data.model_data(store, ROPE_MODEL)))
    out.append(compare_view(data.profiles(store)))
    out.append(orbits_content(store))
    return out
