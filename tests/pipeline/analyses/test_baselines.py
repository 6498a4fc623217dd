"""The i.i.d. baseline (reproducible by seed, layer by layer, grouped like the model, with the closed-form mean of
symmetric_energy), the configs written from registered shapes, and a baseline's values at d = 0 through the
profile route."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.analyses import baselines
from pipeline.analyses.spectra import head_spectra
from pipeline.families import FAMILIES, layout_from_config
from pipeline.profile import head_profiles
from pipeline.registry.models import MODELS
from pipeline.schema import STATISTICS, ModelShape
from pipeline.sources.baseline import KINDS, baseline_heads
from pipeline.sources.iid_heads import IidHeads, check_seed

SHAPE = ModelShape(family="mistral", n_layers=4, n_heads=8, n_kv_heads=2, d_model=64, d_head=8, positional="rope",
                   rotary_dim=8)


def test_iid_reproducible_layer_by_layer_and_grouped():
    a, b = IidHeads(SHAPE, 5), IidHeads(SHAPE, 5)
    later = b.layer(3)
    first = a.layer(0)
    np.testing.assert_array_equal(a.layer(3).W_Q, later.W_Q)
    np.testing.assert_array_equal(a.layer(3).W_K, later.W_K)
    assert first.W_Q.shape == (8, 8, 64) and first.W_K.shape == (2, 8, 64) and first.W_Q.dtype == np.float32
    np.testing.assert_array_equal(first.kv_of_head, [0, 0, 0, 0, 1, 1, 1, 1])
    rng = np.random.default_rng([5, 0])  # the documented stream: W_Q, then W_K
    np.testing.assert_array_equal(first.W_Q, rng.standard_normal((8, 8, 64), dtype=np.float32))
    np.testing.assert_array_equal(first.W_K, rng.standard_normal((2, 8, 64), dtype=np.float32))
    assert not np.array_equal(IidHeads(SHAPE, 6).layer(0).W_Q, first.W_Q)
    with pytest.raises(ValueError, match="out of range"):
        a.layer(4)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="non-negative"):
            check_seed(bad)


def test_iid_symmetric_energy_has_the_closed_form_mean():
    """E||S||^2 / E||L||^2 = (N + 1) / (2N) for i.i.d. Gaussian heads (dashboard/baselines.py)."""
    shape = ModelShape(family="gpt2", n_layers=8, n_heads=32, n_kv_heads=32, d_model=64, d_head=8,
                       positional="learned absolute")
    heads = IidHeads(shape, 0)
    energy = np.concatenate([
        head_profiles(qk.W_Q, qk.W_K, eigvalsh="numpy", at_zero=True).layer_values()[2][
            :, STATISTICS.index("symmetric_energy")]
        for qk in map(heads.layer, range(8))])
    assert np.mean(energy) == pytest.approx(65 / 128, abs=4 * np.std(energy) / np.sqrt(len(energy)))


@pytest.mark.parametrize("name", [n for n, s in MODELS.items() if not FAMILIES[s.family].towers])
def test_configs_of_registered_shapes(name):
    spec = MODELS[name]
    config = baselines.config_for_shape(spec, spec.rope_theta)
    assert spec.mismatches(layout_from_config(config)) == {}


@pytest.mark.parametrize("name", [n for n, s in MODELS.items() if FAMILIES[s.family].towers])
def test_a_registered_model_of_several_towers_needs_its_config(name):
    """A shape does not say how a multi-tower config nests its towers (SigLIP's text_config and vision_config)."""
    with pytest.raises(ValueError, match="can be written from a shape; give the model's config.json"):
        baselines.config_for_shape(MODELS[name], MODELS[name].rope_theta)


def test_config_of_an_unknown_family_and_an_unknown_kind():
    with pytest.raises(ValueError, match="no config of family"):
        baselines.config_for_shape(ModelShape(family="orbits", n_layers=1, n_heads=2, n_kv_heads=2, d_model=8,
                                              d_head=4, positional="none"))
    with pytest.raises(ValueError, match="one of iid, init"):
        baseline_heads({"model_type": "gpt2"}, "gaussian", 0)


@pytest.mark.parametrize("kind", KINDS)
def test_head_data_at_d0_is_the_profile_routes(kind):
    config = baselines.config_for_shape(SHAPE, 1000.0)
    heads = baseline_heads(config, kind, 2)
    assert heads.layout.positional == "rope"  # the model's layout, its R(d) included
    done = []
    data = baselines.head_data(heads, "base", progress=done.append)
    assert done == [0, 1, 2, 3] and data.heads == 32
    qk = heads.layer(2)
    profile, _, statistics, spectrum, three = head_profiles(qk.W_Q, qk.W_K, kv_of_head=qk.kv_of_head,
                                                            eigvalsh="numpy", at_zero=True).layer_values()
    rows = data.layer == 2
    np.testing.assert_array_equal(data.head[rows], np.arange(8))
    np.testing.assert_array_equal(data.profile[rows], profile)
    np.testing.assert_array_equal(data.statistics[rows], statistics)
    np.testing.assert_array_equal(data.spectrum[rows], spectrum)
    spectra = head_spectra(qk.W_Q, qk.W_K, kv_of_head=qk.kv_of_head)
    np.testing.assert_array_equal(data.spectrum_of("eig_abs")[rows], three[1])
    np.testing.assert_allclose(data.spectrum_of("eig_abs")[rows], spectra.eig_abs, atol=1e-12)  # from the weights
