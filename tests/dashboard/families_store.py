"""A store of one tiny random model of each new kind of family, made as a user makes one: each model built offline
from its transformers config class (``tests.pipeline.families.cases``), saved with save_pretrained and run through
``python -m pipeline profiles``. The kinds: a QK-norm decoder (Qwen3), a decoder with a layer without rotary
(SmolLM3), an encoder with rotary (ModernBERT), a vision model (ViT) and a checkpoint of two towers (CLIP, stored
as ``tiny-clip/text`` and ``tiny-clip/vision``)."""

from __future__ import annotations

from pathlib import Path

from tests.pipeline.families.cases import CASES, build, save
from tests.pipeline.test_cli_profiles import cli
from tests.shared import built_once, exported_once

# case -> the model names it stores
MODELS = {"qwen3": ["tiny-qwen3"], "smollm3": ["tiny-smollm3"], "modernbert": ["tiny-modernbert"],
          "vit": ["tiny-vit"], "clip/vision": ["tiny-clip/text", "tiny-clip/vision"]}


def write_families_store(folder: Path) -> tuple[Path, dict]:
    """The store ``folder/store.zarr`` and {case: its model (transformers, float64)}; CLIP's checkpoint (both
    towers) is named ``tiny-clip``."""
    store = folder / "store.zarr"
    built = {}
    for name in MODELS:
        case = CASES[name]
        built[name] = build(case)
        checkpoint = save(built[name], case, folder / f"tiny-{name.replace('/', '-')}")  # the folder names the model
        named = ("--name", "tiny-clip") if name.startswith("clip") else ()
        assert cli("profiles", checkpoint, "--store", store, "--quiet", *named) == 0
    return store, built


def families_store(tmp_path_factory) -> Path:
    """The store of ``write_families_store``, built once per test run for every pytest-xdist worker
    (``tests.shared.built_once``); the tests only read it."""
    return built_once(tmp_path_factory, "families-store", write_families_store) / "store.zarr"


def families_site(tmp_path_factory) -> tuple[Path, Path, list[Path]]:
    """(``families_store``, the folder of its static export (``dashboard.export``), the paths the export returned),
    built once per test run for every pytest-xdist worker; the tests only read them. Apart from the store: the
    quick tier reads the store alone, and the export renders every page of it."""
    store = families_store(tmp_path_factory)
    return (store, *exported_once(tmp_path_factory, "families-site", store))
