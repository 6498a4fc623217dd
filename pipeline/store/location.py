"""Where the store is: the one rule every command and the dashboard follow, and the demo that ships with the
package. Light (the standard library; platformdirs when asked): the command line's help texts import it.

The default store, first match wins:

1. ``$HEADGEOMETRY_STORE`` when it is set (a path or an fsspec URL): "from $HEADGEOMETRY_STORE";
2. ``store.zarr`` in the current folder when there is one: "in the current folder" (a clone, run from its root,
   reads and writes its committed store);
3. ``store.zarr`` in the user data folder (``platformdirs.user_data_path("headgeometry")``, e.g.
   ``~/.local/share/headgeometry`` on Linux, honouring ``$XDG_DATA_HOME``): "user store".

``--store PATH`` overrides it per command. The default is never a path inside the installed package: a wheel's
package folder may be read-only, is replaced by the next upgrade, and holds the demo.

The demo is the committed store's content. A wheel carries it as package data (``setup.py`` copies the
repository's ``store.zarr`` to ``pipeline/store/demo.zarr`` at build time, so the repository holds one copy); a
checkout has no bundled copy and its demo is the checkout's own ``store.zarr``. Readers show the demo in the place
of a user store or current-folder store that is missing or holds no computed model (:mod:`pipeline.store.demo`);
nothing ever writes into a store inside the installed package (:func:`refuse_write`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ENV_VAR = "HEADGEOMETRY_STORE"
STORE_NAME = "store.zarr"
APP_NAME = "headgeometry"
PACKAGE = Path(__file__).resolve().parent.parent  # the installed ``pipeline`` package (in a checkout: its source)
BUNDLED_DEMO = PACKAGE / "store" / "demo.zarr"  # written into the wheel by setup.py
CHECKOUT_STORE = PACKAGE.parent / STORE_NAME  # the committed store, when ``pipeline`` is a checkout's folder

FROM_ENV = f"from ${ENV_VAR}"
IN_CURRENT_FOLDER = "in the current folder"
USER_STORE = "user store"
FROM_OPTION = "from --store"

# the rule in a few words, for every --store help text
DEFAULT_HELP = f"${ENV_VAR}, else {STORE_NAME} in the current folder, else the user store"


@dataclass(frozen=True)
class StoreChoice:
    """A store location (a path or an fsspec URL) and why it is the one in use."""

    location: str
    reason: str

    def line(self) -> str:
        """``LOCATION (REASON)``, as ``list`` and the dashboard print it."""
        return f"{self.location} ({self.reason})"


def user_store() -> Path:
    """``store.zarr`` in the user data folder (platformdirs: ``$XDG_DATA_HOME/headgeometry`` or
    ``~/.local/share/headgeometry`` on Linux, the platform's own folder elsewhere). Nothing is created here."""
    import platformdirs

    return platformdirs.user_data_path(APP_NAME) / STORE_NAME


def make_user_folder(location: str) -> None:
    """Create the user data folder when ``location`` is the user store, before its first write (a store given
    with --store in a folder that does not exist is refused instead: a typo there should not make folders)."""
    if not is_url(location) and Path(location).expanduser().absolute() == user_store().absolute():
        user_store().parent.mkdir(parents=True, exist_ok=True)


def inside_package(location: str) -> bool:
    """Whether ``location`` (a local path) lies inside the installed ``pipeline`` package."""
    if is_url(location):
        return False
    path = Path(location).expanduser().absolute()
    return path == PACKAGE or PACKAGE in path.parents or PACKAGE in path.resolve().parents


def default_store() -> StoreChoice:
    """The default store and why (the rule in the module docstring)."""
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return StoreChoice(env if is_url(env) else str(Path(env).expanduser()), FROM_ENV)
    here = Path.cwd() / STORE_NAME
    if here.is_dir() and not inside_package(str(here)):
        return StoreChoice(str(here), IN_CURRENT_FOLDER)
    return StoreChoice(str(user_store()), USER_STORE)


def chosen_store(option: str | None = None) -> StoreChoice:
    """The store of a command: ``--store`` when given (``option``), else :func:`default_store`."""
    if option:
        return StoreChoice(option if is_url(option) else str(Path(option).expanduser()), FROM_OPTION)
    return default_store()


def demo_store() -> Path | None:
    """The demo: the copy bundled with an installed wheel, else a checkout's committed store; None without either."""
    if (BUNDLED_DEMO / "zarr.json").is_file():
        return BUNDLED_DEMO
    if (PACKAGE.parent / "pyproject.toml").is_file() and (CHECKOUT_STORE / "zarr.json").is_file():
        return CHECKOUT_STORE
    return None


def is_demo(location) -> bool:
    """Whether ``location`` is the demo store."""
    demo = demo_store()
    if demo is None or is_url(str(location)):
        return False
    return Path(location).expanduser().absolute() == demo.absolute()


def refuse_write(location: str) -> None:
    """A StoreError when ``location`` lies inside the installed package (the bundled demo): nothing writes there."""
    from pipeline.store.errors import StoreError

    if inside_package(location):
        raise StoreError(f"{location!r} is inside the installed headgeometry package (the bundled demo store is "
                         "read-only). Copy the demo out with `headgeometry demo PATH` and write there with "
                         "--store PATH, or leave out --store to write to the default store.")


def is_url(location: str) -> bool:
    return "://" in location
