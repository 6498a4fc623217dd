"""Hostile and broken Hubs (tests/hub_server.py): a server that ignores Range or sends more than asked, one
that stalls, and index files whose names point outside the repository, online and offline.

Each case asserts what the client read, what the user is told, how long it took, and that the store is
byte-identical afterwards."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the pipeline tests need torch (pip install -e .[pipeline])")
pytest.importorskip("huggingface_hub", reason="the Hub tests need huggingface_hub")

from safetensors.numpy import save_file  # noqa: E402

from pipeline.sources.base import CheckpointError  # noqa: E402
from pipeline.sources.hub import HubError, hub_checkpoint  # noqa: E402
from tests.hub_server import LoopbackHub, serve_folder  # noqa: E402

REPO = "test-org/tiny"
H, N, LAYERS = 2, 16, 2
FILLER = 48 << 20  # bytes of a tensor nobody asks for: what a Range-ignoring server would push
ROOT = Path(__file__).resolve().parents[2]


def opt_config() -> dict:
    return {"model_type": "opt", "architectures": ["OPTForCausalLM"], "hidden_size": N, "num_attention_heads": H,
            "num_hidden_layers": LAYERS, "ffn_dim": 32, "word_embed_proj_dim": N, "do_layer_norm_before": True,
            "max_position_embeddings": 32, "vocab_size": 64}


def qk_names() -> list[str]:
    return [f"model.decoder.layers.{layer}.self_attn.{p}_proj.weight" for layer in range(LAYERS) for p in "qk"]


def write_checkpoint(folder: Path, index: dict | None = None, filler: int = FILLER) -> Path:
    """An OPT-shaped float32 checkpoint in two shards (Q/K in the first, a large filler in the second)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    qk = {n: rng.normal(size=(N, N)).astype(np.float32) for n in qk_names()}
    save_file(qk, str(folder / "model-00001-of-00002.safetensors"))
    filler_file = str(folder / "model-00002-of-00002.safetensors")
    save_file({"model.decoder.filler": np.zeros(filler // 4, np.float32)}, filler_file)
    wmap = dict.fromkeys(qk, "model-00001-of-00002.safetensors") | {"model.decoder.filler":
                                                                     "model-00002-of-00002.safetensors"}
    wmap |= index or {}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": wmap}))
    (folder / "config.json").write_text(json.dumps(opt_config()))
    return folder


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return write_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny")


@pytest.fixture
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    for var in ("HF_HUB_CACHE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HEADGEOMETRY_HUB_RETRIES", "0")
    return monkeypatch


def snapshot(path) -> dict[str, str]:
    import hashlib

    root = Path(path)
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()} if root.exists() else {}


def cli(*argv, env_extra: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", *map(str, argv)], capture_output=True, text=True,
                          cwd=str(ROOT), timeout=timeout, env=os.environ | env_extra)


def good_store(tmp_path, checkpoint) -> Path:
    """A store holding one complete model, to check that a failed run leaves it byte-identical."""
    from pipeline.run import run_profiles

    store = tmp_path / "s.zarr"
    run_profiles([str(checkpoint)], store, name="kept", progress=False, log=lambda *_: None)
    return store


def assert_one_line_exit_2(done: subprocess.CompletedProcess, pattern: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr
    assert re.search(pattern, lines[0]), (pattern, lines[0])


# ------------------------------------------------------------------------------ Range ignored


@pytest.mark.parametrize("mode", ["ignore", "overflow"])
def test_a_server_that_ignores_range_is_refused_before_the_body(checkpoint, env, mode):
    with LoopbackHub(serve_folder(checkpoint, REPO)) as hub:
        env.setenv("HF_ENDPOINT", hub.endpoint)
        ck = hub_checkpoint(REPO)
        hub.range_mode = mode
        name = qk_names()[0]
        with pytest.raises(HubError, match="ignored the byte range" if mode == "ignore" else "more than the"):
            ck.read(name)
        snap = ck.hub_snapshot
        asked = 8  # the shard's header length: the first range read
        assert snap.bytes_fetched <= asked + (1 << 16), snap.bytes_fetched  # at most one block over
        if mode == "ignore":
            assert snap.bytes_fetched == 0  # the 200 answer is refused on its status line
        assert hub.wait_idle()  # the server has given up on the refused body
        shard = (checkpoint / "model-00001-of-00002.safetensors").stat().st_size
        assert hub.total_bytes(REPO) < shard + 4 * (1 << 20)  # what it managed to push into the socket


def test_a_large_shard_from_a_range_ignoring_server_is_not_read(checkpoint, env):
    """The filler shard (48 MB): reading its header against a Range-ignoring server reads nothing of it."""
    with LoopbackHub(serve_folder(checkpoint, REPO)) as hub:
        env.setenv("HF_ENDPOINT", hub.endpoint)
        ck = hub_checkpoint(REPO)
        hub.range_mode = "ignore"
        with pytest.raises(HubError, match="ignored the byte range"):
            ck.read("model.decoder.filler")
        assert ck.hub_snapshot.bytes_fetched == 0
        assert hub.wait_idle()
        assert hub.total_bytes(REPO) < FILLER // 4, hub.total_bytes(REPO)


def test_cli_against_a_range_ignoring_hub_exits_2_and_keeps_the_store(checkpoint, env, tmp_path):
    store = good_store(tmp_path, checkpoint)
    before = snapshot(store)
    with LoopbackHub(serve_folder(checkpoint, REPO)) as hub:
        hub.range_mode = "ignore"
        done = cli("profiles", REPO, "--store", store, "--quiet",
                   env_extra={"HF_ENDPOINT": hub.endpoint, "HF_HOME": os.environ["HF_HOME"],
                              "HEADGEOMETRY_HUB_RETRIES": "0"})
    assert_one_line_exit_2(done, r"ignored the byte range .* Range requests")
    assert snapshot(store) == before


# ------------------------------------------------------------------------------ stalls


def range_requests(hub: LoopbackHub) -> int:
    return sum(1 for _method, _path, rng in hub.requests if rng)


def test_a_stalled_server_ends_the_run_within_the_timeout(checkpoint, env, tmp_path):
    store = good_store(tmp_path, checkpoint)
    before = snapshot(store)
    with LoopbackHub(serve_folder(checkpoint, REPO)) as hub:
        hub.stall_ranges = 60.0
        t0 = time.perf_counter()
        done = cli("profiles", REPO, "--store", store, "--quiet", timeout=90,
                   env_extra={"HF_ENDPOINT": hub.endpoint, "HF_HOME": os.environ["HF_HOME"],
                              "HEADGEOMETRY_HUB_RETRIES": "0", "HEADGEOMETRY_HUB_TIMEOUT": "1"})
        elapsed = time.perf_counter() - t0
    assert elapsed < 30, f"the run took {elapsed:.0f} s against a server stalled for 60 s"
    assert_one_line_exit_2(done, r"stalled while reading the header of .*: no data within 1 s on 1 of 1 attempt\(s\)"
                                 r".* raise HEADGEOMETRY_HUB_TIMEOUT .* or HEADGEOMETRY_HUB_RETRIES")
    assert snapshot(store) == before


@pytest.mark.slow
def test_a_stalled_server_ends_a_default_run_within_a_minute(checkpoint, env, tmp_path):
    """With no HEADGEOMETRY_HUB_* set, a server that sends headers and then nothing ends the command with a clear
    error after 1 + 3 tries of the first read: 10 s per try and the backoffs between them, from its first Range
    request (the stalled read) to its exit. What comes before that read (the imports, the config and the index) is
    the machine's time, and is printed apart."""
    env.delenv("HEADGEOMETRY_HUB_RETRIES")
    with LoopbackHub(serve_folder(checkpoint, REPO)) as hub:
        hub.stall_ranges = 300.0
        t0 = time.perf_counter()
        done = cli("profiles", REPO, "--store", tmp_path / "s.zarr", "--quiet", timeout=120,
                   env_extra={"HF_ENDPOINT": hub.endpoint, "HF_HOME": os.environ["HF_HOME"]})
        end = time.perf_counter()
        asked = range_requests(hub)
        first = next(t for t, (_method, _path, rng) in zip(hub.request_times, hub.requests, strict=True) if rng)
    print(f"stalled Hub, default settings: the command failed {end - first:.1f} s after its first Range request "
          f"({first - t0:.1f} s before it)")
    assert_one_line_exit_2(done, r"stalled while reading the header of model-00001-of-00002.safetensors of "
                                 r"test-org/tiny: no data within 10 s on 4 of 4 attempt\(s\)")
    assert asked == 4, hub.requests
    assert 4 * 10 + 0.5 + 1 + 2 <= end - first < 55, f"the stalled reads took {end - first:.1f} s"


def stalled_read(hub: LoopbackHub, env, timeout: str, retries: str) -> tuple[float, int, HubError]:
    """Read one tensor from ``hub`` stalling every Range answer: (seconds, Range requests, the error). The reads
    before it (config, index, header) answer at the default timeout; ``timeout`` holds from the stalled read on
    (HEADGEOMETRY_HUB_TIMEOUT is read at each request, HEADGEOMETRY_HUB_RETRIES when a file is opened), so it can be
    short without a slow answer to those reads failing the test."""
    env.delenv("HEADGEOMETRY_HUB_TIMEOUT", raising=False)  # the default, whatever an earlier read of the test set
    env.setenv("HEADGEOMETRY_HUB_RETRIES", retries)
    hub.stall_ranges = 0.0
    ck = hub_checkpoint(REPO)
    ck.hub_snapshot.header("model-00001-of-00002.safetensors")
    env.setenv("HEADGEOMETRY_HUB_TIMEOUT", timeout)
    hub.reset_counts()
    hub.stall_ranges = 60.0
    t0 = time.perf_counter()
    with pytest.raises(HubError) as err:
        ck.read(qk_names()[0])
    return time.perf_counter() - t0, range_requests(hub), err.value


def test_a_stall_in_process_is_a_hub_error_after_the_read_timeout(checkpoint, env):
    with LoopbackHub(serve_folder(checkpoint, REPO)) as hub:
        env.setenv("HF_ENDPOINT", hub.endpoint)
        elapsed, asked, err = stalled_read(hub, env, "0.25", "0")
    assert asked == 1
    assert 0.25 <= elapsed < 10
    assert re.search(r"stalled while reading tensor model.decoder.layers.0.self_attn.q_proj.weight in "
                     r"model-00001-of-00002.safetensors of test-org/tiny: no data within 0.25 s on 1 of 1 attempt",
                     str(err)), err


def test_raising_the_variables_raises_the_stall_budget(checkpoint, env):
    """Each retry is one more Range request that waits the whole timeout; the pauses between are 0.5 s, 1 s."""
    with LoopbackHub(serve_folder(checkpoint, REPO)) as hub:
        env.setenv("HF_ENDPOINT", hub.endpoint)
        short, asked_short, _ = stalled_read(hub, env, "0.2", "0")
        longer, asked_longer, err = stalled_read(hub, env, "0.2", "2")
        slower, asked_slower, _ = stalled_read(hub, env, "0.6", "0")
    assert (asked_short, asked_longer, asked_slower) == (1, 3, 1)
    assert 0.2 <= short < 0.2 + 5
    assert 3 * 0.2 + 0.5 + 1 <= longer < 3 * 0.2 + 0.5 + 1 + 5
    assert 0.6 <= slower < 0.6 + 5
    assert "no data within 0.2 s on 3 of 3 attempt(s)" in str(err), err


def test_a_stalled_config_download_ends_at_the_same_budget(checkpoint, env):
    """huggingface_hub retries a stalled download six times on its own 10 s timeout; the deadline cuts it
    at (retries + 1) x timeout plus the pauses: 2 x 0.25 + 0.5 s here. config.json is the first download, so
    nothing answered before the stall depends on the short timeout."""
    env.setenv("HEADGEOMETRY_HUB_TIMEOUT", "0.25")
    env.setenv("HEADGEOMETRY_HUB_RETRIES", "1")
    with LoopbackHub(serve_folder(checkpoint, REPO)) as hub:
        env.setenv("HF_ENDPOINT", hub.endpoint)
        hub.stall_downloads = 60.0
        t0 = time.perf_counter()
        with pytest.raises(HubError) as err:
            hub_checkpoint(REPO)
        elapsed = time.perf_counter() - t0
        assert any(m == "GET" and p.endswith("/config.json") for m, p, _r in hub.requests), hub.requests
    assert 1 <= elapsed < 1 + 5, elapsed
    assert re.search(r"stalled while reading config.json of test-org/tiny: no data within 1 s \(the download "
                     r"deadline: HEADGEOMETRY_HUB_RETRIES \+ 1 times HEADGEOMETRY_HUB_TIMEOUT", str(err.value))


def test_cli_against_a_stalled_download_is_one_line(checkpoint, env, tmp_path):
    """huggingface_hub's retry warnings do not reach the terminal: the error is the only line. config.json is the
    first download, so its deadline (2 x 0.25 + 0.5 s) cuts the stall and nothing else."""
    with LoopbackHub(serve_folder(checkpoint, REPO)) as hub:
        hub.stall_downloads = 60.0
        t0 = time.perf_counter()
        done = cli("profiles", REPO, "--store", tmp_path / "s.zarr", "--quiet", timeout=90,
                   env_extra={"HF_ENDPOINT": hub.endpoint, "HF_HOME": os.environ["HF_HOME"],
                              "HEADGEOMETRY_HUB_RETRIES": "1", "HEADGEOMETRY_HUB_TIMEOUT": "0.25"})
        elapsed = time.perf_counter() - t0
    assert elapsed < 30, f"the run took {elapsed:.0f} s"
    assert_one_line_exit_2(done, r"stalled while reading config.json of test-org/tiny: no data within 1 s")
    assert not (tmp_path / "s.zarr").exists()


@pytest.mark.parametrize("var, value", [("HEADGEOMETRY_HUB_TIMEOUT", "soon"), ("HEADGEOMETRY_HUB_TIMEOUT", "0"),
                                        ("HEADGEOMETRY_HUB_TIMEOUT", "-3"), ("HEADGEOMETRY_HUB_RETRIES", "1.5"),
                                        ("HEADGEOMETRY_HUB_RETRIES", "-1")])
def test_a_bad_setting_is_refused_before_anything_is_fetched(checkpoint, env, var, value):
    with LoopbackHub(serve_folder(checkpoint, REPO)) as hub:
        env.setenv("HF_ENDPOINT", hub.endpoint)
        env.setenv(var, value)
        with pytest.raises(HubError, match=rf"^{var}='{re.escape(value)}' is not a "):
            hub_checkpoint(REPO)
        assert hub.requests == []


# ------------------------------------------------------------------------------ index names

HOSTILE = {
    "parent": "../secret/model.safetensors",
    "deep-parent": "sub/../../secret/model.safetensors",
    "absolute": "/etc/passwd",
    "url": "https://evil.example/model.safetensors",
    "backslash": "..\\secret\\model.safetensors",
}


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_hostile_index_names_are_refused_online(tmp_path, env, kind):
    bad = HOSTILE[kind]
    folder = write_checkpoint(tmp_path / "repo", {qk_names()[0]: bad}, filler=4)
    secret = write_checkpoint(tmp_path / "secret", filler=4)
    repos = serve_folder(folder, REPO) | serve_folder(secret, "test-org/secret")
    with LoopbackHub(repos) as hub:
        env.setenv("HF_ENDPOINT", hub.endpoint)
        with pytest.raises(CheckpointError, match=r"names the file .* only paths inside the checkpoint"):
            hub_checkpoint(REPO)
        assert not [r for r in hub.requests if "secret" in r[1] or "passwd" in r[1]], hub.requests
        assert all(f"/resolve/{hub.sha[REPO]}/" in r[1] for r in hub.requests
                   if "/resolve/" in r[1] and not r[1].endswith("/config.json"))  # pinned after resolution


@pytest.mark.parametrize("kind", ["absolute", "parent"])
def test_hostile_index_names_are_refused_offline(tmp_path, env, kind):
    """Offline, the cached index's names would be joined to the cache folder: an absolute name would read
    any local file. Here it points at a valid checkpoint outside the cache, which must not be read."""
    outside = write_checkpoint(tmp_path / "outside", filler=4) / "model-00001-of-00002.safetensors"
    bad = str(outside) if kind == "absolute" else "../../../../outside/model-00001-of-00002.safetensors"
    folder = write_checkpoint(tmp_path / "repo", dict.fromkeys(qk_names(), bad), filler=4)
    with LoopbackHub(serve_folder(folder, REPO)) as hub:
        env.setenv("HF_ENDPOINT", hub.endpoint)
        with pytest.raises(CheckpointError, match="names the file"):
            hub_checkpoint(REPO)  # online: refused; config and index are in the cache now
    env.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(CheckpointError, match=r"names the file .* only paths inside the checkpoint"):
        hub_checkpoint(REPO)


def test_hostile_local_index_names_are_refused(tmp_path):
    from pipeline.registry.checkpoints import open_checkpoint

    outside = write_checkpoint(tmp_path / "outside", filler=4) / "model-00001-of-00002.safetensors"
    folder = write_checkpoint(tmp_path / "local", dict.fromkeys(qk_names(), str(outside)), filler=4)
    with pytest.raises(CheckpointError, match="is an absolute path"):
        open_checkpoint(str(folder))
