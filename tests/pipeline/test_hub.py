"""Hub range reads against a loopback Hub (tests/hub_server.py): the real huggingface_hub client talks
HTTP to a local server that serves a small sharded bf16 checkpoint with Range support."""

from __future__ import annotations

import json
import socket
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the pipeline tests need torch (pip install -e .[pipeline])")
pytest.importorskip("huggingface_hub", reason="the Hub tests need huggingface_hub")

from pipeline.profile import head_profiles  # noqa: E402
from pipeline.sources.hub import HubError, hub_checkpoint, read_header  # noqa: E402
from tests.hub_server import LoopbackHub, serve_folder  # noqa: E402

REPO = "test-org/tiny-opt"
H, N, LAYERS = 4, 32, 3


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory):
    """A tiny OPT saved in bfloat16 over several shards (save_pretrained, as on the Hub)."""
    import transformers

    folder = tmp_path_factory.mktemp("tiny-opt")
    cfg = transformers.OPTConfig(hidden_size=N, num_attention_heads=H, num_hidden_layers=LAYERS, ffn_dim=64,
                                 vocab_size=64, max_position_embeddings=32, word_embed_proj_dim=N)
    torch.manual_seed(0)
    model = transformers.OPTForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(str(folder), max_shard_size="12KB")
    assert (folder / "model.safetensors.index.json").exists()
    return folder




@pytest.fixture
def hub(checkpoint_dir, hub_env):
    with LoopbackHub(serve_folder(checkpoint_dir, REPO)) as server:
        hub_env.setenv("HF_ENDPOINT", server.endpoint)
        yield server


def qk_names(layer: int) -> list[str]:
    return [f"model.decoder.layers.{layer}.self_attn.{p}_proj.weight" for p in ("q", "k")]


def disk_tensors(folder) -> dict[str, np.ndarray]:
    from safetensors import safe_open

    out = {}
    for f in sorted(folder.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as fh:
            out.update({k: fh.get_tensor(k).to(torch.float64).numpy() for k in fh.keys()})
    return out


def header_bytes(folder) -> dict[str, int]:
    """8 + JSON header length of each shard (what a range reader must fetch to locate tensors)."""
    return {f.name: 8 + int.from_bytes(f.read_bytes()[:8], "little") for f in folder.glob("*.safetensors")}


def test_range_reads_equal_disk_and_fetch_only_qk(hub, checkpoint_dir):
    ck = hub_checkpoint(REPO)
    assert ck.revision == hub.sha[REPO]  # the commit the branch resolved to, recorded by the caller
    assert ck.config["model_type"] == "opt"
    disk = disk_tensors(checkpoint_dir)
    assert set(ck.tensor_names()) == set(disk)
    for layer in range(LAYERS):
        q_name, k_name = qk_names(layer)
        W_Q, W_K = ck.read(q_name), ck.read(k_name)
        np.testing.assert_array_equal(W_Q, disk[q_name])
        np.testing.assert_array_equal(W_K, disk[k_name])
        got = head_profiles(W_Q.reshape(H, -1, N), W_K.reshape(H, -1, N))
        want = head_profiles(disk[q_name].reshape(H, -1, N), disk[k_name].reshape(H, -1, N))
        np.testing.assert_array_equal(got.profile, want.profile)

    # The bound: config.json + the index + (8 + JSON header) of every shard that holds a Q/K tensor
    # + the Q/K bytes themselves (bf16: 2 bytes per entry), and not one byte more.
    index = json.loads((checkpoint_dir / "model.safetensors.index.json").read_text())["weight_map"]
    wanted = [n for layer in range(LAYERS) for n in qk_names(layer)]
    qk_bytes = sum(disk[n].size * 2 for n in wanted)
    heads = header_bytes(checkpoint_dir)
    shards = {index[n] for n in wanted}
    bound = (qk_bytes + sum(heads[s] for s in shards) + (checkpoint_dir / "config.json").stat().st_size
             + (checkpoint_dir / "model.safetensors.index.json").stat().st_size)
    served = hub.total_bytes(REPO)
    assert served <= bound
    assert served >= qk_bytes
    total = sum(f.stat().st_size for f in checkpoint_dir.glob("*.safetensors"))
    assert served < total / 2, f"fetched {served} of {total} checkpoint bytes"
    assert all(r[2] is not None for r in hub.requests if r[0] == "GET" and r[1].endswith(".safetensors"))


def test_compact_range_reads_are_float32_and_exact(hub, checkpoint_dir):
    """bf16 on the Hub decodes to float32 (exact), so a layer never sits in memory as float64."""
    ck = hub_checkpoint(REPO)
    disk = disk_tensors(checkpoint_dir)
    q_name, _ = qk_names(0)
    got = ck.read_compact(q_name)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.astype(np.float64), disk[q_name])


def test_header_is_two_small_range_reads(hub, checkpoint_dir):
    ck = hub_checkpoint(REPO)
    shard = sorted(header_bytes(checkpoint_dir))[0]
    source = ck.hub_snapshot.source(shard)
    entries = read_header(source)
    assert source.requests == 2 and source.bytes_fetched == header_bytes(checkpoint_dir)[shard]
    with open(checkpoint_dir / shard, "rb") as fh:
        raw = fh.read()
    name, e = sorted(entries.items())[0]
    assert e.end - e.start == int(np.prod(e.shape)) * 2
    assert source.read(e.start, e.end - e.start) == raw[e.start:e.end]


def test_revision_pinning_and_cache_reuse(hub):
    sha = hub.sha[REPO]
    ck = hub_checkpoint(REPO, revision=sha)
    assert ck.revision == sha
    hub.reset_counts()
    again = hub_checkpoint(REPO, revision=sha)  # config and index come from the Hub cache (HF_HOME) now
    assert again.revision == sha
    assert hub.total_bytes(REPO) == 0
    with pytest.raises(HubError, match="no revision 'v9.9'"):
        hub_checkpoint(REPO, revision="v9.9")


def test_token_is_sent(checkpoint_dir, hub_env):
    with LoopbackHub(serve_folder(checkpoint_dir, REPO), token="hf_secret") as server:
        hub_env.setenv("HF_ENDPOINT", server.endpoint)
        with pytest.raises(HubError, match="HF_TOKEN"):
            hub_checkpoint(REPO)
        hub_env.setenv("HF_TOKEN", "hf_secret")
        ck = hub_checkpoint(REPO)
        np.testing.assert_array_equal(ck.read(qk_names(0)[0]), disk_tensors(checkpoint_dir)[qk_names(0)[0]])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_404_and_500_are_clear(checkpoint_dir, hub_env):
    hub_env.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    t0 = time.perf_counter()
    with pytest.raises(HubError, match="could not reach the Hub"):
        hub_checkpoint(REPO)
    assert time.perf_counter() - t0 < 10  # no long backoff before telling the user
    with LoopbackHub(serve_folder(checkpoint_dir, REPO)) as server:
        hub_env.setenv("HF_ENDPOINT", server.endpoint)
        with pytest.raises(HubError, match="no model repository 'test-org/missing'"):
            hub_checkpoint("test-org/missing")
        server.fail_with = 500
        with pytest.raises(HubError, match="answered 500"):
            hub_checkpoint(REPO)
        server.fail_with = None
        ck = hub_checkpoint(REPO)
        server.fail_after_ranges = 0  # the server breaks in the middle of a run
        with pytest.raises(HubError, match="answered 500"):
            ck.read(qk_names(0)[0])


def test_offline_needs_the_cache(hub, hub_env):
    hub_env.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubError, match="HF_HUB_OFFLINE is set and config.json"):
        hub_checkpoint(REPO)
    hub_env.delenv("HF_HUB_OFFLINE")
    hub_checkpoint(REPO)  # caches config and index only
    hub_env.setenv("HF_HUB_OFFLINE", "1")
    before = len(hub.requests)
    with pytest.raises(HubError, match="HF_HUB_OFFLINE is set and model-0000"):
        hub_checkpoint(REPO)
    assert len(hub.requests) == before  # offline means no request at all


# ------------------------------------------------------------------------------ through the pipeline


def run(models, store, **kw):
    from pipeline.run import run_profiles

    return run_profiles(models, str(store), progress=False, log=lambda *_: None, **kw)


def store_arrays(store) -> dict[str, np.ndarray]:
    from pipeline.store import Store

    ds = Store.open(str(store), mode="r").dataset("profiles")
    keys = ("profile", "norm", "layer_done", "complete", "revision", "model", "head_statistics", "antisym_spectrum",
            "eig_abs", "singular_values")
    return {k: ds[k].values.copy() for k in keys}


def qk_bound(folder) -> int:
    """config + index + (8 + header) of every shard holding a Q/K tensor + the Q/K bytes (bf16)."""
    index = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
    wanted = [n for layer in range(LAYERS) for n in qk_names(layer)]
    heads = header_bytes(folder)
    return (2 * H * (N // H) * N * len(wanted) + sum(heads[s] for s in {index[n] for n in wanted})
            + (folder / "config.json").stat().st_size + (folder / "model.safetensors.index.json").stat().st_size)


def test_profiles_from_the_hub_equal_those_from_disk(hub, checkpoint_dir, tmp_path):
    """Profiles, norms, statistics and the spectra of T and L, those of the dense forms of the weights on disk."""
    from pipeline.schema import SPECTRA
    from tests.pipeline.test_head_statistics import naive_spectra

    run([str(checkpoint_dir)], tmp_path / "disk.zarr", name="m")
    hub.reset_counts()
    run([REPO], tmp_path / "hub.zarr", name="m")
    disk, remote = store_arrays(tmp_path / "disk.zarr"), store_arrays(tmp_path / "hub.zarr")
    for var in ("profile", "norm", "head_statistics", *SPECTRA):
        np.testing.assert_array_equal(remote[var], disk[var], err_msg=var)
    weights = disk_tensors(checkpoint_dir)
    q_name, k_name = qk_names(LAYERS - 1)
    n = N // H
    W_Q, W_K = weights[q_name].reshape(H, n, N), weights[k_name].reshape(H, n, N)
    for h in range(H):
        got = np.stack([remote[s][0, LAYERS - 1, h, :2 * n] for s in SPECTRA])
        np.testing.assert_allclose(got, naive_spectra(W_K[h].T @ W_Q[h], n), atol=1e-10)
    assert remote["complete"].all()
    assert str(remote["revision"][0]) == hub.sha[REPO]  # the resolved commit, not "main"
    assert hub.total_bytes(REPO) <= qk_bound(checkpoint_dir)


def test_hub_failures_leave_the_store_as_it_was(hub, checkpoint_dir, tmp_path, hub_env):
    from pipeline.registry.checkpoints import CheckpointError

    store = tmp_path / "s.zarr"
    run([str(checkpoint_dir)], store, name="already-there")
    before = store_arrays(store)
    hub.fail_with = 500
    with pytest.raises(CheckpointError, match="answered 500"):
        run([REPO], store, name="m")
    hub.fail_with = 404
    with pytest.raises(CheckpointError):
        run([REPO], store, name="m")
    hub.fail_with = None
    with pytest.raises(CheckpointError, match="no model repository"):
        run(["test-org/absent"], store, name="m")
    after = store_arrays(store)
    for k in before:
        np.testing.assert_array_equal(after[k], before[k])


def test_interrupted_run_resumes_without_refetching_finished_layers(hub, checkpoint_dir, tmp_path):
    from pipeline.registry.checkpoints import CheckpointError
    from pipeline.store import Store

    store = tmp_path / "s.zarr"
    index = json.loads((checkpoint_dir / "model.safetensors.index.json").read_text())["weight_map"]
    shards = {index[n] for layer in range(LAYERS) for n in qk_names(layer)}
    # the headers of every shard holding Q/K (two reads each: the shapes are checked before any write),
    # layer 0's Q and K, then the server breaks
    hub.fail_after_ranges = 2 * len(shards) + 2
    with pytest.raises(CheckpointError, match="answered 500"):
        run([REPO], store, name="m")
    done = Store.open(str(store), mode="r").layers_done("m")
    assert done[0] and not done.all() and not Store.open(str(store), mode="r").is_complete("m")
    hub.fail_after_ranges = None
    hub.reset_counts()
    run([REPO], store, name="m")
    disk = disk_tensors(checkpoint_dir)
    qk_left = sum(disk[n].size * 2 for layer in np.flatnonzero(~done) for n in qk_names(int(layer)))
    heads = sum(header_bytes(checkpoint_dir).values())
    assert 0 < hub.total_bytes(REPO) <= qk_left + heads  # config and index come from the cache now
    run([str(checkpoint_dir)], tmp_path / "disk.zarr", name="m")
    np.testing.assert_array_equal(store_arrays(store)["profile"], store_arrays(tmp_path / "disk.zarr")["profile"])
    assert Store.open(str(store), mode="r").is_complete("m")
