"""What the served page says about its store: the line naming it and why, and the note when it is the demo.

The served app is handed its store as a path (``python -m dashboard`` runs ``panel serve dashboard/app.py --args
--store PATH`` with the store it chose), so the reason is found again here from the path
(``pipeline.store.demo.describe``): the default store and the rule that chose it, the demo shown in the place of
an unnamed default store that is missing or holds no computed model, or a store named with ``--store``.
"""

from __future__ import annotations

import functools
import html
from pathlib import Path

from pipeline.store.demo import Shown, describe


@functools.lru_cache(maxsize=4)
def _described(store: str) -> Shown:
    """``describe(store)``, once per process: the served store is chosen at start-up, and the note says what the
    default store held then (reading it again for every session would cost each one a store open)."""
    return describe(store)


def _shown_path(store) -> str:
    """``store`` relative to the folder the app was started from when it lies inside it, else as given."""
    shown = Path(store)
    try:
        shown = shown.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        pass
    return str(shown)


def store_line_html(store) -> str:
    """``Store: PATH (why)``: the line at the foot of the page."""
    shown = _described(str(store))
    why = "the demo, read-only" if shown.demo else shown.chosen.reason
    return f"<p class='meta'>Store: <code>{html.escape(_shown_path(store))}</code> ({html.escape(why)})</p>"


def demo_note_html(store) -> str:
    """A visible note under the title when ``store`` is the demo, with the command that computes a model; ''
    otherwise."""
    shown = _described(str(store))
    return f"<div class='warn' id='demo_note'>{html.escape(shown.note())}</div>" if shown.demo else ""
