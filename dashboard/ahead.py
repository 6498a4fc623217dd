"""Profiles layouts built ahead of the sessions that show them.

``panel serve`` runs ``app.py`` afresh for every session, so what sessions share lives in imported
modules: the store's contents (``dashboard.data``) and, here, a few ready layouts per (store, state of
the store, model). A new session takes one and a background thread builds its replacement, so a warm
session does not wait for HoloViews to render. Each layout is used by one session only (a Bokeh model
belongs to one document).
"""

from __future__ import annotations

import collections
import concurrent.futures
import threading

from dashboard import data
from dashboard.profiles_page import profiles_view

READY_PER_MODEL = 2
_ready: dict[tuple, collections.deque] = {}
_builder = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="dashboard-prebuild")
_lock = threading.Lock()


def _refill(key: tuple, m: data.ModelData) -> None:
    with _lock:
        if len(_ready.setdefault(key, collections.deque())) >= READY_PER_MODEL:
            return
    layout = profiles_view(m)
    with _lock:
        _ready[key].append(layout)


def profiles_layout(store, m: data.ModelData):
    """A fresh profiles layout of ``m`` for one session: one built ahead if there is one, else built now."""
    key = (str(store), data.state_key(store), m.row.name)
    with _lock:
        for stale in [k for k in _ready if k[0] == key[0] and k[2] == key[2] and k != key]:
            del _ready[stale]  # built from an earlier state of the store
        queue = _ready.get(key)
        layout = queue.popleft() if queue else None
    for _ in range(READY_PER_MODEL):
        _builder.submit(_refill, key, m)
    return layout if layout is not None else profiles_view(m)
