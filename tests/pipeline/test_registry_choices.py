"""``profiles --registry FAMILY`` and ``--all-registered``: which registry models they add, and the error for a family
the registry has no model of. No network: the selection is the registry's, and models are only registered
(``--register-only``: shapes from the registry, no weights read)."""

from __future__ import annotations

import pytest
import xarray as xr

from pipeline.__main__ import main
from pipeline.cli.profiles import registry_selection
from pipeline.registry.models import MODELS, SEED_MODELS, families, registered
from pipeline.run.options import UsageError


def test_a_family_selects_its_registered_models_in_registry_order():
    assert registered("llama") == ("SmolLM2-135M-Instruct", "SmolLM2-135M", "TinyLlama-1.1B", "Llama-3.2-1B")
    assert registered("opt") == SEED_MODELS[4:10]
    assert registered("deepseek_v3") == ("DeepSeek-V3",)
    assert [registered(f) for f in ("jamba", "falcon_h1", "lfm2", "qwen3_next", "minimax")] == [
        ("Jamba-v0.1",), ("Falcon-H1-7B-Instruct",), ("LFM2-1.2B",), ("Qwen3-Next-80B-A3B-Instruct",),
        ("MiniMax-Text-01",)]
    assert registered() == tuple(MODELS)
    assert set(families()) == {s.family for s in MODELS.values()} and list(families()) == sorted(families())


def test_several_families_and_all_registered():
    assert registry_selection(["gpt_oss", "llama", "gpt_oss"], False) == [
        "gpt-oss-20b", "SmolLM2-135M-Instruct", "SmolLM2-135M", "TinyLlama-1.1B", "Llama-3.2-1B"]
    assert registry_selection(None, True) == list(MODELS)
    assert registry_selection(None, False) == []


def test_an_unknown_family_is_refused_listing_the_choices():
    with pytest.raises(UsageError) as e:
        registry_selection(["llama", "no-such-family"], False)
    message = str(e.value)
    assert message.startswith("--registry: no registered model of the family 'no-such-family'; the registry's "
                              "families: ")
    assert ", ".join(families()) in message


def test_the_command_registers_a_familys_models_and_refuses_an_unknown_one(tmp_path, capsys):
    store = tmp_path / "s.zarr"
    assert main(["profiles", "--registry", "nosuch", "--register-only", "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --registry: no registered model of the family 'nosuch'; the registry's families: "
                          "bert, bloom, deepseek_v3,") and err.count("\n") == 1
    assert not store.exists()
    assert main(["profiles", "gpt2", "--registry", "llama4_text", "--registry", "gpt2", "--register-only", "--store",
                 str(store)]) == 0
    names = list(xr.open_zarr(str(store), group="profiles", chunks=None).model.values)
    # the model named first, then the families' in registry order, once each; Llama 4 Scout as its text tower's row
    assert names == ["gpt2", "Llama-4-Scout-17B-16E/text", "distilgpt2", "gpt2-medium", "gpt2-large"]


def test_the_hybrid_families_register_their_models(tmp_path):
    """``--registry`` takes the hybrids' families: their models are registered with the registry's shapes."""
    store = tmp_path / "s.zarr"
    assert main(["profiles", "--registry", "jamba", "--registry", "minimax", "--registry", "qwen3_next",
                 "--register-only", "--store", str(store), "--quiet"]) == 0
    ds = xr.open_zarr(str(store), group="profiles", chunks=None)
    names = list(ds.model.values)
    assert names == ["Jamba-v0.1", "MiniMax-Text-01", "Qwen3-Next-80B-A3B-Instruct"]
    assert [int(ds.n_layers.sel(model=n)) for n in names] == [32, 80, 48]
    assert [int(ds.d_head.sel(model=n)) for n in names] == [128, 128, 256]


def test_all_registered_with_register_only_lists_the_whole_registry(tmp_path):
    store = tmp_path / "s.zarr"
    assert main(["profiles", "--all-registered", "--register-only", "--store", str(store), "--quiet"]) == 0
    ds = xr.open_zarr(str(store), group="profiles", chunks=None)
    assert list(ds.model.values) == [n for s in MODELS.values() for n in s.stored_names]
    assert not ds.complete.values.any()


def test_help_names_the_choices(capsys):
    with pytest.raises(SystemExit):
        main(["profiles", "--help"])
    out = capsys.readouterr().out
    assert "--registry FAMILY" in out and "--all-registered" in out and "--seed-models" in out
