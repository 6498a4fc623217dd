"""The profiles page's packed arrays (``dashboard/profiles/payload.py``) decode to what they pack: the profiles'
uint16 codes exactly (the fourth restored from the other three and the stored rounding), the spectra within
half a quantum of each head's scale, every sign, zero and NaN kept. The browser's decoder (``js/payload_decode.js``)
is run by node and checked against the codes and eigenvalues themselves, not against the Python inverse only."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from dashboard.common import jscode
from dashboard.common.geometry import dequantise, quantise
from dashboard.profiles.payload import pack_profiles, pack_spectra, unpack_profiles, unpack_spectra
from tests.dashboard.test_dashboard_js import run_node

NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed: the decoder still runs in the "
                                                     "browser tests (tests/browser/test_profiles_page.py)")


def _profiles(heads: int, D: int, seed: int = 0) -> np.ndarray:
    """Points of the simplex moving with d, one head missing (NaN) and one on a vertex (codes 0 and 65534)."""
    rng = np.random.default_rng(seed)
    p0, p1 = rng.dirichlet(np.ones(4), size=(2, heads))
    w = np.linspace(0, 1, D)[None, :, None]
    profile = (1 - w) * p0[:, None] + w * p1[:, None] + 0.02 * rng.dirichlet(np.ones(4), (heads, D)) - 0.005
    profile = np.clip(profile, 0, None)
    profile /= profile.sum(axis=-1, keepdims=True)
    profile[1] = np.nan
    profile[2] = [0.0, 0.0, 1.0, 0.0]
    return profile


def _spectra(heads: int, E: int, seed: int = 1) -> np.ndarray:
    """Decreasing eigenvalues of both signs, with exact zeros, values under half a quantum and NaN padding."""
    rng = np.random.default_rng(seed)
    s = rng.standard_normal((heads, E)) * rng.uniform(0.01, 3.0, (heads, 1))
    s[0, :4] = [2.0, 1e-9, 0.0, -1e-9]  # tiny values keep their sign
    s[1, E // 2:] = np.nan  # NaN-padded past min(N, 2n)
    s[2] = 0.0  # a head without a spectrum to speak of
    s[3, 5] = -3 * np.abs(s[3]).max()  # a head whose largest |λ| is negative
    return -np.sort(-s, axis=-1)


@pytest.mark.parametrize("heads, D", [(7, 129), (5, 1), (0, 1)])
def test_profiles_unpack_to_the_quantised_codes(heads, D):
    q = quantise(_profiles(heads, D)) if heads else np.zeros((0, D, 4), np.uint16)
    packed = pack_profiles(q)
    assert packed.dtype == np.uint8 and packed.size == q.size * 2
    np.testing.assert_array_equal(unpack_profiles(packed, heads), q)


def test_the_fourth_code_is_a_rounding_from_the_other_three():
    """The stored fourth plane is the four codes' sum less 65534: -1, 0 or 1 (mod 2^16) for a point of the
    simplex (four roundings of at most half a quantum each); NaN heads come back as 65535 in every place."""
    heads, D = 9, 129
    profile = _profiles(heads, D)
    q = quantise(profile)
    values = packed_values(pack_profiles(q)).reshape(4, heads, D)
    fourth = np.cumsum(values[3], axis=-1) % 65536
    finite = np.isfinite(profile).all(axis=-1)
    assert set(np.unique(fourth[finite])) <= {65535, 0, 1}
    d = (fourth + 65534 - q[..., :3].astype(np.int64).sum(axis=-1)) % 65536
    np.testing.assert_array_equal(d, q[..., 3])
    np.testing.assert_allclose(dequantise(d)[finite], profile[..., 3][finite], atol=0.5 / 65534)
    assert (q[1] == 65535).all()


def packed_values(packed: np.ndarray) -> np.ndarray:
    """The uint16 values of a packed array: the high bytes are its first half, the low bytes its second."""
    p = packed.astype(np.int64)
    return p[:p.size // 2] * 256 + p[p.size // 2:]


def test_spectra_unpack_within_half_a_quantum_with_every_sign():
    heads, E = 6, 40
    s = _spectra(heads, E)
    packed, scale = pack_spectra(s)
    assert packed.dtype == np.uint8 and packed.size == 2 * heads * E
    np.testing.assert_array_equal(scale, np.nanmax(np.abs(s), axis=-1))
    got = unpack_spectra(packed, scale)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(s))
    np.testing.assert_array_equal(np.sign(got[~np.isnan(s)]), np.sign(s[~np.isnan(s)]))  # λ₊, λ₋ and zeros kept
    half = scale[:, None] / 65534
    big = np.abs(np.nan_to_num(s)) >= half
    err = np.abs(np.nan_to_num(got - s))
    assert (err[big] <= half.repeat(E, 1)[big] * (1 + 1e-12)).all()
    tiny = ~big & (np.nan_to_num(s) != 0)  # under half a quantum: one quantum of its sign
    assert tiny.sum() == 2
    np.testing.assert_array_equal(got[tiny], np.sign(s[tiny]) * scale.repeat(E)[tiny.ravel()] / 32767)


@needs_node
def test_the_browser_decodes_the_codes_and_the_spectra():
    heads, D, E = 5, 129, 24
    q = quantise(_profiles(heads, D))
    s = _spectra(heads, E)
    packed, scale = pack_spectra(s)
    script = jscode.code("payload_decode") + f"""
const q = Uint8Array.from({pack_profiles(q).tolist()}), s = Uint8Array.from({packed.tolist()});
const scale = {json.dumps(scale.tolist())}, out = [];
for (let i = 0; i < {heads}; i++) {{
  out.push([Array.from(head_codes(q, {heads}, i)), Array.from(head_spectrum(s, scale, {heads}, i), String)]);
}}
console.log(JSON.stringify(out));"""
    for i, (codes, values) in enumerate(run_node(script)):
        np.testing.assert_array_equal(np.reshape(codes, (D, 4)), q[i])  # exactly the quantised codes
        got = np.array(values, dtype=float)  # "NaN" as text: JSON has no NaN
        np.testing.assert_array_equal(got, unpack_spectra(packed, scale)[i])  # the same float64 operations
        finite = np.isfinite(s[i])
        np.testing.assert_array_equal(np.isnan(got), ~finite)
        np.testing.assert_allclose(got[finite], s[i][finite], rtol=0, atol=scale[i] / 32767)
