"""Where the store is and what is in it: read-only, through ``pipeline.store`` and ``pipeline.schema``, cached.

The store path comes from the ``--store PATH`` argument (``panel serve dashboard/app.py --args --store
PATH`` or ``python -m dashboard.export OUT --store PATH``), else the default store (``pipeline.store.location``), or
the demo in the place of a user or current-folder store that is missing or holds no computed model. Nothing
else (in particular no URL parameter) chooses the path.

Every read is cached per process, keyed on the store's path and its modification state (the times of
its groups' metadata files), so the sessions of a served app share one load of each model and see a
model registered or repaired while they run. The rows are checked against the layers' checksums once per
store state, so a garbled or deleted chunk shows the model damaged with the command that repairs it. Every
problem surfaces as ``StoreError`` whose message
says what to do.
"""

from __future__ import annotations

import argparse
import functools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xarray as xr

from pipeline.schema import (
    ORBITS,
    ORBITS_SEARCH,
    PROFILES,
    STATISTICS,
    ModelRow,
    orbits_problems,
    spectrum_width,
)
from pipeline.store import ENV_VAR, Store, StoreError
from pipeline.store.demo import shown_store

__all__ = ["ENV_VAR", "ModelData", "ModelRow", "ModelStatistics", "StoreError", "model_data", "model_statistics",
           "orbits", "orbits_search", "profiles", "rows", "state_key", "store_path"]


def store_path(argv: list[str] | None = None) -> Path:
    """The store to read: ``--store`` in ``argv``, else the default store, or the demo in its place when that is
    missing or holds no computed model and $HEADGEOMETRY_STORE did not name it (``pipeline.store.demo.shown_store``)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--store", default=None)
    args, _ = parser.parse_known_args(argv or [])
    return Path(shown_store(args.store).location).expanduser().resolve()


def state_key(path, group: str = PROFILES) -> tuple:
    """The modification state of a group: the times and sizes of its metadata files (model list included)."""
    path = Path(path)
    out = []
    for meta in (path / "zarr.json", path / group / "zarr.json", path / group / "model" / "zarr.json",
                 path / group / "damaged" / "c" / "0", path / group / "complete" / "c" / "0"):
        try:
            st = os.stat(meta)
            out.append((st.st_mtime_ns, st.st_size))
        except OSError:
            out.append(None)
    return tuple(out)


@functools.lru_cache(maxsize=8)
def _profiles(path: str, key: tuple) -> xr.Dataset:
    return Store.open(path, mode="r").dataset(PROFILES)


def profiles(path) -> xr.Dataset:
    """The ``profiles`` group (lazy), opened once per state of the store."""
    return _profiles(str(path), state_key(path))


@functools.lru_cache(maxsize=8)
def _rows(path: str, key: tuple) -> tuple[ModelRow, ...]:
    _profiles(path, key)  # validated first: its StoreError says what is wrong with the group
    return tuple(Store.open(path, mode="r").checked_models())


def rows(path) -> list[ModelRow]:
    """The store's models (``pipeline.schema.ModelRow``), in store order, each checked against its checksums
    (``Store.checked_models``: a model whose written layers do not match reads damaged, with the repair
    command; nothing is written to the store)."""
    return list(_rows(str(path), state_key(path)))


@dataclass(frozen=True)
class ModelData:
    """One model's profile, read once and shared by every session that shows it.

    ``profile``: (n_layers, n_heads, D, 4) float64 without the padding; D = 129 for rotary models, 1 for
    the others (whose form does not depend on position). ``error``: why it could not be read ('' if fine).
    """

    row: ModelRow
    profile: np.ndarray
    error: str = ""
    heat_high: float = 1.0  # top of the heat maps' colour scale over every offset (views.scales)
    hist_top: float = 0.05  # height of the histograms over every offset


@functools.lru_cache(maxsize=16)
def _model_data(path: str, key: tuple, name: str) -> ModelData:
    ds = _profiles(path, key)
    row = next(r for r in _rows(path, key) if r.name == name)
    sel = ds["profile"].sel(model=name).isel(layer=slice(0, row.n_layers), head=slice(0, row.n_heads))
    if not row.rotary:
        sel = sel.isel(d=slice(0, 1))
    try:
        values = np.asarray(sel.transpose("layer", "head", "d", "coordinate").values, dtype=np.float64)
    except Exception as exc:  # noqa: BLE001 - a damaged chunk: the page says so and how to repair it
        empty = np.full((row.n_layers, row.n_heads, 1, 4), np.nan)
        return ModelData(row, empty, f"the stored profiles of {name} cannot be read ({type(exc).__name__}: "
                                     f"{exc}). Repair the model with `{row.fix_command}` (or find the damage "
                                     f"with `python -m pipeline verify --store {path}`).")
    from dashboard.views import scales  # holoviews: imported only once a model is drawn

    return ModelData(row, values, "", *scales(values))


def model_data(path, name: str) -> ModelData:
    """The profile of model ``name`` (cached per store state); KeyError when the store has no such model."""
    if name not in {r.name for r in rows(path)}:
        raise KeyError(name)
    return _model_data(str(path), state_key(path), name)


@dataclass(frozen=True)
class ModelStatistics:
    """One model's head statistics and spectrum at d = 0 (``pipeline.profile.statistics``), without the padding.

    ``statistics``: (n_layers, n_heads, 17) in the order of ``pipeline.schema.STATISTICS``; ``spectrum``:
    (n_layers, n_heads, 2 d_head), decreasing, NaN-padded. ``note``: '' when they are there, else what to show
    (``ModelRow.statistics_note``: "statistics not computed; add them with `COMMAND`", or why they cannot be
    read); the arrays are NaN then.
    """

    row: ModelRow
    statistics: np.ndarray
    spectrum: np.ndarray
    note: str = ""


@functools.lru_cache(maxsize=16)
def _model_statistics(path: str, key: tuple, name: str) -> ModelStatistics:
    ds = _profiles(path, key)
    row = next(r for r in _rows(path, key) if r.name == name)
    width = spectrum_width(row.d_head)
    stats = np.full((row.n_layers, row.n_heads, len(STATISTICS)), np.nan)
    spectrum = np.full((row.n_layers, row.n_heads, width), np.nan)
    if row.statistics_note or "head_statistics" not in ds:
        return ModelStatistics(row, stats, spectrum, row.statistics_note or "statistics not computed")
    heads = {"layer": slice(0, row.n_layers), "head": slice(0, row.n_heads)}
    try:
        stats = np.asarray(ds["head_statistics"].sel(model=name).isel(heads).transpose("layer", "head", "statistic")
                           .values, dtype=np.float64)
        spectrum = np.asarray(ds["spectrum"].sel(model=name).isel(heads | {"eigen": slice(0, width)})
                              .transpose("layer", "head", "eigen").values, dtype=np.float64)
    except Exception as exc:  # noqa: BLE001 - a damaged chunk: the page says so and how to repair it
        return ModelStatistics(row, stats, spectrum, f"the stored statistics of {name} cannot be read "
                               f"({type(exc).__name__}: {exc}). Repair the model with `{row.statistics_command}`.")
    return ModelStatistics(row, stats, spectrum, "")


def model_statistics(path, name: str) -> ModelStatistics:
    """The head statistics and spectrum of model ``name`` (cached per store state); KeyError when the store has
    no such model. A store written before the statistics existed gives NaN arrays and the note saying so."""
    if name not in {r.name for r in rows(path)}:
        raise KeyError(name)
    return _model_statistics(str(path), state_key(path), name)


@functools.lru_cache(maxsize=4)
def _group(path: str, group: str, key: tuple) -> xr.Dataset | None:
    try:
        return Store.open(path, mode="r").dataset(group).load()
    except StoreError:
        if group == ORBITS:
            raise
        return None


def orbits(path) -> xr.Dataset:
    """The ``orbits`` group in memory (it is small); StoreError when absent or not drawable."""
    ds = _group(str(path), ORBITS, state_key(path, ORBITS))
    problems = orbits_problems(ds)
    if problems:
        raise StoreError(f"the orbits group of {path} cannot be shown: {'; '.join(problems)}. "
                         f"Recompute it with `python -m pipeline orbits --store {path}`.")
    return ds


def orbits_search(path) -> xr.Dataset | None:
    """The ``orbits_search`` group in memory, or None when the store has none."""
    return _group(str(path), ORBITS_SEARCH, state_key(path, ORBITS_SEARCH))
