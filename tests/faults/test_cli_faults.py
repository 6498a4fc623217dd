"""Every ordinary bad input to ``python -m pipeline profiles``: one line on stderr, exit status 2, no traceback,
and the store byte-identical (every file hashed before and after).

The command runs in this process (``pipeline.__main__.main``, stderr captured; argparse's exit caught), as it
does in a user's; :func:`test_a_real_process_prints_the_one_line_alone` runs a bad checkpoint and a bad option
as real subprocesses, so nothing else a fresh interpreter prints (import-time warnings) goes unseen. ENOSPC is
simulated (a full disk cannot be made on demand)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import socket
import stat
import struct
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the pipeline tests need torch (pip install -e .[pipeline])")


ROOT = Path(__file__).resolve().parents[2]


def snapshot(path) -> dict[str, str]:
    root = Path(path)
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()} if root.exists() else {}


def process(*argv) -> tuple[int, str]:
    """``python -m pipeline profiles ARGV --quiet`` in a real subprocess (offline): (exit status, stderr)."""
    env = os.environ | {"HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "pipeline", "profiles", *map(str, argv), "--quiet"],
                          capture_output=True, text=True, cwd=str(ROOT), timeout=300, env=env)
    return done.returncode, done.stderr


@pytest.fixture
def cli(capsys, monkeypatch):
    """``cli(*argv)``: ``python -m pipeline profiles ARGV --quiet`` in this process (offline): (exit status,
    stderr)."""
    from pipeline.__main__ import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def run(*argv) -> tuple[int, str]:
        capsys.readouterr()
        try:
            code = main(["profiles", *map(str, argv), "--quiet"])
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code
        return code, capsys.readouterr().err

    return run


def assert_refused(done: tuple[int, str], pattern: str) -> None:
    code, err = done
    assert code == 2, (code, err[-2000:])
    assert "Traceback" not in err, err[-2000:]
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert re.search(pattern, lines[0]), (pattern, lines[0])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def good_store(tmp_path_factory):
    """A store holding one complete model, and the checkpoint folder it came from, made once: the tests read the
    folder (a test that changes it changes a copy) and each gets its own copy of the store."""
    from pipeline.run import run_profiles
    from tests.tiny_models import build_tiny, save

    home = tmp_path_factory.mktemp("good")
    folder = Path(save(build_tiny("opt"), home / "good"))
    store = home / "s.zarr"
    run_profiles([str(folder)], store, progress=False, log=lambda *_: None)
    return store, folder


@pytest.fixture
def store_and_model(good_store, tmp_path):
    """A copy of the module's store (byte for byte), and the checkpoint folder it came from."""
    store = tmp_path / "s.zarr"
    shutil.copytree(good_store[0], store)
    return store, good_store[1]


def copy_of(folder: Path, dest: Path) -> Path:
    shutil.copytree(folder, dest)
    return dest


def _header_claims(folder: Path, size: int, sharded: bool = False) -> None:
    if sharded:
        from safetensors import safe_open

        with safe_open(str(folder / "model.safetensors"), framework="np") as fh:
            names = list(fh.keys())
        _shard(folder, json.dumps({"weight_map": dict.fromkeys(names, "model-00001-of-00001.safetensors")}))
    path = folder / ("model-00001-of-00001.safetensors" if sharded else "model.safetensors")
    raw = path.read_bytes()
    path.write_bytes(struct.pack("<Q", size) + raw[8:])


def _truncate(folder: Path) -> None:
    path = folder / "model.safetensors"
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) - 1000])


def _shard(folder: Path, index_text: str) -> None:
    """Turn the single file into a one-shard checkpoint with the given index text."""
    (folder / "model.safetensors").rename(folder / "model-00001-of-00001.safetensors")
    (folder / "model.safetensors.index.json").write_text(index_text)


def _config(folder: Path, **changes) -> None:
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(changes)
    (folder / "config.json").write_text(json.dumps(cfg))


CHECKPOINT_CASES = {
    "config not JSON": (lambda f: (f / "config.json").write_text("{not json"), r"config.json is not valid JSON"),
    "config a list": (lambda f: (f / "config.json").write_text("[1, 2]"), r"not an object"),
    "config field of the wrong type": (lambda f: _config(f, num_attention_heads="four"),
                                       r"config.json .*(num_attention_heads|not a usable)"),
    "index not JSON": (lambda f: _shard(f, "{oops"), r"index.json is not valid JSON"),
    "index without weight_map": (lambda f: _shard(f, json.dumps({"metadata": {}})), r"no 'weight_map'"),
    "index naming ../": (lambda f: _shard(f, json.dumps({"weight_map": {"x": "../other/model.safetensors"}})),
                         r"'\.\./other/model.safetensors'.*only paths inside the checkpoint"),
    "zero layers": (lambda f: _config(f, num_hidden_layers=0), r"0 layers; a model needs at least one"),
    "header claims 2**40 bytes": (lambda f: _header_claims(f, 2**40), r"header too large"),
    "sharded, header claims 2**40 bytes": (lambda f: _header_claims(f, 2**40, sharded=True), r"header too large"),
    "truncated weights": (_truncate, r"damaged, truncated or not safetensors"),
}


@pytest.mark.parametrize("case", list(CHECKPOINT_CASES))
@pytest.mark.slow
def test_bad_checkpoints(store_and_model, tmp_path, case, cli):
    store, folder = store_and_model
    damage, pattern = CHECKPOINT_CASES[case]
    bad = copy_of(folder, tmp_path / "bad")
    damage(bad)
    for target, runs in ((store, ([], ["--force", "--name", "good"])), (tmp_path / "fresh.zarr", ([],))):
        before = snapshot(target)
        for extra in runs:
            assert_refused(cli(bad, "--store", target, *extra), pattern)
            assert snapshot(target) == before, f"{case} {extra} changed {target}"
    assert not (tmp_path / "fresh.zarr").exists()


@pytest.mark.slow
def test_bad_options(store_and_model, tmp_path, cli):
    store, folder = store_and_model
    before = snapshot(store)
    port = free_port()
    cases = [
        (["--workers", "0"], r"--workers must be at least 1"),
        (["--workers", "-2"], r"--workers must be at least 1"),
        (["--workers", "two"], r"--workers: invalid int value: 'two' \(see `python -m pipeline profiles --help`\)"),
        (["--no-such-option"], r"unrecognized arguments: --no-such-option"),
        (["--scheduler", "not an address"], r"is not a dask scheduler address"),
        (["--scheduler", "tcp://127.0.0.1"], r"is not a dask scheduler address"),
        (["--scheduler", "http://127.0.0.1:8786"], r"is not a dask scheduler address"),
        (["--scheduler", f"tcp://127.0.0.1:{port}"], r"cannot reach the dask scheduler"),
        (["--workers", "2", "--scheduler", f"tcp://127.0.0.1:{port}"], r"give one of them"),
    ]
    for extra, pattern in cases:
        assert_refused(cli(folder, "--store", store, "--force", *extra), pattern)
        assert snapshot(store) == before, extra


@pytest.mark.slow
def test_read_only_store(store_and_model, cli):
    store, folder = store_and_model
    before = snapshot(store)
    modes = {p: p.stat().st_mode for p in [store, *store.rglob("*")]}
    for p in modes:
        p.chmod(stat.S_IMODE(modes[p]) & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        assert_refused(cli(folder, "--store", store, "--force"), r"read-only")
        assert_refused(cli(folder, "--store", store, "--name", "another"), r"read-only")
    finally:
        for p, mode in modes.items():
            p.chmod(stat.S_IMODE(mode))
    assert snapshot(store) == before


def test_zarr_v2_store(store_and_model, tmp_path, cli):
    import zarr

    _, folder = store_and_model
    v2 = tmp_path / "v2.zarr"
    zarr.open_group(str(v2), mode="w", zarr_format=2).create_array("x", shape=(3,), dtype="int32")
    before = snapshot(v2)
    assert_refused(cli(folder, "--store", v2), r"is a Zarr v2 store; .* Zarr v3 only")
    assert snapshot(v2) == before


@pytest.mark.slow
def test_store_that_is_not_a_store(store_and_model, tmp_path, cli):
    _, folder = store_and_model
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("mine")
    a_file = tmp_path / "file.zarr"
    a_file.write_text("x")
    for target, pattern in ((plain, r"not a Zarr store"), (a_file, r"is a file, not a Zarr store")):
        before = snapshot(target) if target.is_dir() else target.read_bytes()
        assert_refused(cli(folder, "--store", target), pattern)
        assert (snapshot(target) if target.is_dir() else target.read_bytes()) == before


def test_a_real_process_prints_the_one_line_alone(store_and_model, tmp_path):
    """A bad checkpoint and a bad option through a fresh interpreter: its stderr is the one error line, nothing
    else (no import-time warning), exit status 2, the store unchanged."""
    store, folder = store_and_model
    before = snapshot(store)
    bad = copy_of(folder, tmp_path / "bad")
    CHECKPOINT_CASES["config not JSON"][0](bad)
    assert_refused(process(bad, "--store", store), CHECKPOINT_CASES["config not JSON"][1])
    assert_refused(process(folder, "--store", store, "--workers", "two"), r"--workers: invalid int value: 'two'")
    assert snapshot(store) == before


def _main(argv, capsys) -> tuple[int, str]:
    from pipeline.__main__ import main

    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


def test_no_space_left_before_writing(store_and_model, tmp_path, monkeypatch, capsys):
    """The run estimates what it writes and refuses when the disk has less free."""
    store, folder = store_and_model
    before = snapshot(store)
    other = copy_of(folder, tmp_path / "other")
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=1000))
    code, err = _main(["profiles", other, "--store", store, "--quiet"], capsys)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert re.search(r"not enough disk space for the store .* MB are free", err), err
    assert snapshot(store) == before


def test_no_space_left_while_writing(store_and_model, tmp_path, monkeypatch, capsys):
    """ENOSPC inside the store's write of layer 1: one line, exit 2, layer 0 kept, a rerun resumes."""
    from pipeline import run
    from pipeline.store import layer_writer as zstore  # where a layer's write computes its checksum

    store, folder = store_and_model
    other = copy_of(folder, tmp_path / "other")
    real, calls = zstore.layer_checksum, []

    def full_disk(*a, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(store))
        return real(*a, **kw)

    monkeypatch.setattr(zstore, "layer_checksum", full_disk)
    code, err = _main(["profiles", other, "--store", store, "--quiet"], capsys)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert re.search(r"no space left on the device .* run the same command again", err), err
    assert run.open_store(str(store)).layers_done("other").tolist() == [True, False]
    monkeypatch.setattr(zstore, "layer_checksum", real)
    code, err = _main(["profiles", other, "--store", store, "--quiet"], capsys)
    assert code == 0 and run.open_store(str(store)).is_complete("other")
