"""The profile math: low-rank route against the naive N x N oracle and against closed forms."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.profile import head_profiles, naive_profiles, profile_of_cores
from pipeline.rotary import rotation_matrices


def dense_L(W_Q, W_K, R=None):
    """L = W_K^T W_Q (or W_K^T R(d) W_Q for each d), formed densely: the oracle's input."""
    if R is None:
        return np.swapaxes(W_K, -1, -2) @ W_Q
    return np.swapaxes(W_K, -1, -2)[:, None] @ R[None] @ W_Q[:, None]


def naive_oracle(L):
    """Independent N x N route: eigendecomposition of the full symmetric part, no thresholds."""
    L = L / np.linalg.norm(L)
    S, T = (L + L.T) / 2, (L - L.T) / 2
    lam = np.linalg.eigvalsh(S)
    pos = np.sort(lam[lam > 0])[::-1]
    neg = np.sort(-lam[lam < 0])[::-1]
    k = len(lam)
    pos = np.pad(pos, (0, k - len(pos)))
    neg = np.pad(neg, (0, k - len(neg)))
    diff = pos - neg
    return np.array([np.sum(T * T), 2 * pos @ neg, np.sum(np.maximum(diff, 0) ** 2), np.sum(np.maximum(-diff, 0) ** 2)])


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), N=st.integers(2, 80), n=st.integers(1, 24), H=st.integers(1, 3))
def test_low_rank_matches_naive_oracle(seed, N, n, H):
    rng = np.random.default_rng(seed)
    W_Q = rng.normal(size=(H, n, N)) * rng.uniform(0.1, 10)
    W_K = rng.normal(size=(H, n, N))
    prof, norm = head_profiles(W_Q, W_K)
    for h in range(H):
        L = dense_L(W_Q[h], W_K[h])
        np.testing.assert_allclose(prof[h], naive_oracle(L), atol=1e-10)
        np.testing.assert_allclose(norm[h], np.linalg.norm(L), rtol=1e-12)


@settings(max_examples=10, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    rot_frac=st.sampled_from([0.25, 0.5, 1.0]),
    style=st.sampled_from(["half", "interleaved"]),
)
def test_rotary_low_rank_matches_naive_at_every_offset(seed, rot_frac, style):
    rng = np.random.default_rng(seed)
    H, n, N = 2, 16, 40
    W_Q, W_K = rng.normal(size=(H, n, N)), rng.normal(size=(H, n, N))
    R = rotation_matrices(n, int(n * rot_frac), 10000.0, 129, style=style)
    prof, norm = head_profiles(W_Q, W_K, R)
    assert prof.shape == (H, 129, 4) and norm.shape == (H, 129)
    L = dense_L(W_Q, W_K, R)
    for h in range(H):
        for d in (0, 1, 7, 128):
            np.testing.assert_allclose(prof[h, d], naive_oracle(L[h, d]), atol=1e-10)
            np.testing.assert_allclose(norm[h, d], np.linalg.norm(L[h, d]), rtol=1e-12)
    # the profile really does move with d (otherwise the slider would show nothing)
    assert np.abs(prof[:, 0] - prof[:, 5]).max() > 1e-3


def as_heads(L):
    """A dense L as one head: W_K = I, W_Q = L, so W_K^T W_Q = L."""
    N = L.shape[0]
    return L[None], np.eye(N)[None]


@pytest.mark.parametrize(
    "diag, expected",
    [([3.0, -1.0], [0, 0.6, 0.4, 0]), ([1.0, 1.0, -3.0], [0, 6 / 11, 1 / 11, 4 / 11])],
)
def test_closed_forms_diagonal(diag, expected):
    L = np.diag(diag)
    np.testing.assert_allclose(naive_profiles(L)[0], expected, atol=1e-15)
    np.testing.assert_allclose(head_profiles(*as_heads(L))[0][0], expected, atol=1e-15)
    np.testing.assert_allclose(naive_oracle(L), expected, atol=1e-15)


@pytest.mark.parametrize("theta", [0.0, 0.3, 1.0, np.pi / 2, 2.0, 3.0, np.pi])
def test_rank_one_closed_form(theta):
    rng = np.random.default_rng(1)
    N = 12
    Q, _ = np.linalg.qr(rng.normal(size=(N, 2)))
    u = Q[:, 0]
    v = np.cos(theta) * Q[:, 0] + np.sin(theta) * Q[:, 1]
    W_K, W_Q = u[None, None, :] * 2.5, v[None, None, :]  # L = W_K^T W_Q = 2.5 u v^T
    prof = head_profiles(W_Q, W_K)[0][0]
    s2, c = np.sin(theta) ** 2, np.cos(theta)
    expected = [s2 / 2, s2 / 2, c**2 if c > 0 else 0.0, c**2 if c < 0 else 0.0]
    np.testing.assert_allclose(prof, expected, atol=1e-12)


def random_heads(seed, H=3, n=8, N=30):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(H, n, N)), rng.normal(size=(H, n, N))


def test_invariances():
    W_Q, W_K = random_heads(0)
    p = head_profiles(W_Q, W_K)[0]
    # transpose: swapping the roles of Q and K gives L^T, same profile (non-rotary)
    np.testing.assert_allclose(head_profiles(W_K, W_Q)[0], p, atol=1e-12)
    # positive scaling
    np.testing.assert_allclose(head_profiles(7.3 * W_Q, W_K)[0], p, atol=1e-12)
    # orthogonal change of basis of the residual stream: L -> O^T L O
    O, _ = np.linalg.qr(np.random.default_rng(5).normal(size=(30, 30)))
    np.testing.assert_allclose(head_profiles(W_Q @ O, W_K @ O)[0], p, atol=1e-12)
    # -L swaps c and d
    np.testing.assert_allclose(head_profiles(-W_Q, W_K)[0], p[:, [0, 1, 3, 2]], atol=1e-12)


def test_random_heads_sit_near_half_half():
    W_Q, W_K = random_heads(3, H=8, n=64, N=512)
    p = head_profiles(W_Q, W_K)[0]
    assert np.all(np.abs(p[:, 0] - 0.5) < 0.03)
    assert np.all(np.abs(p[:, 1] - 0.5) < 0.03)
    assert np.all(p[:, 2] + p[:, 3] < 0.03)


def test_vertices_are_exact():
    rng = np.random.default_rng(2)
    N, m = 20, 3
    X = rng.normal(size=(N, 2 * m))
    J = np.block([[np.zeros((m, m)), np.eye(m)], [-np.eye(m), np.zeros((m, m))]])
    # antisymmetric: L = X J X^T
    W_K, W_Q = X.T[None], (J @ X.T)[None]
    assert head_profiles(W_Q, W_K)[0][0].tolist() == [1.0, 0.0, 0.0, 0.0]
    # positive / negative semidefinite: L = +-Y Y^T
    Y = rng.normal(size=(4, N))
    assert head_profiles(Y[None], Y[None])[0][0].tolist() == [0.0, 0.0, 1.0, 0.0]
    assert head_profiles(-Y[None], Y[None])[0][0].tolist() == [0.0, 0.0, 0.0, 1.0]
    # H: symmetric with spectrum symmetric about zero, L = U diag(2, 1, -1, -2) U^T
    U, _ = np.linalg.qr(rng.normal(size=(N, 4)))
    Dg = np.diag([2.0, 1.0, -1.0, -2.0])
    assert head_profiles((U @ Dg).T[None], U.T[None])[0][0].tolist() == [0.0, 1.0, 0.0, 0.0]
    # the same through the dense route
    assert naive_profiles(U @ Dg @ U.T)[0].tolist() == [0.0, 1.0, 0.0, 0.0]


def test_zero_form_is_nan_and_flagged_without_warnings():
    W = np.zeros((2, 4, 10))
    W_nonzero = np.random.default_rng(0).normal(size=(2, 4, 10))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prof, norm = head_profiles(W, W_nonzero)
        prof_r, norm_r = head_profiles(W, W_nonzero, rotation_matrices(4, 4, 100.0, 5))
    assert np.isnan(prof).all() and (norm == 0).all()
    assert np.isnan(prof_r).all() and (norm_r == 0).all()


def test_profiles_sum_to_one_and_are_nonnegative():
    W_Q, W_K = random_heads(9, H=6, n=5, N=17)
    p = head_profiles(W_Q, W_K, rotation_matrices(5, 4, 50.0, 20))[0]
    assert (p >= 0).all()
    np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-14)


def test_bad_inputs_are_refused_with_a_message():
    with pytest.raises(ValueError, match="shape"):
        head_profiles(np.zeros((2, 4, 10)), np.zeros((2, 4, 11)))
    with pytest.raises(ValueError, match="NaN or Inf"):
        profile_of_cores(np.array([[np.nan, 0.0], [0.0, 1.0]]))
