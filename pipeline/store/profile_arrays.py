"""The profiles group at the level of its zarr arrays: the row names, rows added, evened and cleared, dimensions
grown, variables and coordinates created with the schema's dtypes, fills and chunks.

Plain functions over an open ``zarr.Group``, shared by the parts that write the group (``profiles``,
``layer_writer``, ``verify``, ``migrate``); none of them takes a lock or journals: their callers do.
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import zarr

from pipeline.schema import (
    CONVENTIONS_DATA,
    MODEL_DATA,
    PROFILE_ATTRS,
    PROFILE_COORD_ARRAYS,
    PROFILE_DATA,
    ROW_FIELDS,
    SPECTRA,
    SPECTRA_DATA,
    STATISTICS,
    STATISTICS_DATA,
    ModelRow,
    profile_chunks,
)
from pipeline.schema.conventions import PER_LAYER_FIELDS, conventions_chunks, layer_values
from pipeline.store.errors import StoreError
from pipeline.store.quiet import quiet_listing


class Listed:
    """A zarr group with every array's metadata read once, in one listing (zarr reads the members' metadata
    concurrently), for work that touches most of its arrays: a registration, the table's read, the upgrade's
    rewriting of the per-model variables. Reading ``g[name]`` of a ``zarr.Group`` reads the array's metadata again
    each time (a ``name in g`` check too), one round trip through zarr's event loop apiece; a layer writer, which
    touches some 15 of the 50 arrays, keeps the plain group.

    Holds for as long as no other writer changes the group's arrays: under the store lock (every structural change
    takes it), or for the one read of the table it serves. Arrays this object creates join it; a resize updates the
    array objects in place. The helpers below take a ``Listed`` or a ``zarr.Group`` alike."""

    def __init__(self, group: zarr.Group):
        self.group = group
        with quiet_listing():
            self._arrays = dict(group.arrays())

    def __contains__(self, name: str) -> bool:
        return name in self._arrays

    def __getitem__(self, name: str) -> zarr.Array:
        return self._arrays[name]

    def arrays(self):
        return iter(self._arrays.items())

    def create_array(self, name: str, **kwargs) -> zarr.Array:
        a = self._arrays[name] = self.group.create_array(name, **kwargs)
        return a

    def update_attributes(self, attrs: dict) -> None:
        self.group.update_attributes(attrs)


def row_names(g: zarr.Group) -> list[str]:
    """The ``model`` coordinate: every row's name in store order ("" for a row without one)."""
    return [str(x) for x in g["model"][:]] if g["model"].shape[0] else []


def layer_prefixes(arr: zarr.Array, lengths) -> np.ndarray:
    """A (model, layer) variable read up to each row's length: ``out[i, :lengths[i]]`` is ``arr[i, :lengths[i]]``
    and the rest is the variable's fill value. One coordinate selection reads only the chunks inside the prefixes:
    a row's layers past its model's count are no part of the model (their chunks are mostly absent, and reading an
    absent chunk costs as much as reading a written one: these variables have a chunk per layer)."""
    rows_of_arr, width = arr.shape
    lengths = np.clip(np.asarray(lengths, dtype=np.int64)[:rows_of_arr], 0, width)  # rows past the array's: none
    out = np.full(arr.shape, arr.fill_value, dtype=arr.dtype)
    rows = np.repeat(np.arange(len(lengths)), lengths)
    if rows.size:
        layers = np.concatenate([np.arange(n) for n in lengths])
        out[rows, layers] = arr.get_coordinate_selection((rows, layers))
    return out


def row_index(g: zarr.Group, name: str, location: str = "") -> int:
    """The row of model ``name``; StoreError naming the models there when it has none."""
    names = row_names(g)
    if not name or name not in names:
        raise StoreError(f"model {name!r} is not in the store {location!r} (it has: "
                         f"{', '.join(n for n in names if n) or 'none'}).")
    return names.index(name)


def model_arrays(g: zarr.Group) -> list[zarr.Array]:
    """Every array whose first dimension is ``model``."""
    with quiet_listing():
        arrays = [a for _, a in g.arrays()]
    return [a for a in arrays if a.metadata.dimension_names and a.metadata.dimension_names[0] == "model"]


def resize_array_rows(a: zarr.Array, n: int) -> None:
    """``a`` to ``n`` rows. New rows read as the fill value: shrinking deletes the chunks wholly past the end, and
    the rows past the end of a chunk that holds several (the per-model variables') are set to the fill first, so
    that growing again does not bring their old values back."""
    if a.shape[0] > n and a.chunks[0] > 1 and n % a.chunks[0]:
        a[n:] = a.metadata.fill_value
    if a.shape[0] != n:
        a.resize((n,) + a.shape[1:])


def resize_rows(g: zarr.Group, n: int) -> None:
    """Every model-dimension array to ``n`` rows; the ``model`` names last when growing, first when shrinking."""
    arrays = model_arrays(g)
    names = [a for a in arrays if a.basename == "model"]
    others = [a for a in arrays if a.basename != "model"]
    for a in (others + names) if n >= g["model"].shape[0] else (names + others):
        resize_array_rows(a, n)


def even_rows(g: zarr.Group) -> int:
    """Make every model-dimension array as long as ``model`` (a killed resize may leave them uneven)."""
    n = g["model"].shape[0]
    for a in model_arrays(g):
        resize_array_rows(a, n)
    return n


def clear_row(g: zarr.Group, i: int) -> None:
    """A fresh row's values: fill everywhere (whole chunks, so nothing is read)."""
    for a in model_arrays(g):
        a[i] = a.metadata.fill_value


def create_data_arrays(g: zarr.Group, variables: dict, sizes: dict[str, int], chunks=None) -> None:
    """Create the data variables ``variables`` (schema: name -> (dims, dtype, fill)) at ``sizes``, chunked by
    ``chunks(dims)`` (default: ``profile_chunks``)."""
    for name, (dims, dtype, fill) in variables.items():
        shape = chunks(dims) if chunks is not None else profile_chunks(dims, sizes)
        g.create_array(name, shape=tuple(sizes[d] for d in dims), chunks=shape,
                       dtype=str if dtype == "str" else dtype, fill_value=fill, dimension_names=list(dims))


def create_coordinate(g: zarr.Group, name: str, values, rows: int | None = None) -> None:
    """Create the coordinate ``name`` holding ``values``, with the schema's dtype, fill and chunk length; ``rows``
    entries long (the ones past ``values`` read as the fill), by default as long as ``values``."""
    dtype, fill, chunk = PROFILE_COORD_ARRAYS[name]
    a = g.create_array(name, shape=(len(values) if rows is None else rows,), chunks=(chunk,),
                       dtype=str if dtype == "str" else dtype, fill_value=fill, dimension_names=[name])
    if len(values):
        a[:] = np.array(values, dtype=object) if dtype == "str" else np.asarray(values)


def missing_optional(g: zarr.Group) -> list[str]:
    """The optional variables of the schema a profiles group lacks: the statistics, the spectra, per-model fields
    added after the group was made (the baseline fields), the conventions (rows stored before them read as not
    recorded: every layer of the model's own positional kind)."""
    return [k for k in (*STATISTICS_DATA, *SPECTRA_DATA, *MODEL_DATA, *CONVENTIONS_DATA) if k not in g]


def ensure_optional(g: zarr.Group, width: int) -> list[str]:
    """Idempotent: every optional variable (:func:`missing_optional`) and the coordinates ``statistic`` and ``eigen``
    (of ``width``), created empty in a profiles group that lacks them (its models read "statistics not computed" or
    "spectra not computed", its rows' new fields their defaults); returns the variables created."""
    missing = missing_optional(g)
    if "statistic" not in g:
        create_coordinate(g, "statistic", STATISTICS)
    if "eigen" not in g:
        create_coordinate(g, "eigen", np.arange(width))
    sizes = {"model": g["model"].shape[0], "layer": g["layer"].shape[0], "head": g["head"].shape[0],
             "statistic": len(STATISTICS), "eigen": g["eigen"].shape[0]}
    if missing:
        create_data_arrays(g, {k: v for k, v in (STATISTICS_DATA | SPECTRA_DATA | MODEL_DATA).items() if k in missing},
                           sizes)
        create_data_arrays(g, {k: v for k, v in CONVENTIONS_DATA.items() if k in missing}, sizes,
                           chunks=conventions_chunks)
        g.update_attributes(PROFILE_ATTRS)
    return missing


def write_conventions(g: zarr.Group, i: int, row: ModelRow) -> None:
    """Row ``i``'s conventions variables from ``row`` (its per-layer ones whole: fills past its layers)."""
    conventions = row.conventions
    for name, (dims, _dtype, _fill) in CONVENTIONS_DATA.items():
        if dims == ("model",):
            g[name][i] = getattr(conventions, name)
    for name, values in layer_values(conventions, row.n_layers, g["layer"].shape[0]).items():
        g[name][i] = values


def clear_statistics(g: zarr.Group, i: int, layer: int | None = None) -> None:
    """Forget the values at d = 0 of row ``i`` (one layer, or all): statistics, spectrum and spectra NaN, no
    checksums (whole chunks)."""
    where = (i,) if layer is None else (i, layer)
    if "statistics_checksum" in g:
        g["head_statistics"][where] = np.nan
        g["spectrum"][where] = np.nan
        g["statistics_checksum"][where] = ""
    if "spectra_checksum" in g:
        for name in SPECTRA:
            g[name][where] = np.nan
        g["spectra_checksum"][where] = ""


def grow(g: zarr.Group, n_layers: int, n_heads: int, width: int = 0) -> None:
    """Grow the layer/head (and eigen) dimensions in place; resize keeps every chunk already written."""
    L0, H0 = g["layer"].shape[0], g["head"].shape[0]
    L, H = max(L0, n_layers), max(H0, n_heads)
    E = max(g["eigen"].shape[0], width) if "eigen" in g else 0
    variables = PROFILE_DATA | {k: v for k, v in (STATISTICS_DATA | SPECTRA_DATA | CONVENTIONS_DATA).items() if k in g}
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


def row_dict(row: ModelRow) -> dict:
    """The stored fields of ``row`` (what its registration journals and writes)."""
    d = asdict(row)
    return {k: d[k] for k in ROW_FIELDS}


def row_of(fields: dict) -> ModelRow:
    """The row of :func:`row_dict`'s dict read back from JSON (the journal), its per-layer lists as tuples."""
    return ModelRow(**{k: tuple(v) if k in PER_LAYER_FIELDS else v for k, v in fields.items()})
