"""The three spectra from the reduced problem against the naive N x N computation (numpy eigvals and svd of the
dense L and T), on random, rank-deficient, grouped-query and rotary heads, and on one real head per installed real
model."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.analyses.spectra import SPECTRA, core_spectra, head_spectra, pad
from pipeline.families import layer_qk, layout_from_config
from pipeline.families.rotary import rotation_matrices
from pipeline.profile import cores, span_cores
from pipeline.schema import STATISTICS
from pipeline.store import Store, default_store_path
from tests.pipeline.analyses.conftest import computed_models


def naive(W_q: np.ndarray, W_k: np.ndarray, R: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The k = min(N, 2n) largest values of each spectrum of the dense N x N form, with ||L||_F = 1."""
    n, N = W_q.shape
    k = min(N, 2 * n)
    L = W_k.T @ (W_q if R is None else R @ W_q)
    L = L / np.linalg.norm(L)
    T = (L - L.T) / 2
    first = lambda v: np.sort(v)[::-1][:k]  # noqa: E731
    return {"antisym_spectrum": first(np.linalg.svd(T, compute_uv=False)),
            "eig_abs": first(np.abs(np.linalg.eigvals(L))),
            "singular_values": first(np.linalg.svd(L, compute_uv=False))}


def check(got, W_Q, W_K, kv=None, R=None, atol=1e-10):
    for h in range(W_Q.shape[0]):
        want = naive(W_Q[h], W_K[h if kv is None else kv[h]], R)
        for name in SPECTRA:
            np.testing.assert_allclose(getattr(got, name)[h], want[name], rtol=0, atol=atol, err_msg=name)


@pytest.mark.parametrize("N, n", [(40, 6), (9, 6), (12, 6), (7, 4)])
def test_random_heads_match_the_dense_form(N, n):
    rng = np.random.default_rng(N * 10 + n)
    W_Q, W_K = rng.standard_normal((3, n, N)), rng.standard_normal((3, n, N))
    got = head_spectra(W_Q, W_K)
    assert got.eig_abs.shape == (3, min(N, 2 * n))
    check(got, W_Q, W_K)
    for name in SPECTRA:  # decreasing
        assert (np.diff(getattr(got, name), axis=-1) <= 0).all()


def test_rank_deficient_heads():
    rng = np.random.default_rng(1)
    n, N = 5, 30
    W_Q, W_K = rng.standard_normal((4, n, N)), rng.standard_normal((4, n, N))
    W_Q[0, 3:] = W_Q[0, :2]  # W_Q of rank 3
    W_K[1] = W_Q[1]  # keys equal queries: the span has n dimensions
    W_K[2, 1:] = 0.0  # rank-one keys
    W_Q[3] = 2.0 * W_K[3] + 0.0  # queries parallel to keys: L symmetric, T = 0
    got = head_spectra(W_Q, W_K)
    check(got, W_Q, W_K)
    np.testing.assert_allclose(got.antisym_spectrum[3], 0.0, atol=1e-12)
    assert np.count_nonzero(got.singular_values[2] > 1e-9) == 1


def test_grouped_query_heads_and_a_rotation():
    rng = np.random.default_rng(2)
    n, N = 8, 50
    W_Q, W_K = rng.standard_normal((4, n, N)), rng.standard_normal((2, n, N))
    kv = np.array([0, 0, 1, 1])
    R = rotation_matrices(n, n, 100.0, [7])[0]
    got = head_spectra(W_Q, W_K, R, kv_of_head=kv)
    check(got, W_Q, W_K, kv, R)


def test_eigenvalues_of_l_are_those_of_the_small_product():
    """Closed form: the nonzero eigenvalues of W_K^T W_Q are those of the n x n product W_Q W_K^T."""
    rng = np.random.default_rng(3)
    n, N = 6, 200
    W_Q, W_K = rng.standard_normal((1, n, N)), rng.standard_normal((1, n, N))
    got = head_spectra(W_Q, W_K)
    small = np.sort(np.abs(np.linalg.eigvals(W_Q[0] @ W_K[0].T)))[::-1] / np.linalg.norm(W_K[0].T @ W_Q[0])
    np.testing.assert_allclose(got.eig_abs[0, :n], small, rtol=1e-10)
    np.testing.assert_array_equal(got.eig_abs[0, n:], 0.0)


def test_full_cores_and_top_rows_agree_and_pad():
    rng = np.random.default_rng(4)
    n, N = 5, 30
    K, P = span_cores(rng.standard_normal((2, n, N)), rng.standard_normal((2, n, N)))
    C = cores(K, P)  # (2, 10, 10), rows n: zero
    full, top = core_spectra(C), core_spectra(3.0 * C[:, :n])  # any scale
    for name in SPECTRA:
        np.testing.assert_allclose(getattr(full, name), getattr(top, name), atol=1e-12)
    wide = core_spectra(C[0, :n], width=14)
    assert wide.eig_abs.shape == (14,) and np.isnan(wide.eig_abs[10:]).all()
    np.testing.assert_allclose(wide.eig_abs[:10], full.eig_abs[0], atol=1e-12)
    np.testing.assert_array_equal(pad(full.eig_abs, None), full.eig_abs)


def test_zero_head_is_nan_and_bad_inputs_are_refused():
    got = core_spectra(np.zeros((2, 3, 6)))
    assert np.isnan(got.singular_values).all()
    with pytest.raises(ValueError, match="m <= k"):
        core_spectra(np.ones((4, 3)))
    with pytest.raises(ValueError, match="not finite"):
        core_spectra(np.full((2, 4), np.nan))
    with pytest.raises(ValueError, match="narrower"):
        core_spectra(np.ones((2, 4)), width=3)
    with pytest.raises(ValueError, match="kv_of_head"):
        head_spectra(np.ones((2, 2, 5)), np.ones((1, 2, 5)), kv_of_head=[0, 1])


def test_rank_one_head_pairs_sigma_t_with_the_lobes():
    """Closed form: L = u v^T with unit u, v at cosine t has ||L|| = 1, eigenvalue t, singular value 1, and T's
    singular values sqrt(1 - t^2) / 2 twice."""
    t = 0.3
    u = np.zeros(8)
    u[0] = 1.0
    v = np.zeros(8)
    v[0], v[1] = t, np.sqrt(1 - t * t)
    got = head_spectra(v[None, None, :], u[None, None, :])  # W_Q = v^T, W_K = u^T: L = u v^T
    np.testing.assert_allclose(got.eig_abs[0], [t, 0.0], atol=1e-14)
    np.testing.assert_allclose(got.singular_values[0], [1.0, 0.0], atol=1e-14)
    np.testing.assert_allclose(got.antisym_spectrum[0], [np.sqrt(1 - t * t) / 2] * 2, atol=1e-14)


def real_checkpoint(name: str):
    """The checkpoint of a committed model whose weights are installed with the project; skipped (with the reason)
    where they are not."""
    from pipeline.cli.real import RealModelError, weight_file
    from pipeline.registry.checkpoints import open_checkpoint
    from pipeline.registry.models import MODELS

    spec = MODELS.get(name)
    if spec is not None and spec.pinned is not None:
        try:
            return open_checkpoint(str(weight_file(spec)))
        except RealModelError as exc:
            pytest.skip(str(exc))
    if spec is not None and spec.package_module is not None:
        return open_checkpoint(name)
    pytest.skip(f"{name}'s weights are not installed with the project (its W_Q, W_K are not stored)")


def committed_layer0(name: str):
    """(layout, layer 0's LayerQK) of a committed model: a trained one's from its installed weights (skipped where
    they are not installed), a baseline's made again from its kind and seed, as ``python -m pipeline baseline``
    made it."""
    from pipeline.analyses.baseline_run import baseline_target
    from pipeline.sources.baseline import baseline_heads

    store = Store.open(default_store_path(), "r")
    row = store.row(name)
    if row.is_baseline:
        config, _ = baseline_target(row.source, store)
        heads = baseline_heads(config, row.baseline_kind, row.baseline_seed)
        return heads.layout, heads.layer(0)
    ckpt = real_checkpoint(name)
    layout = layout_from_config(ckpt.config)
    return layout, layer_qk(ckpt, layout, 0)


@pytest.mark.parametrize("name", computed_models())
def test_one_real_head_per_committed_model(committed, name):
    """A real head's spectra equal the dense form's, and its singular values give the participation ratio and
    stable rank the store holds for it."""
    data = committed[name]
    layout, qk = committed_layer0(name)
    h = layout.n_heads - 1
    W_Q, W_K = np.asarray(qk.W_Q[h:h + 1], np.float64), np.asarray(qk.W_K[qk.kv_of_head[h:h + 1]], np.float64)
    got = head_spectra(W_Q, W_K)
    check(got, W_Q, W_K, atol=1e-9)
    e = got.singular_values[0] ** 2
    stats = data.statistics[h]  # layer 0: the first n_heads rows
    assert stats[STATISTICS.index("participation_ratio")] == pytest.approx(e.sum() ** 2 / (e ** 2).sum(), rel=1e-9)
    assert stats[STATISTICS.index("stable_rank")] == pytest.approx(e.sum() / e.max(), rel=1e-9)


def test_the_squared_route_is_taken_where_exact_and_the_svd_elsewhere(monkeypatch):
    """A stack of well-conditioned matrices takes no SVD; a rank-deficient one in it (squares below SQUARED_RCOND
    times the largest) takes the SVD alone. Both equal numpy's SVD: within 1e-12 on the squared route (its error
    bound, eps sigma_max / sqrt(SQUARED_RCOND), is 2.2e-12 at sigma_max <= 1) and exactly on the SVD."""
    from pipeline.profile import core_spectra as cs

    rng = np.random.default_rng(5)
    M = rng.standard_normal((4, 12, 20))
    M /= np.linalg.norm(M, axis=(1, 2), keepdims=True)
    want = np.linalg.svd(M, compute_uv=False)
    M_def = M.copy()
    M_def[2, 5:] = M_def[2, :7]  # rank 7 of 12: five squares at rounding level
    want_def = np.linalg.svd(M_def, compute_uv=False)
    svd, taken = np.linalg.svd, []

    def counted(A, *args, **kwargs):
        taken.append(A.shape)
        return svd(A, *args, **kwargs)

    monkeypatch.setattr(cs.np.linalg, "svd", counted)
    np.testing.assert_allclose(np.sort(cs.singular_values(M))[:, ::-1], want, rtol=0, atol=1e-12)
    assert taken == []
    squares = np.linalg.eigvalsh(M @ np.swapaxes(M, -1, -2))
    np.testing.assert_allclose(np.sort(cs.singular_values(M, squares))[:, ::-1], want, rtol=0, atol=1e-12)
    assert taken == []
    got = np.sort(cs.singular_values(M_def))[:, ::-1]
    assert taken == [(1, 12, 20)]
    np.testing.assert_array_equal(got[2], want_def[2])
    np.testing.assert_allclose(got, want_def, rtol=0, atol=1e-12)
    T = cs.antisymmetric_part(rng.standard_normal((2, 5, 11)))  # odd k = 11: T has a zero singular value
    taken.clear()
    cs.singular_values(T)
    assert taken == [(2, 11, 11)]
