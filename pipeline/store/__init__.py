"""The Zarr store: one handle for every read and write, safe under concurrent writers and crashes.

Light on purpose (numpy, xarray, zarr, filelock only): the dashboard imports this module and must never
pull in torch. The schema (names, dimensions, dtypes, attributes, version) lives in ``pipeline.schema``;
``docs/architecture.md`` explains the rules implemented here.

``Store.open(location, mode)`` opens a store by path or fsspec URL (``None``: :func:`default_store_path`).

- **Profiles** are written template -> regions -> metadata: ``register`` adds the model's row (all its
  fields, data NaN), ``write_layer`` writes one (model, layer) region with its checksum (processes may
  write different layers at once: no two layers share a chunk), ``mark_complete`` sets ``complete`` once
  every layer is written. Registering a larger model grows the layer/head dimensions in place.
- **Writers**: structural changes (register, reset, mark complete, replace a group, repair) hold the
  store lock, a file lock in the writer folder ``.<store name>.writer`` beside the store (zarr sees only
  its own files), so concurrent runs of different models never lose a registration.
  ``Store.writer(name)`` is the per-model lock a run holds from plan to completion: a second run of the
  same model is refused with a message naming the holder (or waits, ``wait=True``).
- **Crash safety**: every structural change is first recorded in a journal (in the writer folder) and
  replayed to its end by the next open, so a kill leaves either the old or the new state: never a model
  row without a name, never stale metadata over new arrays. A group is replaced by writing it whole in
  the writer folder's ``staging`` and exchanging the directories in one step where Linux can
  (``renameat2(RENAME_EXCHANGE)``: even plain xarray readers never find the group missing), else by two
  renames. Zarr writes each file atomically (temporary file, rename).
- **Verification**: each layer's checksum (``schema.layer_checksum``, profile and norm) and, when its
  statistics are written, their own checksum (``schema.statistics_checksum``, head_statistics and
  spectrum) are written with its values. ``verify`` re-reads every written layer, and a layer that does
  not decode or does not match a checksum (a garbled or deleted chunk) is cleared and its model marked
  ``damaged`` with the command that recomputes exactly those layers. A layer without statistics (or a
  store without the statistics variables) is not damaged: its model reads as "statistics not computed".
  Readers check too, without writing: ``checked_models`` (``list``, the dashboard) shows such a model damaged
  with the repair.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.schema import (
    COORDINATES,
    N_OFFSETS,
    ORBITS,
    ORBITS_SEARCH,
    ORBITS_SWEEP,
    POSITIONAL_KINDS,
    PROFILES,
    SCHEMA_VERSION,
    STATISTICS,
    ModelRow,
)
from pipeline.store.backend import ENV_VAR, backend_for, default_store_path, is_url
from pipeline.store.errors import Damage, Errors, StoreError
from pipeline.store.groups import Groups, exchange
from pipeline.store.journal import Journal
from pipeline.store.locks import Locks
from pipeline.store.migrate import Migration
from pipeline.store.profiles import Profiles
from pipeline.store.verify import Verification

__all__ = [
    "COORDINATES", "Damage", "ENV_VAR", "ModelRow", "N_OFFSETS", "ORBITS", "ORBITS_SEARCH", "ORBITS_SWEEP",
    "POSITIONAL_KINDS", "PROFILES", "SCHEMA_VERSION", "STATISTICS", "Store", "StoreError",
    "default_store_path", "exchange",
]


class Store(Groups, Profiles, Verification, Migration, Journal, Locks, Errors):
    """A store opened once; every method reopens the arrays it touches, so other writers' changes show.

    The methods come from one module each: ``groups`` (open, read and replace whole groups), ``profiles``
    (the profiles table), ``verify`` (checksums: verify and the read-side check), ``migrate`` (schema
    upgrades), ``journal`` (recovery), ``locks`` and ``errors``; ``backend`` holds what differs between a
    local folder and an fsspec URL.
    """

    def __init__(self, location: str, mode: str = "a"):
        if mode not in ("a", "r"):
            raise ValueError(f"mode must be 'a' or 'r'; got {mode!r}")
        self.location = location
        self.mode = mode
        self.backend = backend_for(location)

    @classmethod
    def open(cls, location=None, mode: str = "a") -> Store:
        """Open the store at ``location`` (path or fsspec URL; None = :func:`default_store_path`).

        ``mode="r"`` needs an existing store; ``mode="a"`` creates it on the first write. Finishes any
        change a killed writer left half done (see the module docstring).
        """
        location = default_store_path() if location is None else str(location)
        if not is_url(location):
            location = str(Path(location).expanduser())
        store = cls(location, mode)
        store._check_kind()
        store._recover_if_needed()
        return store

    def __repr__(self) -> str:
        return f"Store({self.location!r}, mode={self.mode!r})"
