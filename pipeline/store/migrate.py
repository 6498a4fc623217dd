"""Schema upgrades in place, keeping every group and value (and the optional variables a store lacks added, empty;
the per-model variables of an earlier layout, a chunk per row, rewritten ``MODEL_CHUNK`` rows to a chunk), and the
cleanup of a retired writer's side groups."""

from __future__ import annotations

import numpy as np
import zarr

from pipeline.schema import (
    CONVENTIONS_DATA,
    MODEL_CHUNK,
    MODEL_DATA,
    PROFILE_ATTRS,
    PROFILE_DATA,
    PROFILES,
    SCHEMA_VERSION,
    STR_FIELDS,
    layer_checksum,
)
from pipeline.store.errors import StoreError, writing
from pipeline.store.profile_arrays import (
    Listed,
    create_coordinate,
    create_data_arrays,
    ensure_optional,
    even_rows,
    missing_optional,
    model_arrays,
)
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
        was done; last, the per-model variables of a chunk per row rewritten (:meth:`_rechunk`). ``python -m pipeline
        verify --upgrade`` runs it."""
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
        if todo or missing:
            with writing(self.location, self.mode, "the schema upgrade", "every group"), self.locks.store_lock():
                with self.journal.recording({"op": "upgrade"}):
                    self.apply_upgrade()
            done += [f"{g}: schema version {v} -> {SCHEMA_VERSION}" for g, v in sorted(todo.items())]
            if missing:
                done.append(f"{PROFILES}: added {', '.join(missing)} (empty; each model's own command fills its "
                            "values)")
        return done + (self._rechunk() if PROFILES in versions else [])

    def _rechunk(self) -> list[str]:
        """The per-model variables an earlier version wrote with a chunk per row, rewritten with ``MODEL_CHUNK``
        rows to a chunk (a read of the table then reads one chunk per variable). Journalled with their values: a
        kill between deleting a variable and writing it again is finished from the journal."""
        if not narrow_arrays(self.hierarchy.open(PROFILES)):
            return []
        with writing(self.location, self.mode, "the rechunking of the per-model variables", "every model"), \
                self.locks.store_lock():
            g = Listed(self.hierarchy.open(PROFILES, "a"))
            names = narrow_arrays(g)
            if not names:
                return []
            n = even_rows(g)
            values = {name: g[name][:n].tolist() for name in names}
            with self.journal.recording({"op": "rechunk", "values": values}):
                self.apply_rechunk(values)
        return [f"{PROFILES}: {len(names)} per-model variables rewritten with {MODEL_CHUNK} rows to a chunk (they had "
                "a chunk per row)"]

    def replay_rechunk(self, entry: dict) -> str:
        """The journal's replay of a ``rechunk`` entry."""
        self.apply_rechunk(entry["values"])
        return f"finished rewriting {len(entry['values'])} per-model variables with {MODEL_CHUNK} rows to a chunk"

    def apply_rechunk(self, values: dict[str, list]) -> None:
        """Idempotent: each variable of ``values`` (name -> its values, one per row) made again as the schema
        declares it, ``MODEL_CHUNK`` rows to a chunk, holding those values."""
        g = zarr.open_group(self.location, path=PROFILES, mode="r+", use_consolidated=False, zarr_format=3)
        for name, column in values.items():
            if name in g:
                del g[name]
            if name == "model":
                create_coordinate(g, "model", column)
                continue
            create_data_arrays(g, {name: (MODEL_DATA | CONVENTIONS_DATA)[name]}, {"model": len(column)})
            if column:
                g[name][:] = np.array(column, dtype=object) if isinstance(column[0], str) else np.asarray(column)

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


def narrow_arrays(g) -> list[str]:
    """The per-model variables and the ``model`` coordinate of a profiles group with fewer rows to a chunk than
    ``MODEL_CHUNK`` (an earlier version wrote a chunk per row)."""
    known = ("model", *MODEL_DATA, *CONVENTIONS_DATA)
    return sorted(a.basename for a in model_arrays(g) if a.ndim == 1 and a.chunks[0] != MODEL_CHUNK
                  and a.basename in known)
