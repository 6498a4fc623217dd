"""The committed store agrees with itself through independent definitions: every computed model's stored
spectrum of S gives its stored profile at d = 0 by the profile's definition, and the orbit run's last frame
holds the profiles of the layer stored as ``orbits-c24``."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.orbits.runs import MODEL_NAME
from pipeline.store import Store, default_store_path
from tests.pipeline.analyses.conftest import computed_models


def profile_from_spectrum(lam: np.ndarray) -> np.ndarray:
    """(a, b, c, d) of a form with ||L||_F = 1 from the eigenvalues of its symmetric part (NaN-padded):
    a = 1 - ||S||^2; lambda_+ and lambda_- decreasing and zero-padded; b = 2 <lambda_+, lambda_->,
    c = ||(lambda_+ - lambda_-)_+||^2, d = ||(lambda_+ - lambda_-)_-||^2."""
    lam = lam[~np.isnan(lam)]
    pos = np.sort(lam[lam > 0])[::-1]
    neg = np.sort(-lam[lam < 0])[::-1]
    m = max(len(pos), len(neg))
    pos, neg = np.pad(pos, (0, m - len(pos))), np.pad(neg, (0, m - len(neg)))
    diff = pos - neg
    return np.array([1.0 - lam @ lam, 2.0 * pos @ neg, np.sum(np.clip(diff, 0, None) ** 2),
                     np.sum(np.clip(-diff, 0, None) ** 2)])


def test_every_computed_model_has_statistics():
    store = Store.open(default_store_path(), "r")
    missing = [r.name for r in store.models() if r.complete and not r.statistics_computed]
    assert not missing, f"computed models without head statistics in the committed store: {missing}"


@pytest.mark.parametrize("name", computed_models())
def test_stored_spectra_give_the_stored_profiles(name):
    store = Store.open(default_store_path(), "r")
    ds = store.dataset("profiles").sel(model=name)
    row = store.row(name)
    spectrum = ds.spectrum.values[:row.n_layers, :row.n_heads]
    profile = ds.profile.isel(d=0).values[:row.n_layers, :row.n_heads]
    stats = ds.head_statistics.sel(statistic="symmetric_energy").values[:row.n_layers, :row.n_heads]
    want = np.array([[profile_from_spectrum(s) for s in layer] for layer in spectrum])
    np.testing.assert_allclose(profile, want, atol=1e-9)
    np.testing.assert_allclose(stats, 1.0 - profile[..., 0], atol=1e-9)


def test_the_orbit_runs_last_frame_is_the_stored_layer():
    store = Store.open(default_store_path(), "r")
    orbits = store.dataset("orbits")
    assert "head_profile" in orbits, "the committed orbits run has no frame profiles: regenerate it with " \
        + orbits.attrs.get("command", "python -m pipeline orbits")
    stored = store.dataset("profiles").profile.sel(model=MODEL_NAME).isel(layer=0, d=0).values
    last = orbits.head_profile.isel(frame=-1).values
    np.testing.assert_allclose(last, stored[:last.shape[0]], atol=1e-12)
    assert float(np.abs(orbits.head_profile.isel(frame=0).values - last).max()) > 1e-2  # the heads moved
