"""A small store for the Analyses tab's tests: two tiny random models profiled by the pipeline (a rotary Mistral,
``ROPE``, with an i.i.d. baseline of its own, and a position-free BERT, ``PLAIN``, without one), written once per
test run (``analyses_store``), and its static export (``analyses_site``)."""

from __future__ import annotations

from pathlib import Path

from pipeline.__main__ import main
from tests.shared import built_once, exported_once
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


def analyses_store(tmp_path_factory) -> Path:
    """The store of ``write_analyses_store``, built once per test run for every pytest-xdist worker
    (``tests.shared.built_once``); the tests only read it."""
    return built_once(tmp_path_factory, "analyses-store", write_analyses_store) / "store.zarr"


def analyses_site(tmp_path_factory) -> tuple[Path, list[Path]]:
    """(the folder of ``analyses_store``'s static export, the paths the export returned), built once per test run
    for every pytest-xdist worker; the tests only read them."""
    return exported_once(tmp_path_factory, "analyses-site", analyses_store(tmp_path_factory))
