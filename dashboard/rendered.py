"""The served app's pages rendered once per process and store state, and copied for each session.

``profiles(store, name)``, ``compare(store)`` and ``orbits(store)`` return a ``clone.Copy`` of the layout
that ``profiles_page.profiles_view`` / ``compare_page.compare_view`` / ``orbits_page.orbits_content`` build: the
HoloViews views are rendered the first time a model is shown (about 0.7 s for 1280 heads) and every
later session gets its own copy of those Bokeh models (about 15 ms). The cache is keyed like
``dashboard.data``'s, on the store's path and the modification state of its groups, so a model
recomputed while the server runs is rendered anew.

A rendered page is checked once with Bokeh's document validation (its warnings go to the log), so the
served app switches off the same check on every session's document (``app.serve_settings``): a copy has the models
and values of the page it copies. Before the first copy, the page's stateless selection policies and
index filters (one per data source and one per renderer, all alike) are replaced by one shared
instance of each: about 40 fewer models for every session to build, walk and send. Its figures are not
synced back to the server (``syncable`` False: nothing on the server reads a figure's state, and their
sizes as BokehJS measures them would otherwise come back as nine patches a page load, each handled by the
server under the document's lock); the browser's changes to every other model (the slider, the
selection) still reach it.

Every session's document is walked over all its models several times (Bokeh's document bookkeeping,
Panel's root handling and stylesheet patching) and serialised once, and Bokeh evaluates an unset
property's default at every read (copy, prepare and validate it, 20-50 µs): a walk reads every property
that may hold a model, the serialiser every property. So before the first copy those defaults are
written into the rendered page as values (``_materialise_defaults``), and a read is a dict lookup.
Elements that BokehJS draws in the DOM keep their other properties unset (``_written_properties``).
BokehJS sees every model with the same values and draws the same pixels
(``tests/browser/test_rendered.py``); the document grows by about 5% (the values are sent). The pages
use no Bokeh theme, which such values would override. ``HEADGEOMETRY_WRITE_DEFAULTS=0`` in the server's
environment leaves the defaults unset, to compare a page drawn both ways.
"""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path

from bokeh.core.property.descriptors import PropertyDescriptor, UnsetValueError
from bokeh.core.validation import check_integrity, process_validation_issues
from bokeh.model import Model
from bokeh.models import AllIndices, CDSView, ColumnDataSource, Plot, Title, Toolbar, UIElement, UnionRenderers

from dashboard import data, serialized
from dashboard.bokeh_internals import is_set, set_value
from dashboard.clone import Copy, Plan, copy_layout, copy_plan
from dashboard.serialized import Encoded
from pipeline.schema import ORBITS, ORBITS_SEARCH

_LOCK = threading.Lock()  # sessions asking for a page not yet rendered wait for one rendering of it
                          # (lru_cache alone would let each thread render it)


def _written_properties(m: Model):
    """The properties of ``m`` whose defaults ``_materialise_defaults`` writes: every property of a model
    drawn on a canvas; of a page element drawn in the DOM (layouts, widgets, Divs, figures, their titles
    and toolbars), only those that may hold a model. BokehJS styles such elements differently once a
    property is set, even to its default (with theirs written, the served page's plot titles shrink and a
    toolbar appears: ``tests/browser/test_rendered.py``)."""
    return m.properties_with_refs() if isinstance(m, (UIElement, Title, Toolbar)) else m.properties()


def _materialise_defaults(models: list[Model]) -> None:
    """Write the default of each unset property of ``models`` that ``_written_properties`` names as the
    property's value (those that are not serialised, such as the units of a data spec, stay out of the
    document as before)."""
    for m in models:
        for name in _written_properties(m):
            descriptor = m.lookup(name)
            if not isinstance(descriptor, PropertyDescriptor) or is_set(m, name):  # an alias, or a value
                continue
            try:
                value = getattr(m, name)
            except UnsetValueError:  # a property without a default stays unset
                continue
            set_value(m, descriptor, value)


def _prepared(layout: Model, **shown) -> tuple[Model, list[Model], Encoded, Plan]:
    """``layout`` with its stateless models shared, its defaults written as values, validated once; the
    list of its models; its serialised form (``dashboard.serialized``); and the plan of copying it
    (``clone.copy_plan``).

    ``shown``: the values the app's pane sets on the page's root (``PagePane(sizing_mode="fixed")`` in
    ``app.profiles_panel``), set after the validation (which warns on a fixed sizing mode without a width
    and height), so that a session's copy is served as it was copied."""
    policy, everything = UnionRenderers(), AllIndices()
    for m in list(layout.references()):
        if isinstance(m, ColumnDataSource) and isinstance(m.selection_policy, UnionRenderers):
            m.selection_policy = policy
        elif isinstance(m, CDSView) and isinstance(m.filter, AllIndices):
            m.filter = everything
    models = list(layout.references())
    for m in models:
        if isinstance(m, Plot):
            m.syncable = False
    if os.environ.get("HEADGEOMETRY_WRITE_DEFAULTS", "1") != "0":
        _materialise_defaults(models)
    process_validation_issues(check_integrity(models))
    layout.update(**shown)
    return layout, models, serialized.encode(layout, models), copy_plan(layout, models)


def _copy(layout: Model, models: list[Model], encoded: Encoded, plan: Plan) -> Copy:
    """A new copy of a prepared page that serialises as ``encoded`` (renamed) until it changes."""
    page = copy_layout(layout, models, plan)
    serialized.attach(page.root, page.by_original, encoded)
    return page


@functools.lru_cache(maxsize=8)
def _profiles(path: str, key: tuple, name: str) -> tuple[Model, list[Model], Encoded, Plan]:
    from dashboard.profiles.analyses_data import baseline_of
    from dashboard.profiles.page import profiles_view

    ds = data.profiles(path)
    return _prepared(profiles_view(data.model_data(path, name), ds.sel(model=name), baseline=baseline_of(ds, name)),
                     sizing_mode="fixed")


@functools.lru_cache(maxsize=2)
def _orbits(path: str, key: tuple) -> tuple[Model, list[Model], Encoded, Plan]:
    from dashboard.orbits.page import orbits_content

    return _prepared(orbits_content(Path(path)))


@functools.lru_cache(maxsize=2)
def _compare(path: str, key: tuple) -> tuple[Model, list[Model], Encoded, Plan]:
    from dashboard.compare.page import compare_view

    return _prepared(compare_view(data.profiles(path), damaged={r.name for r in data.rows(path) if r.damaged}))


def compare(store) -> Copy:
    """A new copy of the compare page (every computed model of the store)."""
    with _LOCK:
        prepared = _compare(str(store), data.state_key(store))
    return _copy(*prepared)


def profiles(store, name: str) -> Copy:
    """A new copy of the profiles page of model ``name``; KeyError (from ``data.model_data``, never cached)
    when the store has no such model."""
    with _LOCK:
        prepared = _profiles(str(store), data.state_key(store), name)
    return _copy(*prepared)


def orbits(store) -> Copy:
    """A new copy of the orbits page (or of its message when the store's orbits group cannot be shown)."""
    key = (data.state_key(store, ORBITS), data.state_key(store, ORBITS_SEARCH))
    with _LOCK:
        prepared = _orbits(str(store), key)
    return _copy(*prepared)


def same_structure(a: Copy, b: Copy) -> bool:
    """Whether two copied pages hold the same named models (names and types): then ``replace_in_place`` can
    turn one into the other. Pages of models with and without statistics differ."""
    def names(c: Copy):
        return sorted((n, type(m).__name__) for n, ms in c.named.items() for m in ms)
    return names(a) == names(b)


def _holds_model(value) -> bool:
    if isinstance(value, Model):
        return True
    if isinstance(value, dict):
        return any(_holds_model(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_model(v) for v in value)
    return False


SKIP = {"name", "id", "js_event_callbacks", "js_property_callbacks", "subscribed_events", "syncable", "tags"}


def replace_in_place(shown: Copy, new: Copy) -> None:
    """Give every named model of the page ``shown`` the values of the same-named model of ``new``.

    Both are copies of ``profiles_view`` layouts (``profiles``; same structure for every model), so
    a served page switches model by changing data: no model joins or leaves the document. ``new`` is
    discarded afterwards.
    """
    for name, models in new.named.items():
        olds = shown.named.get(name, [])
        if len(models) != 1 or len(olds) != 1 or type(olds[0]) is not type(models[0]):
            continue
        old, m = olds[0], models[0]
        values = {k: v for k, v in m.properties_with_values(include_defaults=True).items()
                  if k not in SKIP and not _holds_model(v)}
        changed = {}
        for k, v in values.items():
            current = getattr(old, k)
            same = current is v
            if not same:
                try:
                    same = bool(current == v)
                except ValueError:  # arrays
                    same = False
            if not same:
                changed[k] = dict(v) if k == "data" else v
        if changed:
            old.update(**changed)
