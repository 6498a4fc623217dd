"""The store a profiles run writes: where it is, whether this run can write it, and the handle it writes through."""

from __future__ import annotations

import os
import shutil
import stat

from pipeline.store import Store, StoreError, default_store_path
from pipeline.store.location import make_user_folder


def store_location(location) -> str:
    """The store to use: ``location``, else ``pipeline.store.default_store_path()``; ``file://PATH`` -> PATH."""
    s = str(location) if location is not None else default_store_path()
    return s[len("file://"):] if s.startswith("file://") else s


def _read_only(path: str) -> bool:
    """Not writable, or marked read-only (no owner write bit: respected even when running as root)."""
    return not os.access(path, os.W_OK) or not os.stat(path).st_mode & stat.S_IWUSR


def check_store(location: str, bytes_needed: int = 0) -> None:
    """A local store this run can write: writable (store folder and its groups, or the folder it goes in) and
    with room for ``bytes_needed``; StoreError otherwise. What kind of store it is, Store.open checks."""
    if "://" in location:
        return
    make_user_folder(location)  # the default user store's folder is made on its first write
    if os.path.isdir(location):
        folders = [location] + [e.path for e in os.scandir(location) if e.is_dir()]
        for folder in folders:
            if _read_only(folder):
                raise StoreError(f"the store {location!r} is read-only ({folder} cannot be written); make it "
                                 "writable or choose another --store.")
        where = location
    else:
        parent = os.path.dirname(os.path.abspath(location))
        if not os.path.isdir(parent):
            raise StoreError(f"cannot create the store {location!r}: the folder {parent} does not exist.")
        if _read_only(parent):
            raise StoreError(f"cannot create the store {location!r}: the folder {parent} is read-only.")
        where = parent
    free = shutil.disk_usage(where).free
    if bytes_needed and free < bytes_needed:
        raise StoreError(f"not enough disk space for the store {location!r}: this run writes about "
                         f"{bytes_needed / 1e6:.1f} MB and {free / 1e6:.1f} MB are free. Free some space or choose "
                         "another --store.")


def open_store(location: str) -> Store:
    """The :class:`pipeline.store.Store` at ``location``, opened for writing."""
    return Store.open(location, mode="a")
