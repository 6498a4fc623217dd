"""``python -m pipeline baseline``: a baseline goes through the run path as a model entry of its own, tagged, with the
command that recomputes it; its stored profiles (every d of a rotary shape), statistics and spectra are those of the
dense forms of the heads its kind and seed give; it is reproducible by seed, the same by every executor, resumed
and skipped like a checkpoint's run; ``report`` compares a model with its stored baseline; ``list`` shows baselines
apart; bad input is one line."""

from __future__ import annotations

import json
import shlex

import numpy as np
import pytest

from pipeline.__main__ import main
from pipeline.analyses import baselines
from pipeline.analyses.baseline_run import baseline_name, plan_baseline
from pipeline.families import layout_from_config, rotations
from pipeline.profile import naive_profiles
from pipeline.registry.models import MODELS, SEED_MODELS
from pipeline.schema import SPECTRA, ModelRow, ModelShape, trained_and_baselines
from pipeline.sources.iid_heads import IidHeads
from pipeline.sources.init_heads import InitHeads
from pipeline.store import Store
from tests.pipeline.test_head_statistics import naive, naive_spectra

ROPE = ModelShape(family="mistral", n_layers=2, n_heads=4, n_kv_heads=2, d_model=24, d_head=6, positional="rope",
                  rotary_dim=6)
BERT = ModelShape(family="bert", n_layers=2, n_heads=3, n_kv_heads=3, d_model=18, d_head=6,
                  positional="learned absolute")


def config_file(tmp_path, shape: ModelShape, name: str, rope_theta: float = 0.0) -> str:
    """A config.json of ``shape`` in the folder ``name``: the baseline's target."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(baselines.config_for_shape(shape, rope_theta)))
    return str(folder / "config.json")


def stored(store, name: str):
    return Store.open(store, mode="r").dataset("profiles").sel(model=name).load()


def check_against_dense(ds, heads, layout, offsets=(0, 1, 17, 128)):
    """Every head's stored profile at ``offsets`` and its statistics and spectra at d = 0 against the dense forms
    W_K^T R(d) W_Q of ``heads`` (IidHeads or InitHeads)."""
    n = layout.d_head
    for layer in range(layout.n_layers):
        qk = heads.layer(layer)
        R = rotations(layout, layer=layer)
        for h in range(layout.n_heads):
            W_Q = np.asarray(qk.W_Q[h], np.float64)
            W_K = np.asarray(qk.W_K[qk.kv_of_head[h]], np.float64)
            for d in offsets if R is not None else (0,):
                L = W_K.T @ (W_Q if R is None else R[d] @ W_Q)
                np.testing.assert_allclose(ds.profile.values[layer, h, d], naive_profiles(L)[0], atol=1e-12)
            L0 = W_K.T @ W_Q
            want, spectrum = naive(L0, n)
            np.testing.assert_allclose(ds.head_statistics.values[layer, h], want, rtol=1e-9, atol=1e-11)
            np.testing.assert_allclose(ds.spectrum.values[layer, h, :len(spectrum)], spectrum, atol=1e-12)
            got = np.stack([ds[s].values[layer, h, :min(layout.d_model, 2 * n)] for s in SPECTRA])
            np.testing.assert_allclose(got, naive_spectra(L0, n), atol=1e-10)


def test_an_iid_baseline_of_a_rotary_shape_is_profiled_at_every_offset(tmp_path, capsys):
    target = config_file(tmp_path, ROPE, "tiny", rope_theta=1000.0)
    store = str(tmp_path / "s.zarr")
    assert main(["baseline", target, "--kind", "iid", "--seed", "3", "--store", store, "--quiet"]) == 0
    name = baseline_name("tiny", "iid", 3)
    assert name == "tiny~iid-seed3"
    row = Store.open(store, "r").row(name)
    assert (row.baseline_of, row.baseline_kind, row.baseline_seed, row.is_baseline) == ("tiny", "iid", 3, True)
    assert row.complete and row.statistics_computed and row.spectra_computed and row.shape == ROPE
    assert row.command == f"python -m pipeline baseline {target} --kind iid --seed 3"
    assert row.package.startswith("numpy==") and "seed 3" in row.note and row.revision.startswith("sha256:")
    layout = layout_from_config(json.loads(open(target).read()))
    check_against_dense(stored(store, name), IidHeads(layout, 3), layout)
    capsys.readouterr()
    assert main([*shlex.split(row.command)[3:], "--store", store, "--quiet"]) == 0  # its command: nothing to do
    assert "is complete in" in capsys.readouterr().out and Store.open(store).verify() == []


def test_a_library_init_baseline_is_the_models_initialisation_and_reproducible_by_seed(tmp_path):
    """The heads of ``InitHeads`` (equal to ``AutoModel.from_config``'s under the layer seeds:
    test_init_heads.py) are what the store holds; the same seed gives the same store values, another seed others."""
    target = config_file(tmp_path, BERT, "small")
    a, b, c = (str(tmp_path / f"{x}.zarr") for x in "abc")
    for store, seed in ((a, 5), (b, 5), (c, 6)):
        assert main(["baseline", target, "--seed", str(seed), "--store", store, "--quiet"]) == 0
    config = json.loads(open(target).read())
    layout = layout_from_config(config)
    ds = stored(a, "small~init-seed5")
    check_against_dense(ds, InitHeads(config, 5), layout)
    same, other = stored(b, "small~init-seed5"), stored(c, "small~init-seed6")
    for var in ("profile", "norm", "head_statistics", *SPECTRA):
        np.testing.assert_array_equal(ds[var].values, same[var].values, err_msg=var)
    assert not np.allclose(ds.norm.values[0, :3], other.norm.values[0, :3])
    row = Store.open(a, "r").row("small~init-seed5")
    assert row.baseline_kind == "init" and row.package.startswith("transformers==")


def test_every_executor_writes_the_same_baseline(tmp_path):
    from pipeline.run import open_cluster, open_store, run_dask

    target = config_file(tmp_path, ROPE, "tiny", rope_theta=1000.0)
    inline, pool, dask = (str(tmp_path / f"{x}.zarr") for x in ("inline", "pool", "dask"))
    assert main(["baseline", target, "--kind", "iid", "--store", inline, "--quiet"]) == 0
    assert main(["baseline", target, "--kind", "iid", "--store", pool, "--quiet", "--workers", "1"]) == 0
    with open_cluster(workers=1, processes=False) as cluster:
        store = open_store(dask)
        run_dask([plan_baseline(target, "iid", 0, store)], store, cluster.client, progress=False)
    name = "tiny~iid-seed0"
    want = stored(inline, name)
    for path in (pool, dask):
        got = stored(path, name)
        for var in ("profile", "norm", "head_statistics", "spectrum", *SPECTRA, "layer_checksum",
                    "statistics_checksum", "spectra_checksum"):
            np.testing.assert_array_equal(got[var].values, want[var].values, err_msg=f"{path}: {var}")
        assert Store.open(path, "r").row(name).complete


def test_an_interrupted_baseline_resumes_and_force_recomputes(tmp_path, capsys):
    target = config_file(tmp_path, ROPE, "tiny", rope_theta=1000.0)
    store = str(tmp_path / "s.zarr")
    s = Store.open(store)
    plan = plan_baseline(target, "iid", 1, s)
    s.register(plan.row)  # a run killed after its first layer
    from pipeline.run.tasks import compute_layer

    s.write_layer(plan.name, 0, *compute_layer(plan.ckpt, plan.layout, 0, False))
    assert plan_baseline(target, "iid", 1, Store.open(store)).todo == [1]  # resumes with the layer not done
    assert main(["baseline", target, "--kind", "iid", "--seed", "1", "--store", store, "--quiet"]) == 0
    assert Store.open(store, "r").row(plan.name).complete
    assert plan_baseline(target, "iid", 1, Store.open(store)) is None  # complete: skipped
    forced = plan_baseline(target, "iid", 1, Store.open(store), force=True)
    assert forced.todo == [0, 1] and forced.reset


@pytest.mark.parametrize("name", SEED_MODELS)
def test_the_seed_models_baselines_are_planned_from_the_registry_without_weights(tmp_path, name):
    plan = plan_baseline(name, "iid", 0, Store.open(tmp_path / "s.zarr"))
    spec = MODELS[name]
    assert spec.mismatches(plan.layout) == {} and plan.row.shape == spec.shape
    assert (plan.name, plan.row.baseline_of, plan.row.command) == (
        f"{name}~iid-seed0", name, f"python -m pipeline baseline {name} --kind iid --seed 0")
    assert plan.todo == list(range(spec.n_layers)) and not (tmp_path / "s.zarr").exists()  # nothing written


def test_report_compares_a_model_with_its_stored_baseline_and_list_shows_baselines_apart(tiny_model, tmp_path, capsys):
    _, folder = tiny_model("bert")
    store = str(tmp_path / "s.zarr")
    assert main(["profiles", folder, "--store", store, "--name", "m", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["report", "m", "--json", "--store", store]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["baseline"] is None and rep["missing"] == [
        "no baseline of m in the store; make one with `python -m pipeline baseline m --kind init --seed 0`"]
    assert main(["baseline", "m", "--store", store, "--quiet"]) == 0  # a model of the store: its folder's config
    assert main(["baseline", "m", "--kind", "iid", "--store", store, "--quiet"]) == 0
    rows = Store.open(store, "r").models()
    trained, base = trained_and_baselines(rows)
    assert [r.name for r in trained] == ["m"] and [r.name for r in base] == ["m~init-seed0", "m~iid-seed0"]
    assert base[0].source == "m" and base[0].shape == trained[0].shape
    capsys.readouterr()
    assert main(["report", "m", "--json", "--store", store]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["baseline"]["name"] == "m~init-seed0" and rep["missing"] == []
    assert main(["report", "m", "--json", "--baseline", "iid", "--store", store]) == 0  # the stored iid entry
    assert json.loads(capsys.readouterr().out)["baseline"]["name"] == "m~iid-seed0"
    assert main(["list", "--store", store]) == 0
    out = capsys.readouterr().out
    trained_part, base_part = out.split("Random baselines")
    assert "\nm " in trained_part and "m~init-seed0" not in trained_part
    lines = {line.split()[0]: line.split()[1:5] for line in base_part.splitlines()[2:] if line.strip()}
    assert lines == {"m~init-seed0": ["complete", "m", "init", "0"], "m~iid-seed0": ["complete", "m", "iid", "0"]}


def test_bad_input_is_one_line(tiny_model, tmp_path, capsys):
    _, folder = tiny_model("bert")
    store = str(tmp_path / "s.zarr")
    assert main(["profiles", folder, "--store", store, "--name", "m", "--quiet"]) == 0
    assert main(["baseline", "m", "--store", store, "--quiet"]) == 0
    capsys.readouterr()
    cases = {
        ("no such model", "--store", store): "unknown model 'no such model'",
        ("m", "--seed", "-1", "--store", store): "non-negative integer",
        ("m~init-seed0", "--store", store): "is itself a baseline (of 'm')",
        ("m", "--name", "m", "--store", store): "'m' is a trained model in the store",
        ("m", folder, "--name", "x", "--store", store): "--name names one model",
        ("--store", store): "no model given",
    }
    for args, words in cases.items():
        assert main(["baseline", *args, "--quiet"]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and words in err, (args, err)
    Store.open(store).register(ModelRow.of("orb", ModelShape(family="orbits", n_layers=1, n_heads=2, n_kv_heads=2,
                                                             d_model=8, d_head=4, positional="none")))
    assert main(["baseline", "orb", "--store", store, "--quiet"]) == 2
    assert "no config of family 'orbits'" in capsys.readouterr().err
