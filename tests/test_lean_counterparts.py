"""Executable counterparts of the Lean statements in lean/HeadGeometry/.

No Lean toolchain runs in this repository's CI, so every statement formalized in lean/ is also
checked here: symbolically or exhaustively where the statement is elementary (1, 2), and by property
tests on random instances otherwise (3, 4, 5). Each test names the Lean theorem it mirrors.

These tests are self-contained (numpy, sympy, hypothesis); only one test imports the pipeline, to
check that ``pipeline.profile.profile_of_cores`` computes the profile the Lean file describes.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

FAST = settings(max_examples=40, deadline=None)
reals = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_infinity=False)
nonneg_reals = st.floats(min_value=0.0, max_value=1e3, allow_nan=False, allow_infinity=False)
seeds = st.integers(min_value=0, max_value=2**32 - 1)


def pos(x):
    """Positive part, max(x, 0)."""
    return np.maximum(x, 0)


# ---------------------------------------------------------------- 1. HeadGeometry/Coordinatewise.lean


def test_sq_add_sq_eq_cross_add_gaps_symbolic():
    """`sq_add_sq_eq_cross_add_gaps`, both cases of `le_total p q`, symbolically."""
    q = sp.Symbol("q", real=True)
    s = sp.Symbol("s", nonnegative=True)
    for p in (q + s, q - s):  # p >= q and p <= q
        gap_pq, gap_qp = sp.Max(p - q, 0), sp.Max(q - p, 0)
        assert not (gap_pq.has(sp.Max) or gap_qp.has(sp.Max))  # the case analysis is resolved
        assert sp.expand(p**2 + q**2 - (2 * p * q + gap_pq**2 + gap_qp**2)) == 0


def test_cross_gaps_nonneg_symbolic():
    """`cross_gaps_nonneg`: each term is nonnegative when p, q >= 0."""
    p, q = sp.symbols("p q", nonnegative=True)
    for term in (2 * p * q, sp.Max(p - q, 0) ** 2, sp.Max(q - p, 0) ** 2):
        assert term.is_nonnegative is True


@FAST
@given(reals, reals)
def test_sq_add_sq_eq_cross_add_gaps_numeric(p, q):
    lhs = p**2 + q**2
    rhs = 2 * p * q + pos(p - q) ** 2 + pos(q - p) ** 2
    assert rhs == pytest.approx(lhs, rel=1e-12, abs=1e-9)


def test_cross_eq_zero_and_gap_eq_zero_iff_exhaustive():
    """`cross_eq_zero_and_gap_eq_zero_iff`: for p, q >= 0, pq = 0 and (q - p)_+^2 = 0 iff q = 0."""
    grid = [Fraction(n, 2) for n in range(7)]
    for p, q in itertools.product(grid, repeat=2):
        both = p * q == 0 and max(q - p, 0) ** 2 == 0
        assert both == (q == 0), (p, q)


# ------------------------------------------------------------------ 2. HeadGeometry/ProfileSplit.lean


def profile_bcd(lp, ln):
    """(b, c, d) of the vectors lp = lambda_+, ln = lambda_- (last axis), as in ProfileSplit.lean."""
    b = 2 * np.sum(lp * ln, axis=-1)
    c = np.sum(pos(lp - ln) ** 2, axis=-1)
    d = np.sum(pos(ln - lp) ** 2, axis=-1)
    return b, c, d


def integer_vector_pairs(k, values):
    """Every pair (lp, ln) of length-k vectors with entries in `values`: arrays (P, k), (P, k)."""
    vecs = np.array(list(itertools.product(values, repeat=k)), dtype=np.int64)
    i, j = np.meshgrid(np.arange(len(vecs)), np.arange(len(vecs)), indexing="ij")
    return vecs[i.ravel()], vecs[j.ravel()]


@pytest.mark.parametrize("k", [1, 2, 3])
def test_sqNorm_add_sqNorm_eq_profileB_add_profileC_add_profileD_exhaustive(k):
    """The split holds for all real vectors; checked exactly on every integer pair in [-2, 2]^k."""
    lp, ln = integer_vector_pairs(k, range(-2, 3))
    b, c, d = profile_bcd(lp, ln)
    np.testing.assert_array_equal(np.sum(lp**2, -1) + np.sum(ln**2, -1), b + c + d)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_profile_bcd_nonneg_and_vertex_exhaustive(k):
    """`profileB/C/D_nonneg` and `profileB_eq_zero_and_profileD_eq_zero_iff` on [0, 3]^k."""
    lp, ln = integer_vector_pairs(k, range(4))
    b, c, d = profile_bcd(lp, ln)
    assert (b >= 0).all() and (c >= 0).all() and (d >= 0).all()
    np.testing.assert_array_equal((b == 0) & (d == 0), (ln == 0).all(axis=-1))


@FAST
@given(st.lists(st.tuples(nonneg_reals, nonneg_reals), min_size=1, max_size=8))
def test_sqNorm_add_sqNorm_eq_profileB_add_profileC_add_profileD_numeric(pairs):
    lp, ln = np.array(pairs).T
    b, c, d = profile_bcd(lp, ln)
    assert min(b, c, d) >= 0
    assert b + c + d == pytest.approx(np.sum(lp**2) + np.sum(ln**2), rel=1e-12, abs=1e-9)


# --------------------------------------------------------------------- 3. HeadGeometry/Frobenius.lean


def sym_antisym(L):
    return (L + L.T) / 2, (L - L.T) / 2


def frob_sq(A):
    return float(np.sum(A * A))


def random_matrix(seed, n=None):
    rng = np.random.default_rng(seed)
    n = n or int(rng.integers(1, 7))
    return rng.standard_normal((n, n)) * rng.choice([1e-3, 1.0, 1e3])


@FAST
@given(seeds)
def test_frobenius_orthogonality(seed):
    """`frobSq_eq_frobSq_symPart_add_frobSq_antisymPart`, `symPart_add_antisymPart`,
    `transpose_symPart`, `transpose_antisymPart`, `symPart_eq`, `antisymPart_eq`."""
    L = random_matrix(seed)
    S, T = sym_antisym(L)
    np.testing.assert_allclose(S + T, L, rtol=0, atol=1e-15 * np.abs(L).max())
    np.testing.assert_array_equal(S.T, S)
    np.testing.assert_array_equal(T.T, -T)
    assert frob_sq(L) == pytest.approx(frob_sq(S) + frob_sq(T), rel=1e-12)
    # `symPart_sq_add_antisymPart_sq`, entrywise
    np.testing.assert_allclose(S**2 + T**2, L**2 / 2 + L.T**2 / 2, rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_frobenius_orthogonality_symbolic(n):
    L = sp.Matrix(n, n, lambda i, j: sp.Symbol(f"l{i}{j}", real=True))
    S, T = (L + L.T) / 2, (L - L.T) / 2

    def fsq(A):
        return sum(x**2 for x in A)

    assert sp.expand(fsq(L) - fsq(S) - fsq(T)) == 0
    assert (S.T - S).applyfunc(sp.expand) == sp.zeros(n, n)
    assert (T.T + T).applyfunc(sp.expand) == sp.zeros(n, n)


@FAST
@given(seeds)
def test_symPart_eq_zero_iff_and_antisymPart_eq_zero_iff(seed):
    """`symPart_eq_zero_iff` (S = 0 iff L^T = -L), `antisymPart_eq_zero_iff` (T = 0 iff L^T = L),
    `frobSq_eq_zero_iff`."""
    A = random_matrix(seed)
    for L in (A, A - A.T, A + A.T, np.zeros_like(A)):
        S, T = sym_antisym(L)
        assert (S == 0).all() == (L.T == -L).all()
        assert (T == 0).all() == (L.T == L).all()
        assert (frob_sq(S) == 0) == (S == 0).all()


# ----------------------------------------------------------------------- 4. HeadGeometry/Profile.lean


def spectral_split(L):
    """lambda_+, lambda_- of the symmetric part of L: decreasing, zero-padded to the size of L."""
    lam = np.linalg.eigvalsh(sym_antisym(L)[0])
    lp = np.sort(pos(lam))[::-1]
    ln = np.sort(pos(-lam))[::-1]
    return lp, ln


def reference_profile(L):
    """(a, b, c, d) before scaling, as defined in Profile.lean: a = ||T||^2, then b, c, d."""
    lp, ln = spectral_split(L)
    return np.array([frob_sq(sym_antisym(L)[1]), *profile_bcd(lp, ln)])


def family(kind, seed, n):
    """A random n x n form of a given kind: the vertices of the simplex and generic forms."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    B = rng.standard_normal((n, max(1, n - 1)))
    if kind == "indefinite":  # symmetric, with eigenvalues of both signs
        U = np.linalg.qr(A)[0]
        lam = rng.uniform(0.5, 2.0, n) * rng.choice([-1.0, 1.0], n)
        lam[:2] = abs(lam[:2]) * np.array([1.0, -1.0])
        L = U @ np.diag(lam) @ U.T
        return (L + L.T) / 2
    return {"antisymmetric": A - A.T, "psd": B @ B.T, "nsd": -(B @ B.T), "generic": A}[kind]


KINDS = ["antisymmetric", "psd", "nsd", "indefinite", "generic"]


@FAST
@given(seeds)
def test_spectral_split_hypothesis_holds(seed):
    """The hypothesis `IsSpectralSplit` holds for the pipeline's construction of lambda_+-."""
    L = random_matrix(seed)
    lp, ln = spectral_split(L)
    assert (lp >= 0).all() and (ln >= 0).all()
    S = sym_antisym(L)[0]
    assert np.sum(lp**2) + np.sum(ln**2) == pytest.approx(frob_sq(S), rel=1e-10, abs=1e-300)


@FAST
@given(seeds, st.sampled_from(KINDS))
def test_profile_nonneg_and_profile_sum(seed, kind):
    """`profile_nonneg`, `profile_sum`, `normalized_profile_sum`."""
    L = family(kind, seed, 2 + seed % 5)
    prof = reference_profile(L)
    total = frob_sq(L)
    assert (prof >= -1e-12 * total).all()
    assert prof.sum() == pytest.approx(total, rel=1e-10)
    assert (prof / total).sum() == pytest.approx(1.0, rel=1e-12)


@FAST
@given(seeds, st.sampled_from(KINDS))
def test_vertices(seed, kind):
    """`profileA_eq_frobSq_iff` (antisymmetric), `profileC_eq_frobSq_iff` (PSD),
    `profileD_eq_frobSq_iff` (NSD): each coordinate reaches ||L||^2 on its family and only there."""
    L = family(kind, seed, 2 + seed % 5)
    a, b, c, d = reference_profile(L) / frob_sq(L)
    tol = 1e-9
    assert (abs(a - 1) < tol) == (kind == "antisymmetric")
    assert (abs(c - 1) < tol) == (kind == "psd")
    assert (abs(d - 1) < tol) == (kind == "nsd")


def test_profile_of_cores_agrees_with_the_lean_definition():
    """`pipeline.profile.profile_of_cores` on dense forms: the profile of Profile.lean, scaled."""
    from pipeline.profile import profile_of_cores

    rng = np.random.default_rng(0)
    forms = [family(kind, int(s), n) for kind in KINDS for s in rng.integers(0, 2**31, 3) for n in (2, 3, 6)]
    for L in forms:
        prof, norm = profile_of_cores(L)
        assert norm == pytest.approx(np.sqrt(frob_sq(L)), rel=1e-12)
        np.testing.assert_allclose(prof, reference_profile(L) / frob_sq(L), atol=1e-9)
    # the vertices of the Lean vertex theorems
    A = rng.standard_normal((5, 5))
    B = rng.standard_normal((5, 3))
    for L, vertex in ((A - A.T, 0), (B @ B.T, 2), (-(B @ B.T), 3)):
        prof, _ = profile_of_cores(L)
        np.testing.assert_allclose(prof, np.eye(4)[vertex], atol=1e-12)


# ------------------------------------------------------------------------- 5. HeadGeometry/Orbit.lean
#
# A finite group G of permutations of n tokens acts on the token space by permutation matrices P(g);
# on the output space it acts by a representation Q(g) (any matrices). Heads come in orbits G/K for
# subgroups K: a base head averaged over K (so that K fixes it), moved to each coset gK by
# M = P(g) M0 P(g)^T, R = Q(g) R0 P(g)^T. The layer is sum_h R_h X attn(X^T M_h X).


def compose(g, h):
    """(g o h)[i] = g[h[i]] for permutations stored as tuples of images."""
    return tuple(g[i] for i in h)


def generate(generators):
    """The group generated by the given permutations (breadth first)."""
    n = len(generators[0])
    identity = tuple(range(n))
    group, frontier = {identity}, [identity]
    while frontier:
        new = []
        for g in frontier:
            for s in generators:
                h = compose(s, g)
                if h not in group:
                    group.add(h)
                    new.append(h)
        frontier = new
    return sorted(group)


def perm_matrix(g):
    """P e_j = e_{g[j]}: the permutation matrix of g (HeadGeometry.permMatrix up to orientation)."""
    n = len(g)
    P = np.zeros((n, n))
    P[list(g), range(n)] = 1.0
    return P


def orbit_heads(group, subgroups, Q, rng):
    """Heads in orbits: for each subgroup K, one head per left coset gK.

    Returns M (H, n, n), R (H, n_out, n) and `act(g, h)`, the index of the head g . h.
    """
    n = len(group[0])
    n_out = Q(group[0]).shape[0]
    Ms, Rs, heads = [], [], []  # heads[h] = (orbit index, coset)
    for orbit, K in enumerate(subgroups):
        A = rng.standard_normal((n, n))
        B = rng.standard_normal((n_out, n))
        M0 = sum(perm_matrix(k) @ A @ perm_matrix(k).T for k in K) / len(K)  # fixed by K
        R0 = sum(Q(k) @ B @ perm_matrix(k).T for k in K) / len(K)
        for g in group:
            head = (orbit, frozenset(compose(g, k) for k in K))
            if head not in heads:
                heads.append(head)
                Ms.append(perm_matrix(g) @ M0 @ perm_matrix(g).T)
                Rs.append(Q(g) @ R0 @ perm_matrix(g).T)

    def act(g, h):
        orbit, coset = heads[h]
        return heads.index((orbit, frozenset(compose(g, x) for x in coset)))

    return np.array(Ms), np.array(Rs), act


def key_softmax(S):
    """HeadGeometry.keySoftmax: W[j, i] = softmax over keys j of the scores S[i, j]."""
    E = np.exp(S - S.max(axis=1, keepdims=True))
    return (E / E.sum(axis=1, keepdims=True)).T


ATTENTION = {
    "key softmax": key_softmax,
    "column softmax": lambda S: np.exp(S - S.max(axis=0)) / np.exp(S - S.max(axis=0)).sum(axis=0),
    "squares normalised": lambda S: S**2 / (S**2).sum(axis=0, keepdims=True).clip(1e-300),
    "tanh": np.tanh,
    "not entrywise": lambda S: S @ S.T,
}


def layer(attn, M, R, X):
    """HeadGeometry.layer: sum_h R_h X attn(X^T M_h X)."""
    return sum(R[h] @ X @ attn(X.T @ M[h] @ X) for h in range(len(M)))


def cyclic_setup(n):
    """C_n acting by shifts T_s on tokens and by T_2s on outputs; orbits for every subgroup of C_n."""
    shift = tuple((i + 1) % n for i in range(n))
    group = generate([shift])
    subgroups = [[g for g in group if g[0] % d == 0] for d in range(1, n + 1) if n % d == 0]
    return group, subgroups, lambda g: perm_matrix(compose(g, g))


def symmetric3_setup():
    """S_3 acting on 3 tokens; outputs by sign(g) P(g) (a representation that is not a permutation)."""
    group = generate([(1, 0, 2), (1, 2, 0)])

    def sign(g):
        return round(np.linalg.det(perm_matrix(g)))

    subgroups = [[(0, 1, 2)], [(0, 1, 2), (1, 0, 2)], generate([(1, 2, 0)]), group]
    return group, subgroups, lambda g: sign(g) * perm_matrix(g)


def check_orbit_hypotheses(group, M, R, Q, act):
    """The hypotheses of `layer_equivariant`: P^T P = 1, M_{g.h} = P M_h P^T, R_{g.h} = Q R_h P^T."""
    for g in group:
        P = perm_matrix(g)
        np.testing.assert_array_equal(P.T @ P, np.eye(len(g)))  # `permMatrix_transpose_mul`
        for h in range(len(M)):
            np.testing.assert_allclose(M[act(g, h)], P @ M[h] @ P.T, atol=1e-12)
            np.testing.assert_allclose(R[act(g, h)], Q(g) @ R[h] @ P.T, atol=1e-12)


def assert_equivariant(attn, M, R, X, group, Q, name):
    """The conclusion of `layer_equivariant`: layer(P(g) X) = Q(g) layer(X) for every g."""
    out = layer(attn, M, R, X)
    for g in group:
        error = np.linalg.norm(layer(attn, M, R, perm_matrix(g) @ X) - Q(g) @ out)
        assert error <= 1e-10 * max(1.0, np.linalg.norm(out)), (name, g, error)


@FAST
@given(st.integers(2, 8), st.integers(1, 5), seeds, st.booleans())
def test_layer_equivariant_cyclic(n, m, seed, one_hot):
    """`layer_equivariant` / `softmax_layer_equivariant` for C_n, heads in orbits of every size."""
    rng = np.random.default_rng(seed)
    group, subgroups, Q = cyclic_setup(n)
    M, R, act = orbit_heads(group, subgroups, Q, rng)
    check_orbit_hypotheses(group, M, R, Q, act)
    X = np.eye(n)[:, rng.integers(0, n, m)] if one_hot else rng.standard_normal((n, m))
    for name, attn in ATTENTION.items():
        assert_equivariant(attn, M, R, X, group, Q, name)


@FAST
@given(st.integers(1, 4), seeds)
def test_layer_equivariant_nonabelian(m, seed):
    """`layer_equivariant` for S_3, with Q(g) = sign(g) P(g)."""
    rng = np.random.default_rng(seed)
    group, subgroups, Q = symmetric3_setup()
    M, R, act = orbit_heads(group, subgroups, Q, rng)
    check_orbit_hypotheses(group, M, R, Q, act)
    X = rng.standard_normal((3, m))
    for name, attn in ATTENTION.items():
        assert_equivariant(attn, M, R, X, group, Q, name)


def test_layer_not_equivariant_when_a_head_leaves_its_orbit():
    """Control: the check above is sensitive; perturbing one head's OV matrix breaks equivariance."""
    rng = np.random.default_rng(1)
    group, subgroups, Q = cyclic_setup(6)
    M, R, _ = orbit_heads(group, subgroups, Q, rng)
    R = R.copy()
    R[0] += 0.1 * rng.standard_normal(R[0].shape)
    X = rng.standard_normal((6, 4))
    out = layer(key_softmax, M, R, X)
    errors = [np.linalg.norm(layer(key_softmax, M, R, perm_matrix(g) @ X) - Q(g) @ out) for g in group]
    assert errors[0] == pytest.approx(0, abs=1e-12)  # the identity
    assert min(errors[1:]) > 1e-3
