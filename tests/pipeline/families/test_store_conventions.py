"""Each model's conventions in a store written before they were recorded: the store opens and reads them as not
recorded (every layer of the model's positional kind), ``verify --upgrade`` or a registration adds the variables,
and the model's own command records them without recomputing a layer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from pipeline.__main__ import main
from pipeline.run import executors as run_executors
from pipeline.schema import CONVENTIONS_DATA
from pipeline.store import Store
from pipeline.store.profile_arrays import row_dict, row_of
from tests.pipeline.test_cli_profiles import cli, open_store


def drop_conventions(path: Path) -> None:
    """Make ``path`` a store as written before the conventions were recorded: none of their variables."""
    for name in CONVENTIONS_DATA:
        shutil.rmtree(path / "profiles" / name)
    Store(str(path), "a").journal.consolidate()


def test_an_older_store_is_upgraded_and_its_models_record_their_conventions_without_recomputing(
        family_model, tmp_path, monkeypatch, capsys):
    _, folder, _ = family_model("smollm3")  # layer 3 has no rotary
    store = tmp_path / "s.zarr"
    assert cli("profiles", folder, "--store", store, "--quiet") == 0
    drop_conventions(store)
    before = open_store(store).profile.values.copy()
    old = Store.open(str(store), "r").row("tiny-smollm3")
    assert not old.conventions_recorded and old.layer_kinds == ("rope",) * 4 and old.static_layers == ()
    assert not any(name in open_store(store) for name in CONVENTIONS_DATA)

    capsys.readouterr()
    assert main(["verify", "--upgrade", "--store", str(store)]) == 0
    assert f"added {', '.join(CONVENTIONS_DATA)} (empty" in capsys.readouterr().out
    ds = open_store(store)
    assert [str(k) for k in ds.layer_positional.sel(model="tiny-smollm3").values[:4]] == [""] * 4
    assert np.isnan(float(ds.scale.sel(model="tiny-smollm3")))
    assert not Store.open(str(store), "r").row("tiny-smollm3").conventions_recorded
    assert main(["verify", "--upgrade", "--store", str(store)]) == 0
    assert "already at the current schema version" in capsys.readouterr().out  # nothing left to add

    def no_layer(*args, **kwargs):
        raise AssertionError("a layer was recomputed")

    monkeypatch.setattr(run_executors, "compute_layer", no_layer)
    assert cli("profiles", folder, "--store", store, "--quiet") == 0  # registered again, no layer computed
    row = Store.open(str(store), "r").row("tiny-smollm3")
    assert row.complete and row.conventions_recorded and row.static_layers == (3,)
    assert row.layer_kinds == ("rope", "rope", "rope", "none") and row.layer_rope_theta[3] == 0.0
    np.testing.assert_array_equal(open_store(store).profile.values, before)
    capsys.readouterr()
    assert cli("profiles", folder, "--store", store, "--quiet") == 0
    assert "already complete" in capsys.readouterr().out


def test_a_registration_in_an_older_store_adds_the_variables(family_model, tmp_path):
    """The models already there read as not recorded; the new one has its conventions."""
    store = tmp_path / "s.zarr"
    _, first, _ = family_model("olmo2")
    assert cli("profiles", first, "--store", store, "--quiet") == 0
    drop_conventions(store)
    _, second, _ = family_model("gemma2")
    assert cli("profiles", second, "--store", store, "--quiet") == 0
    rows = {r.name: r for r in Store.open(str(store), "r").checked_models()}
    assert not rows["tiny-olmo2"].conventions_recorded and rows["tiny-olmo2"].layer_kinds == ("rope", "rope")
    gemma2 = rows["tiny-gemma2"]
    assert gemma2.conventions_recorded and gemma2.scale_rule == "1/sqrt(query_pre_attn_scalar)"
    assert gemma2.scale == 16 ** -0.5 and gemma2.softcap == 50.0  # the case's query_pre_attn_scalar, soft-cap
    assert Store.open(str(store)).verify() == []


def test_a_journalled_registration_reads_back_the_same_row(family_model, tmp_path):
    """The journal holds a row as JSON: its per-layer conventions come back as the same tuples."""
    from pipeline import run as run_module

    _, folder, _ = family_model("modernbert")  # global and local layers with their own bases
    ((_name, plan),) = run_module.plan_checkpoint(folder, run_module.open_store(str(tmp_path / "s.zarr")))
    row = plan.row
    assert row.layer_rope_theta == (1000.0, 100.0, 1000.0) and row.layer_positional == ("rope",) * 3
    assert row_of(json.loads(json.dumps(row_dict(row)))) == row
