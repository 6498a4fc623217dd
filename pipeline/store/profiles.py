"""The profiles table: one row per model, written template -> layer regions -> completion."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import zarr

from pipeline.schema import (
    BOOL_FIELDS,
    COORDINATES,
    INT_FIELDS,
    MODEL_DATA,
    N_OFFSETS,
    PROFILE_ATTRS,
    PROFILE_COORD_ARRAYS,
    PROFILE_DATA,
    PROFILES,
    ROW_FIELDS,
    STATISTICS,
    STATISTICS_DATA,
    STR_FIELDS,
    ModelRow,
    layer_checksum,
    profile_chunks,
    rows_from_columns,
    spectrum_width,
    statistics_checksum,
)
from pipeline.store.errors import StoreError
from pipeline.store.quiet import quiet_listing


class Profiles:
    """Reads and writes of the profiles group."""

    def _profiles(self, mode: str = "r") -> zarr.Group:
        return self._group(PROFILES, mode)

    def models(self) -> list[ModelRow]:
        """Every model of the profiles group, in store order ([] when the store or group is missing)."""
        return self._models()[0]

    def _models(self) -> tuple[list[ModelRow], zarr.Group | None, list[str], dict[str, np.ndarray]]:
        """The rows, and the group, names and per-model columns they were read from."""
        if PROFILES not in self.groups():
            return [], None, [], {}
        self.dataset(PROFILES)  # validated
        g = self._profiles()
        names = _names(g)
        cols = {f: g[f][:] for f in INT_FIELDS + STR_FIELDS + BOOL_FIELDS + ("layer_done", "statistics_checksum")
                if f in g}
        return rows_from_columns(names, cols), g, names, cols

    def names(self) -> list[str]:
        if PROFILES not in self.groups():
            return []
        return [n for n in _names(self._profiles()) if n]

    def row(self, name: str) -> ModelRow:
        for r in self.models():
            if r.name == name:
                return r
        raise StoreError(f"model {name!r} is not in the store {self.location!r} (it has: "
                         f"{', '.join(self.names()) or 'none'}).")

    def layers_done(self, name: str) -> np.ndarray:
        """Boolean (n_layers,) of the layers of ``name`` already written."""
        g = self._profiles()
        i = _index(g, name, self.location)
        return np.asarray(g["layer_done"][i, : int(g["n_layers"][i])], dtype=bool)

    def layers_with_statistics(self, name: str) -> np.ndarray:
        """Boolean (n_layers,) of the layers of ``name`` written with their head statistics (all False in a store
        without the statistics variables)."""
        g = self._profiles()
        i = _index(g, name, self.location)
        L = int(g["n_layers"][i])
        if "statistics_checksum" not in g:
            return np.zeros(L, dtype=bool)
        sums = g["statistics_checksum"][i, :L]
        done = np.asarray(g["layer_done"][i, :L], dtype=bool)
        return done & np.array([bool(str(x)) for x in sums], dtype=bool)

    def is_complete(self, name: str) -> bool:
        g = self._profiles()
        return bool(g["complete"][_index(g, name, self.location)])

    def register(self, row: ModelRow) -> int:
        """Add a model row, or refresh the fields of a stored one; returns its index.

        The row appears whole or not at all. An existing row keeps its values, so an interrupted run
        resumes; a complete row with another shape is refused (use ``reset`` first to replace it).
        """
        bad = row.shape_problems()
        if bad:
            raise StoreError(f"cannot register {row.name!r}: {'; '.join(bad)}.")
        self._check_not_written_elsewhere(row.name)
        with self._writing(f"the registration of {row.name!r}", "every other model"), self._store_lock():
            self._refuse_other_shape(row)
            with self._journalled({"op": "register", "row": _row_dict(row)}):
                return self._apply_register(row)

    def _refuse_other_shape(self, row: ModelRow) -> None:
        if PROFILES not in self.groups():
            return
        g = self._profiles()
        names = _names(g)
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

    def _apply_register(self, row: ModelRow) -> int:
        """Idempotent: replaying it after a kill at any point gives the same row."""
        width = spectrum_width(row.d_head)
        created = PROFILES not in self.groups()
        if created:  # built at this row's sizes with every variable: nothing to add, grow or even out
            self._create_profiles(row.n_layers, row.n_heads, width)
        g = self._profiles("a")
        if not created:
            _ensure_statistics(g, width)
            _grow(g, row.n_layers, row.n_heads, width)
        n = _even_rows(g) if not created else 1
        names = _names(g)
        if created:
            i = 0  # the new group's one row, every value its fill: nothing to clear or grow
        elif row.name in names:
            i = names.index(row.name)
        elif "" in names:
            i = names.index("")  # a slot without a name: clear what a killed writer may have put there
            _clear_row(g, i)
        else:
            i = n
            _resize_rows(g, n + 1)  # new rows read as fill values (shrinking deleted their chunks)
        values = _row_dict(row)
        for f in INT_FIELDS:
            g[f][i] = int(values[f])
        for f in STR_FIELDS:
            if f != "damaged":
                g[f][i] = str(values[f])
        g["layernorm_folded"][i] = bool(row.layernorm_folded)
        g["model"][i] = row.name  # last: a row is a model once it has its name
        return i

    def _create_profiles(self, n_layers: int, n_heads: int, width: int) -> None:
        """A profiles group with one row, unnamed, every value its fill, built in staging and moved into place
        whole: the row the registration that creates the group fills (resizing some 30 arrays from 0 rows to 1
        took about a third of a first registration). A kill before the row gets its name leaves an unnamed
        row, which the journal's replay removes or the next registration reuses."""
        L, H = max(n_layers, 1), max(n_heads, 1)
        target, path = self.backend.new_group(PROFILES)
        g = zarr.open_group(target, path=path, mode="w", zarr_format=3)
        _coordinate(g, "model", [], rows=1)
        _coordinate(g, "layer", np.arange(L))
        _coordinate(g, "head", np.arange(H))
        _coordinate(g, "d", np.arange(N_OFFSETS))
        _coordinate(g, "coordinate", COORDINATES)
        _data_arrays(g, PROFILE_DATA, {"model": 1, "layer": L, "head": H, "d": N_OFFSETS,
                                       "coordinate": len(COORDINATES)})
        _ensure_statistics(g, width)
        _data_arrays(g, MODEL_DATA, {"model": 1})
        g.update_attributes(PROFILE_ATTRS)  # one write of the group's zarr.json (attrs.update writes once per key)
        self.backend.place_group(target, PROFILES)

    def _drop_ghost_rows(self) -> None:
        """Trailing rows without a name (a registration killed part-way with no journal entry) are removed."""
        if PROFILES not in self.groups():
            return
        g = self._profiles("a")
        n = _even_rows(g)
        names = _names(g)
        keep = n
        while keep > 0 and not names[keep - 1]:
            keep -= 1
        if keep < n:
            _resize_rows(g, keep)

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
                    statistics: np.ndarray | None = None, spectrum: np.ndarray | None = None) -> None:
        """Region write of one (model, layer) with its checksums (:meth:`LayerWriter.write`), through a writer
        opened for this one layer."""
        self.layer_writer(name).write(layer, profile, norm, statistics, spectrum)

    def mark_complete(self, name: str, revision: str | None = None) -> None:
        """Set ``complete`` (and clear ``damaged``) once every layer is written; refuses otherwise."""
        with self._writing(f"the completion of {name!r}", "every layer"), self._store_lock():
            g = self._profiles("a")
            i = _index(g, name, self.location)
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
        self._check_not_written_elsewhere(name)
        with self._writing(f"the reset of {name!r}", "every other model"), self._store_lock():
            g = self._profiles("a")
            i = _index(g, name, self.location)
            g["complete"][i] = False  # first: a kill below leaves an incomplete model, resumable
            g["layer_done"][i] = False
            g["profile"][i] = np.nan
            g["norm"][i] = np.nan
            g["layer_checksum"][i] = ""
            _clear_statistics(g, i)
            g["damaged"][i] = ""



class LayerWriter:
    """Writes layers of one model (:meth:`Profiles.layer_writer`)."""

    def __init__(self, store: Profiles, name: str):
        self.store, self.name = store, name
        with store._writing(f"the layers of {name!r}", "the other layers"):
            self._open()

    def _open(self) -> None:
        g = self.group = self.store._profiles("a")
        self.row = _index(g, self.name, self.store.location)
        self.n_heads, self.n_layers = int(g["n_heads"][self.row]), int(g["n_layers"][self.row])
        self.width = spectrum_width(int(g["d_head"][self.row]))
        names = ("profile", "norm", "layer_checksum", "layer_done")
        if "statistics_checksum" in g:
            names += ("head_statistics", "spectrum", "statistics_checksum")
        self.arrays = {k: g[k] for k in names}  # each array's metadata read once

    def write(self, layer: int, profile: np.ndarray, norm: np.ndarray, statistics: np.ndarray | None = None,
              spectrum: np.ndarray | None = None) -> None:
        """Region write of one layer with its checksums: profile (H, 4) or (H, 129, 4), norm (H,) or (H, 129), and
        the head statistics (H, 17) and spectrum (H, k <= 2 d_head) at d = 0.

        Position-independent layers pass (H, 4) and are repeated at every d. Without ``statistics`` and
        ``spectrum`` the layer's statistics read as not computed. Safe from several processes at once for
        different layers (no lock: no two layers share a chunk).
        """
        name, H, L, width = self.name, self.n_heads, self.n_layers, self.width
        if (statistics is None) != (spectrum is None):
            raise StoreError(f"layer {layer} of {name!r}: give both statistics and spectrum, or neither")
        if statistics is not None:
            statistics = np.asarray(statistics, dtype=np.float64)
            spectrum = np.asarray(spectrum, dtype=np.float64)
            if statistics.shape != (H, len(STATISTICS)) or spectrum.ndim != 2 or spectrum.shape[0] != H \
                    or spectrum.shape[1] > width:
                raise StoreError(f"layer {layer} of {name!r}: expected statistics ({H}, {len(STATISTICS)}) and "
                                 f"spectrum ({H}, k) with k <= {width}; got {statistics.shape} and {spectrum.shape}")
            spectrum = np.pad(spectrum, ((0, 0), (0, width - spectrum.shape[1])), constant_values=np.nan)
        if not 0 <= layer < L:
            raise StoreError(f"layer {layer} out of range for {name!r} with {L} layers")
        profile = np.asarray(profile, dtype=np.float64)
        norm = np.asarray(norm, dtype=np.float64)
        if profile.ndim == 2:
            profile = np.broadcast_to(profile[:, None, :], (profile.shape[0], N_OFFSETS, 4))
            norm = np.broadcast_to(norm[:, None], (norm.shape[0], N_OFFSETS))
        if profile.shape != (H, N_OFFSETS, 4) or norm.shape != (H, N_OFFSETS):
            raise StoreError(f"layer {layer} of {name!r}: expected profile ({H}, {N_OFFSETS}, 4) and norm "
                             f"({H}, {N_OFFSETS}); got {profile.shape} and {norm.shape}")
        store, i = self.store, self.row
        with store._writing(f"layer {layer} of {name!r}", "the other layers"):
            # a store without the statistics variables (or with some: _ensure_statistics adds what is missing)
            if statistics is not None and "statistics_checksum" not in self.arrays:
                with store._store_lock():
                    _ensure_statistics(self.group, width)
                    store._consolidate()
                self._open()
            a = self.arrays
            # order: values, checksums, then layer_done (a kill before the last leaves the layer to do)
            a["profile"][i, layer, :H] = profile
            a["norm"][i, layer, :H] = norm
            if "statistics_checksum" in a:
                if statistics is not None:
                    E = a["spectrum"].shape[-1]
                    a["head_statistics"][i, layer, :H] = statistics
                    a["spectrum"][i, layer, :H] = np.pad(spectrum, ((0, 0), (0, E - width)), constant_values=np.nan)
                else:
                    a["head_statistics"][i, layer] = np.nan
                    a["spectrum"][i, layer] = np.nan
            a["layer_checksum"][i, layer] = layer_checksum(profile, norm)
            if "statistics_checksum" in a:
                a["statistics_checksum"][i, layer] = ("" if statistics is None
                                                      else statistics_checksum(statistics, spectrum))
            a["layer_done"][i, layer] = True


def _names(g: zarr.Group) -> list[str]:
    return [str(x) for x in g["model"][:]] if g["model"].shape[0] else []


def _index(g: zarr.Group, name: str, location: str = "") -> int:
    names = _names(g)
    if not name or name not in names:
        raise StoreError(f"model {name!r} is not in the store {location!r} (it has: "
                         f"{', '.join(n for n in names if n) or 'none'}).")
    return names.index(name)


def _model_arrays(g: zarr.Group) -> list[zarr.Array]:
    with quiet_listing():
        arrays = [a for _, a in g.arrays()]
    return [a for a in arrays if a.metadata.dimension_names and a.metadata.dimension_names[0] == "model"]


def _resize_rows(g: zarr.Group, n: int) -> None:
    """Every model-dimension array to ``n`` rows; the ``model`` names last when growing, first when shrinking."""
    arrays = _model_arrays(g)
    names = [a for a in arrays if a.basename == "model"]
    others = [a for a in arrays if a.basename != "model"]
    for a in (others + names) if n >= g["model"].shape[0] else (names + others):
        if a.shape[0] != n:
            a.resize((n,) + a.shape[1:])


def _even_rows(g: zarr.Group) -> int:
    """Make every model-dimension array as long as ``model`` (a killed resize may leave them uneven)."""
    n = g["model"].shape[0]
    for a in _model_arrays(g):
        if a.shape[0] != n:
            a.resize((n,) + a.shape[1:])
    return n


def _clear_row(g: zarr.Group, i: int) -> None:
    """A fresh row's values: fill everywhere (whole chunks, so nothing is read)."""
    for a in _model_arrays(g):
        a[i] = a.metadata.fill_value


def _data_arrays(g: zarr.Group, variables: dict, sizes: dict[str, int]) -> None:
    """Create the data variables ``variables`` (schema: name -> (dims, dtype, fill)) at ``sizes``."""
    for name, (dims, dtype, fill) in variables.items():
        g.create_array(name, shape=tuple(sizes[d] for d in dims), chunks=profile_chunks(dims, sizes),
                       dtype=str if dtype == "str" else dtype, fill_value=fill, dimension_names=list(dims))


def _coordinate(g: zarr.Group, name: str, values, rows: int | None = None) -> None:
    """Create the coordinate ``name`` holding ``values``, with the schema's dtype, fill and chunk length; ``rows``
    entries long (the ones past ``values`` read as the fill), by default as long as ``values``."""
    dtype, fill, chunk = PROFILE_COORD_ARRAYS[name]
    a = g.create_array(name, shape=(len(values) if rows is None else rows,), chunks=(chunk,),
                       dtype=str if dtype == "str" else dtype, fill_value=fill, dimension_names=[name])
    if len(values):
        a[:] = np.array(values, dtype=object) if dtype == "str" else np.asarray(values)


def _ensure_statistics(g: zarr.Group, width: int) -> None:
    """Idempotent: the statistics variables and their coordinates (``statistic``, ``eigen`` of ``width``), empty,
    in a profiles group that lacks them (its models read as not computed)."""
    if "statistic" not in g:
        _coordinate(g, "statistic", STATISTICS)
    if "eigen" not in g:
        _coordinate(g, "eigen", np.arange(width))
    sizes = {"model": g["model"].shape[0], "layer": g["layer"].shape[0], "head": g["head"].shape[0],
             "statistic": len(STATISTICS), "eigen": g["eigen"].shape[0]}
    missing = {k: v for k, v in STATISTICS_DATA.items() if k not in g}
    if missing:
        _data_arrays(g, missing, sizes)
        g.update_attributes(PROFILE_ATTRS)


def _clear_statistics(g: zarr.Group, i: int, layer: int | None = None) -> None:
    """Forget the statistics of row ``i`` (one layer, or all): NaN values, no checksum (whole chunks)."""
    if "statistics_checksum" not in g:
        return
    where = (i,) if layer is None else (i, layer)
    g["head_statistics"][where] = np.nan
    g["spectrum"][where] = np.nan
    g["statistics_checksum"][where] = ""


def _grow(g: zarr.Group, n_layers: int, n_heads: int, width: int = 0) -> None:
    """Grow the layer/head (and eigen) dimensions in place; resize keeps every chunk already written."""
    L0, H0 = g["layer"].shape[0], g["head"].shape[0]
    L, H = max(L0, n_layers), max(H0, n_heads)
    E = max(g["eigen"].shape[0], width) if "eigen" in g else 0
    variables = PROFILE_DATA | {k: v for k, v in STATISTICS_DATA.items() if k in g}
    for name, (dims, _dtype, _fill) in variables.items():
        a = g[name]
        new = {"layer": L, "head": H, "eigen": E}
        shape = tuple(new.get(d, s) for d, s in zip(dims, a.shape, strict=True))
        if shape != a.shape:
            a.resize(shape)
    if "eigen" in g and (g["eigen"].shape[0] != E or not np.array_equal(g["eigen"][:], np.arange(E))):
        g["eigen"].resize((E,))
        g["eigen"][:] = np.arange(E)
    if g["layer"].shape[0] != L or not np.array_equal(g["layer"][:], np.arange(L)):
        g["layer"].resize((L,))
        g["layer"][:] = np.arange(L)
    if g["head"].shape[0] != H or not np.array_equal(g["head"][:], np.arange(H)):
        g["head"].resize((H,))
        g["head"][:] = np.arange(H)


def _row_dict(row: ModelRow) -> dict:
    d = asdict(row)
    return {k: d[k] for k in ROW_FIELDS}
