"""Schema upgrades in place, keeping every group and value (and the optional variables a store lacks added, empty),
and the cleanup of a retired writer's side groups."""

from __future__ import annotations

import numpy as np
import zarr

from pipeline.schema import (
    MODEL_DATA,
    PROFILE_ATTRS,
    PROFILE_DATA,
    PROFILES,
    SCHEMA_VERSION,
    STR_FIELDS,
    layer_checksum,
)
from pipeline.store.errors import StoreError, writing
from pipeline.store.profile_arrays import create_data_arrays, ensure_optional, even_rows, missing_optional
from pipeline.store.quiet import quiet_listing


class Migration:
    """upgrade() and its journalled step (:meth:`replay_upgrade` finishes one a kill interrupted)."""

    def __init__(self, backend, mode: str, hierarchy, locks, journal):
        self.backend, self.mode = backend, mode
        self.hierarchy, self.locks, self.journal = hierarchy, locks, journal
        self.location = backend.location

    def upgrade(self) -> list[str]:
        """Bring every group to SCHEMA_VERSION in place, keeping all data, and add the optional variables the
        profiles group lacks (empty: its models read "statistics not computed" or "spectra of T and L not computed"
        with their own command, which fills them), after finishing or removing the side groups of the two-rename
        layout (``G.__writing__``, ``G.__old__``: a writer without the journal left them when killed); returns what
        was done. ``python -m pipeline verify --upgrade`` runs it."""
        done = self._clean_side_groups()
        versions = self.hierarchy.schema_versions()
        todo = {g: v for g, v in versions.items() if v != SCHEMA_VERSION}
        newer = {g: v for g, v in todo.items() if not isinstance(v, int) or v > SCHEMA_VERSION}
        if newer:
            raise StoreError(f"groups {newer} of {self.location!r} are not from an older version of this "
                             f"schema (this code writes version {SCHEMA_VERSION}); nothing changed.")
        missing = (missing_optional(zarr.open_group(self.location, path=PROFILES, mode="r", use_consolidated=False,
                                                    zarr_format=3))
                   if PROFILES in versions else [])
        if not todo and not missing:
            return done
        with writing(self.location, self.mode, "the schema upgrade", "every group"), self.locks.store_lock():
            with self.journal.recording({"op": "upgrade"}):
                self.apply_upgrade()
        added = [f"{PROFILES}: added {', '.join(missing)} (empty; each model's own command fills its values)"]
        return (done + [f"{g}: schema version {v} -> {SCHEMA_VERSION}" for g, v in sorted(todo.items())]
                + (added if missing else []))

    def _clean_side_groups(self) -> list[str]:
        if not self.backend.legacy_leftovers():
            return []
        with writing(self.location, self.mode, "the cleanup of side groups", "every group"), \
                self.locks.store_lock():
            out = self.backend.clean_legacy()
            self.journal.consolidate()
        return out

    def replay_upgrade(self, entry: dict) -> str:
        """The journal's replay of an ``upgrade`` entry."""
        self.apply_upgrade()
        return f"finished upgrading to schema version {SCHEMA_VERSION}"

    def apply_upgrade(self) -> None:
        """Idempotent. Version 1 -> 2: the provenance and damage fields, and per-layer checksums of the
        layers already written (computed from the stored values); then every optional variable the profiles group
        lacks, empty."""
        root = zarr.open_group(self.location, mode="a", use_consolidated=False, zarr_format=3)
        with quiet_listing():
            groups = list(root.groups())
        for name, g in groups:
            if name == PROFILES and g.attrs.get("schema_version") != SCHEMA_VERSION:
                n = even_rows(g)
                L = g["layer"].shape[0]
                missing = {f: MODEL_DATA[f] for f in STR_FIELDS if f not in g}
                if "layer_checksum" not in g:
                    missing["layer_checksum"] = PROFILE_DATA["layer_checksum"]
                create_data_arrays(g, missing, {"model": n, "layer": L})
                sums = g["layer_checksum"]
                done = np.asarray(g["layer_done"][:], dtype=bool)
                for i in range(n):
                    H = int(g["n_heads"][i])
                    for layer in np.flatnonzero(done[i]):
                        if not str(sums[i, layer]):
                            sums[i, layer] = layer_checksum(g["profile"][i, layer, :H], g["norm"][i, layer, :H])
                g.attrs.update(PROFILE_ATTRS)
            if name == PROFILES:
                ensure_optional(g, max([2 * int(x) for x in g["d_head"][:]], default=0))
            g.attrs["schema_version"] = SCHEMA_VERSION
