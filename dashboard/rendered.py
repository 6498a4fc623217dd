"""The served app's pages rendered once per process and store state, and copied for each session.

``Pages`` (one per server process: ``PAGES``) renders the layout that ``profiles.page.profiles_view`` /
``compare.page.compare_view`` / ``orbits.page.orbits_content`` build (``render``), prepares it (``prepare``) and
hands each session a ``clone.Copy`` of it: the HoloViews views are rendered the first time a page is asked for
(about 0.7 s for a 1280-head model) and every later session gets its own copy of those Bokeh models (about
15 ms). A page's key (``profiles_key``, ``compare_key``, ``orbits_key``) holds, like ``dashboard.data``'s cache,
the store's path and the modification state of its groups, so a model recomputed while the server runs is
rendered anew. Pages are rendered one at a time on a thread of their own, the pages a session waits for first,
then those ``Pages.warm`` asks for ahead of any session; a session awaits a page's future, so the server's event
loop keeps serving other sessions while a page is rendered (``dashboard.app``). What a rendering changes in Bokeh's
process-wide state stays on that thread: each plot is attached to a document of its own, never to the session
whose callback runs on the event loop meanwhile (``common.render``), and Bokeh's switch of property validation,
which HoloViews turns off while it fills each data source, holds per thread (``bokeh_internals.validation_per_thread``,
set before the thread starts). tests/browser/test_served_loads.py loads pages while the thread renders.

A rendered page is checked once with Bokeh's document validation (its warnings go to the log), so the
served app switches off the same check on every session's document (``app.serve_settings``): a copy has the models
and values of the page it copies. Before the first copy, the page's stateless selection policies and
index filters (one per data source and one per renderer, all alike) are replaced by one shared
instance of each: about 40 fewer models for every session to build, walk and send. Its figures are not
synced back to the server (``syncable`` False: nothing on the server reads a figure's state, and their
sizes as BokehJS measures them would otherwise come back as nine patches a page load, each handled by the
server under the document's lock); the browser's changes to every other model (the slider, the
selection) still reach it.

``Pages``' parameters switch each piece off (``copies``: a page rendered per session; ``preserialise``: each
session's copy serialised by Bokeh), as ``benchmarks/dashboard_bench.py --only pieces`` serves them side by
side; docs/architecture.md ("The serve layer's pieces") has the figures.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from bokeh.core.validation import check_integrity, process_validation_issues
from bokeh.model import Model
from bokeh.models import AllIndices, CDSView, ColumnDataSource, Plot, UnionRenderers

from dashboard import data, serialized
from dashboard.bokeh_internals import validation_per_thread
from dashboard.clone import Copy, Plan, copy_layout, copy_plan
from dashboard.common.render import models_by_name
from dashboard.serialized import Encoded
from dashboard.training import runs
from pipeline.schema import ORBITS, ORBITS_SEARCH

PAGES_KEPT = 12  # prepared pages a process keeps (the least recently asked for go first)


@dataclass(frozen=True)
class Prepared:
    """A rendered page ready to copy: its ``layout``, the list of its ``models``, its serialised form
    (``dashboard.serialized``; None where ``Pages`` does not pre-serialise) and the ``plan`` of copying it
    (``clone.copy_plan``)."""

    layout: Model
    models: list[Model]
    encoded: Encoded | None
    plan: Plan


def prepare(layout: Model, preserialise: bool = True, **shown) -> Prepared:
    """``layout`` with its stateless models shared, validated once, serialised once (``preserialise``) and
    planned for copying.

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
    process_validation_issues(check_integrity(models))
    layout.update(**shown)
    encoded = serialized.encode(layout, models) if preserialise else None
    return Prepared(layout, models, encoded, copy_plan(layout, models))


def profiles_key(store, name: str) -> tuple:
    """The key of the profiles page of model (or run) ``name`` in the store's present state: of its profiles group,
    and of the run of that name (``dashboard.training.runs.state_key``)."""
    return ("profiles", str(store), data.state_key(store), name, runs.state_key(store, name))


def compare_key(store) -> tuple:
    """The key of the compare page in the store's present state."""
    return ("compare", str(store), data.state_key(store))


def orbits_key(store) -> tuple:
    """The key of the orbits page in the present state of the store's orbits groups."""
    return ("orbits", str(store), (data.state_key(store, ORBITS), data.state_key(store, ORBITS_SEARCH)))


def render(key: tuple) -> tuple[Model, dict]:
    """The page of ``key`` (``profiles_key``, ``compare_key``, ``orbits_key``) as its page builder lays it out,
    and the values the app's pane sets on its root."""
    kind, path = key[0], key[1]
    if kind == "profiles":
        return profiles_layout(path, key[3]), {"sizing_mode": "fixed"}
    if kind == "compare":
        from dashboard.compare.page import compare_view

        return compare_view(data.profiles(path), rows=data.rows(path)), {}
    from dashboard.orbits.page import orbits_content

    return orbits_content(Path(path)), {}


def drawable_rows(path) -> list[data.ModelRow]:
    """The store's models (``data.rows``); none when the store holds runs but no profiles group (a run's frames
    written into a new store: ``profiles MODEL --revisions SPEC``), whose pages are then the runs'."""
    try:
        return data.rows(path)
    except data.StoreError:
        if runs.run_names(path):
            return []
        raise


def profiles_layout(path, name: str, run_d0_only: bool = False, **shown):
    """The profiles page of ``name`` as ``profiles_view`` lays it out (``shown``: its navigation, as the exporter
    gives it): a drawable model of the store, with the Training tab of the run of its name when there is one, or a
    run no drawable model names, drawn as its last complete frame with the Training tab
    (``dashboard.training.model``). ``run_d0_only``: the Training tab ships its frames at d = 0 alone (the
    exporter's ``--run-d0-only``). KeyError when the store has neither."""
    from dashboard.profiles.analyses_data import baseline_of
    from dashboard.profiles.page import profiles_view
    from dashboard.training.frames import run_frames
    from dashboard.training.model import last_frame
    from dashboard.training.page import training_tab

    run = runs.run(path, name) if name in runs.run_names(path) else None
    more = (training_tab(run_frames(run, name), d0_only=run_d0_only),) if run is not None else ()
    rows = drawable_rows(path)
    if any(r.name == name and r.computed and not r.damaged for r in rows) or run is None:
        ds = data.profiles(path)
        return profiles_view(data.model_data(path, name), ds.sel(model=name),
                             baseline=baseline_of(ds, name, rows), more_tabs=more, **shown)
    m, sel = last_frame(run, name)
    return profiles_view(m, sel, more_tabs=more, **shown)


class Pages:
    """The served app's pages, each rendered and prepared once per process and store state (the key holds the
    state: a model recomputed while the server runs is rendered anew), one at a time on a thread of their own,
    so that no session's event loop waits on a rendering: a session awaits ``build(key)`` (a future) and takes a
    ``copy`` of the prepared page it holds.

    ``copies``: a session gets a copy of the page prepared once (``clone.py``), else a page rendered for it
    alone, in its own build; ``preserialise``: as ``prepare`` does it (for copies). A rendering that fails (a
    model no longer in the store: ``KeyError``) is not kept; the next request renders again."""

    def __init__(self, copies: bool = True, preserialise: bool = True):
        self.copies, self.preserialise = copies, preserialise
        self._built: OrderedDict[tuple, Future] = OrderedDict()
        self._queue: list[tuple[tuple | None, object]] = []  # (page key or None, its work), the next first
        self._lock = threading.Condition()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queue:
                    self._lock.wait()
                _, work = self._queue.pop(0)
            try:
                work()
            except Exception:  # noqa: BLE001 - a warm-up that cannot read the store: the sessions will say why
                logging.getLogger("dashboard").warning("warming the pages failed", exc_info=True)

    def _queued(self, key: tuple | None, work, first: bool) -> None:
        """Queue ``work`` (a function) for the pages' thread: ``first``, before everything still waiting, else
        after it; the caller holds the lock."""
        self._queue.insert(0 if first else len(self._queue), (key, work))
        if self._thread is None:
            validation_per_thread()  # HoloViews switches validation off while it renders: only for this thread
            self._thread = threading.Thread(target=self._run, name="pages", daemon=True)
            self._thread.start()
        self._lock.notify()

    def _prepare(self, key: tuple, future: Future) -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            start = time.perf_counter()
            layout, shown = render(key)
            future.set_result(prepare(layout, self.preserialise, **shown))
            logging.getLogger("dashboard").info("built the %s page%s in %.1f s", key[0],
                                                f" of {key[3]}" if key[0] == "profiles" else "",
                                                time.perf_counter() - start)
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the page
            future.set_exception(exc)

    def build(self, key: tuple, first: bool = True) -> Future:
        """The future of the prepared page of ``key``, queued unless it is built or being built: ``first``, before
        every page still waiting (a session waits for it), else after them (``warm``). Without copies, a done
        future of None: ``copy`` renders the page."""
        if not self.copies:
            future = Future()
            future.set_result(None)
            return future
        with self._lock:
            future = self._built.get(key)
            if future is None or (future.done() and future.exception() is not None):
                future = self._built[key] = Future()
                self._queued(key, lambda: self._prepare(key, future), first)
                while len(self._built) > PAGES_KEPT:
                    self._built.popitem(last=False)
            elif first and not future.done():  # waiting in the queue: it goes first
                at = next((i for i, (k, _) in enumerate(self._queue) if k == key), None)
                if at:
                    self._queue.insert(0, self._queue.pop(at))
            self._built.move_to_end(key)
            return future

    def warm(self, keys) -> None:
        """Build, after every page already waiting, the pages of ``keys()`` (a function, called on the pages'
        thread: working out the keys may read the store), in that order."""
        with self._lock:
            self._queued(None, lambda: [self.build(k, first=False) for k in keys()], first=False)

    def copy(self, key: tuple, prepared: Prepared | None) -> Copy:
        """A session's own page from ``prepared`` (the result of ``build(key)``): a copy of it, or, without copies,
        the page rendered for this session alone, here and now (as the app did before pages were copied)."""
        if not self.copies:
            layout, _ = render(key)
            return Copy(layout, models_by_name(layout))
        page = copy_layout(prepared.layout, prepared.models, prepared.plan)
        if prepared.encoded is not None:
            serialized.attach(page.root, page.by_original, prepared.encoded)
        return page

    def page(self, key: tuple) -> Copy:
        """A session's own page of ``key``, waiting for its preparation (outside a served session: a notebook, a
        test); what the page builder raised, if it failed."""
        return self.copy(key, self.build(key).result())


PAGES = Pages()  # the served app's pages (``app.serve``)


def compare(store) -> Copy:
    """A new copy of the compare page (every computed model of the store)."""
    return PAGES.page(compare_key(store))


def profiles(store, name: str) -> Copy:
    """A new copy of the profiles page of model ``name``; KeyError (from ``data.model_data``, never kept) when
    the store has no such model."""
    return PAGES.page(profiles_key(store, name))


def orbits(store) -> Copy:
    """A new copy of the orbits page (or of its message when the store's orbits group cannot be shown)."""
    return PAGES.page(orbits_key(store))


def same_structure(a: Copy, b: Copy) -> bool:
    """Whether two copied pages hold the same named models (names and types): then ``replace_in_place`` can
    turn one into the other. Whether a model has statistics does not change the names (the views that need them
    are hidden), so most pages of one store share one structure. A page with a run's Training tab is of a structure
    of its own: the tab holds models that are its run's and carry no name (its legends' items, its charts' log-step
    axes and their ticks), which an in-place switch would keep from the page before."""
    def names(c: Copy):
        return sorted((n, type(m).__name__) for n, ms in c.named.items() for m in ms)
    if "training" in a.named or "training" in b.named:
        return False
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
