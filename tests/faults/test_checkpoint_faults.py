"""Hostile and damaged local checkpoints are refused by the reader with a CheckpointError, never a MemoryError
or a read of what the file claims: a header length of 2**40, a truncated file, offsets past the end."""

from __future__ import annotations

import json
import pathlib
import resource
import struct

import numpy as np
import pytest

pytest.importorskip("safetensors", reason="the checkpoint tests need safetensors")

from safetensors.numpy import save_file  # noqa: E402

from pipeline.registry.checkpoints import open_checkpoint  # noqa: E402
from pipeline.schema import Provenance  # noqa: E402
from pipeline.sources.base import CheckpointError  # noqa: E402

Q, K = (f"model.decoder.layers.0.self_attn.{p}_proj.weight" for p in "qk")


def folder_with(tmp_path, raw_of=None, sharded: bool = False) -> pathlib.Path:
    """A one-layer OPT checkpoint, single file or one shard + index, its weight file passed through raw_of."""
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "opt", "hidden_size": 8,
                                                    "num_attention_heads": 2, "num_hidden_layers": 1}))
    path = folder / ("model-00001-of-00001.safetensors" if sharded else "model.safetensors")
    save_file({Q: np.ones((8, 8), np.float32), K: np.ones((8, 8), np.float32)}, str(path))
    if sharded:
        (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": dict.fromkeys((Q, K),
                                                                                                      path.name)}))
    if raw_of is not None:
        path.write_bytes(raw_of(path.read_bytes()))
    return folder


def open_and_read(folder):
    ck = open_checkpoint(str(folder))
    return ck.read_compact(Q)


@pytest.mark.parametrize("sharded", [False, True])
@pytest.mark.parametrize("claimed", [2**40, 2**63, 100_000_001])
def test_a_huge_claimed_header_is_refused_without_allocating_it(tmp_path, claimed, sharded):
    folder = folder_with(tmp_path, lambda raw: struct.pack("<Q", claimed) + raw[8:], sharded)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, hard))  # a 2**40-byte read would fail with MemoryError
    try:
        with pytest.raises(CheckpointError, match=r"header too large.*damaged, truncated or not safetensors"):
            open_and_read(folder)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.mark.parametrize("sharded", [False, True])
@pytest.mark.parametrize("cut", [1, 100, 250])
def test_a_truncated_file_is_refused(tmp_path, cut, sharded):
    folder = folder_with(tmp_path, lambda raw: raw[:-cut], sharded)
    with pytest.raises(CheckpointError, match=r"damaged, truncated or not safetensors"):
        open_and_read(folder)


def test_a_header_that_is_not_json_is_refused(tmp_path):
    folder = folder_with(tmp_path, lambda raw: raw[:8] + b"\xff" * (int.from_bytes(raw[:8], "little")) +
                         raw[8 + int.from_bytes(raw[:8], "little"):])
    with pytest.raises(CheckpointError, match=r"cannot read .* as safetensors"):
        open_and_read(folder)


def test_provenance_of_a_single_safetensors_file(tmp_path):
    import hashlib

    folder = folder_with(tmp_path)
    ck = open_checkpoint(str(folder))
    want = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    assert ck.provenance == Provenance(format="safetensors", file="model.safetensors", sha256=want)
    assert ck.own_name == ""  # a folder gives no name of its own: the folder's name is the default
