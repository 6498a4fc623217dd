"""A small store for the Analyses tab's tests: two tiny random models profiled by the pipeline (a rotary Mistral,
``ROPE``, with an i.i.d. baseline of its own, and a position-free BERT, ``PLAIN``, without one)."""

from __future__ import annotations

from pathlib import Path

from pipeline.__main__ import main
from tests.tiny_models import build_tiny, save

ROPE, PLAIN = "tiny-rope", "tiny-plain"
ROPE_BASELINE = f"{ROPE}~iid-seed4"


def write_analyses_store(folder: Path) -> Path:
    """Profile both models into ``folder/store.zarr`` (statistics and spectra), add ROPE's i.i.d. baseline
    (seed 4); returns the store's path."""
    store = folder / "store.zarr"
    for kind, name in (("mistral", ROPE), ("bert", PLAIN)):
        weights = save(build_tiny(kind, seed=1, num_hidden_layers=3), folder / name)
        assert main(["profiles", str(weights), "--store", str(store), "--name", name, "--quiet"]) == 0
    assert main(["baseline", ROPE, "--kind", "iid", "--seed", "4", "--store", str(store), "--quiet"]) == 0
    return store
