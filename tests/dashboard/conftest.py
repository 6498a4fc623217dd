"""The dashboard's tests draw HoloViews views: Bokeh is HoloViews' backend for them, as the entry points make
it (``dashboard.common.render.use_bokeh``)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def bokeh_backend():
    from dashboard.common.render import use_bokeh

    use_bokeh()
