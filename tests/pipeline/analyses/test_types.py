"""The type rule's home in the pipeline follows its definition (and the dashboard draws that rule), the paper's rule
follows its definition, and the sensitivity table counts what the rules give at each threshold."""

from __future__ import annotations

import numpy as np
import pytest

from dashboard.common import geometry
from pipeline.analyses import types
from tests.pipeline.analyses.conftest import computed_models


def awkward_profiles(rng: np.random.Generator, n: int = 4000) -> np.ndarray:
    """Random profiles with the awkward values mixed in: NaN, zeros, exact ties, the thresholds themselves
    (c + d = 0.01, imbalance = +-0.2), infinities and negative numbers."""
    p = rng.dirichlet(np.ones(4) * 0.3, size=n)
    special = np.array([[np.nan] * 4, [0.0] * 4, [0.5, 0.5, 0.0, 0.0], [0.99, 0.0, 0.005, 0.005],
                        [0.0, 0.0, 0.6, 0.4], [0.0, 0.0, 0.4, 0.6], [0.0, 0.5, 0.25, 0.25], [0.1, 0.1, np.inf, 0.0],
                        [0.0, 0.0, -0.1, 0.3], [0.0, 0.0, np.nan, 0.2], [0.0, 0.0, 0.3, np.nan]])
    idx = rng.integers(0, n, size=len(special) * 20)
    p[idx] = np.repeat(special, 20, axis=0)
    return p


def rule_by_hand(row) -> int:
    """The project's rule for one profile, written out from its definition (module docstring of types)."""
    a, b, c, d = (float(x) for x in row)
    if not all(np.isfinite([a, b, c, d])):
        return types.TYPE_II
    s = c + d
    imbalance = (c - d) / s if s > 0 else 0.0
    if s > types.CD_FLOOR and imbalance > types.IMBALANCE_CUT:
        return types.TYPE_I_PLUS
    if s > types.CD_FLOOR and imbalance < -types.IMBALANCE_CUT:
        return types.TYPE_I_MINUS
    return types.TYPE_II


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_rule_follows_its_definition_on_random_profiles(seed):
    p = awkward_profiles(np.random.default_rng(seed))
    want = np.array([rule_by_hand(row) for row in p])
    np.testing.assert_array_equal(types.spectral_types(p), want)
    grid = p.reshape(40, 100, 4)  # any leading shape
    np.testing.assert_array_equal(types.spectral_types(grid), types.spectral_types(p).reshape(40, 100))


def test_the_dashboard_draws_the_pipelines_rule():
    """One home: the dashboard's geometry takes the rule and its codes from pipeline.analyses.types."""
    assert geometry.spectral_types is types.spectral_types
    assert geometry.TYPE_NAMES is types.TYPE_NAMES
    assert (geometry.TYPE_I_PLUS, geometry.TYPE_II, geometry.TYPE_I_MINUS) == (0, 1, 2)


@pytest.mark.parametrize("name", computed_models())
def test_the_rule_follows_its_definition_on_every_committed_head(committed, name):
    data = committed[name]
    want = np.array([rule_by_hand(row) for row in data.profile.reshape(-1, 4)]).reshape(data.profile.shape[:-1])
    np.testing.assert_array_equal(types.spectral_types(data.profile), want)


def test_thresholds_by_hand():
    p = np.array([[0, 0, 0.6, 0.4], [0, 0, 0.61, 0.39], [0, 0.99, 0.0075, 0.0025], [0, 0.98, 0.015, 0.005]])
    # imbalance 0.2 (to rounding) is not > 0.2; 0.22 is. c + d = 0.01 is not > 0.01; 0.02 is (imbalance 0.5).
    np.testing.assert_array_equal(types.spectral_types(p), [1, 0, 1, 0])
    np.testing.assert_array_equal(types.spectral_types(p, imbalance_cut=0.1), [0, 0, 1, 0])
    np.testing.assert_array_equal(types.spectral_types(p, cd_floor=0.005), [1, 0, 0, 0])


def test_paper_rule_by_its_definition():
    rng = np.random.default_rng(3)
    c, d = rng.uniform(0, 0.03, 500), rng.uniform(0, 0.03, 500)
    c[:5], d[:5] = [0.01, 0.02, np.nan, 0.015, 0.0], [0.01, 0.0, 0.1, 0.005, 0.0]
    got = types.paper_types(c, d, radius=0.02)
    for ci, di, g in zip(c, d, got, strict=True):
        want = 1 if not (np.isfinite(ci) and np.isfinite(di)) or ci + di <= 0.02 else (0 if ci > di else 2)
        assert g == want, (ci, di)


def test_sensitivity_counts_each_threshold():
    rng = np.random.default_rng(4)
    p = rng.dirichlet(np.ones(4) * 0.3, size=300)
    p[0] = np.nan
    rest = 1 - p[:, 0]
    c_sym, d_sym = p[:, 2] / rest, p[:, 3] / rest
    got = types.sensitivity(p, c_sym, d_sym)
    assert got["heads"] == 299
    for i, cut in enumerate(types.IMBALANCE_CUTS):
        for j, floor in enumerate(types.CD_FLOORS):
            c, d = p[1:, 2], p[1:, 3]
            imb = (c - d) / (c + d)
            plus = int(np.sum((c + d > floor) & (imb > cut)))
            minus = int(np.sum((c + d > floor) & (imb < -cut)))
            assert got["counts"][i][j] == [plus, 299 - plus - minus, minus]
    for r, counts in zip(got["radii"], got["paper_counts"], strict=True):
        inside = c_sym[1:] + d_sym[1:] <= r
        assert counts == [int(np.sum(~inside & (c_sym[1:] > d_sym[1:]))), int(inside.sum()),
                          int(np.sum(~inside & (c_sym[1:] <= d_sym[1:])))]
    assert got["default"] == got["counts"][types.IMBALANCE_CUTS.index(0.2)][types.CD_FLOORS.index(0.01)]


def test_the_rules_home_imports_numpy_only():
    """The dashboard takes the rule from here: importing it pulls in neither scipy nor torch."""
    import subprocess
    import sys

    code = ("import sys, pipeline.analyses.types\n"
            "print([m for m in ('scipy', 'torch', 'transformers') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
