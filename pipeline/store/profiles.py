"""The profiles table: one row per model, written template -> layer regions -> completion."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import zarr

from pipeline.schema import (
    BOOL_FIELDS,
    CHECKSUMS,
    CONVENTIONS_DATA,
    COORDINATES,
    INT_FIELDS,
    N_OFFSETS,
    PROFILE_ATTRS,
    PROFILE_DATA,
    PROFILES,
    STR_FIELDS,
    ModelRow,
    rows_from_columns,
    spectrum_width,
)
from pipeline.store.errors import StoreError, writing
from pipeline.store.layer_writer import LayerWriter
from pipeline.store.profile_arrays import (
    Listed,
    clear_row,
    clear_statistics,
    create_coordinate,
    create_data_arrays,
    ensure_optional,
    even_rows,
    grow,
    layer_prefixes,
    resize_rows,
    row_dict,
    row_index,
    row_names,
    row_of,
    write_conventions,
)

__all__ = ["LayerWriter", "ProfilesTable", "Table"]


@dataclass(frozen=True)
class Table:
    """The profiles table as read once: its rows, and the group (its arrays listed once), the row names and the
    per-model columns they were read from (``group`` None and the rest empty when the store has no profiles
    group)."""

    rows: list[ModelRow]
    group: Listed | None
    names: list[str]
    columns: dict[str, np.ndarray]


class ProfilesTable:
    """Reads and writes of the profiles group (its groups through ``hierarchy``, structural changes under the store
    lock and journalled)."""

    def __init__(self, backend, mode: str, hierarchy, locks, journal):
        self.backend, self.mode = backend, mode
        self.hierarchy, self.locks, self.journal = hierarchy, locks, journal
        self.location = backend.location

    def open(self, mode: str = "r") -> zarr.Group:
        """The profiles group, its schema version checked."""
        return self.hierarchy.open(PROFILES, mode)

    def read(self) -> Table:
        """The rows, and the group, names and per-model columns they were read from."""
        if not self.hierarchy.has(PROFILES):
            return Table([], None, [], {})
        self.hierarchy.check(PROFILES)
        g = Listed(self.open())
        names = row_names(g)
        per_layer = ("layer_done", *CHECKSUMS)  # (model, layer), a chunk per layer: read up to each model's count
        cols = {f: g[f][:] for f in INT_FIELDS + STR_FIELDS + BOOL_FIELDS + tuple(CONVENTIONS_DATA) if f in g}
        cols |= {f: layer_prefixes(g[f], cols["n_layers"]) for f in per_layer if f in g}
        return Table(rows_from_columns(names, cols), g, names, cols)

    def models(self) -> list[ModelRow]:
        """Every model of the profiles group, in store order ([] when the store or group is missing)."""
        return self.read().rows

    def names(self) -> list[str]:
        if not self.hierarchy.has(PROFILES):
            return []
        return [n for n in row_names(self.open()) if n]

    def row(self, name: str) -> ModelRow:
        for r in self.models():
            if r.name == name:
                return r
        raise StoreError(f"model {name!r} is not in the store {self.location!r} (it has: "
                         f"{', '.join(self.names()) or 'none'}).")

    def layers_done(self, name: str) -> np.ndarray:
        """Boolean (n_layers,) of the layers of ``name`` already written."""
        g = self.open()
        i = row_index(g, name, self.location)
        return np.asarray(g["layer_done"][i, : int(g["n_layers"][i])], dtype=bool)

    def layers_with_statistics(self, name: str) -> np.ndarray:
        """Boolean (n_layers,) of the layers of ``name`` written with their head statistics (all False in a store
        without the statistics variables)."""
        return self._layers_with(name, "statistics_checksum")

    def layers_with_spectra(self, name: str) -> np.ndarray:
        """Boolean (n_layers,) of the layers of ``name`` written with their spectra of T and L (all False in a store
        without the spectra variables)."""
        return self._layers_with(name, "spectra_checksum")

    def _layers_with(self, name: str, checksum: str) -> np.ndarray:
        g = self.open()
        i = row_index(g, name, self.location)
        L = int(g["n_layers"][i])
        if checksum not in g:
            return np.zeros(L, dtype=bool)
        sums = g[checksum][i, :L]
        done = np.asarray(g["layer_done"][i, :L], dtype=bool)
        return done & np.array([bool(str(x)) for x in sums], dtype=bool)

    def is_complete(self, name: str) -> bool:
        g = self.open()
        return bool(g["complete"][row_index(g, name, self.location)])

    def register(self, row: ModelRow) -> int:
        """Add a model row, or refresh the fields of a stored one; returns its index.

        The row appears whole or not at all. An existing row keeps its values, so an interrupted run
        resumes; a complete row with another shape is refused (use ``reset`` first to replace it).
        """
        bad = row.shape_problems()
        if bad:
            raise StoreError(f"cannot register {row.name!r}: {'; '.join(bad)}.")
        self.locks.refuse_if_held(row.name)
        with writing(self.location, self.mode, f"the registration of {row.name!r}", "every other model"), \
                self.locks.store_lock():
            self._refuse_other_shape(row)
            with self.journal.recording({"op": "register", "row": row_dict(row)}):
                return self.apply_register(row)

    def replay_register(self, entry: dict) -> str:
        """The journal's replay of a ``register`` entry."""
        row = row_of(entry["row"])
        self.apply_register(row)
        return f"finished registering {row.name!r}"

    def _refuse_other_shape(self, row: ModelRow) -> None:
        if not self.hierarchy.has(PROFILES):
            return
        g = self.open()
        names = row_names(g)
        if row.name not in names:
            return
        i = names.index(row.name)
        if bool(g["complete"][i]):
            old = {f: int(g[f][i]) for f in ("n_layers", "n_heads", "d_model", "d_head")}
            new = {f: getattr(row, f) for f in old}
            if old != new:
                raise StoreError(
                    f"the store already holds a complete {row.name!r} with shape {old}, but this checkpoint "
                    f"has {new}. Use --name to store it under another name, or --force to replace it."
                )

    def apply_register(self, row: ModelRow) -> int:
        """Write ``row`` into the group; idempotent: replaying it after a kill at any point gives the same row."""
        width = spectrum_width(row.d_head)
        created = not self.hierarchy.has(PROFILES)
        if created:  # built at this row's sizes with every variable: nothing to add, grow or even out
            self._create(row.n_layers, row.n_heads, width)
        g = Listed(self.open("a"))  # some 50 arrays, each touched once or more below
        if not created:
            ensure_optional(g, width)
            grow(g, row.n_layers, row.n_heads, width)
        n = even_rows(g) if not created else 1
        names = row_names(g)
        if created:
            i = 0  # the new group's one row, every value its fill: nothing to clear or grow
        elif row.name in names:
            i = names.index(row.name)
        elif "" in names:
            i = names.index("")  # a slot without a name: clear what a killed writer may have put there
            clear_row(g, i)
        else:
            i = n
            resize_rows(g, n + 1)  # new rows read as fill values (rows dropped were set to the fill first)
        values = row_dict(row)
        for f in INT_FIELDS:
            g[f][i] = int(values[f])
        for f in STR_FIELDS:
            if f != "damaged":
                g[f][i] = str(values[f])
        g["layernorm_folded"][i] = bool(row.layernorm_folded)
        write_conventions(g, i, row)
        g["model"][i] = row.name  # last: a row is a model once it has its name
        return i

    def _create(self, n_layers: int, n_heads: int, width: int) -> None:
        """A profiles group with one row, unnamed, every value its fill, built in staging and moved into place
        whole: the row the registration that creates the group fills (resizing some 30 arrays from 0 rows to 1
        took about a third of a first registration). A kill before the row gets its name leaves an unnamed
        row, which the journal's replay removes or the next registration reuses."""
        L, H = max(n_layers, 1), max(n_heads, 1)
        target, path = self.backend.new_group(PROFILES)
        g = zarr.open_group(target, path=path, mode="w", zarr_format=3)
        create_coordinate(g, "model", [], rows=1)
        create_coordinate(g, "layer", np.arange(L))
        create_coordinate(g, "head", np.arange(H))
        create_coordinate(g, "d", np.arange(N_OFFSETS))
        create_coordinate(g, "coordinate", COORDINATES)
        create_data_arrays(g, PROFILE_DATA, {"model": 1, "layer": L, "head": H, "d": N_OFFSETS,
                                             "coordinate": len(COORDINATES)})
        ensure_optional(g, width)  # the statistics, the spectra and every per-model variable
        g.update_attributes(PROFILE_ATTRS)  # one write of the group's zarr.json (attrs.update writes once per key)
        self.backend.place_group(target, PROFILES)

    def drop_ghost_rows(self) -> None:
        """Trailing rows without a name (a registration killed part-way with no journal entry) are removed."""
        if not self.hierarchy.has(PROFILES):
            return
        g = self.open("a")
        n = even_rows(g)
        names = row_names(g)
        keep = n
        while keep > 0 and not names[keep - 1]:
            keep -= 1
        if keep < n:
            resize_rows(g, keep)

    def layer_writer(self, name: str) -> LayerWriter:
        """A writer of the layers of ``name``: the group, the model's row and its arrays opened once (a run writes
        every layer through one; :meth:`write_layer` opens one per layer).

        What it keeps stays true while it is used: a named row never moves (rows are only appended, and only
        unnamed trailing rows are ever removed), and its sizes are fixed while the run holds the model's writer
        lock (a reset or re-registration of the model waits for it). Another model's registration may grow the
        layer, head or eigen dimensions meanwhile: chunks never change shape, so the region this row writes maps
        to the same chunks, and spectrum columns past the width seen at opening keep their fill (NaN), as a
        writer opened afterwards pads them.
        """
        return LayerWriter(self, name)

    def write_layer(self, name: str, layer: int, profile: np.ndarray, norm: np.ndarray,
                    statistics: np.ndarray | None = None, spectrum: np.ndarray | None = None,
                    spectra: np.ndarray | None = None) -> None:
        """Region write of one (model, layer) with its checksums (:meth:`LayerWriter.write`), through a writer
        opened for this one layer."""
        self.layer_writer(name).write(layer, profile, norm, statistics, spectrum, spectra)

    def mark_complete(self, name: str, revision: str | None = None) -> None:
        """Set ``complete`` (and clear ``damaged``) once every layer is written; refuses otherwise."""
        with writing(self.location, self.mode, f"the completion of {name!r}", "every layer"), \
                self.locks.store_lock():
            g = self.open("a")
            i = row_index(g, name, self.location)
            n_layers = int(g["n_layers"][i])
            if n_layers < 1:
                raise StoreError(f"cannot mark {name!r} complete: it has {n_layers} layers.")
            done = np.asarray(g["layer_done"][i, :n_layers], dtype=bool)
            if not done.all():
                missing = np.flatnonzero(~done).tolist()
                raise StoreError(f"cannot mark {name!r} complete: layers {missing} are not written")
            if revision is not None:
                g["revision"][i] = str(revision)
            g["damaged"][i] = ""
            g["complete"][i] = True

    def reset(self, name: str) -> None:
        """Forget the values of a model (for --force): data NaN, no layer done, not complete, not damaged."""
        self.locks.refuse_if_held(name)
        with writing(self.location, self.mode, f"the reset of {name!r}", "every other model"), \
                self.locks.store_lock():
            g = self.open("a")
            i = row_index(g, name, self.location)
            g["complete"][i] = False  # first: a kill below leaves an incomplete model, resumable
            g["layer_done"][i] = False
            g["profile"][i] = np.nan
            g["norm"][i] = np.nan
            g["layer_checksum"][i] = ""
            clear_statistics(g, i)
            g["damaged"][i] = ""

    def mark_damaged(self, name: str, layers: list[int], line: str) -> None:
        """Clear ``layers`` of ``name`` (not done, values NaN, no checksums) and mark the model ``damaged`` with
        ``line`` and not complete (verify's marking)."""
        with writing(self.location, self.mode, f"the damage record of {name!r}", "the undamaged layers"), \
                self.locks.store_lock():
            g = self.open("a")
            i = row_index(g, name, self.location)
            g["complete"][i] = False
            g["damaged"][i] = line
            for layer in layers:
                g["layer_done"][i, layer] = False
                g["layer_checksum"][i, layer] = ""
                g["profile"][i, layer] = np.nan  # whole chunks: replaces a garbled chunk without reading it
                g["norm"][i, layer] = np.nan
                clear_statistics(g, i, layer)
