"""benchmarks/chunked_route.py, the comparison the pipeline's numpy route is measured against: the two routes give
the same profiles, norms, statistics and spectra within 1e-12 (with and without scipy), both match the naive N x N
oracle, and the chunked route names a head with NaN or Inf weights as the pipeline does."""

import sys
from pathlib import Path

import numpy as np
import pytest

from pipeline.families.rotary import rotation_matrices
from pipeline.profile import head_profiles
from tests.pipeline.test_profile import dense_L, gqa_heads, naive_oracle

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from chunked_route import chunked_profiles  # noqa: E402


@pytest.mark.parametrize("no_scipy", [False, True])
@pytest.mark.parametrize(
    "H, kv, n, N, rot, style",
    [(4, 2, 16, 96, 16, "half"),  # grouped-query, k = 2n: the triangular product
     (3, 3, 8, 40, 4, "interleaved"),  # partial rotary
     (2, 1, 12, 18, 12, "half"),  # N < 2n: m = n, k = N
     (2, 2, 12, 8, 12, "half")],  # N < n: m = k = N < n, the dense product
)
def test_the_numpy_route_equals_the_chunked_route(monkeypatch, no_scipy, H, kv, n, N, rot, style):
    """The numpy route's offset-by-offset path (in place LAPACK, triangular products) against the chunked path
    (one eigvalsh call per chunk): profiles, norms, statistics and spectra within 1e-12, with and without scipy."""
    if no_scipy:
        monkeypatch.setitem(sys.modules, "scipy.linalg", None)  # `from scipy.linalg import ...` raises ImportError
    rng = np.random.default_rng(H * 1000 + N)
    W_Q, W_K = rng.normal(size=(H, n, N)) * rng.uniform(0.1, 10), rng.normal(size=(kv, n, N))
    W_Q[0] = 0.0  # L = 0: NaN profile, norm 0
    kv_of_head = np.arange(H) // (H // kv)
    gain = rng.uniform(0.5, 2.0, size=N)
    R = rotation_matrices(n, rot, 500.0, 33, style=style)
    results = {}
    for rotations in (R, None):
        new = head_profiles(W_Q, W_K, rotations, kv_of_head=kv_of_head, gain=gain, at_zero=True).layer_values()
        results[rotations is None] = new
        old = chunked_profiles(W_Q, W_K, rotations, kv_of_head=kv_of_head, gain=gain, at_zero=True).layer_values()
        for got, want in zip(new, old, strict=True):
            assert got.shape == want.shape
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        assert np.isnan(new[0][0]).all() and (new[1][0] == 0).all()
    L = dense_L(W_Q * gain, W_K[kv_of_head] * gain, R)  # and both against the N x N oracle
    for h in range(1, H):
        np.testing.assert_allclose(results[True][0][h], naive_oracle(L[h, 0]), atol=1e-10)  # R(0) = I
        np.testing.assert_allclose(results[False][0][h, 32], naive_oracle(L[h, 32]), atol=1e-10)


@pytest.mark.parametrize("no_scipy", [False, True])
def test_the_per_offset_route_matches_the_oracle_and_the_chunked_route(monkeypatch, no_scipy):
    """k = 2n = 144: the per-offset route's own LAPACK settings (the span through its Gram matrix, dsytrd in blocks of
    SYTRD_BLOCK) against the N x N oracle at every offset and against the chunked route (numpy's eigvalsh and qr),
    and the same sizes without scipy (numpy's eigvalsh and qr on the per-offset route)."""
    if no_scipy:
        monkeypatch.setitem(sys.modules, "scipy.linalg", None)
    n, N = 72, 160
    rng = np.random.default_rng(144)
    W_Q, W_K = rng.normal(size=(1, n, N)) * 3.0, rng.normal(size=(1, n, N))
    gain = rng.uniform(0.5, 2.0, size=N)
    R = rotation_matrices(n, n, 1e4, 5)
    got = head_profiles(W_Q, W_K, R, gain=gain, at_zero=True).layer_values()
    want = chunked_profiles(W_Q, W_K, R, gain=gain, at_zero=True).layer_values()
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    L = dense_L(W_Q * gain, W_K * gain, R)
    for d in range(len(R)):
        np.testing.assert_allclose(got[0][0, d], naive_oracle(L[0, d]), atol=1e-10)
        np.testing.assert_allclose(got[1][0, d], np.linalg.norm(L[0, d]), rtol=1e-12)


def test_chunks_of_one_offset_give_the_values_of_the_default_route():
    rng = np.random.default_rng(8)
    W_Q, W_K = rng.normal(size=(2, 6, 25)), rng.normal(size=(2, 6, 25))
    R = rotation_matrices(6, 6, 100.0, 11)
    ref = head_profiles(W_Q, W_K, R)
    small = chunked_profiles(W_Q, W_K, R, chunk_bytes=1)  # chunks of one offset
    np.testing.assert_allclose(small.profile, ref.profile, atol=1e-14)
    np.testing.assert_allclose(small.norm, ref.norm, rtol=1e-14)


@pytest.mark.parametrize("rotary", [False, True])
@pytest.mark.parametrize("where", ["query", "key", "gain"])
def test_a_nonfinite_weight_names_its_head_on_the_chunked_route(rotary, where):
    W_Q, W_K, kv_of_head = gqa_heads(2)
    gain = np.ones(W_Q.shape[-1])
    R = rotation_matrices(W_Q.shape[1], W_Q.shape[1], 10000.0, 9) if rotary else None
    first = {"query": 3, "key": int(np.flatnonzero(kv_of_head == 1)[0]), "gain": 0}[where]
    if where == "query":
        W_Q = W_Q.copy()
        W_Q[3, 2, 7] = np.nan
    elif where == "key":
        W_K = W_K.copy()
        W_K[1, 0, 11] = np.inf
    else:
        gain[5] = -np.inf
    with pytest.raises(ValueError, match=f"^head {first} has NaN or Inf weights"):
        chunked_profiles(W_Q, W_K, R, kv_of_head=kv_of_head, gain=gain)
