"""Where a store lives: a local folder or an fsspec URL, each a backend with the same small interface.

A backend knows the store's own files only as far as the pipeline needs them outside zarr: whether the
store exists and is a Zarr v3 store, the writer folder (journal, staging, locks), and what a killed
writer left there. Everything else goes through zarr, which takes both kinds of location.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import zarr

from pipeline.schema import RUNS
from pipeline.store.errors import StoreError, v2_message
from pipeline.store.location import ENV_VAR, default_store, is_url, refuse_write  # noqa: F401 - ENV_VAR: pipeline.store's

STAGING = "staging"


def default_store_path() -> str:
    """The one default store (``pipeline.store.location.default_store``: ``$HEADGEOMETRY_STORE``, else
    ``store.zarr`` in the current folder, else the user store). Every pipeline command and the dashboard use it."""
    return default_store().location


def backend_for(location: str) -> Local | Remote:
    return Remote(location) if is_url(location) else Local(location)


class Local:
    """A store folder; its writer folder ``.<name>.writer`` beside it (zarr sees only its own files)."""

    swaps_groups = True  # a group is staged whole and swapped in

    def __init__(self, location: str):
        self.location = location
        p = Path(location).absolute()
        self.aux = p.parent / f".{p.name}.writer"
        self.lock_dir = self.aux / "locks"

    def exists(self) -> bool:
        return (Path(self.location) / "zarr.json").exists()

    def check_kind(self, mode: str) -> None:
        """No store, not a Zarr store, a Zarr v2 store: each a clear StoreError."""
        loc, p = self.location, Path(self.location)
        if mode == "a":
            refuse_write(loc)  # the bundled demo, or anything else inside the installed package
        if not p.exists():
            if mode == "r":
                raise StoreError(
                    f"no store at {loc!r}. Create it with `python -m pipeline profiles MODEL --store {loc}`, "
                    "or leave out --store to use the default store."
                )
            return
        if not p.is_dir():
            raise StoreError(f"{loc!r} is a file, not a Zarr store (a folder). Choose another --store.")
        if (p / ".zgroup").exists() or (p / ".zarray").exists():
            raise StoreError(v2_message(loc))
        meta = p / "zarr.json"
        if not meta.exists() and "zarr.json" not in (names := os.listdir(p)):
            # Listed again after the check: another writer may have created the store in between. An empty folder
            # becomes a store, and so does one holding only zarr's temporary files (".partial"). Those are another
            # writer's creation in flight or what a kill before its first write left; they are not removed here,
            # outside the store lock, but by the journal's recovery, which lists them again under the lock every
            # creation holds (``Journal.recover``).
            if mode == "a" and all(n.endswith(".partial") for n in names):
                return
            raise StoreError(f"{loc!r} is not a Zarr store (no zarr.json). Point at a store written by "
                             "`python -m pipeline`, or choose a new --store.")
        try:
            node = json.loads(meta.read_text())
        except (OSError, ValueError) as exc:
            raise StoreError(f"{loc!r} is not a readable Zarr store ({exc}).") from exc
        if node.get("zarr_format") != 3 or node.get("node_type") != "group":
            raise StoreError(f"{loc!r} is not a Zarr v3 group store (zarr.json says format "
                             f"{node.get('zarr_format')}, node {node.get('node_type')!r}).")

    def create_root(self) -> None:
        """The store's root group, if there is none yet."""
        Path(self.location).mkdir(parents=True, exist_ok=True)
        if not self.exists():
            zarr.open_group(self.location, mode="a", zarr_format=3)

    # the writer folder

    def read(self, rel: str) -> bytes | None:
        try:
            return (self.aux / rel).read_bytes()
        except FileNotFoundError:
            return None

    def write_atomic(self, rel: str, data: bytes) -> None:
        path = self.aux / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    def delete(self, rel: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.aux / rel)

    # what a killed writer left

    def stale_staging(self) -> bool:
        staging = self.aux / STAGING
        return staging.is_dir() and any(staging.iterdir())

    def clean_staging(self) -> list[str]:
        """Remove groups half written in staging by a killed writer (the old group is intact)."""
        staging = self.aux / STAGING
        out = []
        if staging.is_dir():
            for p in staging.iterdir():
                shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
                out.append(f"removed the unfinished {p.name}")
        return out

    def legacy_leftovers(self) -> list[Path]:
        if not Path(self.location).is_dir():
            return []
        return [p for p in Path(self.location).iterdir() if p.name.endswith(("__writing__", "__old__"))]

    def partials(self) -> list[Path]:
        """Temporary files of writes a kill interrupted, where zarr would trip over them (root, groups and runs)."""
        if not Path(self.location).is_dir():
            return []
        root = Path(self.location)
        dirs = [root] + [p for p in root.iterdir() if p.is_dir()]
        if (root / RUNS).is_dir():  # the run groups, one level down
            dirs += [p for p in (root / RUNS).iterdir() if p.is_dir()]
        return [f for d in dirs for f in d.glob("*.partial") if f.is_file()]

    def clean_legacy(self) -> list[str]:
        """Side groups of the two-rename layout without a journal (``G.__writing__``, ``G.__old__`` inside the
        store): swap in or remove."""
        out = []
        root = Path(self.location)
        for p in self.legacy_leftovers():
            group = p.name.rsplit(".", 1)[0]
            target = root / group
            if not target.exists() and p.name.endswith("__writing__") and (p / "zarr.json").exists():
                os.replace(p, target)  # the old writer had moved the old group away: the new one was complete
                out.append(f"moved {p.name} into place")
            elif not target.exists() and p.name.endswith("__old__"):
                os.replace(p, target)
                out.append(f"restored {p.name}")
            else:
                shutil.rmtree(p, ignore_errors=True)
                out.append(f"removed {p.name}")
        return out

    # a new group, built whole

    def new_group(self, group: str) -> tuple[str, str]:
        """(location, path) to build ``group`` at: a folder in staging, moved in by :meth:`place_group`."""
        self.create_root()
        return str(self.aux / STAGING / f"{group}.{uuid.uuid4().hex}"), ""

    def place_group(self, built: str, group: str) -> None:
        os.replace(built, Path(self.location) / group)


class Remote:
    """A store at an fsspec URL: the writer folder is ``<root>.writer``; locks are local (one machine)."""

    swaps_groups = False  # a group is rewritten in place (objects cannot be swapped)

    def __init__(self, location: str):
        from fsspec.core import url_to_fs

        self.location = location
        self.fs, self.root = url_to_fs(location)
        self.aux_root = self.root.rstrip("/") + ".writer"
        lock_home = Path(tempfile.gettempdir()) / "headgeometry-locks"
        self.lock_dir = lock_home / hashlib.sha256(location.encode()).hexdigest()[:16]

    def exists(self) -> bool:
        return self.fs.exists(f"{self.root}/zarr.json")

    def check_kind(self, mode: str) -> None:
        loc = self.location
        try:
            exists = self.fs.exists(self.root)
        except Exception as exc:  # noqa: BLE001 - any fsspec backend error
            raise StoreError(f"cannot reach the store {loc!r} ({exc}).") from exc
        if not exists and mode == "r":
            raise StoreError(f"no store at {loc!r}. Create it with `python -m pipeline profiles MODEL --store {loc}`.")
        if exists and self.fs.exists(f"{self.root}/.zgroup"):
            raise StoreError(v2_message(loc))

    def create_root(self) -> None:
        if not self.exists():
            zarr.open_group(self.location, mode="a", zarr_format=3)

    def read(self, rel: str) -> bytes | None:
        try:
            return self.fs.cat_file(f"{self.aux_root}/{rel}")
        except (FileNotFoundError, KeyError):
            return None

    def write_atomic(self, rel: str, data: bytes) -> None:
        self.fs.pipe_file(f"{self.aux_root}/{rel}", data)  # one object put

    def delete(self, rel: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm_file(f"{self.aux_root}/{rel}")

    def stale_staging(self) -> bool:
        return False

    def clean_staging(self) -> list[str]:
        return []

    def legacy_leftovers(self) -> list[Path]:
        return []

    def partials(self) -> list[Path]:
        return []

    def clean_legacy(self) -> list[str]:
        return []

    def new_group(self, group: str) -> tuple[str, str]:
        return self.location, group

    def place_group(self, built: str, group: str) -> None:
        """Built in place already."""


def with_store(command: str, location: str) -> str:
    """``command`` with ``--store LOCATION`` unless it has one or the location is the default store."""
    if "--store" in command or location == default_store_path():
        return command
    return f"{command} --store {location}"
