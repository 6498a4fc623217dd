"""The store's groups: listed, opened with their schema version checked, read as validated Datasets, replaced whole."""

from __future__ import annotations

import ctypes
import errno
import functools
import json
import os
import shutil
import sys
import uuid
import warnings
from collections.abc import Mapping
from pathlib import Path

import xarray as xr
import zarr

from pipeline.schema import (
    PROFILES,
    SCHEMA_VERSION,
    WRITE_COMMANDS,
    problems,
)
from pipeline.store.backend import STAGING
from pipeline.store.errors import StoreError, writing
from pipeline.store.quiet import quiet_listing

RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100
_NO_EXCHANGE = (errno.EINVAL, errno.ENOSYS, errno.EXDEV, errno.EOPNOTSUPP)


class Hierarchy:
    """The store's groups: listed, opened with their schema version checked, read as validated Datasets, and
    replaced whole (journalled: :meth:`replay_replace` finishes a replacement a kill interrupted)."""

    def __init__(self, backend, mode: str, locks, journal):
        self.backend, self.mode, self.locks, self.journal = backend, mode, locks, journal
        self.location = backend.location

    def check_kind(self) -> None:
        """No store, not a Zarr store, a Zarr v2 store: each a clear StoreError."""
        self.backend.check_kind(self.mode)

    def exists(self) -> bool:
        """Whether the store has been created (its root zarr.json is there)."""
        return self.backend.exists()

    def _root(self) -> zarr.Group:
        try:
            return zarr.open_group(self.location, mode="r", use_consolidated=False, zarr_format=3)
        except FileNotFoundError as exc:
            raise StoreError(f"no store at {self.location!r} ({exc}).") from exc

    def names(self) -> list[str]:
        """The groups the store holds (empty when there is no store yet)."""
        if not self.exists():
            return []
        with quiet_listing():
            return sorted(name for name, _ in self._root().groups())

    def _group(self, group: str, mode: str = "r") -> zarr.Group | None:
        """The group ``group`` as zarr opens it ("r" or "a": never created here), or None when the store holds no
        such group: its one metadata file read, where listing the store's groups reads every group's."""
        if mode not in ("r", "a"):
            raise ValueError(f"mode {mode!r}: a group is opened 'r' or 'a'")
        if not self.exists():
            return None
        try:
            return zarr.open_group(self.location, path=group, mode="r" if mode == "r" else "r+",
                                   use_consolidated=False, zarr_format=3)
        except (FileNotFoundError, zarr.errors.ContainsArrayError):  # zarr 3.1: GroupNotFoundError, a FileNotFoundError
            return None

    def has(self, group: str) -> bool:
        """Whether the store holds the group ``group`` (one of :meth:`names`)."""
        return self._group(group) is not None

    def open(self, group: str, mode: str = "r") -> zarr.Group:
        """One group, its schema version checked (StoreError with the fix otherwise); ``mode`` "a" to write."""
        g = self._group(group, mode)
        if g is None:
            fix = WRITE_COMMANDS.get(group, "python -m pipeline ...")
            raise StoreError(f"the store {self.location!r} has no {group!r} group. Write it with "
                             f"`{fix} --store {self.location}`.")
        version = g.attrs.get("schema_version")
        if version != SCHEMA_VERSION:
            if isinstance(version, int) and version < SCHEMA_VERSION:
                fix = (f"Upgrade it in place (nothing is lost) with `python -m pipeline verify --upgrade "
                       f"--store {self.location}`.")
            else:
                fix = "Use the version of the pipeline that wrote it, or recompute the group."
            raise StoreError(f"the {group!r} group of {self.location!r} has schema version {version}; this code "
                             f"reads version {SCHEMA_VERSION}. {fix}")
        return g

    def dataset(self, group: str) -> xr.Dataset:
        """One group as a lazy xarray Dataset (dask arrays), validated against ``pipeline.schema``."""
        return self._validated(group, dask=True)

    def check(self, group: str) -> None:
        """StoreError when ``group`` does not follow ``pipeline.schema``, as :meth:`dataset` would raise it, without
        building the Dataset's dask arrays (about half of its cost)."""
        self._validated(group, dask=False)

    def _validated(self, group: str, dask: bool) -> xr.Dataset:
        self.open(group)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # consolidated fallback on hand-made stores
                ds = xr.open_zarr(self.location, group=group, **({} if dask else {"chunks": None}))
        except Exception as exc:  # noqa: BLE001 - zarr raises several types for damaged metadata
            raise StoreError(f"the {group!r} group of {self.location!r} cannot be read ({exc}). Run "
                             f"`python -m pipeline verify --store {self.location}`.") from exc
        bad = problems(group, ds)
        if bad:
            fix = WRITE_COMMANDS.get(group, "python -m pipeline ...")
            raise StoreError(f"the {group!r} group of {self.location!r} does not follow the schema: "
                             f"{'; '.join(bad)}. Recompute it with `{fix} --store {self.location}`.")
        return ds

    def replace(self, group: str, ds: xr.Dataset, attrs: Mapping | None = None) -> None:
        """Replace one group (e.g. ``orbits``) with ``ds``, atomically on local stores; other groups untouched.

        Written whole in staging (beside the store), then exchanged with the stored group in one step
        (Linux ``renameat2(RENAME_EXCHANGE)``), so every reader, plain xarray included, sees the old group or
        the new one, never none. The root's consolidated metadata is dropped before the exchange and written
        again after it, so no reader takes the old group's metadata over the new arrays. Where the exchange
        is not available (another OS, a filesystem without it), the old group is moved aside and the new one
        moved in: a reader between the two renames finds no group, and a kill there is finished by the next
        open (the journal). On object stores (URLs) the group is rewritten in place.
        """
        if group == PROFILES:
            raise StoreError("the profiles group is written layer by layer; use register/write_layer")
        ds = _vlen_strings(ds)
        ds.attrs = dict(ds.attrs) | dict(attrs or {}) | {"schema_version": SCHEMA_VERSION}
        for v in ds.variables.values():
            v.encoding = {}
        bad = problems(group, ds)
        if bad:
            raise StoreError(f"refusing to write the {group!r} group: {'; '.join(bad)}.")
        with writing(self.location, self.mode, f"the {group!r} group",
                     f"the old {group!r} group and every other group"):
            if not self.backend.swaps_groups:
                with self.locks.store_lock():
                    ds.to_zarr(self.location, group=group, mode="w", consolidated=False, zarr_format=3)
                    self.journal.consolidate()
                return
            token = uuid.uuid4().hex
            new, old = f"{STAGING}/{group}.{token}", f"{STAGING}/{group}.old.{token}"
            # held while creating the root and staging too: recovery removes the temporary files and staging of
            # writers that do not hold it
            with self.locks.store_lock():
                self.backend.create_root()
                try:
                    ds.to_zarr(str(self.backend.aux / new), mode="w", consolidated=False, zarr_format=3)
                    ino = os.stat(self.backend.aux / new).st_ino  # tells the new group from the old after an exchange
                    self.journal.write({"op": "replace", "group": group, "new": new, "old": old, "ino": ino})
                except BaseException:
                    shutil.rmtree(self.backend.aux / new, ignore_errors=True)
                    raise
                self.swap(group, new, old, ino)  # from here on a failure is finished by the next open
                self.journal.consolidate()
                self.journal.clear()

    def replay_replace(self, entry: dict) -> str:
        """The journal's replay of a ``replace`` entry."""
        self.swap(entry["group"], entry["new"], entry["old"], entry.get("ino"))
        return f"finished replacing the {entry['group']!r} group"

    def swap(self, group: str, new: str, old: str, ino: int | None = None) -> None:
        """Idempotent: put the staged group ``new`` in place of ``group`` and drop the old one.

        ``ino`` is the staged group's inode: after an exchange the staging path holds the old group (another
        inode), which is then only removed. Without it (a journal entry with no inode) the staging path is
        the new group whenever it exists.
        """
        root, staged = Path(self.location), self.backend.aux / new
        if staged.exists() and (ino is None or os.stat(staged).st_ino == ino):
            self._drop_consolidated()  # else a reader would take the old group's metadata over the new arrays
            # one step where possible: the group becomes the new one, the staging path holds the old one
            if not ((root / group).exists() and exchange(staged, root / group)):
                if (root / group).exists():
                    os.replace(root / group, self.backend.aux / old)
                os.replace(staged, root / group)
        if staged.exists():
            shutil.rmtree(staged, ignore_errors=True)  # the old group, exchanged out
        shutil.rmtree(self.backend.aux / old, ignore_errors=True)

    def _drop_consolidated(self) -> None:
        """Remove the root's consolidated metadata (one atomic replace of its zarr.json) until the next
        consolidation: meanwhile every reader, plain xarray included, reads each group's own metadata, which
        travels with the group's folder."""
        meta = Path(self.location) / "zarr.json"
        node = json.loads(meta.read_text())
        if node.pop("consolidated_metadata", None) is None:
            return
        tmp = meta.with_name(f"zarr.json.{uuid.uuid4().hex}.partial")  # a leftover is removed by the next open
        tmp.write_text(json.dumps(node, indent=2))
        os.replace(tmp, meta)

    def schema_versions(self) -> dict[str, object]:
        """The schema version of every group."""
        if not self.exists():
            return {}
        with quiet_listing():
            return {name: g.attrs.get("schema_version") for name, g in self._root().groups()}


@functools.cache
def renameat2():
    """libc's ``renameat2`` (Linux, glibc >= 2.28), or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one atomic step (``renameat2(RENAME_EXCHANGE)``); False, with nothing changed,
    where that is not available (no such call, or the filesystem or kernel refuses it: the caller falls back
    to two renames). Other errors raise OSError."""
    fn = renameat2()
    if fn is None:
        return False
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in _NO_EXCHANGE:
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def _vlen_strings(ds: xr.Dataset) -> xr.Dataset:
    """Numpy fixed-width strings (<U) become variable-length strings in Zarr v3."""
    out = ds.copy()
    for name, var in list(out.variables.items()):
        if var.dtype.kind == "U":
            out[name] = var.astype(object)
    return out
