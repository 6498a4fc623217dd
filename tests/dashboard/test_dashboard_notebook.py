"""docs/views.ipynb runs top to bottom in a Jupyter kernel (nbclient) and shows every view."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.dashboard.training_store import write_training_store

NOTEBOOK = Path(__file__).resolve().parents[2] / "docs" / "views.ipynb"


@pytest.mark.slow
def test_the_example_notebook_runs_and_draws_each_view(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat", reason="the notebook test needs the test extra (nbformat)")
    nbclient = pytest.importorskip("nbclient", reason="the notebook test needs the test extra (nbclient)")
    store = write_training_store(tmp_path / "store.zarr", with_orbits=True)  # the synthetic models, orbits and runs
    monkeypatch.setenv("HEADGEOMETRY_STORE", str(store))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
                            ).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not any(o.get("output_type") == "error" for o in c.outputs) for c in code)
    assert code[0].outputs[-1]["data"]["text/plain"] == "['synthetic-rope', 'synthetic-absolute']"
    for cell in code[1:]:  # every view is displayed as a Bokeh plot (HoloViews' mimebundle)
        bundle = cell.outputs[-1].get("data", {})
        assert "application/vnd.holoviews_exec.v0+json" in bundle, cell.source
