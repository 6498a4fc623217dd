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
- **Runs**: the checkpoints of one training run are one group ``runs/NAME`` (``pipeline.schema.runs``), a frame
  per training step, each frame's layers written like a model's (values, checksums, then done); frames are added
  by a journalled change, and ``runs()`` lists them.
- **Verification**: each layer's checksum (``schema.layer_checksum``, profile and norm) and, when its
  values at d = 0 are written, their own checksums (``schema.statistics_checksum``, head_statistics and
  spectrum; ``schema.spectra_checksum``, the three spectra of T and L) are written with its values. ``verify``
  re-reads every written layer, and a layer that does not decode or does not match a checksum (a garbled or
  deleted chunk) is cleared and its model marked ``damaged`` with the command that recomputes exactly those
  layers. A layer without statistics or spectra (or a store without their variables) is not damaged: its model
  reads as "statistics not computed" or "spectra of T and L not computed".
  Readers check too, without writing: ``checked_models`` (``list``, the dashboard) shows such a model damaged
  with the repair.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import xarray as xr

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
    RunSummary,
)
from pipeline.store.backend import ENV_VAR, backend_for, default_store_path, is_url
from pipeline.store.errors import Damage, StoreError
from pipeline.store.groups import Hierarchy, exchange
from pipeline.store.journal import Journal
from pipeline.store.layer_writer import LayerWriter
from pipeline.store.locks import Locks
from pipeline.store.migrate import Migration
from pipeline.store.profiles import ProfilesTable
from pipeline.store.runs import RunGroups, RunState
from pipeline.store.verify import Verification

__all__ = [
    "COORDINATES", "Damage", "ENV_VAR", "ModelRow", "N_OFFSETS", "ORBITS", "ORBITS_SEARCH", "ORBITS_SWEEP",
    "POSITIONAL_KINDS", "PROFILES", "SCHEMA_VERSION", "STATISTICS", "Store", "StoreError",
    "default_store_path", "exchange",
]


class Store:
    """A store opened once; every method reopens the arrays it touches, so other writers' changes show.

    The facade over the store's parts, each an object handed the store's backend (``backend``: what differs
    between a local folder and an fsspec URL) and the parts it uses:

    - ``locks`` (:class:`~pipeline.store.locks.Locks`): the store lock and the per-model writer locks;
    - ``journal`` (:class:`~pipeline.store.journal.Journal`): structural changes recorded first, replayed by
      the next open (each part that journals a change hands it the replay: ``journal.on(op, replay)``);
    - ``hierarchy`` (:class:`~pipeline.store.groups.Hierarchy`): the groups, opened with their schema version
      checked, read as validated Datasets, replaced whole;
    - ``profiles`` (:class:`~pipeline.store.profiles.ProfilesTable`): the profiles table's rows and layers;
    - ``run_groups`` (:class:`~pipeline.store.runs.RunGroups`): the runs of a model's checkpoints (``runs/NAME``),
      their frames added and written (:class:`~pipeline.store.frame_writer.FrameWriter`);
    - ``verification`` (:class:`~pipeline.store.verify.Verification`): verify and the read-side check;
    - ``migration`` (:class:`~pipeline.store.migrate.Migration`): schema upgrades.
    """

    def __init__(self, location: str, mode: str = "a"):
        if mode not in ("a", "r"):
            raise ValueError(f"mode must be 'a' or 'r'; got {mode!r}")
        self.location = location
        self.mode = mode
        self.backend = backend_for(location)
        self.locks = Locks(self.backend)
        self.journal = Journal(self.backend, mode, self.locks)
        self.hierarchy = Hierarchy(self.backend, mode, self.locks, self.journal)
        self.profiles = ProfilesTable(self.backend, mode, self.hierarchy, self.locks, self.journal)
        self.run_groups = RunGroups(self.backend, mode, self.hierarchy, self.locks, self.journal)
        self.verification = Verification(self.backend, self.hierarchy, self.profiles, self.run_groups)
        self.migration = Migration(self.backend, mode, self.hierarchy, self.locks, self.journal)
        self.journal.on("register", self.profiles.replay_register)
        self.journal.on("replace", self.hierarchy.replay_replace)
        self.journal.on("upgrade", self.migration.replay_upgrade)
        self.journal.on("rechunk", self.migration.replay_rechunk)
        self.journal.on("run_frames", self.run_groups.replay_frames)
        self.journal.after_replay(self.profiles.drop_ghost_rows)

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
        store.hierarchy.check_kind()
        store.journal.recover_if_needed()
        return store

    def __repr__(self) -> str:
        return f"Store({self.location!r}, mode={self.mode!r})"

    # groups

    def exists(self) -> bool:
        """Whether the store has been created (its root zarr.json is there)."""
        return self.hierarchy.exists()

    def groups(self) -> list[str]:
        """The groups the store holds (empty when there is no store yet)."""
        return self.hierarchy.names()

    def dataset(self, group: str) -> xr.Dataset:
        """One group as a lazy xarray Dataset, validated against ``pipeline.schema``."""
        return self.hierarchy.dataset(group)

    def replace_group(self, group: str, ds: xr.Dataset, attrs: Mapping | None = None) -> None:
        """Replace one group (not profiles) with ``ds``, atomically on local stores (:meth:`Hierarchy.replace`)."""
        self.hierarchy.replace(group, ds, attrs)

    def schema_versions(self) -> dict[str, object]:
        """The schema version of every group."""
        return self.hierarchy.schema_versions()

    # the profiles table

    def models(self) -> list[ModelRow]:
        """Every model of the profiles group, in store order ([] when the store or group is missing); trained models
        and random baselines alike (``pipeline.schema.trained_and_baselines`` tells them apart)."""
        return self.profiles.models()

    def names(self) -> list[str]:
        """The model names, in store order."""
        return self.profiles.names()

    def row(self, name: str) -> ModelRow:
        """The row of model ``name`` (StoreError naming the models there when it is not one)."""
        return self.profiles.row(name)

    def layers_done(self, name: str) -> np.ndarray:
        """Boolean (n_layers,) of the layers of ``name`` already written."""
        return self.profiles.layers_done(name)

    def layers_with_statistics(self, name: str) -> np.ndarray:
        """Boolean (n_layers,) of the layers of ``name`` written with their head statistics."""
        return self.profiles.layers_with_statistics(name)

    def layers_with_spectra(self, name: str) -> np.ndarray:
        """Boolean (n_layers,) of the layers of ``name`` written with their spectra of T and L."""
        return self.profiles.layers_with_spectra(name)

    def is_complete(self, name: str) -> bool:
        return self.profiles.is_complete(name)

    def register(self, row: ModelRow) -> int:
        """Add a model row whole, or refresh the fields of a stored one (:meth:`ProfilesTable.register`)."""
        return self.profiles.register(row)

    def layer_writer(self, name: str) -> LayerWriter:
        """A writer of the layers of ``name``, its row and arrays opened once
        (:meth:`ProfilesTable.layer_writer`)."""
        return self.profiles.layer_writer(name)

    def write_layer(self, name: str, layer: int, profile: np.ndarray, norm: np.ndarray,
                    statistics: np.ndarray | None = None, spectrum: np.ndarray | None = None,
                    spectra: np.ndarray | None = None) -> None:
        """Region write of one (model, layer) with its checksums (:meth:`LayerWriter.write`)."""
        self.profiles.write_layer(name, layer, profile, norm, statistics, spectrum, spectra)

    def mark_complete(self, name: str, revision: str | None = None) -> None:
        """Set ``complete`` (and clear ``damaged``) once every layer is written; refuses otherwise."""
        self.profiles.mark_complete(name, revision)

    def reset(self, name: str) -> None:
        """Forget the values of a model (for --force): data NaN, no layer done, not complete, not damaged."""
        self.profiles.reset(name)

    # the runs of a model's checkpoints (runs/NAME: pipeline.schema.runs)

    def runs(self) -> list[RunSummary]:
        """Every run of the store (``runs/NAME``), its frames in step order and those not complete
        (:class:`pipeline.schema.RunSummary`); [] when it has none."""
        return self.run_groups.summaries()

    def run_names(self) -> list[str]:
        """The runs' names (their groups are ``runs/NAME``)."""
        return self.run_groups.names()

    def run(self, name: str) -> xr.Dataset:
        """Run ``name`` as a lazy, validated Dataset: ``profile (step, layer, head, d, coordinate)`` and the rest of
        ``pipeline.schema.runs`` (frames in the order written: ``.sortby("step")`` orders them by step)."""
        return self.run_groups.dataset(name)

    def run_state(self, name: str) -> RunState | None:
        """What a planner reads of run ``name`` (None when there is no such run)."""
        return self.run_groups.state(name)

    def add_frames(self, name: str, header: dict, frames: list[dict], reset: list[int] = ()) -> dict[int, int]:
        """Add frames to run ``name`` (its group made when absent), journalled; step -> index
        (:meth:`RunGroups.add_frames`)."""
        return self.run_groups.add_frames(name, header, frames, reset)

    def frame_writer(self, name: str):
        """A writer of run ``name``'s frames (:class:`pipeline.store.frame_writer.FrameWriter`)."""
        return self.run_groups.frame_writer(name)

    def finish_run(self, name: str) -> None:
        """Record which frames of run ``name`` repeat another (``repeat_of``)."""
        self.run_groups.finish(name)

    # verification, upgrades, recovery, locks

    def verify(self, names: list[str] | None = None, mark: bool = True) -> list[Damage]:
        """Re-read every written layer (and every other group); returns what is damaged, marking it with
        ``mark`` (:meth:`Verification.verify`)."""
        return self.verification.verify(names, mark)

    def damage_found(self) -> dict[str, str]:
        """Read-only: model name -> damage line of the models whose written layers no longer match their
        checksums, not yet marked damaged."""
        return self.verification.damage_found()

    def checked_models(self) -> list[ModelRow]:
        """:meth:`models`, with the damage :meth:`damage_found` finds folded in. Writes nothing."""
        return self.verification.checked_models()

    def upgrade(self) -> list[str]:
        """Bring every group to SCHEMA_VERSION in place, keeping all data, and the per-model variables to
        ``MODEL_CHUNK`` rows to a chunk (:meth:`Migration.upgrade`)."""
        return self.migration.upgrade()

    def recover(self) -> list[str]:
        """Finish (or clean up) what a killed writer left; returns one line per action taken."""
        return self.journal.recover()

    def writer(self, name: str, wait: bool = False) -> contextlib.AbstractContextManager[None]:
        """The per-model writer lock a run holds while it writes ``name`` (:meth:`Locks.writer`)."""
        return self.locks.writer(name, wait)
