"""Per-head statistics and spectra against a naive computation from the full N x N form (numpy eigh, eigvals, svd),
on the profile route and through every run path."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.families.rotary import rotation_matrices
from pipeline.profile import head_profiles
from pipeline.schema import SPECTRA, STATISTICS

IDX = {name: i for i, name in enumerate(STATISTICS)}


def naive(L: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The statistics (in STATISTICS order) and spectrum of one dense form L (N x N) of head dimension n, straight
    from the definitions: eigh of the full S, svd of the full L. The span has k = min(N, 2n) dimensions, so the
    N - k eigenvalues of S nearest zero (those off the span) are left out of the counts and the spectrum."""
    N = L.shape[0]
    k = min(N, 2 * n)
    L = L / np.linalg.norm(L)
    S = (L + L.T) / 2
    ev = np.linalg.eigh(S)[0]
    ev = np.sort(ev[np.argsort(np.abs(ev))[N - k:]])  # the k on the span
    cut = 1e-9 * np.abs(ev).max()
    n_pos, n_neg = int((ev > cut).sum()), int((ev < -cut).sum())
    pos = np.zeros(k)
    neg = np.zeros(k)
    p, m = np.sort(ev[ev > 0])[::-1], np.sort(-ev[ev < 0])[::-1]
    pos[:len(p)], neg[:len(m)] = p, m
    sym_sq = float((S ** 2).sum())
    rho = np.linalg.norm(neg) / np.linalg.norm(pos)
    pairing = 1 - np.linalg.norm(pos - neg) / np.sqrt(sym_sq)
    bound = 1 - abs(1 - rho) / np.sqrt(1 + rho ** 2)
    u = pos - neg
    h = np.linalg.svd(L, compute_uv=False)
    e = h ** 2
    values = {
        "symmetric_energy": sym_sq, "n_pos": n_pos, "n_neg": n_neg, "n_zero": k - n_pos - n_neg,
        "balance": 1 - abs(n_pos - n_neg) / (n_pos + n_neg), "pairing": pairing, "rho": rho,
        "pairing_bound": bound, "pairing_gap": bound - pairing,
        "lobe_departure": np.linalg.norm(neg - rho * pos) / np.linalg.norm(neg),
        "b_sym": 2 * pos @ neg / sym_sq, "c_sym": (u[u > 0] ** 2).sum() / sym_sq,
        "d_sym": (u[u < 0] ** 2).sum() / sym_sq,
        "trace_ratio": abs(np.trace(L)), "participation_ratio": e.sum() ** 2 / (e ** 2).sum(),
        "stable_rank": e.sum() / e.max(), "leading_share": e.max() / e.sum(),
    }
    return np.array([values[s] for s in STATISTICS], dtype=np.float64), ev[::-1]


def naive_spectra(L: np.ndarray, n: int) -> np.ndarray:
    """The three spectra (3, k) of one dense form (``pipeline.schema.SPECTRA`` order), k = min(N, 2n) largest of each,
    ||L||_F = 1: numpy's svd of T = (L - L^T) / 2, |eigvals| of L, svd of L."""
    k = min(L.shape[0], 2 * n)
    L = L / np.linalg.norm(L)
    first = lambda v: np.sort(v)[::-1][:k]  # noqa: E731
    return np.stack([first(np.linalg.svd((L - L.T) / 2, compute_uv=False)), first(np.abs(np.linalg.eigvals(L))),
                     first(np.linalg.svd(L, compute_uv=False))])


def dense(W_Q, W_K, h, kv=None, R=None, gain=None):
    q, k = W_Q[h], W_K[h if kv is None else kv[h]]
    if gain is not None:
        q, k = q * gain, k * gain
    return k.T @ (np.eye(q.shape[0]) if R is None else R) @ q


def check(W_Q, W_K, n, got_stats, got_spec, got_spectra=None, kv=None, R0=None, gain=None):
    for h in range(W_Q.shape[0]):
        L = dense(W_Q, W_K, h, kv, R0, gain)
        want, spec = naive(L, n)
        np.testing.assert_allclose(got_stats[h], want, rtol=1e-9, atol=1e-11, err_msg=f"head {h}")
        np.testing.assert_allclose(got_spec[h], spec, rtol=0, atol=1e-12)
        if got_spectra is not None:
            np.testing.assert_allclose(got_spectra[:, h], naive_spectra(L, n), rtol=0, atol=1e-10,
                                       err_msg=f"head {h}")


@pytest.mark.parametrize("N,n,H", [(40, 6, 4), (24, 8, 3), (12, 8, 2)])  # the last: N < 2n, the span is all of R^N
def test_statistics_and_spectrum_match_the_dense_computation(N, n, H):
    rng = np.random.default_rng(N + n)
    W_Q, W_K = rng.normal(size=(H, n, N)), rng.normal(size=(H, n, N))
    prof, norm, stats, spec, spectra = head_profiles(W_Q, W_K, at_zero=True).layer_values()
    assert stats.shape == (H, len(STATISTICS)) and spec.shape == (H, min(N, 2 * n))
    assert spectra.shape == (len(SPECTRA), H, min(N, 2 * n))
    check(W_Q, W_K, n, stats, spec, spectra)
    np.testing.assert_allclose(stats[:, IDX["symmetric_energy"]], 1 - prof[:, 0], atol=1e-12)
    # statistics change nothing about the profile
    plain = head_profiles(W_Q, W_K)
    np.testing.assert_array_equal(plain.profile, prof)
    np.testing.assert_array_equal(plain.norm, norm)


def test_grouped_query_rotary_and_folded_heads_at_d0():
    """GQA (4 query heads on 2 key heads), rotary offsets, a folded gain: the statistics are those of L(0)."""
    rng = np.random.default_rng(7)
    H, Hkv, n, N = 4, 2, 8, 30
    W_Q, W_K = rng.normal(size=(H, n, N)).astype(np.float32), rng.normal(size=(Hkv, n, N)).astype(np.float32)
    W_K[1] = 0.3 * W_K[0] + W_K[1]  # not independent of each other
    kv = np.array([0, 0, 1, 1])
    gain = rng.uniform(0.5, 2.0, size=N)
    R = rotation_matrices(n, n, 100.0, 9)
    prof, norm, stats, spec, spectra = head_profiles(W_Q, W_K, R, kv_of_head=kv, gain=gain,
                                                     at_zero=True).layer_values()
    check(W_Q.astype(np.float64), W_K.astype(np.float64), n, stats, spec, spectra, kv=kv, R0=R[0], gain=gain)
    _, _, s2, sp2, _ = head_profiles(W_Q, W_K, R[:1], kv_of_head=kv, gain=gain, at_zero=True).layer_values()
    np.testing.assert_allclose(stats, s2, rtol=1e-12, atol=1e-14)  # the same head at d = 0 alone
    np.testing.assert_allclose(spec, sp2, atol=1e-14)
    # a partial-rotary layer (half the dimensions rotated): R(0) is the identity there too
    R = rotation_matrices(n, n // 2, 10000.0, 5)
    _, _, s3, sp3, _ = head_profiles(W_Q, W_K, R, kv_of_head=kv, gain=gain, at_zero=True).layer_values()
    np.testing.assert_allclose(s3, stats, rtol=1e-12, atol=1e-14)


def test_the_spectrum_is_the_eigenvalues_of_S_decreasing_and_the_profile_follows_from_it():
    rng = np.random.default_rng(2)
    W_Q, W_K = rng.normal(size=(3, 5, 20)), rng.normal(size=(3, 5, 20))
    prof, _, stats, spec, _ = head_profiles(W_Q, W_K, at_zero=True).layer_values()
    assert np.all(np.diff(spec, axis=-1) <= 0)
    pos, neg = np.maximum(spec, 0), np.sort(np.maximum(-spec, 0), axis=-1)[:, ::-1]
    np.testing.assert_allclose(2 * np.sum(pos * neg, axis=-1), prof[:, 1], atol=1e-12)  # b = 2 <lambda_+, lambda_->
    np.testing.assert_allclose(np.sum(spec ** 2, axis=-1), stats[:, IDX["symmetric_energy"]], atol=1e-12)


def test_the_vertices_and_the_undefined_cases():
    rng = np.random.default_rng(5)
    n, N = 3, 10
    Y = rng.normal(size=(n, N))
    # positive semidefinite Y^T Y: lambda_- = 0, so rho = 0, the bound 0, lobe_departure undefined (NaN)
    _, _, s, spec, spectra = head_profiles(Y[None], Y[None], at_zero=True).layer_values()
    s = dict(zip(STATISTICS, s[0], strict=True))
    assert (s["n_pos"], s["n_neg"], s["n_zero"]) == (3, 0, 3)
    assert s["rho"] == 0 and s["pairing_bound"] == 0 and np.isnan(s["lobe_departure"])
    assert s["c_sym"] == 1 and s["b_sym"] == 0 and s["d_sym"] == 0 and s["balance"] == 0
    assert s["symmetric_energy"] == pytest.approx(1, abs=1e-14) and s["pairing"] == pytest.approx(0, abs=1e-14)
    assert np.all(spec[0, 3:] == 0)
    np.testing.assert_allclose(spectra[0], 0, atol=1e-14)  # symmetric: T = 0 (up to the span's rounding)
    # negative semidefinite: lambda_+ = 0, so rho (and everything built on it) is NaN
    _, _, s, _, _ = head_profiles(-Y[None], Y[None], at_zero=True).layer_values()
    s = dict(zip(STATISTICS, s[0], strict=True))
    assert np.isnan([s["rho"], s["pairing_bound"], s["pairing_gap"], s["lobe_departure"]]).all()
    assert s["d_sym"] == 1 and (s["n_pos"], s["n_neg"]) == (0, 3)
    # antisymmetric: S = 0, every ratio over ||S|| or the counts is NaN; symmetric_energy 0, all zeros
    M = rng.normal(size=(N, N))
    A = M - M.T  # rank N: as a head of dimension N
    U, sv, Vt = np.linalg.svd(A)
    W_K, W_Q = U.T, sv[:, None] * Vt  # A = W_K^T W_Q
    _, _, s, spec, spectra = head_profiles(W_Q[None], W_K[None], at_zero=True).layer_values()
    s = dict(zip(STATISTICS, s[0], strict=True))
    assert s["symmetric_energy"] == 0 and s["n_zero"] == N and s["trace_ratio"] == pytest.approx(0, abs=1e-12)
    for name in ("balance", "pairing", "rho", "pairing_bound", "pairing_gap", "lobe_departure", "b_sym"):
        assert np.isnan(s[name]), name
    assert np.all(spec == 0)
    np.testing.assert_allclose(spectra[:, 0], naive_spectra(A, N), atol=1e-12)  # T = L: sigma(T) = sigma(L)
    # rank one: participation ratio and stable rank exactly 1, the leading share 1
    x, y = rng.normal(size=(1, N)), rng.normal(size=(1, N))
    W_Q = np.vstack([x, np.zeros((n - 1, N))])[None]
    W_K = np.vstack([y, np.zeros((n - 1, N))])[None]
    _, _, s, _, spectra = head_profiles(W_Q, W_K, at_zero=True).layer_values()
    s = dict(zip(STATISTICS, s[0], strict=True))
    assert s["participation_ratio"] == pytest.approx(1) and s["stable_rank"] == pytest.approx(1)
    assert s["leading_share"] == pytest.approx(1)
    np.testing.assert_allclose(spectra[2, 0, 0], 1.0)  # sigma(L): one singular value
    np.testing.assert_allclose(spectra[2, 0, 1:], 0, atol=1e-12)
    # L = 0: no statistics, no spectrum
    _, norm, s, spec, spectra = head_profiles(np.zeros((1, n, N)), Y[None], at_zero=True).layer_values()
    assert norm[0] == 0 and np.isnan(s).all() and np.isnan(spec).all() and np.isnan(spectra).all()


# ------------------------------------------------------------------------------------- every run path writes them


def stored_statistics(store, name):
    """(head_statistics, spectrum, the spectra (3, layer, head, eigen)) of model ``name``."""
    from pipeline.store import Store

    ds = Store.open(store, mode="r").dataset("profiles").sel(model=name)
    return ds.head_statistics.values, ds.spectrum.values, np.stack([ds[s].values for s in SPECTRA])


def test_every_run_path_writes_the_statistics_of_the_checkpoint(tiny_model, tmp_path):
    """In-process, a process pool and a dask cluster write the same statistics and spectra, those of the dense L(0) of
    each head of a grouped-query rotary checkpoint (4 query heads on 2 key heads, n = 12, N = 32)."""
    from pipeline.run import open_cluster, open_store, plan_model, run_dask, run_profiles

    model, folder = tiny_model("mistral")
    H, Hkv, n, N = 4, 2, 12, 32
    runs = {}
    run_profiles([folder], tmp_path / "inline.zarr", name="m", progress=False, log=lambda *_: None)
    runs["inline"] = stored_statistics(tmp_path / "inline.zarr", "m")
    run_profiles([folder], tmp_path / "pool.zarr", name="m", progress=False, log=lambda *_: None, workers=1)
    runs["pool"] = stored_statistics(tmp_path / "pool.zarr", "m")
    with open_cluster(workers=1, processes=False) as cluster:
        store = open_store(str(tmp_path / "dask.zarr"))
        run_dask([plan_model(folder, store, name="m")], store, cluster.client, progress=False)
    runs["dask"] = stored_statistics(tmp_path / "dask.zarr", "m")
    for layer, block in enumerate(model.model.layers):
        W_Q = block.self_attn.q_proj.weight.detach().numpy().reshape(H, n, N)
        W_K = block.self_attn.k_proj.weight.detach().numpy().reshape(Hkv, n, N)
        for h in range(H):
            want, spec = naive(W_K[h // 2].T @ W_Q[h], n)
            three = naive_spectra(W_K[h // 2].T @ W_Q[h], n)
            for how, (stats, spectrum, spectra) in runs.items():
                np.testing.assert_allclose(stats[layer, h], want, rtol=1e-9, atol=1e-11, err_msg=how)
                np.testing.assert_allclose(spectrum[layer, h], spec, atol=1e-12, err_msg=how)
                np.testing.assert_allclose(spectra[:, layer, h, :2 * n], three, atol=1e-10, err_msg=how)
    for how in ("pool", "dask"):
        for a, b in zip(runs[how], runs["inline"], strict=True):
            np.testing.assert_array_equal(a, b)


def test_the_orbits_model_is_written_with_its_statistics(tmp_path):
    from pipeline.orbits.store_io import write_profiles_model
    from pipeline.store import Store

    rng = np.random.default_rng(11)
    params = {"W_Q": rng.normal(size=(3, 4, 10)), "W_K": rng.normal(size=(3, 4, 10))}
    write_profiles_model(tmp_path / "s.zarr", params, name="orb")
    stats, spectrum, spectra = stored_statistics(tmp_path / "s.zarr", "orb")
    for h in range(3):
        want, spec = naive(params["W_K"][h].T @ params["W_Q"][h], 4)
        np.testing.assert_allclose(stats[0, h], want, rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(spectrum[0, h], spec, atol=1e-12)
        np.testing.assert_allclose(spectra[:, 0, h], naive_spectra(params["W_K"][h].T @ params["W_Q"][h], 4),
                                   atol=1e-10)
    row = Store.open(tmp_path / "s.zarr", "r").row("orb")
    assert row.statistics_computed and row.spectra_computed


def test_the_command_shown_for_a_store_without_statistics_adds_them(tiny_model, tmp_path, capsys):
    """A store written before the statistics (here: their variables removed) lists its model as "statistics not
    computed" with the model's own command; running that command adds them and leaves the profile as it was."""
    import shlex

    from pipeline.__main__ import main
    from pipeline.store import Store
    from tests.pipeline.test_store import drop_statistics

    _, folder = tiny_model("bert")
    store = tmp_path / "s.zarr"
    assert main(["profiles", folder, "--store", str(store), "--name", "m", "--quiet"]) == 0
    before = Store.open(store, mode="r").dataset("profiles").sel(model="m").load()
    drop_statistics(store)
    capsys.readouterr()
    assert main(["list", "--store", str(store)]) == 0
    row = Store.open(store, "r").row("m")
    assert f"m: statistics not computed; add them with `{row.fix_command}`" in capsys.readouterr().out
    args = shlex.split(row.fix_command)
    assert args[:4] == ["python", "-m", "pipeline", "profiles"]
    assert main([*args[3:], "--store", str(store), "--quiet"]) == 0
    after = Store.open(store, mode="r").dataset("profiles").sel(model="m").load()
    assert Store.open(store, "r").row("m").statistics_computed
    np.testing.assert_array_equal(after.profile.values, before.profile.values)
    np.testing.assert_array_equal(after.head_statistics.values, before.head_statistics.values)
    np.testing.assert_array_equal(after.spectrum.values, before.spectrum.values)
    assert main(["profiles", folder, "--store", str(store), "--name", "m", "--quiet"]) == 0  # now: nothing to do
    assert "already complete" in capsys.readouterr().out
    assert Store.open(store).verify() == []


def test_the_command_shown_for_a_store_without_the_spectra_adds_them(tiny_model, tmp_path, capsys):
    """A store written before the spectra of T and L (their variables and the baseline fields removed) keeps its
    statistics (they verify) and lists its model as "spectra of T and L not computed" with its own command; ``verify
    --upgrade`` adds the variables empty; the command, without --force, adds the spectra and leaves the profile and
    statistics as they were."""
    import shlex

    from pipeline.__main__ import main
    from pipeline.store import Store
    from tests.pipeline.test_store import drop_spectra

    _, folder = tiny_model("bert")
    store = tmp_path / "s.zarr"
    assert main(["profiles", folder, "--store", str(store), "--name", "m", "--quiet"]) == 0
    before = Store.open(store, mode="r").dataset("profiles").sel(model="m").load()
    drop_spectra(store)
    row = Store.open(store, "r").row("m")
    assert row.statistics_computed and not row.spectra_computed and row.statistics_note == ""
    assert row.spectra_note == f"spectra of T and L not computed; add them with `{row.fix_command}`"
    capsys.readouterr()
    assert main(["verify", "--store", str(store)]) == 0  # the statistics still match their checksums
    out = capsys.readouterr().out
    assert "every written layer matches its checksum" in out and f"m: {row.spectra_note}" in out
    assert main(["verify", "--upgrade", "--store", str(store)]) == 0
    assert "upgraded: profiles: added antisym_spectrum, eig_abs, singular_values, spectra_checksum" in \
        capsys.readouterr().out
    upgraded = Store.open(store, mode="r").dataset("profiles")
    assert np.isnan(upgraded.eig_abs.sel(model="m").values).all() and int(upgraded.baseline_seed[0]) == 0
    assert not Store.open(store, "r").row("m").spectra_computed
    args = shlex.split(row.fix_command)
    assert main([*args[3:], "--store", str(store), "--quiet"]) == 0
    after = Store.open(store, mode="r").dataset("profiles").sel(model="m").load()
    assert Store.open(store, "r").row("m").spectra_computed
    for var in ("profile", "head_statistics", "spectrum"):
        np.testing.assert_array_equal(after[var].values, before[var].values)
    for var in SPECTRA:
        np.testing.assert_array_equal(after[var].values, before[var].values)
    assert Store.open(store).verify() == []
