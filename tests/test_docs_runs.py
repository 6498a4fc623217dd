"""docs/architecture.md's table of a run's group (``runs/NAME``) against pipeline/schema/runs.py and a group written
through the public API: exactly the schema's variables, with their dimensions, dtypes and chunks (H, 2n and L in
the table stand for the run's head count, spectrum width and layer count, S for ``STEP_CHUNK``)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import zarr

from pipeline.schema import runs as schema_runs

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
SECTION = "### `runs/NAME`"


def documented() -> dict[str, tuple[tuple[str, ...], str, tuple[str, ...]]]:
    """name -> (dims, dtype, chunks) from the section's table."""
    text = DOC.read_text()
    start = text.index(SECTION)
    end = text.find("\n### ", start + len(SECTION))
    rows = {}
    for line in text[start:end].splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        for name in re.findall(r"`([^`]+)`", cells[0]):
            assert name not in rows, f"{name} is in two rows of the table"
            rows[name] = (tuple(d.strip() for d in cells[1].split(",")), cells[2],
                          tuple(c.strip() for c in cells[3].split(",")))
    assert rows, f"no table rows under {SECTION} in {DOC}"
    return rows


def doc_dtype(array) -> str:
    """The table's spelling of a Zarr array's dtype: float64, int64, bool or str."""
    dtype = np.dtype(array.dtype)
    return "str" if dtype.kind in "OTU" else dtype.name


SCHEMA = schema_runs.FRAME_DATA | schema_runs.STEP_DATA | schema_runs.LAYER_DATA


def test_the_table_names_exactly_the_schema_variables_their_dims_and_dtypes():
    docs = documented()
    assert sorted(set(SCHEMA) - set(docs)) == [], "in pipeline/schema/runs.py but not in docs/architecture.md"
    assert sorted(set(docs) - set(SCHEMA)) == [], "in docs/architecture.md but not in pipeline/schema/runs.py"
    assert {n: d for n, (d, _t, _c) in docs.items() if d != SCHEMA[n][0]} == {}, "dims differ from the schema"
    assert {n: t for n, (_d, t, _c) in docs.items() if t != SCHEMA[n][1]} == {}, "dtypes differ from the schema"


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    """A run group of 2 frames, 3 layers of 5 heads of dimension 4, written through the Store."""
    from pipeline.store import Store

    path = tmp_path_factory.mktemp("docs") / "s.zarr"
    attrs = dict(family="gpt_neox", n_layers=3, n_heads=5, n_kv_heads=5, d_model=20, d_head=4, positional="rope",
                 rotary_dim=2, tower="", qk_norm="", scale=0.5, scale_rule="1/sqrt(head_dim)", softcap=0.0,
                 layernorm_folded=False, source="/x", format="safetensors", command="c")
    layers = {"layer_positional": ["rope"] * 3, "layer_rope_theta": [1e4] * 3, "layer_rope_scaling": [""] * 3}
    Store.open(path).add_frames("r", {"attrs": attrs, "layers": layers},
                                [{"step": s, "revision": f"step{s}", "commit": "c", "metrics": None} for s in (1, 2)])
    return zarr.open_group(str(path), path="runs/r", mode="r"), {"H": "5", "2n": "8", "L": "3",
                                                                 "S": str(schema_runs.STEP_CHUNK)}


def test_the_table_gives_the_written_dtypes_and_chunks(group):
    g, sizes = group
    for name, (_dims, dtype, chunks) in documented().items():
        a = g[name]
        assert doc_dtype(a) == dtype, name
        want = tuple(int(sizes.get(c, c)) for c in chunks)
        assert a.chunks == want, f"{name}: chunks {a.chunks}, the table says {chunks}"
        assert a.metadata.dimension_names == SCHEMA[name][0], name
    assert np.isnan(g["profile"].fill_value) and g["repeat_of"].fill_value == schema_runs.NO_REPEAT
