"""``profiles MODEL --revisions SPEC`` on a folder of checkpoints: each revision a frame of the store's group
runs/NAME, whose values equal the dense N x N computation on that checkpoint's own weights; metrics by step, repeats
copied and marked, ``list`` and ``verify`` of a run, a run read by plain xarray while it is written, its executors,
and the inputs refused with one line and nothing written.

The checkpoints are tiny random GPT-NeoX models (rotary on a quarter of each head, Pythia's layout: fused
query_key_value per head), saved by transformers as ``checkpoint-N`` folders as the Trainer leaves them. The
independent computation takes W_Q, W_K from the live transformers modules (not from the files) and evaluates the
profile of L(d) = W_K^T R(d) W_Q from its definition (tests/pipeline/test_cli_profiles.py), the statistics and
spectra from the full form at d = 0 (tests/pipeline/test_head_statistics.py).
"""

from __future__ import annotations

import contextlib
import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from pipeline.run import frame_executors
from pipeline.schema import SPECTRA
from pipeline.store import Store
from tests.pipeline.test_cli_profiles import cli, expected_profiles, module_weights, snapshot
from tests.pipeline.test_head_statistics import naive, naive_spectra
from tests.tiny_models import build_tiny, random_model, save, torch

KIND = "gpt_neox"  # 2 layers x 4 heads, width 64, rotary on 4 of each head's 16 dimensions
STEPS = (0, 5, 10, 100)  # checkpoint-10 comes after checkpoint-5: steps are ordered as numbers


def make_run(root: Path, steps=STEPS, seeds=None, **config) -> tuple[Path, dict]:
    """A folder of ``checkpoint-STEP`` subfolders, each a tiny GPT-NeoX of its own seed; (folder, step -> model)."""
    root.mkdir(parents=True, exist_ok=True)
    models = {}
    for i, step in enumerate(steps):
        model = build_tiny(KIND, seed=(seeds or steps)[i] + 1, **config)
        save(model, root / f"checkpoint-{step}")
        models[step] = model
    return root, models


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory) -> tuple[Path, dict]:
    root, models = make_run(tmp_path_factory.mktemp("trainer") / "trainer-out")
    (root / "runs").mkdir()  # the Trainer's logs beside its checkpoints: not a revision
    metrics = {"scalars": {"loss_first_half": 2.5, "loss_repeated_half": 0.25},
               "heads": {"induction_score": [[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8]]}}
    (root / "checkpoint-10" / "metrics.json").write_text(json.dumps(metrics))
    return root, models


@pytest.fixture(scope="module")
def written(run_folder, tmp_path_factory) -> tuple[Path, xr.Dataset]:
    """The whole run profiled once, in this process: the store and its run group read back whole."""
    root, _ = run_folder
    store = tmp_path_factory.mktemp("store") / "s.zarr"
    assert cli("profiles", root, "--revisions", "all", "--store", store, "--quiet") == 0
    return store, open_run(store, "trainer-out")


def open_run(store, name: str) -> xr.Dataset:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # plain xarray, as a user opens it: no fallback, no other warning
        return xr.open_zarr(str(store), group=f"runs/{name}", chunks=None).load()


def test_each_frame_equals_the_dense_computation_on_its_own_weights(written, run_folder):
    store, ds = written
    _, models = run_folder
    assert list(ds.step.values) == list(STEPS)
    assert list(ds.revision.values) == [f"checkpoint-{s}" for s in STEPS]
    assert ds.profile.dims == ("step", "layer", "head", "d", "coordinate")
    assert ds.layer_done.values.all() and (ds.repeat_of.values == -1).all()
    for i, step in enumerate(STEPS):
        model = models[step]
        want_p, want_n = expected_profiles(model, KIND)
        np.testing.assert_allclose(ds.profile.values[i], want_p, rtol=0, atol=1e-9, err_msg=f"step {step}")
        np.testing.assert_allclose(ds.norm.values[i], want_n, rtol=1e-10)
        n = ds.sizes["eigen"] // 2
        for layer in range(2):
            W_Q, W_K = module_weights(model, KIND, layer)
            for h in range(4):
                L = W_K[h].T @ W_Q[h]  # d = 0: R(0) = I
                stats, spectrum = naive(L, n)
                np.testing.assert_allclose(ds.head_statistics.values[i, layer, h], stats, rtol=1e-9, atol=1e-11)
                np.testing.assert_allclose(ds.spectrum.values[i, layer, h], spectrum, rtol=0, atol=1e-12)
                got = np.stack([ds[s].values[i, layer, h] for s in SPECTRA])
                np.testing.assert_allclose(got, naive_spectra(L, n), rtol=0, atol=1e-10)
    # the frames differ (each is its own checkpoint), and the offsets move the rotary heads
    assert np.abs(ds.profile.values[0] - ds.profile.values[1]).max() > 1e-2
    assert np.abs(ds.profile.values[0, :, :, 0] - ds.profile.values[0, :, :, 64]).max() > 1e-3


def test_the_run_records_its_model_once_and_its_metrics_by_step(written, run_folder):
    store, ds = written
    root, _ = run_folder
    assert ds.attrs["n_layers"] == 2 and ds.attrs["n_heads"] == 4 and ds.attrs["family"] == "gpt_neox"
    assert ds.attrs["positional"] == "rope" and ds.attrs["rotary_dim"] == 4 and ds.attrs["scale_rule"]
    assert ds.attrs["source"] == str(root) and not ds.attrs["layernorm_folded"]
    assert ds.attrs["command"] == f"python -m pipeline profiles {root} --revisions all"
    assert ds.layer_positional.dims == ("layer",) and list(ds.layer_positional.values) == ["rope", "rope"]
    assert all(c.startswith("local-") for c in ds.commit.values)
    # metrics.json of checkpoint-10 alone: by step, NaN where a checkpoint has none
    at = list(STEPS).index(10)
    np.testing.assert_array_equal(ds.metric_loss_first_half.values, [np.nan if s != 10 else 2.5 for s in STEPS])
    assert ds.metric_loss_repeated_half.values[at] == 0.25
    assert ds.head_metric_induction_score.dims == ("step", "layer", "head")
    np.testing.assert_array_equal(ds.head_metric_induction_score.values[at], [[0.1, 0.2, 0.3, 0.4],
                                                                              [0.5, 0.6, 0.7, 0.8]])
    assert np.isnan(np.delete(ds.head_metric_induction_score.values, at, axis=0)).all()
    assert Store.open(store, "r").run("trainer-out").sizes["step"] == len(STEPS)  # the handle validates it


def test_list_shows_each_run_its_steps_and_what_is_missing(run_folder, tmp_path, capsys):
    root, _ = run_folder
    store = tmp_path / "s.zarr"
    assert cli("profiles", root, "--revisions", "checkpoint-0,checkpoint-100", "--store", store, "--quiet",
               "--name", "two") == 0
    group = Store.open(store, "a").run_groups.open("two", "a")
    group["layer_done"][1, 1] = False  # as a kill leaves a frame: its last layer not written
    capsys.readouterr()
    assert cli("list", "--store", store) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("two "))
    assert re.search(r"^two\s+2\s+0 to 100\s+1/2\s+0\s+2\s+4\s+checkpoint-100 \(1/2 layers\)\s+" + re.escape(str(root)),
                     line), line
    [summary] = Store.open(store, "r").runs()
    assert summary.steps == (0, 100) and [f.revision for f in summary.missing] == ["checkpoint-100"]
    # the rerun of the run's command writes only that layer
    with computations() as calls:
        assert cli("profiles", root, "--revisions", "all", "--store", store, "--quiet", "--name", "two") == 0
    assert sorted(calls) == [(1, 1), (2, 0), (2, 1), (3, 0), (3, 1)]  # step 100's layer 1, steps 5 and 10 whole
    assert list(open_run(store, "two").step.values) == [0, 100, 5, 10]  # frames in the order first planned
    assert open_run(store, "two").sortby("step").layer_done.values.all()


@contextlib.contextmanager
def computations():
    """Within it, the (frame index, layer) of every layer the inline run computes from weights (not copied)."""
    calls: list[tuple[int, int]] = []
    real = frame_executors.write_frame_layer

    def spy(writer, ckpt, layout, index, layer, fold_ln, qk):
        copied = real(writer, ckpt, layout, index, layer, fold_ln, qk)
        if not copied:
            calls.append((index, layer))
        return copied

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(frame_executors, "write_frame_layer", spy)
        yield calls


def test_a_repeat_is_copied_not_computed_and_marked(tmp_path):
    """A revision whose Q/K equal an earlier one's (its MLP moved, its attention frozen) is stored as a repeat:
    every layer copied from the earlier frame, ``repeat_of`` its step; one whose Q/K equal in one layer only copies
    that layer and repeats no frame. A repeat of a frame stored by an earlier command is found too."""
    root = tmp_path / "run"
    base = build_tiny(KIND, seed=7)
    save(base, root / "step100")
    with torch.no_grad():
        base.gpt_neox.layers[0].mlp.dense_h_to_4h.weight.add_(1.0)  # other weights move, Q/K do not
    save(base, root / "step200")
    with torch.no_grad():
        base.gpt_neox.layers[1].attention.query_key_value.weight.mul_(1.5)  # layer 1's Q/K move
    save(base, root / "step300")
    store = tmp_path / "s.zarr"
    with computations() as calls:
        assert cli("profiles", root, "--revisions", "step100,step200,step300", "--store", store, "--quiet") == 0
    assert sorted(calls) == [(0, 0), (0, 1), (2, 1)]  # step200 whole and step300's layer 0 copied
    ds = open_run(store, "run")
    assert list(ds.repeat_of.values) == [-1, 100, -1]
    assert (ds.qk_sha256.values[1] == ds.qk_sha256.values[0]).all()
    assert ds.qk_sha256.values[2, 0] == ds.qk_sha256.values[0, 0] != ds.qk_sha256.values[2, 1]
    for var in ("profile", "norm", "head_statistics", "spectrum", *SPECTRA):
        np.testing.assert_array_equal(ds[var].values[1], ds[var].values[0], err_msg=var)
    assert np.abs(ds.norm.values[2, 1] - ds.norm.values[0, 1]).max() > 1e-3  # layer 1 computed: 1.5^2 x the norm
    np.testing.assert_allclose(ds.norm.values[2, 1], 2.25 * ds.norm.values[0, 1], rtol=1e-12)
    assert Store.open(store).verify() == []  # copies carry their checksums

    # a later command adds a revision that repeats a stored frame: copied from the store
    save(build_tiny(KIND, seed=7), root / "step50")  # the same Q/K as step100, other weights as saved
    with computations() as calls:
        assert cli("profiles", root, "--revisions", "all", "--store", store, "--quiet") == 0
    assert calls == []
    ds = open_run(store, "run").sortby("step")
    assert list(ds.step.values) == [50, 100, 200, 300] and list(ds.repeat_of.values) == [-1, 50, 50, -1]


def test_a_repeat_of_a_damaged_frame_is_computed(tmp_path):
    root = tmp_path / "run"
    model = build_tiny(KIND, seed=3)
    save(model, root / "step1")
    store = tmp_path / "s.zarr"
    assert cli("profiles", root, "--revisions", "all", "--store", store, "--quiet") == 0
    group = Store.open(store, "a").run_groups.open("run", "a")
    group["norm"][0, 0, 0, 0] = 123.0  # its checksum no longer matches
    with torch.no_grad():
        model.gpt_neox.layers[1].mlp.dense_4h_to_h.weight.add_(1.0)
    save(model, root / "step2")
    with computations() as calls:
        assert cli("profiles", root, "--revisions", "all", "--store", store, "--quiet") == 0
    assert calls == [(1, 0)]  # layer 1 copied; layer 0's source does not match its checksum: computed
    want, _ = expected_profiles(model, KIND)
    np.testing.assert_allclose(open_run(store, "run").profile.values[1], want, rtol=0, atol=1e-9)


def test_verify_finds_a_damaged_frame_and_its_revisions_command_repairs_it(run_folder, tmp_path, capsys):
    root, models = run_folder
    store = tmp_path / "s.zarr"
    assert cli("profiles", root, "--revisions", "checkpoint-5,checkpoint-10", "--store", store, "--quiet") == 0
    from pipeline.cli import verify as verify_cli

    def verify(*names, dry=False):
        import argparse

        args = argparse.Namespace(store=str(store), models=list(names), upgrade=False, dry_run=dry)
        return verify_cli.main(args)

    assert verify() == 0 and verify("trainer-out") == 0 and verify("runs/trainer-out") == 0
    capsys.readouterr()
    chunk = store / "runs" / "trainer-out" / "spectrum" / "c" / "1" / "0" / "0" / "0"
    assert chunk.is_file()
    chunk.unlink()  # checkpoint-10's layer 0 statistics lose their spectrum
    assert verify(dry=True) == 1
    out = capsys.readouterr().out
    repair = f"python -m pipeline profiles {root} --revisions checkpoint-10 --name trainer-out --store {store}"
    assert (f"runs/trainer-out frame 'checkpoint-10' layer 0: its statistics chunk is missing (the values read as "
            f"NaN); repair: {repair}") in out
    assert Store.open(store, "r").runs()[0].missing == ()  # --dry-run marks nothing
    assert verify() == 1
    [summary] = Store.open(store, "r").runs()
    assert [(f.revision, f.layers_done) for f in summary.missing] == [("checkpoint-10", 1)]
    import shlex

    argv = shlex.split(repair)[3:]
    assert cli(*argv, "--quiet") == 0
    assert verify() == 0
    want, _ = expected_profiles(models[10], KIND)
    np.testing.assert_allclose(open_run(store, "trainer-out").profile.values[1], want, rtol=0, atol=1e-9)
    with pytest.raises(Exception, match="not in the store"):
        Store.open(store, "r").verify(["nothing-of-that-name"], mark=False)


def test_plain_xarray_reads_a_run_while_it_is_written(run_folder, tmp_path, monkeypatch):
    """After every layer a plain ``xr.open_zarr`` of the group reads the frames added, each layer written so far
    with its values, the others NaN and not done."""
    root, models = run_folder
    store = tmp_path / "s.zarr"
    from pipeline.store.frame_writer import FrameWriter

    real, seen = FrameWriter.write, []

    def write(self, index, layer, *args, **kwargs):
        real(self, index, layer, *args, **kwargs)
        ds = open_run(store, "trainer-out")
        done = ds.layer_done.values
        assert done[index, layer] and done.sum() == len(seen) + 1
        np.testing.assert_array_equal(np.isnan(ds.profile.values).all(axis=(2, 3, 4)), ~done)
        seen.append((index, layer))

    monkeypatch.setattr(FrameWriter, "write", write)
    assert cli("profiles", root, "--revisions", "every:2", "--store", store, "--quiet") == 0
    assert seen == [(0, 0), (0, 1), (1, 0), (1, 1)]  # checkpoint-0 and checkpoint-10
    want, _ = expected_profiles(models[10], KIND)
    np.testing.assert_allclose(open_run(store, "trainer-out").profile.values[1], want, rtol=0, atol=1e-9)


def test_progress_shows_revisions_done_of_total_and_bytes_read(run_folder, tmp_path, capsys):
    root, _ = run_folder
    assert cli("profiles", root, "--revisions", "log:3", "--store", tmp_path / "s.zarr") == 0
    err = capsys.readouterr().err
    qk = 2 * 2 * 64 * 64 * 8  # a frame's Q/K: 2 layers of W_Q and W_K, 64 x 64 each, float64 as saved
    last = re.findall(r"revisions (\d+)/(\d+), ([\d.]+) MB read", err)[-1]
    assert last[:2] == ("3", "3") and float(last[2]) == pytest.approx(3 * qk / 1e6, abs=0.051)


@pytest.mark.slow
def test_a_pool_and_a_dask_cluster_write_the_frames_the_inline_run_writes(run_folder, written, tmp_path):
    pytest.importorskip("distributed", reason="the cluster test needs dask.distributed")
    from pipeline.run import open_cluster, run_profiles

    root, _ = run_folder
    _, want = written
    pool = tmp_path / "pool.zarr"
    assert cli("profiles", root, "--revisions", "all", "--store", pool, "--quiet", "--workers", "2") == 0
    with open_cluster(workers=2) as cluster:
        run_profiles([str(root)], str(tmp_path / "dask.zarr"), revisions="all", progress=False, log=lambda *_: None,
                     client=cluster.client)
    for store in (pool, tmp_path / "dask.zarr"):
        got = open_run(store, "trainer-out")
        for var in ("profile", "norm", "head_statistics", "spectrum", *SPECTRA, "qk_sha256", "layer_checksum"):
            np.testing.assert_array_equal(got[var].values, want[var].values, err_msg=f"{store.name} {var}")


# ------------------------------------------------------------------------------------- refused, nothing written


def refused(argv, store, capsys, match: str) -> None:
    """The command exits 2 with one line on stderr matching ``match``, and the store is as it was."""
    before = snapshot(store)
    capsys.readouterr()
    assert cli("profiles", *argv, "--store", store, "--quiet") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert re.search(match, err), err
    assert snapshot(store) == before


@pytest.mark.parametrize("spec, match", [
    ("every:0", r"K must be a whole number >= 1"),
    ("log:x", r"K must be a whole number >= 2"),
    ("bogus:3", r"unknown form 'bogus:'"),
    ("checkpoint-7", r"checkpoint-7"),
    ("", r"empty revision spec"),
])
def test_bad_specs_are_one_line_and_write_nothing(run_folder, tmp_path, capsys, spec, match):
    root, _ = run_folder
    store = tmp_path / "s.zarr"
    refused([root, "--revisions", spec], store, capsys, match)
    assert not store.exists()


def test_bad_folders_and_options_are_one_line_and_write_nothing(run_folder, tmp_path, capsys):
    root, _ = run_folder
    store = tmp_path / "s.zarr"
    empty = tmp_path / "empty"
    (empty / "logs").mkdir(parents=True)
    refused([empty, "--revisions", "all"], store, capsys, r"no checkpoints in .*empty")
    refused([root, root, "--revisions", "all"], store, capsys, r"exactly one MODEL_OR_PATH")
    refused([root, "--revisions", "all", "--revision", "main"], store, capsys, r"give one of them")
    refused([root, "--revisions", "all", "--register-only"], store, capsys, r"does not go with --revisions")
    refused([root, "--revisions", "all", "--name", "a/b"], store, capsys, r"cannot name a run: it holds a slash")
    assert not store.exists()

    # a checkpoint of another shape among them
    other, _ = make_run(tmp_path / "mixed", steps=(1, 2))
    save(build_tiny(KIND, seed=9, num_attention_heads=8), other / "checkpoint-3")
    refused([other, "--revisions", "all"], store, capsys,
            r"revision 'checkpoint-3' of .* is not of the shape .* of 'checkpoint-1' \(n_heads 8 against 4")
    # a metrics.json not of its shape
    (other / "checkpoint-3").rename(tmp_path / "moved")
    (other / "checkpoint-2" / "metrics.json").write_text(json.dumps({"heads": {"x": [[1, 2]]}}))
    refused([other, "--revisions", "all"], store, capsys, r"metrics.json: per-head metric 'x' is not 2 lists")
    (other / "checkpoint-2" / "metrics.json").unlink()
    assert not store.exists()

    # checkpoints stored by tower: a two-tower T5, and an encoder saved alone (one tower, still stored NAME/encoder)
    t5 = {"d_model": 32, "d_kv": 8, "num_heads": 4, "num_layers": 2, "d_ff": 64}
    for cls, towers in (("T5Model", "encoder, decoder"), ("T5EncoderModel", "encoder")):
        folder = tmp_path / cls
        for step in (1, 2):
            save(random_model("T5Config", t5, cls, seed=step), folder / f"checkpoint-{step}")
        refused([folder, "--revisions", "all"], store, capsys,
                rf"revision 'checkpoint-1' .* is a checkpoint stored by tower \({towers}, each a model NAME/TOWER\)")
    assert not store.exists()

    # a store whose run of that name has another shape: refused, the store unchanged
    assert cli("profiles", other, "--revisions", "all", "--store", store, "--quiet", "--name", "r") == 0
    wide, _ = make_run(tmp_path / "wide", steps=(1,), num_attention_heads=8)
    refused([wide, "--revisions", "all", "--name", "r"], store, capsys,
            r"the store's run 'r' holds frames of .* of another shape .*n_heads 8 against 4")
    # a frame whose checkpoint changed since it was computed needs --force
    save(build_tiny(KIND, seed=11), other / "checkpoint-2")
    refused([other, "--revisions", "all", "--name", "r"], store, capsys,
            r"frame 'checkpoint-2' of the run 'r' was computed from local-\w+, and checkpoint-2 is now local-\w+")
    with computations() as calls:
        assert cli("profiles", other, "--revisions", "all", "--name", "r", "--store", store, "--quiet", "--force") == 0
    assert sorted(calls) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    want, _ = expected_profiles(build_tiny(KIND, seed=11), KIND)
    np.testing.assert_allclose(open_run(store, "r").profile.values[1], want, rtol=0, atol=1e-9)
