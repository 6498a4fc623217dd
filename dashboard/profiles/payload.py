"""The two large arrays a profiles page ships to its browser code, packed to compress well.

An exported page carries its arrays gzip-compressed and base64-encoded (Bokeh's inline arrays), and two of
them make most of a large model's page: every head's quantised profile at every offset d (``profile_cube``)
and every head's S spectrum at d = 0 (``inspector_spectra``). Packed as here, gzip shrinks them two to
three times more; the browser decodes them (``js/payload_decode.js``) to the values it used before:

Profiles: the uint16 codes of ``geometry.quantise``, (heads, D, 4), restored exactly.

- The fourth code is replaced by the sum of the four less 65534, modulo 2^16: a + b + c + d = 1, so that
  sum is a rounding of one quantum (-1, 0 or 1) and d's code comes back as (r + 65534 - a - b - c) mod 2^16.
- Coordinate-major, then head, then offset, each value as its difference from the same head's value at the
  offset before (the first as it is), modulo 2^16: a profile moves little from one d to the next.
- Those uint16 values as bytes: every high byte, then every low byte.

Spectra: (heads, E) eigenvalues (NaN-padded) as int16 codes of each head's largest |λ| (its ``scale``):
round(λ / scale * 32767), decoded as code * scale / 32767, within half a quantum (scale / 65534) of λ; a
nonzero λ under half a quantum keeps its sign as ±1 (the inspector draws λ₊ and λ₋ by sign, so every bar
is still there), NaN as -32768. Each head's codes as differences along E (the spectrum is sorted) and split
into high and low bytes as above; the scales travel as float64.

The inspector draws the bars in 220 px: half a quantum is under 0.004 px.
"""

from __future__ import annotations

import numpy as np

WRAP = 1 << 16
SUM_CODE = 65534  # geometry.SCALE: the codes of a head's four coordinates sum to this, within one
SPECTRUM_CODE = 32767  # the code of a head's largest |λ|
SPECTRUM_NAN = -32768


def _deltas(values: np.ndarray) -> np.ndarray:
    """Each row of ``values`` (int64, last axis) as differences from the value before, modulo 2^16."""
    out = values.copy()
    out[..., 1:] -= values[..., :-1]
    return out % WRAP


def _sums(deltas: np.ndarray) -> np.ndarray:
    return np.cumsum(deltas, axis=-1) % WRAP


def _split(values: np.ndarray) -> np.ndarray:
    """uint16 values (any shape) as flat uint8: every high byte, then every low byte."""
    v = values.reshape(-1).astype(np.int64)
    return np.concatenate([v >> 8, v & 0xFF]).astype(np.uint8)


def _join(packed: np.ndarray) -> np.ndarray:
    p = np.asarray(packed, dtype=np.int64)
    half = p.size // 2
    return (p[:half] << 8) | p[half:]


def pack_profiles(q: np.ndarray) -> np.ndarray:
    """Quantised profiles (heads, D, 4) uint16 -> uint8 of 8 * heads * D (the module's docstring)."""
    q = np.asarray(q, dtype=np.int64)
    r = (q.sum(axis=-1) - SUM_CODE) % WRAP
    planes = np.moveaxis(np.concatenate([q[..., :3], r[..., None]], axis=-1), -1, 0)  # (4, heads, D)
    return _split(_deltas(planes))


def unpack_profiles(packed: np.ndarray, heads: int) -> np.ndarray:
    """The inverse of ``pack_profiles``: (heads, D, 4) uint16."""
    values = _join(packed)
    D = values.size // (4 * heads) if heads else 1
    planes = _sums(values.reshape(4, heads, D))
    planes[3] = (planes[3] + SUM_CODE - planes[0] - planes[1] - planes[2]) % WRAP
    return np.moveaxis(planes, 0, -1).astype(np.uint16)


def spectrum_codes(spectra: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(heads, E) eigenvalues -> their int16 codes (heads, E) as int64 and each head's scale (heads,)."""
    s = np.asarray(spectra, dtype=np.float64)
    finite = np.isfinite(s)
    scale = np.max(np.abs(np.where(finite, s, 0.0)), axis=-1, initial=0.0)
    safe = np.where(scale > 0, scale, 1.0)[:, None]
    codes = np.rint(np.where(finite, s, 0.0) / safe * SPECTRUM_CODE)
    codes = np.where((codes == 0) & finite & (s != 0), np.sign(s), codes)
    return np.where(finite, codes, SPECTRUM_NAN).astype(np.int64), scale


def pack_spectra(spectra: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(heads, E) eigenvalues -> (uint8 of 2 * heads * E, float64 scales of the heads)."""
    codes, scale = spectrum_codes(spectra)
    return _split(_deltas(codes % WRAP)), scale


def unpack_spectra(packed: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The inverse of ``pack_spectra`` up to half a quantum: (heads, E) float64, as the browser computes it."""
    scale = np.asarray(scale, dtype=np.float64)
    heads = scale.size
    values = _join(packed)
    codes = _sums(values.reshape(heads, values.size // heads if heads else 0))
    codes = np.where(codes >= WRAP // 2, codes - WRAP, codes)
    out = codes * scale[:, None] / SPECTRUM_CODE
    return np.where(codes == SPECTRUM_NAN, np.nan, out)
