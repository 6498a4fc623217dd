"""The demo store: what readers show when the default store has nothing to show, and its copy as a writable store.

The demo (``pipeline.store.location.demo_store``: the committed store's content, bundled with the package) is
read-only. ``list`` and the dashboard show it when the default store found without being named (the user store,
or the current folder's ``store.zarr``) is missing or holds no computed model, and say so with the command that
computes a model; a store named with ``--store`` or ``$HEADGEOMETRY_STORE`` is shown as it is (a missing one is an
error saying how to create it, not the demo in its place). ``headgeometry demo PATH`` copies it out (:func:`copy_demo`).
"""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from pipeline.store.errors import StoreError
from pipeline.store.location import (
    FROM_ENV,
    FROM_OPTION,
    StoreChoice,
    chosen_store,
    default_store,
    demo_store,
    inside_package,
    is_demo,
    is_url,
    refuse_write,
)
from pipeline.version import version

COMPUTE = "headgeometry profiles gpt2"  # the command a note gives to compute a first model
COPY = "headgeometry demo PATH"
NAMED = (FROM_ENV, FROM_OPTION)  # stores the user named: shown as they are (a typo is an error, not the demo)
MISSING = "does not exist yet"
EMPTY = "holds no computed model yet"


@dataclass(frozen=True)
class Shown:
    """The store a reader shows: ``chosen`` (``--store`` or the default rule), or the demo in its place
    (``demo``: the chosen store is the user store or the current folder's and is missing or holds no computed
    model). ``state`` says
    what the chosen store lacks ('' when it is shown)."""

    chosen: StoreChoice
    location: str
    demo: bool = False
    state: str = ""

    def note(self) -> str:
        """One line saying what is shown, and why when it is the demo."""
        if not self.demo:
            return f"Store: {self.chosen.line()}"
        why = f": the default store {self.chosen.line()} {self.state}" if self.state else ""
        return (f"Showing the demo store ({origin(self.location)}){why}. Compute a model "
                f"with `{COMPUTE}`; `{COPY}` copies the demo out as a writable store.")


def origin(demo: str) -> str:
    """What the demo at ``demo`` is, in a few words: the read-only copy bundled with the package, or a checkout's
    committed store."""
    if inside_package(demo):
        return f"read-only, bundled with headgeometry {version()}"
    return "this checkout's committed store"


def store_state(location: str) -> str:
    """What the store at ``location`` lacks: "does not exist yet", "holds no computed model yet", or '' when it
    holds a computed model or cannot be read (its reader then says why)."""
    from pipeline.store import Store
    from pipeline.store.backend import backend_for

    try:
        if not (backend_for(location).exists() if is_url(location) else Path(location).exists()):
            return MISSING
        computed = any(r.computed for r in Store.open(location, "r").models())
    except (StoreError, OSError):
        return ""
    return "" if computed else EMPTY


def shown_store(option: str | None = None) -> Shown:
    """The store to show for ``--store`` ``option`` (None: the default store, or the demo in the place of an
    unnamed one that has nothing to show)."""
    chosen = chosen_store(option)
    demo = demo_store()
    if chosen.reason in NAMED or demo is None or is_demo(chosen.location):
        return Shown(chosen, chosen.location, demo=inside_package(chosen.location))
    state = store_state(chosen.location)
    return Shown(chosen, str(demo), demo=True, state=state) if state else Shown(chosen, chosen.location)


def describe(location) -> Shown:
    """How a reader handed ``location`` explains it: the default store (and why), the demo (and what the default
    store lacks), or a store chosen with ``--store``. For a process given its store by another (``python -m
    dashboard`` runs ``panel serve ... --args --store PATH`` with the store it chose)."""
    location = str(location)
    default = default_store()
    if _same(location, default.location):
        return Shown(default, location, demo=inside_package(location))
    if is_demo(location):
        return Shown(default, location, demo=True, state=store_state(default.location))
    return Shown(chosen_store(location), location, demo=inside_package(location))


def _same(a: str, b: str) -> bool:
    if is_url(a) or is_url(b):
        return a == b
    return Path(a).expanduser().absolute() == Path(b).expanduser().absolute()


@dataclass(frozen=True)
class Listed:
    """One store ``list`` prints: its location, the line above its table, and the line when it has no models."""

    location: str
    heading: str
    empty: str


def listed_stores(option: str | None = None) -> list[Listed]:
    """The stores ``list`` prints: the chosen one, then the demo when it is shown in the chosen one's place."""
    from pipeline.store import written_by

    shown = shown_store(option)
    chosen = shown.chosen.location
    recorded = None if shown.state == MISSING else written_by.recorded(chosen)
    written = f"last written by headgeometry {recorded}" if recorded else "writer's version not recorded"
    out = [Listed(chosen, f"The store {shown.chosen.line()}, {written}:",
                  f"The store {shown.chosen.line()} holds no profiles yet.")]
    if shown.demo and shown.location != chosen:
        heading = (f"The demo store {shown.location} ({origin(shown.location)}; compute a "
                   f"model of your own with `{COMPUTE}`, or copy the demo out as a writable store with `{COPY}`):")
        out.append(Listed(shown.location, heading, f"The demo store {shown.location} holds no profiles."))
    return out


def copy_demo(dest) -> Path:
    """Copy the demo to ``dest`` (a new folder) as a writable store; returns it. Nothing existing is overwritten:
    a StoreError when ``dest`` exists (an empty folder is taken) or there is no demo."""
    demo = demo_store()
    if demo is None:
        raise StoreError("this installation has no demo store (it ships with the wheel, and a checkout has its "
                         "committed store.zarr).")
    dest = Path(dest).expanduser()
    refuse_write(str(dest))
    if dest.exists() and not (dest.is_dir() and not any(dest.iterdir())):
        raise StoreError(f"{str(dest)!r} already exists; choose a new folder for the copy of the demo.")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex}.partial")
    try:
        for folder, _dirs, files in os.walk(demo):
            rel = Path(folder).relative_to(demo)
            (tmp / rel).mkdir(parents=True, exist_ok=True)  # this process's umask, not the package's modes
            for name in files:
                shutil.copyfile(Path(folder) / name, tmp / rel / name)
        if dest.exists():
            dest.rmdir()
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest
