"""Shared hooks and fixtures of every test.

Every test under tests/browser/ gets the ``browser`` marker here, so the quick tier
(``-m "not slow and not browser"``) leaves out any browser test, marked in its module or not. Each test gets the
pytest-xdist group that runs it where its shared fixtures are built (:func:`xdist_group`).

``tiny_model`` saves tiny random transformers models (``tests.tiny_models``, which the model tests import). This
module imports neither torch nor transformers: pytest-xdist's controller loads it, runs no test, and starts its
workers sooner without them.
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from tests.faults.figures import pytest_runtest_logreport, pytest_terminal_summary  # noqa: F401 - the faults' summary

BROWSER_TESTS = Path(__file__).resolve().parent / "browser"


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's hook reads the xdist_group marks
def pytest_collection_modifyitems(config, items) -> None:
    """Every test under tests/browser/ is a ``browser`` test, so ``-m "not browser"`` leaves them all out; each
    test gets the pytest-xdist group (:func:`xdist_group`) that runs it where its shared fixtures are built."""
    for item in items:
        if BROWSER_TESTS in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.browser)
        group = xdist_group(item)
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))


def pytest_configure(config) -> None:
    """Python's cyclic garbage collector runs less often in a test process, as in the dashboard's processes
    (``dashboard.collector``), from before the collection: the tests allocate millions of objects (Bokeh models,
    zarr's and xarray's bookkeeping) beside millions more from the imports (torch, transformers, HoloViews), and at
    Python's default thresholds the full collections, each a walk over all of them, took a large share of a
    worker's time; ten of them fell in the collection's imports alone. A test that needs garbage gone calls
    ``gc.collect()``."""
    from dashboard.collector import collect_less_often

    collect_less_often()


def pytest_collection_finish(session) -> None:
    """One torch thread per pytest-xdist worker; and what the collection's imports made is frozen
    (``gc.freeze``): those objects live as long as the process, and the full collections after it (a test's
    ``gc.collect()``, the session's last one) then walk only what the tests made."""
    try:
        import torch
    except ImportError:  # the dashboard's tests run without the pipeline's extras
        pass
    else:
        torch.set_num_threads(1)  # a worker per core (-n auto): one thread each
    gc.freeze()


@pytest.hookimpl(trylast=True)  # after pytest's own sessionfinish, which tears the session's fixtures down
def pytest_sessionfinish(session) -> None:
    """The session's garbage is collected once, while pytest's hook still reports an exception raised in a
    finalizer, and what survives is frozen (``gc.freeze``). At exit pytest collects five more times to find such
    exceptions; each of those would walk the whole heap again (over a second each in a worker that built pages),
    and with the survivors frozen they walk only what the exit itself makes."""
    gc.collect()
    gc.freeze()


def xdist_group(item) -> str | None:
    """The pytest-xdist group of a test (``--dist loadgroup`` in pyproject.toml sends a group to one worker, and a
    worker is a pytest session of its own): "browser" for the browser tests, so that one chromium, one served app
    and one export of each kind (session fixtures of tests/browser/conftest.py) serve them all; its module for a
    test that uses a module-scoped fixture, so that the fixture is built once; else None (any worker). A test
    marked with a group of its own (``tests.shared.SYNTHETIC_PAGES``, ``tests.shared.ANALYSES_PAGES``) keeps it."""
    if item.get_closest_marker("browser") is not None:
        return "browser"
    defs = getattr(item, "_fixtureinfo", None)
    if defs is not None and any(d.scope == "module" for ds in defs.name2fixturedefs.values() for d in ds):
        return item.nodeid.split("::")[0]
    return None


@pytest.fixture
def tiny_model(tmp_path):
    """Factory: ``tiny_model(kind, dtype=None, max_shard_size=None, seed=0, **config) -> (model, folder)``, a tiny
    random model saved under the test's ``tmp_path`` (``tests.tiny_models.tiny_factory``)."""
    from tests.tiny_models import tiny_factory

    return tiny_factory(tmp_path)
