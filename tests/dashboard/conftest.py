"""The dashboard's tests draw HoloViews views: Bokeh is HoloViews' backend for them, as the entry points make
it (``dashboard.common.render.use_bokeh``).

What the tests only read is built once: ``synthetic``, the browser tests' synthetic store, once per test run;
``static_page``, a profiles page of a store, once per pytest-xdist worker (as are the served app's pages of a store,
``rendered.PAGES``, so the tests that read ``synthetic`` share those too); ``pages``, every kind of page, for the
tests that read their callbacks; ``analyses_pages``, the profiles pages of the Analyses tab's store, once per
worker."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from tests.shared import built_once


@pytest.fixture(scope="session", autouse=True)
def bokeh_backend():
    from dashboard.common.render import use_bokeh

    use_bokeh()


@pytest.fixture(scope="session")
def synthetic(tmp_path_factory) -> Path:
    """The browser tests' synthetic store (``write_synthetic_store``: a rotary model with statistics, an absolute one
    without, an empty one, and an orbits group), written once per test run for every pytest-xdist worker
    (``tests.shared.built_once``). The tests that take it only read it."""
    from tests.browser.conftest import write_synthetic_store

    return built_once(tmp_path_factory, "dashboard-synthetic",
                      lambda folder: write_synthetic_store(folder / "store.zarr")) / "store.zarr"


@pytest.fixture(scope="session")
def static_page():
    """``static_page(store, name, statistics=True)``: the profiles page of model ``name`` as ``profiles_view`` lays
    it out without navigation, from the model's Dataset (its statistics and spectra) or, with ``statistics``
    False, from its profiles alone; built once per worker for the tests that only read it (a test that changes
    a page, or puts it into a document it keeps, builds its own)."""
    from dashboard import data
    from dashboard.profiles.page import profiles_view

    @cache
    def build(store: Path, name: str, statistics: bool = True):
        return profiles_view(data.model_data(store, name),
                             data.profiles(store).sel(model=name) if statistics else None)

    return build


@pytest.fixture(scope="session")
def training_store(tmp_path_factory) -> Path:
    """The training view's store (``training_store.write_training_store``: the synthetic models and two runs), written
    once per test run; the tests that take it only read it."""
    from tests.dashboard.training_store import write_training_store

    return built_once(tmp_path_factory, "dashboard-training",
                      lambda folder: write_training_store(folder / "store.zarr")) / "store.zarr"


@pytest.fixture(scope="session")
def pages(synthetic, static_page, training_store):
    """The profiles pages of a rotary and an absolute-position model (static, with their tabs and navigation),
    a profiles page without navigation and statistics, the served compare and orbits pages (copies of this
    process's ``rendered.PAGES``, which the served-page tests read too), over the browser tests' synthetic store, and
    a run's page with its Training tab (``training_store``)."""
    from dashboard import data, rendered
    from dashboard.profiles.page import profiles_view
    from tests.browser.conftest import ABSOLUTE_MODEL, ROPE_MODEL
    from tests.dashboard.training_store import RUN

    store = synthetic
    nav = {ROPE_MODEL: "a.html", ABSOLUTE_MODEL: "b.html"}
    out = [profiles_view(data.model_data(store, n), data.profiles(store).sel(model=n), nav=nav, current_url=nav[n],
                         tabs={"profiles": "", "compare": "compare.html"}) for n in nav]
    out.append(static_page(store, ROPE_MODEL, statistics=False))
    out.append(rendered.compare(store).root)
    out.append(rendered.orbits(store).root)
    out.append(rendered.profiles_layout(training_store, RUN))
    return out


@pytest.fixture(scope="session")
def analyses_pages(tmp_path_factory) -> tuple[Path, dict]:
    """(the Analyses tab's store (``analyses_store``), {model: its profiles page with its statistics and its
    baseline}) for its two trained models, built once per worker; the tests that take it only read it, and their
    modules share a worker (``tests.shared.ANALYSES_PAGES``)."""
    from dashboard import data
    from dashboard.profiles.analyses_data import baseline_of
    from dashboard.profiles.page import profiles_view
    from tests.dashboard.analyses_store import PLAIN, ROPE, analyses_store

    store = analyses_store(tmp_path_factory)
    ds = data.profiles(store)
    return store, {n: profiles_view(data.model_data(store, n), ds.sel(model=n), baseline=baseline_of(ds, n))
                   for n in (ROPE, PLAIN)}
