"""Scale: comparisons measured side by side in one run (ratios, not timed tests).

    python benchmarks/scale_bench.py [--dir DIR] [--mistral-layers 2] [--opt-layers 24] [--sections 12345] [--rounds 5]
                                     [--before REV] [--latent]

1. eigen routes per head at (N, n) = (5120, 128) over 129 offsets: the naive N x N route (one offset
   timed, times 129), the pipeline (pipeline.profile.head_profiles), and the bare batched 2n x 2n
   eigvalsh floor; numpy vs torch, float64 vs float32, 1 vs 2 threads, CUDA when present; then the profile
   core against the eigensolver floors (``--sections c`` alone): the pipeline's numpy route as it is, with earlier
   settings (``pipeline.profile.Kernels``), the chunked route (benchmarks/chunked_route.py) and, with
   ``--before REV``, revision REV's in a child process, interleaved, and where each one's time goes.
2. peak resident memory of `python -m pipeline profiles` on a Mistral-Small-24B-shaped sharded bf16
   checkpoint (a child process), over its imports, against one layer's Q/K bytes + 200 MB; then the same on one
   DeepSeek-V3-shaped layer of multi-head latent attention (``--latent``; with ``--before REV`` also REV's
   pipeline, side by side).
3. throughput on an opt-1.3b-shaped checkpoint: the whole pipeline (the CLI's run path, one process, and a
   2-worker dask LocalCluster) vs only reading Q/K. "Reading Q/K" is opening the checkpoint and reading every
   Q/K tensor as the pipeline gets it (``read_compact``: fp16 -> float32 with its NaN/Inf check), nothing kept.
   Both from a warm page cache, on one thread, in interleaved rounds; the ratio in wall and in process CPU
   time (medians of the per-round ratios), and each stage of one pass in both (``pipeline_stages``). With
   ``--before REV`` the whole run of git revision REV's pipeline package (a child process on the same
   checkpoint, :data:`revisions.WHOLE_RUN`) is timed in the same rounds, and its 2 dask workers after this checkout's
   (``revisions.dask_runs``). 24 layers by default, opt-1.3b's own depth.
4. bytes fetched through the loopback Hub (tests/hub_server.py) by a whole run on the Mistral-shaped
   checkpoint, against its Q/K bytes.
5. the same range reads through huggingface_hub's HfFileSystem and through pipeline.sources.hub, against
   an honest server and one that ignores Range: bytes served per byte asked.
Synthetic checkpoints come from benchmarks/synthetic_checkpoints.py (cached in --dir).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _folder in (ROOT, os.path.join(ROOT, "benchmarks")):
    if _folder not in sys.path:  # a spawned dask worker runs this again with its parent's sys.path (first_on_path)
        sys.path.insert(0, _folder)
MB = 1e6

from timed_kernels import EIG, SPAN, TRMM, TimedKernels  # noqa: E402


def best(f, repeats=3):
    t, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = f()
        t = min(t, time.perf_counter() - t0)
    return t, out


def _status_mb(key: str) -> float:
    """A memory line of /proc/self/status in MB (VmHWM: peak resident, fresh after exec; VmRSS: resident now)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1e3
    return float("nan")


def hwm_mb() -> float:
    return _status_mb("VmHWM")


def rss_mb() -> float:
    return _status_mb("VmRSS")


# ----------------------------------------------------------------------------------------- 1. eigen


def eigen_case():
    """One (5120, 128) head (Mistral-Small's width and head size) with rotary R(d), d = 0..128, and the (129, 256,
    256) symmetric parts of its cores: what the eigen step must solve."""
    import numpy as np

    from pipeline.families.rotary import rotation_matrices
    from pipeline.profile import cores, span_cores

    N, n = 5120, 128
    rng = np.random.default_rng(0)
    W_Q, W_K = rng.normal(size=(1, n, N)) / N**0.5, rng.normal(size=(1, n, N)) / N**0.5
    R = rotation_matrices(n, n, 1e8)  # Mistral-Small's rope theta, 129 offsets
    K, P = span_cores(W_Q, W_K)
    C = cores(K, P, R)[0]
    return W_Q, W_K, R, 0.5 * (C + np.swapaxes(C, -1, -2))


def eigen_section(naive: bool, repeats: int, before_rev: str | None = None) -> None:
    import numpy as np
    import torch
    from threadpoolctl import threadpool_limits

    from pipeline.profile import head_profiles, naive_profiles

    W_Q, W_K, R, S = eigen_case()
    print("\n== 1. eigen routes, one head at (N, n) = (5120, 128), 129 offsets ==")
    rows = []
    with threadpool_limits(1):
        t_pipe, out = best(lambda: head_profiles(W_Q, W_K, R))
        prof = out.profile
        t_floor, lam = best(lambda: np.linalg.eigvalsh(S))
        rows.append(("numpy float64 eigvalsh, 1 thread (floor)", t_floor, 0.0))
    with threadpool_limits(2):
        t2, lam2 = best(lambda: np.linalg.eigvalsh(S))
        rows.append(("numpy float64 eigvalsh, 2 threads", t2, float(np.abs(lam2 - lam).max())))
        t_pipe2, _ = best(lambda: head_profiles(W_Q, W_K, R, threads=2))  # its default is one thread
    scale = float(np.abs(lam).max())
    torch.set_num_threads(1)  # 2 threads lose badly on this shared 2-core machine (see numpy's row)
    St = torch.from_numpy(S)
    t, lt = best(lambda: torch.linalg.eigvalsh(St).numpy())
    rows.append(("torch float64 eigvalsh, 1 thread", t, float(np.abs(lt - lam).max()) / scale))
    S32 = St.float()
    t, lt = best(lambda: torch.linalg.eigvalsh(S32).double().numpy())
    rows.append(("torch float32 eigvalsh, 1 thread", t, float(np.abs(lt - lam).max()) / scale))
    if torch.cuda.is_available():
        Sg = torch.from_numpy(S).cuda()
        torch.linalg.eigvalsh(Sg)
        torch.cuda.synchronize()
        t, lt = best(lambda: torch.linalg.eigvalsh(Sg).cpu().numpy())
        rows.append(("torch CUDA float64 eigvalsh", t, float(np.abs(lt - lam).max()) / scale))
    else:
        rows.append(("torch CUDA eigvalsh", float("nan"), float("nan")))
    print(f"{'route':46} {'s/head':>9} {'max rel. diff':>14}  (eigenvalues of the 129 cores only)")
    for name, t, diff in rows:
        print(f"{name:46} {t:9.3f} {diff:14.1e}" + ("   (no GPU here)" if t != t else ""))
    if naive:
        with threadpool_limits(1):
            L = np.swapaxes(W_K[0], -1, -2) @ R[1] @ W_Q[0]
            t0 = time.perf_counter()
            p1 = naive_profiles(L)[0]
            t_naive1 = time.perf_counter() - t0
        assert np.allclose(p1, prof[0, 1], atol=1e-9), (p1, prof[0, 1])
        print(f"naive N x N route: {t_naive1:.1f} s for one offset (measured), x129 = {129 * t_naive1:.0f} s/head")
        print(f"RATIO naive / pipeline = {129 * t_naive1 / t_pipe:.0f}x")
    t_torch, out_t = best(lambda: head_profiles(W_Q, W_K, R, eigvalsh="torch", device="cpu", threads=1))
    t_t32, out_32 = best(lambda: head_profiles(W_Q, W_K, R, eigvalsh="torch-float32", tol=1e-5, device="cpu",
                                               threads=1))
    prof_t, prof_32 = out_t.profile, out_32.profile
    print(f"pipeline (head_profiles: QR + cores + eigensolver + profile), 1 thread: {t_pipe:.3f} s/head; "
          f"2 threads: {t_pipe2:.3f}; 2 threads / 1 thread = {t_pipe2 / t_pipe:.2f}")
    print(f"pipeline with eigvalsh='torch' (float64), 1 thread: {t_torch:.3f} s/head, max |profile diff| "
          f"{np.abs(prof_t - prof).max():.1e}; 'torch-float32' tol 1e-5: {t_t32:.3f} s/head, max |profile diff| "
          f"{np.abs(prof_32 - prof).max():.1e}")
    pipeline_against_floors(W_Q, W_K, R, S, repeats, before_rev)


# the per-offset route's earlier settings, compared side by side with the current one (Kernels' fields)
ROUTES = (("QR span, LAPACK's blocking", dict(gram_rcond=0, qr_block=None, sytrd_block=None)),
          ("QR span", dict(gram_rcond=0)))


CORE_CHILD = r"""
import sys, time
import numpy as np
from threadpoolctl import threadpool_limits
from pipeline.profile import head_profiles
from pipeline.families.rotary import rotation_matrices

N, n = 5120, 128  # eigen_case's head
rng = np.random.default_rng(0)
W_Q, W_K = rng.normal(size=(1, n, N)) / N**0.5, rng.normal(size=(1, n, N)) / N**0.5
R = rotation_matrices(n, n, 1e8)
with threadpool_limits(1):
    out = head_profiles(W_Q, W_K, R)
    np.save(sys.argv[1], np.asarray(out[0] if isinstance(out, tuple) else out.profile))
    print("ready", flush=True)
    for _ in sys.stdin:
        w, c = time.perf_counter(), time.thread_time()
        head_profiles(W_Q, W_K, R)
        print(time.perf_counter() - w, time.thread_time() - c, flush=True)
"""  # eigen_case's head profiled once per line read, each call timed inside the child: (wall s, CPU s) printed


@contextlib.contextmanager
def core_at_revision(rev: str | None):
    """``(one, profile)``: ``one()`` times one ``head_profiles`` call of git revision ``rev``'s pipeline (None: this
    checkout's) on :func:`eigen_case`'s head in a child process (wall s, CPU s of its thread, one BLAS thread);
    ``profile`` is that revision's profile of the head. The child's start, imports and first call are not counted.
    Both sides of a before/after comparison run in such a child, so that neither carries this process's state."""
    import numpy as np
    from revisions import revision_tree

    with revision_tree(rev) if rev else contextlib.nullcontext(ROOT) as tree, \
            tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PYTHONPATH=tree)
        values = os.path.join(tmp, "profile.npy")
        child = subprocess.Popen([sys.executable, "-c", CORE_CHILD, values], cwd=tree, env=env, text=True,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        if child.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the profile core of {rev or 'this checkout'} failed (its error is above)")

        def one() -> tuple[float, float]:
            child.stdin.write("run\n")
            child.stdin.flush()
            w, c = child.stdout.readline().split()
            return float(w), float(c)

        try:
            yield one, np.load(values)
        finally:
            child.stdin.close()
            child.wait()


def pipeline_against_floors(W_Q, W_K, R, S, repeats: int = 7, before_rev: str | None = None) -> None:
    """The profile core against the eigensolver floors, interleaved in one run (1 thread).

    The routes: the chunked route (``benchmarks/chunked_route.py``: offsets in chunks of CHUNK_BYTES, numpy's
    ``eigvalsh`` on each (chunk, k, k) stack, numpy's ``qr``); the pipeline's numpy route with earlier settings
    (``Kernels(gram_rcond=0)``: the span factored by Householder QR in place of the Gram matrix's Cholesky, and that
    with LAPACK's default blocking besides: ``qr_block=None, sytrd_block=None``); the pipeline's numpy route as it
    is ("after"); with ``before_rev``, this checkout's and revision REV's ``head_profiles``, each in a child process
    (:func:`core_at_revision`, timed inside the child). Floors, on the same 129 matrices: numpy's ``eigvalsh`` on
    their (129, k, k) stack (the issue's floor), and LAPACK ``dsyevd`` (numpy's driver) through scipy, one matrix at
    a time, in place, as the pipeline calls it. Wall and CPU time (``time.thread_time``, one thread) of the same
    runs: on a loaded machine the wall ratios carry the waits for a core, the CPU ratios do not.
    """
    import numpy as np
    from chunked_route import chunked_profiles

    from pipeline.profile import Kernels, head_profiles
    from pipeline.profile.lapack import lapack_in_place

    eig, _ = lapack_in_place(S.shape[-1])
    work = np.empty(S.shape[1:])

    def per_matrix():
        for Sd in S:
            work[...] = Sd
            eig(work)

    def timed(f):  # (wall s, CPU s of this thread) of one call
        w, c = time.perf_counter(), time.thread_time()
        f()
        return time.perf_counter() - w, time.thread_time() - c

    runs = {"floor: numpy eigvalsh on the stack": lambda: timed(lambda: np.linalg.eigvalsh(S)),
            "floor: dsyevd per matrix, in place": lambda: timed(per_matrix),
            "chunked route": lambda: timed(lambda: chunked_profiles(W_Q, W_K, R)),
            **{name: (lambda k=knobs: timed(lambda: head_profiles(W_Q, W_K, R, kernels=Kernels(**k))))
               for name, knobs in ROUTES},
            "after: offset by offset": lambda: timed(lambda: head_profiles(W_Q, W_K, R))}
    after = head_profiles(W_Q, W_K, R)
    diffs = {"chunked route": chunked_profiles(W_Q, W_K, R).profile}
    with contextlib.ExitStack() as stack:
        if before_rev:  # this checkout and revision REV, each in a child process of its own
            for rev, name in ((None, "after, a child process"), (before_rev, f"before: revision {before_rev}")):
                runs[name], diffs[name] = stack.enter_context(core_at_revision(rev))
        t, c = interleaved(runs, repeats)
    with open("/proc/loadavg") as fh:
        load = fh.read().split()[:3]
    print(f"\nprofile core, one (5120, 128) head, 129 offsets, 1 thread, {repeats} interleaved repeats "
          f"(load average {' '.join(load)})")
    for name, profile in diffs.items():
        print(f"  after vs {name}: max |profile diff| {float(np.nanmax(np.abs(after.profile - profile))):.1e}")
    print(f"{'':38} {'median ms':>10} {'min ms':>8} {'CPU median ms':>14}")
    for name, v in t.items():
        print(f"{name:38} {1e3 * np.median(v):10.1f} {1e3 * v.min():8.1f} {1e3 * np.median(c[name]):14.1f}")
    floor, floor_pm = t["floor: numpy eigvalsh on the stack"], t["floor: dsyevd per matrix, in place"]
    routes = [name for name in runs if not name.startswith("floor")]
    for name in routes:
        r1, r2 = t[name] / floor, t[name] / floor_pm
        print(f"RATIO {name} / numpy eigvalsh floor = median {np.median(r1):.2f}, min {r1.min():.2f}   |   "
              f"/ dsyevd-per-matrix floor = median {np.median(r2):.2f}, min {r2.min():.2f}")
    for name in routes:
        r1 = c[name] / c["floor: numpy eigvalsh on the stack"]
        print(f"RATIO {name} / numpy eigvalsh floor in CPU time = median {np.median(r1):.2f}, min {r1.min():.2f}")
    core_breakdown(W_Q, W_K, R, float(np.median(c["floor: numpy eigvalsh on the stack"])))
    r = floor_pm / floor
    print(f"(the per-matrix floor / the stack floor = median {np.median(r):.2f}: the same driver on matrices kept in "
          "cache and not copied, with the pipeline's dsytrd block size; the target, <= 1.1, is "
          "against numpy's eigvalsh on the stack)")


def interleaved(runs: dict, repeats: int) -> tuple[dict, dict]:
    """Each of ``runs`` (a function returning its (wall s, CPU s)) ``repeats`` times, all of them in each repeat in
    a rotated order, on one BLAS thread: (wall times, CPU times) per name, as arrays."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    times = {name: [] for name in runs}
    cpu = {name: [] for name in runs}  # this thread's CPU time: what a loaded machine's waits do not inflate
    names = list(runs)
    with threadpool_limits(1):
        for r in range(repeats):  # the machine is shared: each repeat runs them all, in a rotated order
            for name in names[r % len(names):] + names[:r % len(names)]:
                w, c = runs[name]()
                times[name].append(w)
                cpu[name].append(c)
    return {n: np.array(v) for n, v in times.items()}, {n: np.array(v) for n, v in cpu.items()}


def core_breakdown(W_Q, W_K, R, floor_s: float, repeats: int = 5) -> None:
    """Where a head's time goes in each route: the LAPACK calls timed by the kernels' wrappers (:class:`TimedKernels`:
    the span's factor, Gram + Cholesky or QR; eigensolver; the triangular core product; for the chunked route its
    numpy ``qr`` and ``eigvalsh``), the rest (rotation, the other core products, norms, sym/antisym parts, Python) as
    the remainder; CPU time of this thread, medians over ``repeats``, in ms and in % of ``floor_s`` (the floor's CPU
    time)."""
    import numpy as np
    from chunked_route import chunked_profiles, numpy_qr
    from threadpoolctl import threadpool_limits

    from pipeline.profile import head_profiles

    print("\nwhere the time goes (CPU time; LAPACK calls timed by wrappers; medians of "
          f"{repeats}; % of the numpy eigvalsh floor, {1e3 * floor_s:.0f} ms):")
    parts = (SPAN, EIG, TRMM)
    for label, knobs in (("chunked route", None), *ROUTES, ("after: offset by offset", {})):
        rows = {name: [] for name in ("total",) + parts}
        for _ in range(repeats):
            kernels = TimedKernels(**(knobs or {}))
            with threadpool_limits(1):
                t0 = time.thread_time()
                if knobs is None:
                    chunked_profiles(W_Q, W_K, R, factor=kernels.timed(SPAN, numpy_qr),
                                     eigvalsh=kernels.timed(EIG, np.linalg.eigvalsh))
                else:
                    head_profiles(W_Q, W_K, R, kernels=kernels)
                rows["total"].append(time.thread_time() - t0)
            for name in parts:
                rows[name].append(kernels.seconds(name))
        med = {name: float(np.median(v)) for name, v in rows.items()}
        rest = med["total"] - sum(med[name] for name in parts)
        cells = [f"{name} {1e3 * med[name]:.0f} ms ({100 * med[name] / floor_s:.0f} %)" for name in parts
                 if med[name] > 0]
        print(f"  {label}: total {1e3 * med['total']:.0f} ms ({100 * med['total'] / floor_s:.0f} %) = "
              + ", ".join(cells) + f", the rest {1e3 * rest:.0f} ms ({100 * rest / floor_s:.0f} %)")


# ----------------------------------------------------------------------------------------- 2. memory


def cli_memory_child(folder: str, store: str) -> None:
    """Child process: import what the run imports, take the RSS, run the CLI on ``folder``, print the peak."""
    import numpy as np  # noqa: F401
    import safetensors  # noqa: F401
    import torch  # noqa: F401
    import tqdm  # noqa: F401
    import xarray  # noqa: F401
    import zarr  # noqa: F401

    import pipeline.families  # noqa: F401
    import pipeline.profile  # noqa: F401
    import pipeline.registry.checkpoints  # noqa: F401
    import pipeline.store  # noqa: F401
    from pipeline.__main__ import main

    base = rss_mb()
    t0 = time.perf_counter()
    code = main(["profiles", folder, "--store", store, "--name", "bench", "--quiet"])
    peak = hwm_mb()  # not ru_maxrss: Linux carries that over from the parent across fork + exec
    print(f"{base:.1f} {peak:.1f} {time.perf_counter() - t0:.1f} {code}")


def memory_section(folder: str, layers: int) -> None:
    from synthetic_checkpoints import FAMILIES
    from threadpoolctl import threadpool_info

    print("\n== 2. peak memory through the CLI, Mistral-Small-24B-shaped bf16 checkpoint ==")
    shapes = dict((p.format(l=0), s) for p, s in FAMILIES["mistral-small-24b"][2])
    qk = sum(s[0] * s[1] for k, s in shapes.items() if "q_proj" in k or "k_proj" in k) * 2 / MB
    pools = ", ".join(f"{os.path.basename(p['filepath'])}: {p['num_threads']}" for p in threadpool_info())
    print(f"BLAS/LAPACK thread pools at the default setting here: {pools}")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    for label, extra in (("default threads", {}), ("OMP_NUM_THREADS=1", {"OMP_NUM_THREADS": "1"})):
        with tempfile.TemporaryDirectory() as tmp:
            out = subprocess.run([sys.executable, __file__, "--memory-child", folder, os.path.join(tmp, "s.zarr")],
                                 capture_output=True, text=True, check=True, env=env | extra)
        base, peak, secs, code = (float(x) for x in out.stdout.split()[-4:])
        assert code == 0, out.stderr
        print(f"{label}: `python -m pipeline profiles` over {layers} layers ({secs:.0f} s): RSS after imports "
              f"{base:.0f} MB, peak {peak:.0f} MB, peak over imports {peak - base:.0f} MB")
        print(f"  target: one layer's Q/K ({qk:.1f} MB, bf16) + 200 MB = {qk + 200:.0f} MB -> RATIO peak over "
              f"imports / target = {(peak - base) / (qk + 200):.2f} (<= 1 meets it); peak over imports - Q/K bytes = "
              f"{peak - base - qk:.0f} MB")


LATENT_CHILD = r"""
import sys, time
import numpy, safetensors, torch, tqdm, xarray, zarr  # noqa: F401 - what the run imports, before the start
import pipeline, pipeline.families, pipeline.profile, pipeline.registry.checkpoints, pipeline.store
from pipeline.__main__ import main

def mb(key):
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) / 1e3 for line in fh if line.startswith(key + ":"))

base, t0 = mb("VmRSS"), time.perf_counter()
code = main(["profiles", sys.argv[1], "--store", sys.argv[2], "--name", "bench", "--quiet"])
print(pipeline.__file__, base, mb("VmHWM"), time.perf_counter() - t0, code)
"""  # the CLI's peak over its imports, run with a tree's pipeline first on the path (cli_memory_child's measure)


def latent_memory(folder: str, before_rev: str | None) -> None:
    """One DeepSeek-V3-shaped latent attention layer (128 heads of 192 dimensions, N 7168) through ``python -m
    pipeline profiles``: the peak over the imports against the layer's Q/K bytes (the query and key tensors whole,
    of kv_b_proj the key rows) + 200 MB, this checkout's and, with ``before_rev``, that revision's."""
    from revisions import revision_tree
    from synthetic_checkpoints import FAMILIES

    print("\n== 2b. peak memory through the CLI, one DeepSeek-V3-shaped latent attention layer ==")
    config, _, tensors = FAMILIES["deepseek-v3"]
    heads, nope = config["num_attention_heads"], config["qk_nope_head_dim"]
    qk = sum(2 * (heads * nope if "kv_b_proj" in name else shape[0]) * (shape[1] if len(shape) > 1 else 1)
             for name, shape in tensors) / MB
    arms = [("this checkout", None)] + ([(f"before ({before_rev})", before_rev)] if before_rev else [])
    for label, rev in arms:
        with contextlib.ExitStack() as stack:
            tree = ROOT if rev is None else stack.enter_context(revision_tree(rev))
            tmp = stack.enter_context(tempfile.TemporaryDirectory())
            out = subprocess.run([sys.executable, "-c", LATENT_CHILD, folder, os.path.join(tmp, "s.zarr")], cwd=tree,
                                 env=dict(os.environ, PYTHONPATH=tree), capture_output=True, text=True, check=True)
        where, base, peak, secs, code = out.stdout.split()[-5:]
        base, peak = float(base), float(peak)
        assert code == "0" and where.startswith(tree), (where, out.stderr)
        print(f"{label}: 1 layer ({float(secs):.0f} s): RSS after imports {base:.0f} MB, peak over imports "
              f"{peak - base:.0f} MB; target Q/K ({qk:.1f} MB, bf16) + 200 MB = {qk + 200:.0f} MB -> RATIO "
              f"{(peak - base) / (qk + 200):.2f} (<= 1 meets it)")


# ----------------------------------------------------------------------------------------- 3. throughput


def cpu_s() -> float:
    """CPU time of this process, every thread (zarr writes from its own I/O thread), user + system."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def clocked(f) -> tuple[float, float]:
    """(wall s, process CPU s) of one call of ``f``."""
    w, c = time.perf_counter(), cpu_s()
    f()
    return time.perf_counter() - w, cpu_s() - c


def read_qk(folder: str, names: list[str], widen: bool = False) -> None:
    """Only reading Q/K: open the checkpoint (config, index, headers, revision) and read every Q/K tensor the way
    the pipeline gets it, ``read_compact`` (fp16 -> float32, exact, with its NaN/Inf check); nothing is kept.
    ``widen``: each tensor is also converted to float64, the dtype the QR works in (the pipeline does this one
    head at a time, inside its profiles stage)."""
    import numpy as np

    from pipeline.registry.checkpoints import open_checkpoint

    ck = open_checkpoint(folder)
    for n in names:
        x = ck.read_compact(n)
        if widen:
            x.astype(np.float64)


def whole_run(folder: str, store: str) -> None:
    """The whole pipeline as ``python -m pipeline profiles FOLDER --store STORE --name opt --quiet`` runs it:
    plan (every check, the NaN/Inf check of every Q/K tensor included), registration, each layer read,
    profiled with its statistics and written, completion."""
    from pipeline.run import RunOptions, run

    run(RunOptions(models=[folder], store=store, name="opt", quiet=True), log=lambda *a: None)




@contextlib.contextmanager
def run_at_revision(rev: str, folder: str):
    """A function timing one whole run (:func:`whole_run`'s) of git revision ``rev``'s pipeline package on
    ``folder``: (wall s, CPU s), measured in a child process that imports that package (``git archive``), warmed
    by one untimed run. The child's start and imports are not counted."""
    from revisions import WHOLE_RUN, revision_tree, timed_child

    with revision_tree(rev) as tree, timed_child(WHOLE_RUN, folder, tree, f"the run of revision {rev}") as one:
        yield one


def throughput_section(folder: str, repeats: int = 5, before_rev: str | None = None) -> None:
    """The pipeline against only reading Q/K (:func:`read_qk`), both from a warm page cache (one untimed pass of
    each first), on one BLAS/torch thread, paired and interleaved: ``repeats`` rounds of (read, pipeline), the
    ratio taken per round in wall time and in process CPU time, and their medians printed. With ``before_rev``,
    that revision's whole run (:func:`run_at_revision`) in the same rounds. Then 2 dask workers (best of 2 runs of
    ``run_dask``, this checkout's and, with ``before_rev``, that revision's: ``revisions.dask_runs``)."""
    from statistics import median

    from revisions import dask_runs, revision_tree
    from synthetic_checkpoints import qk_names
    from threadpoolctl import threadpool_limits

    from pipeline.registry.checkpoints import open_checkpoint

    print("\n== 3. throughput, opt-1.3b-shaped fp16 checkpoint: pipeline vs reading Q/K ==")
    layers = int(open_checkpoint(folder).config["num_hidden_layers"])
    names = qk_names("opt-1.3b", layers)
    with tempfile.TemporaryDirectory() as tmp:
        def store() -> str:
            return os.path.join(tmp, f"s{time.perf_counter_ns()}.zarr")

        reads, wides, runs, revs = [], [], [], []
        with threadpool_limits(1), contextlib.ExitStack() as stack:  # like a dask worker (OMP_NUM_THREADS=1)
            at_rev = stack.enter_context(run_at_revision(before_rev, folder)) if before_rev else None
            read_qk(folder, names)
            whole_run(folder, store())
            for _ in range(repeats):
                reads.append(clocked(lambda: read_qk(folder, names)))
                runs.append(clocked(lambda: whole_run(folder, store())))
                wides.append(clocked(lambda: read_qk(folder, names, widen=True)))
                if at_rev is not None:
                    revs.append(at_rev())
        t_two = min(t for t, _ in dask_runs(None, folder, "opt", 2, [store(), store()]))
        if before_rev:
            with revision_tree(before_rev) as tree:
                t_two_before = min(t for t, _ in dask_runs(tree, folder, "opt", 2, [store(), store()]))
    print(f"{layers} layers x 32 heads (n = 64, N = 2048, learned positions: one offset); {repeats} interleaved "
          "rounds, medians")
    for k, unit in ((0, "wall"), (1, "CPU")):
        r, p = median(x[k] for x in reads), median(x[k] for x in runs)
        ratio = median(b[k] / a[k] for a, b in zip(reads, runs, strict=True))
        print(f"  {unit:4}: reading Q/K only {r:.2f} s, pipeline 1 process {p:.2f} s -> RATIO pipeline / read = "
              f"{ratio:.2f} (median of per-round ratios; target <= 3)")
        if revs:
            ratio_rev = median(b[k] / a[k] for a, b in zip(reads, revs, strict=True))
            print(f"        before (revision {before_rev}, a child process): pipeline {median(x[k] for x in revs):.2f} "
                  f"s -> RATIO pipeline / read = {ratio_rev:.2f}")
        ratio_wide = median(b[k] / a[k] for a, b in zip(wides, runs, strict=True))
        print(f"        reading Q/K and widening it to float64 {median(x[k] for x in wides):.2f} s -> RATIO pipeline / "
              f"that = {ratio_wide:.2f}")
    t_read = median(x[0] for x in reads)
    t_one = median(x[0] for x in runs)
    stages = pipeline_stages(folder, layers, repeats)
    c_read = median(x[1] for x in reads)
    print("  where one pass goes (1 thread; medians over the rounds; wall / CPU s, and CPU x the read's CPU):")
    for k, (w, c) in stages.items():
        print(f"    {k:58} {w:6.3f} / {c:6.3f} s  ({c / c_read:5.2f} x read)")
    qr_cpu, eig_cpu = stages[SPAN][1], stages[EIG][1]
    print(f"  the span's factor alone (Gram + Cholesky, float64, for the profiles' exactness) is "
          f"{qr_cpu / c_read:.1f} x the read's CPU, so read + factor is {1 + qr_cpu / c_read:.1f} x before any other "
          f"stage; with the eigenvalues, {1 + (qr_cpu + eig_cpu) / c_read:.1f} x: the floor of this route "
          "(float64 BLAS/LAPACK at their own speed on one thread)")
    print(f"pipeline, 2 dask workers: {t_two:.2f} s wall (run_dask; planning and the cluster's start not counted) -> "
          f"RATIO pipeline / read = {t_two / t_read:.2f}; speed-up over 1 process = {t_one / t_two:.2f}")
    if before_rev:
        print(f"        before (revision {before_rev}): {t_two_before:.2f} s wall -> RATIO pipeline / "
              f"read = {t_two_before / t_read:.2f}")


def pipeline_stages(folder: str, layers: int, repeats: int = 5) -> dict[str, tuple[float, float]]:
    """Single-process passes over the checkpoint, each stage clocked on its own (wall, process CPU; the median over
    ``repeats`` passes): planning (``plan_model``: config, headers, shapes), the NaN/Inf check of every Q/K tensor
    the run does before the store is touched, both as ``run.check_weights`` does it (``check_finite``: on the
    stored bits) and by reading every tensor compact (shown for comparison, not summed), the registration of the
    model's row, reading and converting Q/K (``layer_qk``), the factor of each head's span and the eigenvalues of
    each head's cores and of its statistics' Gram matrix (timed by :class:`TimedKernels`, the kernels
    ``head_profiles`` is given), the rest of the profiles and statistics, the store's layer writes (values,
    checksums, layer_done) and the completion."""
    from statistics import median

    from threadpoolctl import threadpool_limits

    from pipeline.families import layer_qk, rotations
    from pipeline.profile import head_profiles
    from pipeline.run import check_weights, open_store, plan_model

    keys = ("plan (plan_model)", "NaN/Inf check (check_weights: stored bits)",
            "NaN/Inf check by compact reads (not summed)", "register", "read Q/K (layer_qk)", SPAN, EIG,
            "profiles and statistics (besides the factor and eigenvalues)", "store writes (layer_writer, write)",
            "mark_complete")
    wall: dict[str, list[float]] = {k: [] for k in keys}
    cpu: dict[str, list[float]] = {k: [] for k in keys}

    def clock(key, f, *args, **kwargs):
        w, c = time.perf_counter(), cpu_s()
        out = f(*args, **kwargs)
        wall[key][-1] += time.perf_counter() - w
        cpu[key][-1] += cpu_s() - c
        return out

    def compact_reads(ckpt) -> None:
        for n in ckpt.tensor_names():
            if "q_proj" in n or "k_proj" in n:
                ckpt.read_compact(n)

    def one_pass(s: str) -> None:
        for k in keys:
            wall[k].append(0.0)
            cpu[k].append(0.0)
        kernels = TimedKernels()
        p = clock(keys[0], plan_model, folder, open_store(s), name="opt")
        clock(keys[1], check_weights, p, progress=False)
        clock(keys[2], compact_reads, p.ckpt)
        store = open_store(s)
        clock(keys[3], store.register, p.row)
        rot = rotations(p.layout)
        writer = clock(keys[8], store.layer_writer, "opt")  # as run_inline: opened once per model
        for layer in range(layers):
            qk = clock(keys[4], layer_qk, p.ckpt, p.layout, layer, False)
            out = clock(keys[7], head_profiles, qk.W_Q, qk.W_K, rot, kv_of_head=qk.kv_of_head, gain=qk.gain,
                        at_zero=True, kernels=kernels)
            values = clock(keys[7], out.layer_values)
            clock(keys[8], writer.write, layer, *values)
        clock(keys[9], store.mark_complete, "opt")
        for key in (SPAN, EIG):
            wall[key][-1], cpu[key][-1] = kernels.seconds(key, cpu=False), kernels.seconds(key)
            wall[keys[7]][-1] -= wall[key][-1]
            cpu[keys[7]][-1] -= cpu[key][-1]

    with tempfile.TemporaryDirectory() as tmp, threadpool_limits(1):
        for r in range(repeats):
            one_pass(os.path.join(tmp, f"stages{r}.zarr"))
    out = {k: (median(wall[k]), median(cpu[k])) for k in keys}
    summed = [k for k in keys if "not summed" not in k]
    out["sum of the stages"] = (sum(out[k][0] for k in summed), sum(out[k][1] for k in summed))
    return out


# ----------------------------------------------------------------------------------------- 4. hub bytes


def _qk_bytes(snap) -> int:
    return sum(e.end - e.start for f in snap._headers for n, e in snap._headers[f].items()
               if "q_proj" in n or "k_proj" in n)


def hub_section(folder: str) -> None:
    from tests.hub_server import LoopbackHub, serve_folder

    print("\n== 4. bytes fetched through the loopback Hub by a whole run, Mistral-shaped checkpoint ==")
    repo = "bench/mistral-small-24b-shaped"
    with tempfile.TemporaryDirectory() as home, LoopbackHub(serve_folder(folder, repo)) as hub:
        os.environ.update(HF_HOME=home, HF_ENDPOINT=hub.endpoint)
        from pipeline.run import run_profiles

        t0 = time.perf_counter()
        run_profiles([repo], os.path.join(home, "s.zarr"), name="bench", progress=False, log=lambda *_: None)
        secs = time.perf_counter() - t0
        served = hub.total_bytes(repo)
        qk = _qk_bytes(_snapshot_with_headers(repo))
        total = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    print(f"checkpoint on the server: {total / MB:.1f} MB; its Q/K tensors: {qk / MB:.1f} MB")
    print(f"served by the loopback Hub for `profiles` (validation, profiles, store): {served / MB:.3f} MB in "
          f"{secs:.1f} s (config + index + shard headers: {(served - qk) / 1e3:.1f} kB)")
    print(f"RATIO bytes fetched / Q/K bytes = {served / qk:.5f} (target <= 1.0001); "
          f"fetched / whole checkpoint = {served / total:.3f}")


def _snapshot_with_headers(repo: str):
    from pipeline.sources.hub import resolve_snapshot

    snap = resolve_snapshot(repo)
    for f in snap.files:
        snap.header(f)
    return snap


# ----------------------------------------------------------------------------------------- 5. HfFileSystem


def _file_bytes(path: str, start: int, end: int) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(start)
        return fh.read(end - start)


def hffs_section(folder: str) -> None:
    """The same Q/K range reads through huggingface_hub's HfFileSystem and through pipeline.sources.hub,
    against an honest server and against one that ignores Range."""
    from tests.hub_server import LoopbackHub, serve_folder

    print("\n== 5. range reads: huggingface_hub HfFileSystem vs pipeline.sources.hub (own), Mistral-shaped ==")
    repo = "bench/mistral-small-24b-shaped"
    rows = []
    for mode in ("honour", "ignore"):
        with tempfile.TemporaryDirectory() as home, LoopbackHub(serve_folder(folder, repo)) as hub:
            os.environ.update(HF_HOME=home, HF_ENDPOINT=hub.endpoint, HEADGEOMETRY_HUB_RETRIES="0")
            from huggingface_hub import HfFileSystem

            snap = _snapshot_with_headers(repo)
            wanted = [(snap.weight_map[n], snap.entry(n)) for n in sorted(snap.weight_map)
                      if "q_proj" in n or "k_proj" in n][:2]
            asked = sum(e.end - e.start for _, e in wanted)
            hub.range_mode = mode
            for who in ("HfFileSystem", "own"):
                hub.reset_counts()
                before = snap.bytes_fetched
                t0 = time.perf_counter()
                try:
                    got = []
                    if who == "own":
                        for f, e in wanted:
                            got.append(snap.source(f).read(e.start, e.end - e.start))
                    else:
                        fs = HfFileSystem(endpoint=hub.endpoint, skip_instance_cache=True)
                        for f, e in wanted:
                            with fs.open(f"{repo}@{snap.commit}/{f}", "rb", cache_type="none") as fh:
                                fh.seek(e.start)
                                got.append(fh.read(e.end - e.start))
                    right = all(g == _file_bytes(os.path.join(folder, f), e.start, e.end)
                                for g, (f, e) in zip(got, wanted, strict=True))
                    outcome = "read, bytes right" if right else "read, bytes WRONG (not the asked range)"
                except Exception as exc:  # noqa: BLE001 - reported in the table
                    outcome = f"refused ({type(exc).__name__})"
                secs = time.perf_counter() - t0
                time.sleep(0.3)
                served = hub.total_bytes(repo)
                received = snap.bytes_fetched - before if who == "own" else served  # HfFileSystem reads whole bodies
                rows.append((mode, who, asked, served, received, secs, outcome))
    print("served: bytes the server wrote into the socket; received: bytes the reader took in")
    print(f"{'server':8} {'reader':13} {'asked MB':>9} {'served MB':>10} {'received MB':>12} {'received/asked':>15} "
          f"{'s':>6}  outcome")
    for mode, who, asked, served, received, secs, outcome in rows:
        print(f"{mode:8} {who:13} {asked / MB:9.2f} {served / MB:10.2f} {received / MB:12.2f} "
              f"{received / asked:15.4f} {secs:6.2f}  {outcome}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "headgeometry-bench"))
    ap.add_argument("--mistral-layers", type=int, default=2)
    ap.add_argument("--opt-layers", type=int, default=24, help="layers of the opt-1.3b-shaped checkpoint (default 24, "
                    "its own)")
    ap.add_argument("--no-naive", action="store_true", help="skip the ~30 s naive 5120 x 5120 eigvalsh")
    ap.add_argument("--sections", default="12345", help="which comparisons to run (default: all, 12345; c: only the "
                    "profile core against the eigensolver floors, a part of 1)")
    ap.add_argument("--repeats", type=int, default=7, help="interleaved repeats of the profile core comparison")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved (read, pipeline) rounds of "
                    "section 3 (default 5)")
    ap.add_argument("--before", metavar="REV", default=None, help="also time this git revision's pipeline package "
                    "(e.g. the last release) in the same rounds: its profile core (sections 1 and c), its whole run "
                    "and its 2 dask workers (section 3)")
    ap.add_argument("--latent", action="store_true", help="section 2 also profiles one DeepSeek-V3-shaped latent "
                    "attention layer (128 heads; a few minutes, and as long again for --before's)")
    ap.add_argument("--memory-child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.memory_child:
        cli_memory_child(*args.memory_child)
        return 0
    from synthetic_checkpoints import write_synthetic

    t0 = time.perf_counter()
    if set(args.sections) & set("2345"):
        mistral = str(write_synthetic("mistral-small-24b", os.path.join(args.dir, "mistral"), args.mistral_layers))
        opt = str(write_synthetic("opt-1.3b", os.path.join(args.dir, "opt-1.3b"), args.opt_layers,
                                  layers_per_shard=4))
        print(f"synthetic checkpoints in {args.dir} ({time.perf_counter() - t0:.0f} s)")
    if "1" in args.sections:
        eigen_section(naive=not args.no_naive, repeats=args.repeats, before_rev=args.before)
    elif "c" in args.sections:
        pipeline_against_floors(*eigen_case(), repeats=args.repeats, before_rev=args.before)
    if "2" in args.sections:
        memory_section(mistral, args.mistral_layers)
        if args.latent:
            latent_memory(str(write_synthetic("deepseek-v3", os.path.join(args.dir, "deepseek-v3"), 1)), args.before)
    if "3" in args.sections:
        throughput_section(opt, args.rounds, args.before)
    if "4" in args.sections:
        hub_section(mistral)
    if "5" in args.sections:
        hffs_section(mistral)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
