"""docs/architecture.md's table of the ``profiles`` group against pipeline/schema/__init__.py and a written store.

The table must name exactly the schema's variables (PROFILE_DATA, STATISTICS_DATA, SPECTRA_DATA, CONVENTIONS_DATA
and the per-model fields) with their dimensions, and give the dtype and chunk shape that a store written through the
public API really has (H0 and E0 in the table stand for the head count and the eigen width the group was
created with, M for the rows of a per-model variable's chunk).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import zarr

from pipeline import schema
from tests.browser.conftest import write_synthetic_store

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
SECTION = "### `profiles`"


def documented() -> dict[str, tuple[tuple[str, ...], str, tuple[str, ...]]]:
    """name -> (dims, dtype, chunks) from the profiles table (a row may name several variables)."""
    text = DOC.read_text()
    start = text.index(SECTION)
    end = text.find("\n### ", start + len(SECTION))
    rows = {}
    for line in text[start:end if end > 0 else None].splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        dims = tuple(d.strip() for d in cells[1].split(","))
        chunks = tuple(c.strip() for c in cells[3].split(","))
        for name in re.findall(r"`([^`]+)`", cells[0]):
            assert name not in rows, f"{name} is in two rows of the table"
            rows[name] = (dims, cells[2], chunks)
    assert rows, f"no table rows under {SECTION} in {DOC}"
    return rows


def schema_dims() -> dict[str, tuple[str, ...]]:
    data = {name: dims for name, (dims, _dtype, _fill) in
            (schema.PROFILE_DATA | schema.STATISTICS_DATA | schema.SPECTRA_DATA | schema.CONVENTIONS_DATA).items()}
    per_model = dict.fromkeys(schema.INT_FIELDS + schema.STR_FIELDS + schema.BOOL_FIELDS, ("model",))
    return data | per_model


def doc_dtype(array) -> str:
    """The table's spelling of a Zarr array's dtype: float64, int32, bool or str."""
    dtype = np.dtype(array.dtype)
    return "str" if dtype.kind in "OTU" else dtype.name


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The profiles group of a store written through the public API, and the sizes it was created with."""
    path = write_synthetic_store(tmp_path_factory.mktemp("docs") / "store.zarr", rope_shape=(4, 8),
                                 with_orbits=False)
    group = zarr.open_group(str(path), path=schema.PROFILES, mode="r")
    first_d_head = 16  # write_synthetic_store registers its rope model (8 heads, d_head 16) first
    return group, {"H0": "8", "E0": str(schema.spectrum_width(first_d_head)), "M": str(schema.MODEL_CHUNK)}


def test_the_table_names_exactly_the_schema_variables_and_dims():
    docs = {name: dims for name, (dims, _dtype, _chunks) in documented().items()}
    want = schema_dims()
    assert sorted(set(want) - set(docs)) == [], "in pipeline/schema/__init__.py but not in docs/architecture.md"
    assert sorted(set(docs) - set(want)) == [], "in docs/architecture.md but not in pipeline/schema/__init__.py"
    assert {n: d for n, d in docs.items() if d != want[n]} == {}, "dims differ from the schema"


def test_the_table_dtypes_are_the_schema_dtypes():
    docs = documented()
    for name, (_dims, dtype, _fill) in (schema.PROFILE_DATA | schema.STATISTICS_DATA | schema.SPECTRA_DATA
                                        | schema.CONVENTIONS_DATA | schema.MODEL_DATA).items():
        if name in docs:
            assert docs[name][1] == dtype, name


def test_the_table_dtypes_and_chunks_are_what_a_store_has(written):
    group, symbols = written
    arrays = dict(group.arrays())
    for name, (dims, dtype, chunks) in documented().items():
        assert name in arrays, f"{name} is documented but a written store has no such array"
        array = arrays[name]
        assert tuple(array.metadata.dimension_names) == dims, name
        assert doc_dtype(array) == dtype, (name, doc_dtype(array), dtype)
        assert tuple(str(c) for c in array.chunks) == tuple(symbols.get(c, c) for c in chunks), (name, array.chunks)
