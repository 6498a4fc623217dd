"""The version of headgeometry that last wrote a store, kept in the root group's attributes.

``Store`` records it with every structural change (register, mark complete, replace a group, upgrade, recovery:
each ends with the root's metadata consolidated), so the version shown is that of the last writer. ``list``
shows it; a store written before versions were recorded has none.
"""

from __future__ import annotations

import zarr

from pipeline.version import version

KEY = "headgeometry_version"


def record(location: str) -> None:
    """Set the root's ``headgeometry_version`` to this package's version (no write when it is that already)."""
    root = zarr.open_group(location, mode="a", use_consolidated=False, zarr_format=3)
    if root.attrs.get(KEY) != version():
        root.attrs[KEY] = version()


def recorded(location: str) -> str | None:
    """The version that last wrote the store at ``location``, or None (not recorded, or no store)."""
    try:
        root = zarr.open_group(location, mode="r", use_consolidated=False, zarr_format=3)
    except (FileNotFoundError, zarr.errors.GroupNotFoundError):
        return None
    value = root.attrs.get(KEY)
    return str(value) if value is not None else None
