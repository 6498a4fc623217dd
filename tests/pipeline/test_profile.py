"""The profile math: low-rank route against the naive N x N oracle and against closed forms."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import profile as prof_module
from pipeline.families.rotary import rotation_matrices
from pipeline.profile import Kernels, eigen, head_profiles, naive_profiles, profile_of_cores, span, spectra
from pipeline.profile import lapack as numpy_route


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
    out = head_profiles(W_Q, W_K)
    prof, norm = out.profile, out.norm
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
    out = head_profiles(W_Q, W_K, R)
    prof, norm = out.profile, out.norm
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
    np.testing.assert_allclose(head_profiles(*as_heads(L)).profile[0], expected, atol=1e-15)
    np.testing.assert_allclose(naive_oracle(L), expected, atol=1e-15)


@pytest.mark.parametrize("theta", [0.0, 0.3, 1.0, np.pi / 2, 2.0, 3.0, np.pi])
def test_rank_one_closed_form(theta):
    rng = np.random.default_rng(1)
    N = 12
    Q, _ = np.linalg.qr(rng.normal(size=(N, 2)))
    u = Q[:, 0]
    v = np.cos(theta) * Q[:, 0] + np.sin(theta) * Q[:, 1]
    W_K, W_Q = u[None, None, :] * 2.5, v[None, None, :]  # L = W_K^T W_Q = 2.5 u v^T
    prof = head_profiles(W_Q, W_K).profile[0]
    s2, c = np.sin(theta) ** 2, np.cos(theta)
    expected = [s2 / 2, s2 / 2, c**2 if c > 0 else 0.0, c**2 if c < 0 else 0.0]
    np.testing.assert_allclose(prof, expected, atol=1e-12)


def random_heads(seed, H=3, n=8, N=30):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(H, n, N)), rng.normal(size=(H, n, N))


def test_invariances():
    W_Q, W_K = random_heads(0)
    p = head_profiles(W_Q, W_K).profile
    # transpose: swapping the roles of Q and K gives L^T, same profile (non-rotary)
    np.testing.assert_allclose(head_profiles(W_K, W_Q).profile, p, atol=1e-12)
    # positive scaling
    np.testing.assert_allclose(head_profiles(7.3 * W_Q, W_K).profile, p, atol=1e-12)
    # orthogonal change of basis of the residual stream: L -> O^T L O
    O, _ = np.linalg.qr(np.random.default_rng(5).normal(size=(30, 30)))
    np.testing.assert_allclose(head_profiles(W_Q @ O, W_K @ O).profile, p, atol=1e-12)
    # -L swaps c and d
    np.testing.assert_allclose(head_profiles(-W_Q, W_K).profile, p[:, [0, 1, 3, 2]], atol=1e-12)


def test_random_heads_sit_near_half_half():
    W_Q, W_K = random_heads(3, H=8, n=64, N=512)
    p = head_profiles(W_Q, W_K).profile
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
    assert head_profiles(W_Q, W_K).profile[0].tolist() == [1.0, 0.0, 0.0, 0.0]
    # positive / negative semidefinite: L = +-Y Y^T
    Y = rng.normal(size=(4, N))
    assert head_profiles(Y[None], Y[None]).profile[0].tolist() == [0.0, 0.0, 1.0, 0.0]
    assert head_profiles(-Y[None], Y[None]).profile[0].tolist() == [0.0, 0.0, 0.0, 1.0]
    # H: symmetric with spectrum symmetric about zero, L = U diag(2, 1, -1, -2) U^T
    U, _ = np.linalg.qr(rng.normal(size=(N, 4)))
    Dg = np.diag([2.0, 1.0, -1.0, -2.0])
    assert head_profiles((U @ Dg).T[None], U.T[None]).profile[0].tolist() == [0.0, 1.0, 0.0, 0.0]
    # the same through the dense route
    assert naive_profiles(U @ Dg @ U.T)[0].tolist() == [0.0, 1.0, 0.0, 0.0]


def test_zero_form_is_nan_and_flagged_without_warnings():
    W = np.zeros((2, 4, 10))
    W_nonzero = np.random.default_rng(0).normal(size=(2, 4, 10))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, out_r = head_profiles(W, W_nonzero), head_profiles(W, W_nonzero, rotation_matrices(4, 4, 100.0, 5))
    prof, norm, prof_r, norm_r = out.profile, out.norm, out_r.profile, out_r.norm
    assert np.isnan(prof).all() and (norm == 0).all()
    assert np.isnan(prof_r).all() and (norm_r == 0).all()


def test_profiles_sum_to_one_and_are_nonnegative():
    W_Q, W_K = random_heads(9, H=6, n=5, N=17)
    p = head_profiles(W_Q, W_K, rotation_matrices(5, 4, 50.0, 20)).profile
    assert (p >= 0).all()
    np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-14)


def test_bad_inputs_are_refused_with_a_message():
    with pytest.raises(ValueError, match="shape"):
        head_profiles(np.zeros((2, 4, 10)), np.zeros((2, 4, 11)))
    with pytest.raises(ValueError, match="NaN or Inf"):
        profile_of_cores(np.array([[np.nan, 0.0], [0.0, 1.0]]))


# ------------------------------------------------------------------ compact inputs, eigen routes, bounded work


def gqa_heads(seed, H=4, kv=2, n=6, N=20):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(H, n, N)), rng.normal(size=(kv, n, N)), np.arange(H) // (H // kv)


def test_grouped_key_heads_and_gain_equal_the_expanded_float64_route():
    W_Q, W_K, kv_of_head = gqa_heads(4)
    g = np.random.default_rng(5).uniform(0.5, 2.0, size=W_Q.shape[-1])
    R = rotation_matrices(6, 4, 500.0, 9)
    out = head_profiles(W_Q, W_K, R, kv_of_head=kv_of_head, gain=g)
    got, got_norm = out.profile, out.norm
    L = dense_L(W_Q * g, W_K[kv_of_head] * g, R)
    for h in range(len(W_Q)):
        for d in range(9):
            np.testing.assert_allclose(got[h, d], naive_oracle(L[h, d]), atol=1e-10)
            np.testing.assert_allclose(got_norm[h, d], np.linalg.norm(L[h, d]), rtol=1e-12)


def test_float32_storage_gives_the_same_profiles_as_its_float64_values():
    """Weights kept in float32 (as decoded from bf16/fp16) are widened per head: same numbers exactly."""
    W_Q, W_K, kv_of_head = gqa_heads(6)
    W_Q32, W_K32 = W_Q.astype(np.float32), W_K.astype(np.float32)
    R = rotation_matrices(6, 6, 100.0, 5)
    a = head_profiles(W_Q32, W_K32, R, kv_of_head=kv_of_head)
    b = head_profiles(W_Q32.astype(np.float64), W_K32.astype(np.float64)[kv_of_head], R)
    np.testing.assert_array_equal(a.profile, b.profile)
    np.testing.assert_array_equal(a.norm, b.norm)


def test_dense_rotations_take_the_dense_product_and_match_the_oracle():
    rng = np.random.default_rng(8)
    W_Q, W_K = rng.normal(size=(2, 6, 25)), rng.normal(size=(2, 6, 25))
    R = rotation_matrices(6, 6, 100.0, 11)
    # a rotation with no pair structure (a random orthogonal mix) takes the dense product, checked on the oracle
    O = np.linalg.qr(rng.normal(size=(3, 6, 6)))[0]
    assert prof_module.rotation_pairs(O) is None and prof_module.rotation_pairs(R) is not None
    out = head_profiles(W_Q, W_K, O)
    dense, dense_norm = out.profile, out.norm
    L = dense_L(W_Q, W_K, O)
    for h in range(2):
        for d in range(3):
            np.testing.assert_allclose(dense[h, d], naive_oracle(L[h, d]), atol=1e-10)
            np.testing.assert_allclose(dense_norm[h, d], np.linalg.norm(L[h, d]), rtol=1e-12)


def test_lapack_blocking_agrees_with_lapacks_defaults():
    """The per-offset eigensolver (dsytrd in blocks of SYTRD_BLOCK) and the QR (dgeqrt in blocks of QR_BLOCK) agree
    with LAPACK's default calls (dsyevd's queried work size, dgeqrf) to rounding; with the knobs at None they are
    those calls, bit for bit."""
    lapack = pytest.importorskip("scipy.linalg.lapack", reason="the in-place LAPACK calls are scipy's")
    rng = np.random.default_rng(7)
    for k in (64, 128, 256):
        X = rng.normal(size=(k, k))
        S = X + X.T
        lwork, liwork = (int(x) for x in lapack.dsyevd_lwork(k, compute_v=0, lower=1)[:2])
        want = lapack.dsyevd(S.copy().T, compute_v=0, lower=1, lwork=lwork, liwork=liwork)[0]
        A = np.asfortranarray(rng.normal(size=(3 * k, k)))
        qr = np.triu(lapack.dgeqrf(A.copy(order="F"), lwork=int(lapack.dgeqrf_lwork(*A.shape)[0]))[0][:k])
        got, R = numpy_route.lapack_in_place(k)[0](S.copy()), span.qr_r_in_place(A.copy(order="F"))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-13 * np.abs(want).max())
        np.testing.assert_allclose(got, np.linalg.eigvalsh(S), rtol=0, atol=1e-13 * np.abs(want).max())
        np.testing.assert_allclose(R, qr, rtol=0, atol=1e-13 * np.abs(R).max())  # the same reflections, signs and all
        np.testing.assert_array_equal(numpy_route.lapack_in_place(k, sytrd_block=None)[0](S.copy()), want)
        np.testing.assert_array_equal(span.qr_r_in_place(A.copy(order="F"), block=None), qr)


def conditioned_heads(cond: float | str, n: int = 24, N: int = 200, seed: int = 0):
    """W_Q, W_K (1, n, N) whose span [W_K^T | W_Q^T] has singular values from 3.7 down to 3.7 / cond (spaced
    geometrically), or, with cond = "rank 40", 40 equal singular values and the rest exactly zero."""
    rng = np.random.default_rng(seed)
    X = np.linalg.qr(rng.normal(size=(N, 2 * n)))[0]
    Y = np.linalg.qr(rng.normal(size=(2 * n, 2 * n)))[0]
    if cond == "rank 40":
        s = np.where(np.arange(2 * n) < 40, 1.0, 0.0)
    else:
        s = np.logspace(0, -np.log10(cond), 2 * n)
    U = (X * s) @ Y * 3.7
    if cond == "rank 40":
        U = U @ np.linalg.qr(rng.normal(size=(2 * n, 2 * n)))[0]  # no exactly zero columns left
    return U[:, n:].T[None].copy(), U[:, :n].T[None].copy()


def spy_qr(monkeypatch) -> list:
    """Record each call of the QR in ``span_r``'s place: what the Gram route fell back to."""
    taken, qr_r = [], span.qr_r_in_place
    monkeypatch.setattr(span, "qr_r_in_place", lambda A, block=span.QR_BLOCK: taken.append("qr") or qr_r(A, block))
    return taken


@pytest.mark.parametrize("cond", [1.0, 1e2, 1e4, 1e6, 1e8])
def test_the_gram_factor_gives_the_qr_factors_values(monkeypatch, cond):
    """A head's span factored through its Gram matrix (dsyrk + dpotrf) gives the profiles, norms, statistics and
    spectra of the Householder QR (``Kernels(gram_rcond=0)``) within 1e-13 at every offset, for spans of condition
    number 1 to 1e8: far past the guard, which is lowered here so that the Gram route takes them all."""
    pytest.importorskip("scipy.linalg.lapack", reason="the Gram route is scipy's BLAS and LAPACK")
    W_Q, W_K = conditioned_heads(cond)
    R = rotation_matrices(W_Q.shape[1], W_Q.shape[1], 1e4, 9)
    taken = spy_qr(monkeypatch)
    gram = head_profiles(W_Q, W_K, R, at_zero=True, kernels=Kernels(gram_rcond=1e-15))
    assert taken == []
    qr = head_profiles(W_Q, W_K, R, at_zero=True, kernels=Kernels(gram_rcond=0))
    assert taken == ["qr"]
    for a, b in zip(gram.layer_values(), qr.layer_values(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("cond", [1.0, 10.0, 1e6, 1e12, "rank 40"])
def test_the_gram_guard_leaves_ill_conditioned_and_rank_deficient_spans_to_the_qr(monkeypatch, cond):
    """At the default GRAM_RCOND, well-conditioned spans take the Gram route (F^T F = A^T A, F upper triangular);
    spans of condition 1e6 and 1e12, and a span of rank 40 < 2n, get the Householder QR's factor itself."""
    pytest.importorskip("scipy.linalg.lapack", reason="the Gram route is scipy's BLAS and LAPACK")
    W_Q, W_K = conditioned_heads(cond)
    A0 = np.asfortranarray(np.concatenate([W_K[0].T, W_Q[0].T], axis=1))
    taken = spy_qr(monkeypatch)
    F = span.span_r(span.Span(W_K[0], W_Q[0]))
    assert np.array_equal(F, np.triu(F))
    if cond in (1.0, 10.0):
        assert taken == []
        np.testing.assert_allclose(F.T @ F, A0.T @ A0, rtol=0, atol=1e-13 * np.abs(A0.T @ A0).max())
    else:
        assert taken == ["qr"]
        np.testing.assert_array_equal(F, span.qr_r_in_place(A0.copy(order="F")))


def test_the_gram_factor_written_into_a_used_work_array_is_the_one_made_afresh():
    """The span's work arrays (``span_work``) serve every head of a layer: a Gram matrix written over another head's
    factor, or over NaN in the triangle it writes, with another head's rows or NaN in the block array, gives the
    factor of new arrays bit for bit (dsyrk with beta = 0 reads nothing of G; every block is written before it is
    read), and G's strict upper triangle, which R is read from, stays zero."""
    pytest.importorskip("scipy.linalg.lapack", reason="the Gram route is scipy's BLAS and LAPACK")
    W_Q, W_K = conditioned_heads(10.0)
    n, N = W_Q.shape[-2:]
    head = span.Span(W_K[0], W_Q[0])
    fresh = span.span_r(head)
    work_block, work_G = span.span_work(n, N)
    other = span.Span(W_K[0][:, ::-1], W_Q[0][:, ::-1])
    for old in (np.nan, "other"):
        if old == "other":
            span.span_r(other, (work_block, work_G))
        else:
            work_G[np.tril_indices(len(work_G))], work_block[...] = old, old
        R = span.span_r(head, (work_block, work_G))
        assert np.shares_memory(R, work_G)
        np.testing.assert_array_equal(R, fresh)
        assert not np.triu(work_G, 1).any()


@pytest.mark.parametrize("rows", [1, 7, 64, 1 << 20])
def test_the_gram_factor_by_blocks_of_rows_is_that_of_the_whole_span(monkeypatch, rows):
    """The Gram matrix accumulated over blocks of the span's rows (``SPAN_BLOCK_BYTES``; blocks of 1 and 7 rows leave
    a last block shorter than the others) gives the factor of one dsyrk over the whole span, converted and scaled by
    the gain beforehand, within rounding: F^T F = A^T A of that A."""
    pytest.importorskip("scipy.linalg.lapack", reason="the Gram route is scipy's BLAS and LAPACK")
    W_Q, W_K = conditioned_heads(10.0)
    gain = np.random.default_rng(3).uniform(0.5, 2.0, W_Q.shape[-1])
    A = np.asfortranarray(np.concatenate([W_K[0].T, W_Q[0].T], axis=1)) * gain[:, None]
    monkeypatch.setattr(span, "SPAN_BLOCK_BYTES", rows * 16 * W_Q.shape[1])
    block, _ = work = span.span_work(W_Q.shape[1], W_Q.shape[-1])
    assert len(block) == min(rows, W_Q.shape[-1])
    F = span.span_r(span.Span(W_K[0].astype(np.float32), W_Q[0].astype(np.float32), gain), work)
    A32 = np.asfortranarray(np.concatenate([W_K[0].T, W_Q[0].T], axis=1).astype(np.float32)) * gain[:, None]
    np.testing.assert_allclose(F.T @ F, A32.T @ A32, rtol=0, atol=1e-13 * np.abs(A.T @ A).max())


def test_spectra_in_blocks_of_rows_are_those_of_one_pass(monkeypatch):
    """profile_of_spectra works in row blocks under SPECTRA_BLOCK_BYTES: 700 spectra (with zeros, ties, a dead
    row) give bit for bit what one pass over all of them gives."""
    rng = np.random.default_rng(5)
    lam = rng.standard_normal((700, 64))
    lam[::7, :6] = 0.0
    lam[3] = lam[3, ::-1]
    lam[11, :] = -lam[11, :]
    norm = rng.uniform(0.5, 2.0, 700)
    norm[40] = 0.0
    a = rng.uniform(0.0, 0.3, 700)
    blocked = spectra.profile_of_spectra(a, lam, norm, 1e-10)
    assert 700 > 2 * (spectra.SPECTRA_BLOCK_BYTES // (8 * 64))  # the blocked path is the one taken
    monkeypatch.setattr(spectra, "SPECTRA_BLOCK_BYTES", 1 << 40)
    whole = spectra.profile_of_spectra(a, lam, norm, 1e-10)
    for x, y in zip(blocked, whole, strict=True):
        np.testing.assert_array_equal(x, y)
    assert np.isnan(blocked[0][40]).all() and np.isfinite(blocked[0][41]).all()


def test_numpy_route_runs_blas_on_one_thread_unless_told_otherwise():
    """threads=None on the numpy route: every BLAS/LAPACK pool (numpy's and scipy's) at one thread during the call,
    the process setting back after it; an explicit count is used as given."""
    threadpoolctl = pytest.importorskip("threadpoolctl", reason="thread limits need threadpoolctl (pipeline extra)")
    import scipy.linalg.lapack  # noqa: F401 - its BLAS loaded, so that its pool is seen too

    W_Q, W_K, kv_of_head = gqa_heads(13)
    R = rotation_matrices(6, 6, 100.0, 3)
    seen = []

    def record(_h):
        seen.append(sorted({p["num_threads"] for p in threadpoolctl.threadpool_info()}))

    with threadpoolctl.threadpool_limits(2):
        head_profiles(W_Q, W_K, R, kv_of_head=kv_of_head, eigvalsh="numpy", progress=record)
        head_profiles(W_Q, W_K, kv_of_head=kv_of_head, eigvalsh="numpy", progress=record)
        assert seen == [[1]] * 8
        assert {p["num_threads"] for p in threadpoolctl.threadpool_info()} == {2}
        seen.clear()
        head_profiles(W_Q, W_K, R, kv_of_head=kv_of_head, eigvalsh="numpy", threads=2, progress=record)
        assert seen == [[2]] * 4


def test_cores_by_batched_matmul_equal_the_explicit_products():
    rng = np.random.default_rng(3)
    K, P = rng.normal(size=(2, 8, 4)), rng.normal(size=(2, 8, 4))
    R = rotation_matrices(4, 4, 10.0, 3)
    C = prof_module.cores(K, P, R)
    assert C.shape == (2, 3, 8, 8)
    for h in range(2):
        for d in range(3):
            np.testing.assert_allclose(C[h, d], K[h] @ R[d] @ P[h].T, rtol=1e-13, atol=1e-13)


def test_eigen_routes_resolve_as_documented():
    assert prof_module.eigen_route("numpy") == ("numpy", None)
    assert prof_module.eigen_route("torch", "cpu") == ("torch", "cpu")
    assert prof_module.eigen_route("auto", "cpu") == ("torch", "cpu")  # an explicit device means torch
    expected = ("torch", "cuda") if eigen.cuda_available() else ("numpy", None)
    assert prof_module.eigen_route("auto") == expected
    with pytest.raises(ValueError, match="one of"):
        prof_module.eigen_route("lapack")
    with pytest.raises(ValueError, match="CPU only"):
        prof_module.eigen_route("numpy", "cuda")


def test_torch_float64_route_on_cpu_matches_numpy():
    """The torch route (used automatically on CUDA; GPU not available in CI) on the CPU: same numbers."""
    pytest.importorskip("torch", reason="the torch eigen route needs torch (installed with the pipeline extra)")
    W_Q, W_K, kv_of_head = gqa_heads(11)
    R = rotation_matrices(6, 6, 100.0, 7)
    ref = head_profiles(W_Q, W_K, R, kv_of_head=kv_of_head, eigvalsh="numpy")
    got = head_profiles(W_Q, W_K, R, kv_of_head=kv_of_head, eigvalsh="torch", device="cpu", threads=1)
    np.testing.assert_allclose(got.profile, ref.profile, atol=1e-12)
    np.testing.assert_allclose(got.norm, ref.norm, rtol=1e-12)  # torch's QR and products: rounding apart
    # exact vertices survive the route change
    Y = np.random.default_rng(2).normal(size=(4, 20))
    assert head_profiles(Y[None], Y[None], eigvalsh="torch", device="cpu").profile[0].tolist() == [0.0, 0.0, 1.0, 0.0]


def test_torch_float32_route_needs_a_tolerance_and_keeps_within_it():
    pytest.importorskip("torch", reason="the torch eigen route needs torch (installed with the pipeline extra)")
    rng = np.random.default_rng(12)
    W_Q, W_K = rng.normal(size=(3, 16, 64)), rng.normal(size=(3, 16, 64))
    R = rotation_matrices(16, 16, 1e4, 17)
    with pytest.raises(ValueError, match="explicit tol"):
        head_profiles(W_Q, W_K, R, eigvalsh="torch-float32", device="cpu")
    tol = 1e-5
    ref = head_profiles(W_Q, W_K, R, eigvalsh="numpy")
    got = head_profiles(W_Q, W_K, R, eigvalsh="torch-float32", tol=tol, device="cpu")
    assert np.abs(got.profile - ref.profile).max() <= tol
    np.testing.assert_allclose(got.norm, ref.norm, rtol=1e-12)  # norms are float64 either way
    Y = rng.normal(size=(4, 20))
    assert head_profiles(-Y[None], Y[None], eigvalsh="torch-float32", tol=tol, device="cpu").profile[0].tolist() == [
        0.0, 0.0, 0.0, 1.0]


def test_bad_grouping_and_gain_are_refused_with_a_message():
    W_Q, W_K, kv_of_head = gqa_heads(1)
    with pytest.raises(ValueError, match="kv_of_head"):
        head_profiles(W_Q, W_K)
    with pytest.raises(ValueError, match="kv_of_head"):
        head_profiles(W_Q, W_K, kv_of_head=kv_of_head + 5)
    with pytest.raises(ValueError, match="gain"):
        head_profiles(W_Q, W_K, kv_of_head=kv_of_head, gain=np.ones(3))
    with pytest.raises(ValueError, match="NaN or Inf"):
        head_profiles(np.full_like(W_Q, np.nan), W_K, kv_of_head=kv_of_head)


@pytest.mark.parametrize("rotary", [False, True])
@pytest.mark.parametrize("where", ["query", "key", "gain"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_one_nonfinite_weight_names_its_head_on_every_route(rotary, where, bad):
    """The check reads the span's factor, not the weights: one NaN or Inf anywhere a head reads is still caught,
    and named by the first head that reads it (a key head or the gain reaches every query head sharing it)."""
    W_Q, W_K, kv_of_head = gqa_heads(2)
    gain = np.ones(W_Q.shape[-1])
    R = rotation_matrices(W_Q.shape[1], W_Q.shape[1], 10000.0, 9) if rotary else None
    first = {"query": 3, "key": int(np.flatnonzero(kv_of_head == 1)[0]), "gain": 0}[where]
    if where == "query":
        W_Q = W_Q.copy()
        W_Q[3, 2, 7] = bad
    elif where == "key":
        W_K = W_K.copy()
        W_K[1, 0, 11] = bad
    else:
        gain[5] = bad
    with pytest.raises(ValueError, match=f"^head {first} has NaN or Inf weights"):
        head_profiles(W_Q, W_K, R, kv_of_head=kv_of_head, gain=gain)


def test_finite_weights_whose_factor_overflows_are_told_apart_from_nonfinite_ones():
    """Entries near float64's largest make the span's column norms overflow (R has Inf) from finite weights."""
    W_Q, W_K, kv_of_head = gqa_heads(3)
    with pytest.raises(ValueError, match="^head 0: the factor of its weights overflowed float64"):
        head_profiles(np.full(W_Q.shape, 1e308), np.full(W_K.shape, 1e308), kv_of_head=kv_of_head)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_compact_layer_route_equals_the_expanded_float64_layer(tmp_path, dtype):
    """A grouped-query checkpoint read compactly (float16 for fp16, float32 for bf16 / fp32; key heads once)
    profiles exactly like layer_weights."""
    torch = pytest.importorskip("torch", reason="writing the bf16 test checkpoint needs torch")
    import json

    from safetensors.torch import save_file

    from pipeline.families import layer_qk, layer_weights, layout_from_config, rotations
    from pipeline.registry.checkpoints import open_checkpoint

    H, kv, n, N = 4, 2, 8, 24
    gen = torch.Generator().manual_seed(0)
    tensors = {"model.layers.0.self_attn.q_proj.weight": torch.randn(H * n, N, generator=gen),
               "model.layers.0.self_attn.k_proj.weight": torch.randn(kv * n, N, generator=gen),
               "model.layers.0.input_layernorm.weight": 1 + 0.1 * torch.randn(N, generator=gen)}
    save_file({k: v.to(getattr(torch, dtype)) for k, v in tensors.items()}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps(dict(
        model_type="mistral", hidden_size=N, num_attention_heads=H, num_key_value_heads=kv, head_dim=n,
        num_hidden_layers=1, rope_theta=1000.0)))
    ckpt = open_checkpoint(str(tmp_path))
    layout = layout_from_config(ckpt.config)
    for fold in (False, True):
        qk = layer_qk(ckpt, layout, 0, fold)
        assert qk.W_Q.dtype == (np.float16 if dtype == "float16" else np.float32) and qk.W_K.shape == (kv, n, N)
        W_Q, W_K = layer_weights(ckpt, layout, 0, fold)
        np.testing.assert_array_equal(qk.W_Q.astype(np.float64), ckpt.read("model.layers.0.self_attn.q_proj.weight")
                                      .reshape(H, n, N))
        R = rotations(layout)
        got = head_profiles(qk.W_Q, qk.W_K, R, kv_of_head=qk.kv_of_head, gain=qk.gain)
        want = head_profiles(W_Q, W_K, R)
        np.testing.assert_array_equal(got.profile, want.profile)
        np.testing.assert_array_equal(got.norm, want.norm)
