"""The served app's pages rendered once per process and store state, and copied for each session.

``profiles(store, name)`` and ``orbits(store)`` return a ``clone.Copy`` of the layout that
``profiles_page.profiles_view`` / ``export.orbits_content`` build: the HoloViews views are rendered the first
time a model is shown (about 0.7 s for 1280 heads) and every later session gets its own copy of those
Bokeh models (about 15 ms). The cache is keyed like ``dashboard.data``'s, on the store's path and the
modification state of its groups, so a model recomputed while the server runs is rendered anew.

A rendered page is checked once with Bokeh's document validation (its warnings go to the log), so the
served app switches off the same check on every session's document (``app.py``): a copy has the models
and values of the page it copies. Before the first copy, the page's stateless selection policies and
index filters (one per data source and one per renderer, all alike) are replaced by one shared
instance of each: about 40 fewer models for every session to build, walk and send.

Every session's document is walked over all its models several times (Bokeh's document bookkeeping,
Panel's root handling and stylesheet patching), and a walk reads every property that may hold a model.
Bokeh evaluates an unset property's default at every read (prepare and validate it, about 50 µs), so
before the first copy those defaults are written into the rendered page as values: a walk then reads a
dict. The page shows the same (a value equal to the default), its document grows by about 2% (the
values are sent), and a walk costs about a third of what it did (``benchmarks/dashboard_bench.py``). The
pages use no Bokeh theme, which such values would override.
"""

from __future__ import annotations

import functools
import threading
from pathlib import Path

from bokeh.core.validation import check_integrity, process_validation_issues
from bokeh.model import Model
from bokeh.models import AllIndices, CDSView, ColumnDataSource, UnionRenderers

from dashboard import data
from dashboard.clone import Copy, copy_layout
from pipeline.schema import ORBITS, ORBITS_SEARCH

_LOCK = threading.Lock()  # sessions asking for a page not yet rendered wait for one rendering of it
                          # (lru_cache alone would let each thread render it)


def _materialise_references(models: list[Model]) -> None:
    """Write the default of every unset property that may hold a model as the property's value."""
    for m in models:
        for name in m.properties_with_refs():
            if name not in m._property_values and name not in m._unstable_default_values:
                m.lookup(name)._set_value(m, getattr(m, name))


def _prepared(layout: Model) -> tuple[Model, list[Model]]:
    """``layout`` with its stateless models shared, the defaults its walks read written as values, validated
    once; and the list of its models."""
    policy, everything = UnionRenderers(), AllIndices()
    for m in list(layout.references()):
        if isinstance(m, ColumnDataSource) and isinstance(m.selection_policy, UnionRenderers):
            m.selection_policy = policy
        elif isinstance(m, CDSView) and isinstance(m.filter, AllIndices):
            m.filter = everything
    models = list(layout.references())
    _materialise_references(models)
    process_validation_issues(check_integrity(models))
    return layout, models


@functools.lru_cache(maxsize=8)
def _profiles(path: str, key: tuple, name: str) -> tuple[Model, list[Model]]:
    from dashboard.profiles_page import profiles_view

    return _prepared(profiles_view(data.model_data(path, name)))


@functools.lru_cache(maxsize=2)
def _orbits(path: str, key: tuple) -> tuple[Model, list[Model]]:
    from dashboard.export import orbits_content

    return _prepared(orbits_content(Path(path)))


def profiles(store, name: str) -> Copy:
    """A new copy of the profiles page of model ``name``; KeyError (from ``data.model_data``, never cached)
    when the store has no such model."""
    with _LOCK:
        layout, models = _profiles(str(store), data.state_key(store), name)
    return copy_layout(layout, models)


def orbits(store) -> Copy:
    """A new copy of the orbits page (or of its message when the store's orbits group cannot be shown)."""
    key = (data.state_key(store, ORBITS), data.state_key(store, ORBITS_SEARCH))
    with _LOCK:
        layout, models = _orbits(str(store), key)
    return copy_layout(layout, models)
