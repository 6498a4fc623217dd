"""The store's runs (``runs/NAME``, ``pipeline.schema.runs``), read for the training view: through ``pipeline.store``
only, read-only, cached per process on the store's path and the run's modification state, as ``dashboard.data``
caches the profiles group.

A run's state is that of its group's metadata, of its ``step`` coordinate (which grows when frames are added) and of
the folders of its ``layer_done`` chunks (one per frame: a layer written renames its chunk into its frame's folder),
so a page rendered while a run is being written is rendered again once more of it is written.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import xarray as xr

from pipeline.schema import RunSummary, run_group
from pipeline.store import Store, StoreError

__all__ = ["StoreError", "run", "run_names", "state_key", "summaries"]


def _stat(path: Path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def state_key(path, name: str | None = None) -> tuple:
    """The modification state of the store's runs (``name`` None: their list) or of run ``name``."""
    path = Path(path)
    out = [_stat(path / "zarr.json"), _stat(path / "runs" / "zarr.json")]
    if name is None:
        return tuple(out)
    group = path / run_group(name)
    out += [_stat(group / "zarr.json"), _stat(group / "step" / "zarr.json")]
    try:
        with os.scandir(group / "layer_done" / "c") as entries:
            out.append(tuple(sorted((e.name, e.stat().st_mtime_ns) for e in entries)))
    except OSError:
        out.append(None)
    return tuple(out)


@functools.lru_cache(maxsize=8)
def _summaries(path: str, key: tuple) -> tuple[RunSummary, ...]:
    return tuple(Store.open(path, mode="r").runs())


def summaries(path) -> list[RunSummary]:
    """Every run of the store (``pipeline.schema.RunSummary``: its frames in step order, those not complete); [] when
    it has none."""
    return list(_summaries(str(path), state_key(path)))


def run_names(path) -> list[str]:
    """The names of the store's runs that have at least one complete frame: the runs the training view can draw."""
    return [s.name for s in summaries(path) if any(f.complete for f in s.frames)]


@functools.lru_cache(maxsize=4)
def _run(path: str, name: str, key: tuple) -> xr.Dataset:
    return Store.open(path, mode="r").run(name).load()


def run(path, name: str) -> xr.Dataset:
    """Run ``name`` in memory (validated against ``pipeline.schema.runs``), once per state of the run; KeyError when
    the store holds no such run."""
    if name not in {s.name for s in summaries(path)}:
        raise KeyError(name)
    return _run(str(path), name, state_key(path, name))
