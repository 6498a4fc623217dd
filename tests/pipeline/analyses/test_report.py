"""The report gathers each module's numbers for a model (and its baseline), is JSON, says what it lacks, prints
as text; the percentiles against a baseline by hand; ``report`` on the committed store through its command."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pipeline.analyses import clusters, pairing_law, types
from pipeline.analyses.head_data import HeadData
from pipeline.analyses.report import format_text, percentiles, report, to_json
from pipeline.cli.report import register
from pipeline.store import default_store_path
from tests.pipeline.analyses.conftest import computed_models, random_head_data


def test_percentiles_by_hand():
    ref = np.array([1.0, 2.0, 2.0, 3.0, np.nan])
    got = percentiles(np.array([0.5, 1.0, 2.0, 3.5, np.nan]), ref)
    np.testing.assert_allclose(got[:4], [0.0, 12.5, 50.0, 100.0])  # 1.0: none below, one equal -> 0.5 / 4
    assert np.isnan(got[4]) and np.isnan(percentiles(np.array([1.0]), np.array([np.nan]))).all()


def test_report_of_random_heads_with_a_baseline():
    data, _, _ = random_head_data(np.random.default_rng(0), heads=40, n=6, N=30)
    base, _, _ = random_head_data(np.random.default_rng(1), heads=50, n=6, N=30, name="base", skew=False)
    rep = report(data, base)
    assert json.loads(to_json(rep)) == json.loads(json.dumps(rep))  # JSON-able, no NaN
    assert rep["missing"] == [] and rep["heads"] == 40
    s = data.stat
    assert rep["pairing_law"] == pairing_law.pairing_law(s("pairing"), s("rho"), s("n_pos"), s("n_neg"))
    assert rep["types"]["default"] == types.type_counts(types.spectral_types(data.profile)).tolist()
    assert set(rep["goodness_of_fit"]) == {"eig_L", "lambda_plus", "lambda_minus", "sigma_T"}
    assert rep["spectral_geometry"]["heads"] == 40
    found = clusters.clusters(data.spectrum, types.spectral_types(data.profile))
    assert rep["clusters"]["ari"] == found["ari"] and rep["clusters"]["silhouette"] == found["silhouette"]
    b = rep["baseline"]["pairing"]
    assert b["trained_median"] == pytest.approx(np.median(s("pairing")))
    assert b["baseline_median"] == pytest.approx(np.median(base.stat("pairing")))
    p = percentiles(s("pairing"), base.stat("pairing"))
    assert b["percentile"]["q50"] == pytest.approx(np.median(p))
    assert b["below_all"] == pytest.approx(np.mean(s("pairing") < base.stat("pairing").min()))
    text = format_text(rep)
    law = rep["pairing_law"]
    assert f"a = {law['beta']['a']:.2f}, b = {law['beta']['b']:.2f}" in text
    assert f"n_pos = n_neg in {law['balance']['balanced']} of 40 heads" in text
    assert "Trained vs baseline base (50 heads)" in text


def test_what_the_data_lacks_is_said():
    data, _, _ = random_head_data(np.random.default_rng(2), heads=10)
    no_spectra = HeadData("m", 40, 6, data.layer, data.head, data.profile, data.statistics, data.spectrum, {},
                          command="python -m pipeline profiles m")
    rep = report(no_spectra)
    assert rep["spectral_geometry"] is None and set(rep["goodness_of_fit"]) == {"lambda_plus", "lambda_minus"}
    assert "python -m pipeline profiles m" in rep["missing"][0]
    bare = HeadData("m", 40, 6, data.layer, data.head, data.profile, command="python -m pipeline profiles m")
    rep = report(bare)
    assert rep["pairing_law"] is None and rep["missing"] == [
        "head statistics not computed for m: add them with `python -m pipeline profiles m`"]
    assert "Missing: head statistics not computed" in format_text(rep)


@pytest.mark.parametrize("name", computed_models())
def test_report_command_on_the_committed_store(capsys, committed, name):
    import argparse

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["report", name, "--json", "--store", str(default_store_path())])
    assert args.func(args) == 0
    rep = json.loads(capsys.readouterr().out)
    data = committed[name]
    assert rep["heads"] == data.heads
    assert rep["pairing_law"]["balance"]["balanced"] == int(np.sum(data.stat("n_pos") == data.stat("n_neg")))
    assert rep["pairing_law"]["beta"]["heads"] + rep["pairing_law"]["beta"]["left_out"] == data.heads


def test_report_command_errors(capsys):
    import argparse

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["report", "no-such-model", "--store", str(default_store_path())])
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: model 'no-such-model' is not in the store") and err.count("\n") == 1


def test_report_says_which_models_have_a_baseline_to_make(capsys):
    """A model of a transformers family is told the command that makes its baseline; the orbit experiment's layer
    (no transformers config) is told that it has none, never a command that would fail."""
    import argparse

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    for name, said in (("orbits-c24", "its family 'orbits' has no transformers config"),
                       ("paraphrase-MiniLM-L3-v2", None)):
        args = parser.parse_args(["report", name, "--json", "--store", str(default_store_path())])
        assert args.func(args) == 0
        missing = json.loads(capsys.readouterr().out)["missing"]
        if said is None:
            assert not any("baseline" in m for m in missing)  # the committed store holds its init baseline
        else:
            assert any(said in m for m in missing), missing
