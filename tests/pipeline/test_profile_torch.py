"""The torch routes' layer-batched path (pipeline.profile.device) on CPU torch, against the numpy route
(profiles, norms, statistics and spectra within 1e-12) and against the naive N x N route; and
benchmarks/gpu_bench.py run on the CPU at tiny sizes."""

import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

from pipeline import profile as prof_module
from pipeline.families.rotary import rotation_matrices
from pipeline.profile import Kernels, head_profiles, naive_profiles

torch = pytest.importorskip("torch", reason="the torch eigen routes need torch (installed with the pipeline extra)")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def layer(seed, H=4, kv=2, n=8, N=40):
    rng = np.random.default_rng(seed)
    W_Q = rng.normal(size=(H, n, N)) * rng.uniform(0.1, 10, size=(H, 1, 1))
    W_K = rng.normal(size=(kv, n, N))
    return W_Q, W_K, np.arange(H) // (H // kv), rng.uniform(0.5, 2.0, size=N)


def assert_same(got, want, atol=1e-12):
    """profile, norm[, statistics, spectrum]: same shapes and NaNs; norms to 1e-12 relative, the rest absolute."""
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a.shape == b.shape
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
        if i == 1:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=0)
        else:
            np.testing.assert_allclose(a, b, rtol=0, atol=atol)


def arrays(out) -> tuple[np.ndarray, ...]:
    """profile, norm[, statistics, spectrum] of a head_profiles result."""
    return out.layer_values() if out.at_zero is not None else (out.profile, out.norm)


def both(W_Q, W_K, rotations, **kw):
    """(torch float64 on the CPU, numpy) arrays of the same call."""
    got = head_profiles(W_Q, W_K, rotations, eigvalsh="torch", device="cpu", threads=1, **kw)
    want = head_profiles(W_Q, W_K, rotations, eigvalsh="numpy", **kw)
    return arrays(got), arrays(want)


@pytest.mark.parametrize("style, rot", [("half", 8), ("interleaved", 8), ("half", 4)])
def test_rotary_layer_with_grouped_keys_gain_and_statistics_equals_the_numpy_route(style, rot):
    W_Q, W_K, kv_of_head, gain = layer(1)
    R = rotation_matrices(8, rot, 500.0, 17, style=style)
    got, want = both(W_Q, W_K, R, kv_of_head=kv_of_head, gain=gain, at_zero=True)
    assert got[0].shape == (4, 17, 4) and got[2].shape == (4, 17) and got[3].shape == (4, 16)
    assert_same(got, want)
    plain = both(W_Q, W_K[kv_of_head], R)  # without the grouping, the gain or the statistics
    assert_same(*plain)


def test_position_free_layer_equals_the_numpy_route():
    W_Q, W_K, kv_of_head, gain = layer(2)
    got, want = both(W_Q, W_K, None, kv_of_head=kv_of_head, gain=gain, at_zero=True)
    assert got[0].shape == (4, 4) and got[1].shape == (4,)
    assert_same(got, want)


def test_dense_rotations_take_the_batched_product_and_equal_the_numpy_route():
    W_Q, W_K, kv_of_head, _ = layer(3)
    O = np.linalg.qr(np.random.default_rng(3).normal(size=(5, 8, 8)))[0]  # no pair structure
    assert prof_module.rotation_pairs(O) is None
    assert_same(*both(W_Q, W_K, O, kv_of_head=kv_of_head, at_zero=True))


def test_chunks_split_heads_and_offsets_and_give_the_same_values():
    """chunk_bytes of 5 cores: the (heads x offsets) pairs cross head boundaries inside chunks, the QR takes two heads
    at a time. Every core is solved once, progress reports each head once in order, values as unchunked and numpy."""
    W_Q, W_K, kv_of_head, gain = layer(4, H=6, kv=3)
    R = rotation_matrices(8, 8, 1e4, 7)
    k = 16
    batches = []

    class Counting(Kernels):  # each batched eigensolver call's batch size
        def torch_eigensolver(self, route):
            eig = super().torch_eigensolver(route)

            def f(S):
                batches.append(S.shape[0])
                return eig(S)

            return f

    done = []
    small = head_profiles(W_Q, W_K, R, kv_of_head=kv_of_head, gain=gain, at_zero=True, eigvalsh="torch",
                          device="cpu", threads=1, chunk_bytes=5 * k * k * 8, progress=done.append, kernels=Counting())
    assert batches == [5] * 8 + [2] and done == list(range(6))  # 6 x 7 = 42 cores
    batches.clear()
    whole = head_profiles(W_Q, W_K, R, kv_of_head=kv_of_head, gain=gain, at_zero=True, eigvalsh="torch",
                          device="cpu", threads=1, chunk_bytes=1 << 30, kernels=Counting())
    assert batches == [42]
    for a, b in zip(arrays(small), arrays(whole), strict=True):  # the same cores: chunking changes nothing
        np.testing.assert_array_equal(a, b)
    assert_same(arrays(small), arrays(head_profiles(W_Q, W_K, R, kv_of_head=kv_of_head, gain=gain, at_zero=True,
                                                    eigvalsh="numpy")))


@pytest.mark.parametrize("H, kv, n, N", [(4, 2, 8, 40),  # k = 2n
                                         (2, 1, 12, 18),  # N < 2n: m = n, k = N
                                         (2, 2, 12, 8)])  # N < n: m = k = N < n
def test_rank_deficient_and_zero_heads_equal_the_numpy_route(H, kv, n, N):
    W_Q, W_K, kv_of_head, gain = layer(5 + N, H=H, kv=kv, n=n, N=N)
    W_Q[0] = 0.0  # L = 0: NaN profile, norm 0
    W_Q[1] = W_Q[1, :1]  # every query row the same: rank one
    W_K[0, n // 2:] = W_K[0, :n - n // 2]  # repeated key rows
    R = rotation_matrices(n, n, 1e3, 9)
    for rotations in (R, None):
        got, want = both(W_Q, W_K, rotations, kv_of_head=kv_of_head, gain=gain, at_zero=True)
        assert_same(got, want)
        assert np.isnan(got[0][0]).all() and (got[1][0] == 0).all() and np.isnan(got[2][0]).all()


def test_against_the_naive_n_by_n_route():
    """Independent of the low-rank reduction: the dense W_K^T R(d) W_Q (times the gain), N x N, its own profile."""
    W_Q, W_K, kv_of_head, gain = layer(6, N=20)
    R = rotation_matrices(8, 8, 100.0, 6)
    out = head_profiles(W_Q, W_K, R, kv_of_head=kv_of_head, gain=gain, eigvalsh="torch", device="cpu")
    prof, norm = out.profile, out.norm
    Wq, Wk = W_Q * gain, W_K[kv_of_head] * gain
    L = np.swapaxes(Wk, -1, -2)[:, None] @ R[None] @ Wq[:, None]  # (H, D, N, N)
    naive, naive_norm = naive_profiles(L)
    np.testing.assert_allclose(prof, naive, atol=1e-10)
    np.testing.assert_allclose(norm, naive_norm, rtol=1e-12)
    np.testing.assert_allclose(norm, np.linalg.norm(L, axis=(-2, -1)), rtol=1e-12)


def test_compact_read_only_storage_is_widened_exactly_and_vertices_stay_exact():
    W_Q, W_K, kv_of_head, gain = layer(7)
    R = rotation_matrices(8, 8, 100.0, 5)
    compact = [W_Q.astype(np.float32), W_K.astype(np.float32), gain, R]
    for x in compact:  # as a memory-mapped checkpoint gives them: torch.from_numpy would warn on these
        x.setflags(write=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = head_profiles(compact[0], compact[1], compact[3], kv_of_head=kv_of_head, gain=compact[2],
                          eigvalsh="torch", device="cpu")
    b = head_profiles(W_Q.astype(np.float32).astype(np.float64), W_K.astype(np.float32).astype(np.float64), R,
                      kv_of_head=kv_of_head, gain=gain, eigvalsh="torch", device="cpu")
    np.testing.assert_array_equal(a.profile, b.profile)
    np.testing.assert_array_equal(a.norm, b.norm)
    Y = np.random.default_rng(7).normal(size=(1, 4, 20))
    vertices = head_profiles(np.concatenate([Y, -Y]), np.concatenate([Y, Y]), eigvalsh="torch", device="cpu").profile
    assert vertices.tolist() == [[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]  # L = Y^T Y and -Y^T Y


def test_float32_eigensolver_keeps_within_its_tolerance_and_bad_weights_name_their_head():
    W_Q, W_K, kv_of_head, gain = layer(8)
    R = rotation_matrices(8, 8, 1e4, 9)
    tol = 1e-5
    got = head_profiles(W_Q, W_K, R, kv_of_head=kv_of_head, gain=gain, eigvalsh="torch-float32", tol=tol, device="cpu")
    want = head_profiles(W_Q, W_K, R, kv_of_head=kv_of_head, gain=gain, eigvalsh="numpy")
    assert np.abs(got.profile - want.profile).max() <= tol
    np.testing.assert_allclose(got.norm, want.norm, rtol=1e-12)  # norms are float64 either way
    W_Q[2, 3, 5] = np.nan
    with pytest.raises(ValueError, match="head 2 has NaN or Inf"):
        head_profiles(W_Q, W_K, R, kv_of_head=kv_of_head, eigvalsh="torch", device="cpu", chunk_bytes=1)


def test_gpu_bench_runs_on_the_cpu_at_tiny_sizes(monkeypatch, capsys):
    """The benchmark script end to end on CPU torch: exit status 0, the torch route within 1e-12 of the numpy route,
    the pool's figure equal to the single process's; asking for CUDA where there is none is a one-line error (the
    script's ``main`` called here: the refusal comes before anything is computed)."""
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "gpu_bench.py"), "--device", "cpu", "--heads", "4",
           "--kv-heads", "2", "--n", "8", "--N", "48", "--offsets", "9", "--repeats", "1", "--workers", "2"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    diffs = dict(re.findall(r"^max \|profile difference\| (\(\w\)) against \(a\): (\S+)$", run.stdout, re.M))
    assert set(diffs) == {"(b)", "(c)"}, run.stdout
    assert float(diffs["(c)"]) <= 1e-12 and float(diffs["(b)"]) == 0.0
    assert re.search(r"^ratio \(a\) / \(c\): \d", run.stdout, re.M), run.stdout
    if not torch.cuda.is_available():
        monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))
        monkeypatch.setenv("PYTORCH_NVML_BASED_CUDA_CHECK", "1")  # what main sets for its process, undone after
        import gpu_bench

        assert gpu_bench.main(["--device", "cuda"]) == 2
        out, err = capsys.readouterr()
        assert out == "" and len(err.strip().splitlines()) == 1 and "CUDA" in err
