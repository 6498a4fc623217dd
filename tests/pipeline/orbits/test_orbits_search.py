"""The multi-seed search: table rows equal the analysis of each seed's own train() run; ranking; resume after a
kill without retraining; dask.distributed batches; storing the best run; the CLI built from Config."""

import json
from dataclasses import fields, replace

import numpy as np
import pytest
import torch
import xarray as xr

from pipeline import store
from pipeline.orbits import search as search_mod
from pipeline.orbits.config import Config, command_for, recipe_config
from pipeline.orbits.search import SIZES, TOLS, Recipe, analyse, read_table, row_key, search, table_dataset
from pipeline.schema import ORBITS_SEARCH

TINY = Config(n_heads=4, d_model=16, d_head=4, epochs=20, lr=3e-3, ramp_start=5, ramp_end=15, penalty_end=30.0,
              context_batch=2, polish_steps=2, frame_every=10**6)


def _train_row(cfg, seed, name, polished):
    from pipeline.orbits.train import train

    run = train(replace(cfg, seed=seed), progress=False)
    return analyse(run["M"][-1], run["R"][-1], run["final"], seed, cfg, name, polished)


def _same(row, want):
    for k in ("run", "seed", "recipe", "families", "polished"):
        assert row[k] == want[k], k
    # batched and single-seed training agree to float rounding (test_orbits_batch.py), which 20 epochs and polishing
    # carry to relative differences of about 1e-4 in the errors
    for k in ("train_accuracy", "heldout_accuracy", "e3", "matching_error"):
        assert row[k] == pytest.approx(want[k], rel=2e-3, abs=1e-9), k
    np.testing.assert_array_equal(row["orbit_count"], want["orbit_count"])
    np.testing.assert_array_equal(row["family_heads"], want["family_heads"])


@pytest.fixture(scope="module")
def tiny_search(tmp_path_factory):
    """A search of three seeds, made once: its table is only read; store_best adds the ``orbits`` group."""
    torch.set_num_threads(1)
    path = str(tmp_path_factory.mktemp("tiny-search") / "s.zarr")
    rows = search(path, [Recipe("tiny", TINY)], [0, 1, 2], device="cpu", batch_size=2, polish_top=1, progress=False,
                  command="test", log=lambda line: None)
    return path, rows


@pytest.mark.slow
def test_rows_equal_the_analysis_of_each_seeds_train_run(tiny_search):
    path, rows = tiny_search
    table = {r["run"]: r for r in read_table(path)}
    assert sorted(table) == ["tiny-s0", "tiny-s1", "tiny-s2"]
    # batch 1 = seeds 0, 1 (one polished), batch 2 = seed 2 (polished: the best of its batch)
    assert table["tiny-s2"]["polished"] and sum(table[n]["polished"] for n in ("tiny-s0", "tiny-s1")) == 1
    for name, row in table.items():
        seed = int(name.split("-s")[1])
        # a polished row is train() with the recipe's polishing; an unpolished one train() with AdamW alone
        cfg = TINY if row["polished"] else replace(TINY, polish_steps=0)
        want = _train_row(cfg, seed, name, row["polished"])
        want["recipe"] = json.dumps(search_mod.differences(TINY), sort_keys=True)
        _same(row, want)
    ds = store.Store.open(path, mode="r").dataset(ORBITS_SEARCH).load()
    assert ds.orbit_count.dims == ("run", "tol", "size") and list(ds.tol.values) == list(TOLS)
    assert list(ds.size.values) == list(SIZES) and list(ds.k.values) == list(range(13))
    assert sorted(ds["rank"].values.tolist()) == [1, 2, 3] and ds.attrs["command"] == "test"
    assert ds.attrs["commit"] and json.loads(str(ds.recipe.values[0]))["epochs"] == 20
    # the families string and family_heads agree: "r:n/k" for every r with heads
    for fam, heads in zip(ds.families.values, ds.family_heads.values, strict=True):
        parsed = {int(t.split(":")[0]): int(t.split(":")[1].split("/")[0]) for t in str(fam).split()}
        assert parsed == {k: int(n) for k, n in enumerate(heads) if n}


def test_resume_after_a_kill_never_retrains(tmp_path, monkeypatch):
    torch.set_num_threads(1)
    path = str(tmp_path / "s.zarr")
    trained = []
    orig = search_mod.batch_rows

    def counting(cfg, label, seeds, *a, **k):
        trained.append(list(seeds))
        if seeds == [2, 3]:
            raise KeyboardInterrupt  # killed during the second batch
        return orig(cfg, label, seeds, *a, **k)

    monkeypatch.setattr(search_mod, "batch_rows", counting)
    rec = [Recipe("tiny", replace(TINY, epochs=6, polish_steps=0))]
    with pytest.raises(KeyboardInterrupt):
        search(path, rec, range(4), device="cpu", batch_size=2, progress=False, log=lambda line: None)
    assert sorted(r["run"] for r in read_table(path)) == ["tiny-s0", "tiny-s1"]  # the first batch survived
    monkeypatch.setattr(search_mod, "batch_rows", orig)
    trained.clear()
    monkeypatch.setattr(search_mod, "batch_rows", lambda cfg, label, seeds, *a, **k:
                        trained.append(list(seeds)) or orig(cfg, label, seeds, *a, **k))
    rows = search(path, rec, range(4), device="cpu", batch_size=2, progress=False, log=lambda line: None)
    assert trained == [[2, 3]] and len(rows) == 4
    trained.clear()
    search(path, rec, range(4), device="cpu", batch_size=2, progress=False, log=lambda line: None)
    assert trained == []


def _row(name, counts2, err, failed=False):
    oc = np.zeros((len(TOLS), len(SIZES)), dtype=np.int64)
    for size, n in counts2.items():
        oc[0, SIZES.index(size)] = n
    return {"run": name, "seed": 0, "recipe": "{}", "train_accuracy": 1.0, "heldout_accuracy": 1.0, "e3": 1e-4,
            "matching_error": err, "orbit_count": oc, "family_heads": np.zeros(13, dtype=np.int64),
            "families": "failed at epoch 3" if failed else "", "polished": False, "failed": failed}


def test_ranking_12_plus_4_first_then_heads_in_orbits_then_matching_error():
    rows = [_row("a", {4: 1, 3: 1}, 0.02), _row("b", {12: 1, 4: 1}, 0.5), _row("c", {6: 1, 3: 1, 2: 1}, 0.3),
            _row("d", {4: 1, 3: 1}, 0.01), _row("e", {}, float("nan")), _row("f", {12: 2}, 0.0, failed=True)]
    ds = table_dataset(rows, {})
    assert dict(zip(ds.run.values, ds["rank"].values.tolist(), strict=True)) == {
        "b": 1, "c": 2, "d": 3, "a": 4, "e": 5, "f": 6}
    # the stored run's key from its attributes: long-s9-p650's 4 + 3 at matching error 0.018
    stored = search_mod.stored_key({"orbit_sizes": [4, 3], "median_matching_error": 0.018})
    assert row_key(rows[3]) < stored < row_key(rows[0]) and row_key(rows[1]) < stored


@pytest.mark.slow
def test_dask_batches_give_the_same_rows(tmp_path):
    distributed = pytest.importorskip("distributed", reason="dask.distributed is an optional extra")
    torch.set_num_threads(1)
    rec = [Recipe("tiny", replace(TINY, epochs=6, polish_steps=0))]
    inline = search(str(tmp_path / "a.zarr"), rec, range(3), device="cpu", batch_size=2, progress=False,
                    log=lambda line: None)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as c:
        spread = search(str(tmp_path / "b.zarr"), rec, range(3), device="cpu", batch_size=2, progress=False,
                        scheduler=c.scheduler_address, log=lambda line: None)
    a, b = ({r["run"]: r for r in rows} for rows in (inline, spread))
    assert sorted(a) == sorted(b) == ["tiny-s0", "tiny-s1", "tiny-s2"]
    for name in a:
        _same(b[name], a[name])


@pytest.mark.slow
def test_store_best_replaces_the_orbits_group_only_for_a_better_run(tiny_search):
    path, rows = tiny_search
    verdict = search_mod.store_best(path, rows, log=lambda line: None)
    best = min(rows, key=row_key)
    assert verdict.startswith(f"stored {best['run']}")
    ds = store.Store.open(path, mode="r").dataset("orbits")
    assert ds.attrs["seed"] == best["seed"] and json.loads(ds.attrs["recipe"]) == json.loads(best["recipe"])
    assert ds.attrs["commit"] and ds.attrs["command"].startswith("python -m pipeline orbits --seed")
    verdict = search_mod.store_best(path, rows, log=lambda line: None)
    assert verdict.startswith("kept the stored run")


def test_the_cli_is_built_from_config_and_explains_bad_input(capsys, tmp_path, monkeypatch):
    from pipeline.__main__ import build_parser, main
    from pipeline.orbits import search

    monkeypatch.setattr(search, "SCHEDULER_TIMEOUT", "0.5s")  # the unreachable scheduler below: no 5 s wait

    parser = build_parser()
    helptext = parser._subparsers._group_actions[0].choices["orbits"].format_help()
    for f in fields(Config):
        if f.name != "extra":
            assert "--" + f.name.replace("_", "-") in helptext, f.name
    assert "/work" not in helptext and "/tmp" not in helptext
    # the documented command of the stored run parses back to the long recipe on seed 9
    cmd = command_for(recipe_config("long", seed=9))
    assert cmd == "python -m pipeline orbits --recipe long --seed 9"
    from pipeline.orbits.cli import config_from_args

    args = parser.parse_args(cmd.split()[3:])
    assert config_from_args(args) == recipe_config("long", seed=9)
    assert recipe_config("long").epochs == 4500 and recipe_config("long").polish_steps == 650
    args = parser.parse_args(["orbits", "--recipe", "long", "--seed", "2", "--context-lengths", "4", "8",
                              "--no-learn-embed", "--weight-decay-qk", "0"])
    cfg = config_from_args(args)
    assert cfg == replace(recipe_config("long", seed=2), context_lengths=(4, 8), learn_embed=False,
                          weight_decay_qk=0.0)
    assert config_from_args(parser.parse_args(command_for(cfg).split()[3:])) == cfg
    # the search's recorded command parses back to the same options (its Config flags written as command_for's)
    from pipeline.orbits.cli import search_command

    argv = ["orbits", "search", "--seeds", "0-3", "--recipe", "long", "--penalty-end", "3000", "--no-qk-bias",
            "--penalty-scales", "0.5", "2", "--grid", "init_scale=1,0.5", "--time-budget", "1.5"]
    args = parser.parse_args(argv)
    cmd = search_command(args)
    assert "--no-qk-bias --penalty-end 3000 --penalty-scales 0.5 2 --grid init_scale=1,0.5" in cmd
    again = parser.parse_args(cmd.split()[3:])
    for k in ("seeds", "recipe", "penalty_end", "qk_bias", "penalty_scales", "grid", "time_budget", "device"):
        assert getattr(again, k) == getattr(args, k), k
    assert config_from_args(again) == config_from_args(args)
    st = str(tmp_path / "x.zarr")
    for argv, message in ((["--seeds", "5-3"], "is empty"), (["--seeds", "a"], "range such as"),
                          (["--seeds", "0", "--grid", "lr=1"], "FIELD=V1,V2"),
                          (["--seeds", "0", "--grid", "init_scale=x"], "do not parse"),
                          (["--seeds", "0", "--train-fraction", "0"], "strictly between"),
                          (["--seeds", "0", "--batch-size", "0"], "--batch-size"),
                          (["--seeds", "0", "--scheduler", "tcp://127.0.0.1:9"], "no dask scheduler answers")):
        with pytest.raises(SystemExit) as exc:
            main(["orbits", "search", "--store", st, *argv])
        assert exc.value.code == 2 and message in capsys.readouterr().err, argv


def test_search_cli_writes_the_table(tmp_path, capsys):
    from pipeline.__main__ import main

    torch.set_num_threads(1)
    st = str(tmp_path / "c.zarr")
    assert main(["orbits", "search", "--store", st, "--seeds", "0-1", "--recipe", "base", "--n-heads", "4",
                 "--d-model", "16", "--d-head", "4", "--epochs", "4", "--grid", "init_scale=1,0.5",
                 "--device", "cpu", "--polish-top", "0", "--no-store-best"]) == 0
    out = capsys.readouterr().out
    assert "4 runs (0 failed)" in out and "runs with 12 or more heads at k = 2 or 10: 0 of 4" in out
    ds = xr.open_zarr(st, group=ORBITS_SEARCH)
    assert sorted(ds.run.values.tolist()) == ["base+init_scale=0.5-s0", "base+init_scale=0.5-s1",
                                              "base+init_scale=1-s0", "base+init_scale=1-s1"]
    assert ds.attrs["command"].startswith("python -m pipeline orbits search --seeds 0-1 --recipe base --n-heads 4")
    assert "--grid init_scale=1,0.5" in ds.attrs["command"]


def test_a_table_off_the_schema_is_refused(tmp_path):
    from pipeline.schema import orbits_search_problems
    from pipeline.store import Store, StoreError

    ds = table_dataset([_row("a", {4: 1}, 0.1), _row("b", {}, 0.2)], {})
    assert orbits_search_problems(ds, check_version=False) == []
    bad = ds.assign_coords(size=list(range(8)))
    assert any("coordinate size" in p for p in orbits_search_problems(bad, check_version=False))
    with pytest.raises(StoreError, match="coordinate size"):
        Store.open(str(tmp_path / "v.zarr")).replace_group(ORBITS_SEARCH, bad)
    with pytest.raises(StoreError, match="no 'rank' variable"):
        Store.open(str(tmp_path / "v.zarr")).replace_group(ORBITS_SEARCH, ds.drop_vars("rank"))


def test_merge_adds_another_stores_rows_without_training(tmp_path, monkeypatch, capsys):
    from pipeline.__main__ import main

    a, b = str(tmp_path / "a.zarr"), str(tmp_path / "b.zarr")
    search_mod.write_table(a, [_row("x-s1", {4: 1, 3: 1}, 0.1), _row("x-s2", {}, 0.5)],
                           {"command": f"cmd-a --store {tmp_path}/scratch.zarr --seeds 1-2"})
    search_mod.write_table(b, [_row("x-s2", {2: 1}, 0.2), _row("x-s3", {3: 1}, 0.3)], {"command": "cmd-b"})
    monkeypatch.setattr(search_mod, "batch_rows", lambda *a, **k: pytest.fail("--merge must not train"))
    assert main(["orbits", "search", "--store", b, "--merge", a, "--no-store-best"]) == 0
    ds = store.Store.open(b, mode="r").dataset(ORBITS_SEARCH).load()
    assert sorted(ds.run.values.tolist()) == ["x-s1", "x-s2", "x-s3"]
    assert int(ds.orbit_count.sel(run="x-s2", tol=0.02, size=2)) == 1  # the target's own row kept
    assert dict(zip(ds.run.values, ds["rank"].values.tolist(), strict=True)) == {"x-s1": 1, "x-s2": 3, "x-s3": 2}
    assert ds.attrs["command"].startswith("cmd-b; cmd-a --seeds 1-2") and str(tmp_path) not in ds.attrs["command"]
    assert "3 runs (0 failed)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["orbits", "search", "--store", b, "--merge", str(tmp_path / "nothing")])
    assert exc.value.code == 2


def test_the_committed_table_merges_both_ways_and_is_rewritten_in_its_own_format(tmp_path):
    """The repository's store.zarr holds an orbits_search table the search wrote: --merge
    reads it into a new store with every row unchanged, writes arrays of the same dimensions, data types and fill
    values, and a copy of the committed table takes the merged one back (rows already there win)."""
    import pathlib
    import shutil

    from pipeline.__main__ import main

    committed = pathlib.Path(__file__).resolve().parents[3] / "store.zarr"
    if not (committed / ORBITS_SEARCH).is_dir():
        pytest.skip("the repository's store.zarr has no orbits_search table")
    want = read_table(str(committed))
    new = str(tmp_path / "new.zarr")
    assert main(["orbits", "search", "--store", new, "--merge", str(committed), "--no-store-best"]) == 0
    got = read_table(new)
    assert [r["run"] for r in got] == [r["run"] for r in want] and len(got) > 0
    for a, b in zip(got, want, strict=True):
        for k, v in b.items():
            if isinstance(v, np.ndarray):
                np.testing.assert_array_equal(a[k], v)
            elif isinstance(v, float) and np.isnan(v):
                assert np.isnan(a[k]), (a["run"], k)
            else:
                assert a[k] == v, (a["run"], k)
    arrays = sorted(p.parent.name for p in (committed / ORBITS_SEARCH).glob("*/zarr.json"))
    assert arrays == sorted(p.parent.name for p in (tmp_path / "new.zarr" / ORBITS_SEARCH).glob("*/zarr.json"))
    for name in arrays:
        old_meta = json.loads((committed / ORBITS_SEARCH / name / "zarr.json").read_text())
        new_meta = json.loads((tmp_path / "new.zarr" / ORBITS_SEARCH / name / "zarr.json").read_text())
        for key in ("data_type", "dimension_names", "fill_value", "shape"):
            assert new_meta[key] == old_meta[key], (name, key)

    copy = tmp_path / "copy.zarr"  # the committed table alone, in a store of its own
    shutil.copytree(committed / ORBITS_SEARCH, copy / ORBITS_SEARCH)
    (copy / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {}}))
    search_mod.write_table(new, got + [_row("extra-s0", {4: 1}, 0.1)], {"command": "extra"})
    assert main(["orbits", "search", "--store", str(copy), "--merge", new, "--no-store-best"]) == 0
    assert sorted(r["run"] for r in read_table(str(copy))) == sorted([r["run"] for r in want] + ["extra-s0"])


def test_the_train_cli_saves_the_run_that_train_gives(tmp_path, capsys):
    """``python -m pipeline orbits`` without --from-run: the saved run is train()'s on the flags' Config."""
    from pipeline.__main__ import main
    from pipeline.orbits.store_io import load_run
    from pipeline.orbits.train import train

    path = str(tmp_path / "r.npz")
    assert main(["orbits", "--n-heads", "4", "--d-model", "16", "--d-head", "4", "--epochs", "6", "--seed", "3",
                 "--polish-steps", "1", "--frame-every", "2", "--save-run", path, "--no-store"]) == 0
    assert f"saved the run to {path}" in capsys.readouterr().out
    saved = load_run(path)
    cfg = Config(n_heads=4, d_model=16, d_head=4, epochs=6, seed=3, polish_steps=1, frame_every=2)
    want = train(cfg, progress=False)
    assert saved["name"] == "base-s3-custom" and saved["config"] == want["config"]
    np.testing.assert_array_equal(saved["epoch"], want["epoch"])
    np.testing.assert_allclose(saved["M"], want["M"], rtol=1e-5, atol=1e-7)
