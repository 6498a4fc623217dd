"""The profile route in torch float64 on a device (CUDA) against the CPU, side by side in one run.

    python benchmarks/gpu_bench.py [--device cuda] [--heads 32 --kv-heads 8 --n 128 --N 5120 --offsets 129]
                                   [--repeats 3] [--workers CPUS] [--chunk-bytes BYTES]

One rotary layer of Mistral-Small-24B's shape (by default: 32 query heads, 8 key heads, head size 128, width
5120, offsets d = 0..128, rope base from benchmarks/synthetic_checkpoints.py), synthetic float32 weights
(normal / sqrt(N), seeded) and an RMSNorm-like gain, all profiled as the pipeline profiles a layer
(``pipeline.profile.head_profiles(..., at_zero=True)``, as the run path's ``compute_layer`` calls it). Timed, best of
``--repeats``:

(a) the numpy route as the pipeline runs it: ``eigvalsh="numpy"``, one head at a time, one thread;
(b) the same numpy route on all of the machine's cores: the heads split over a process pool of ``--workers``
    processes (default: the cores this process may run on, os.sched_getaffinity, else os.cpu_count()), one
    thread each. The fair CPU figure; the pool is started and warmed up before the timing, and the weights
    reach the workers once, before it;
(c) the torch float64 route on ``--device``: the whole layer batched there (QR over heads, cores and one
    ``eigvalsh`` per chunk of (heads x offsets) matrices, pipeline.profile.device), after one
    warm-up call, synchronised (``torch.cuda.synchronize``) around each timed call on CUDA.

How to read it: "ratio (b) / (c)" is the GPU's speed-up over the whole CPU; the target is >= 5. "ratio (a) / (c)"
is against one CPU thread. "max |profile difference| (c) against (a)" must be <= 1e-12 (float64 on both
sides; the two routes round differently, so it is not 0), and (b) against (a) is exactly 0 (the same per-head
computation); beyond that the script exits with status 1. One more run of (c), not counted in its figure, splits
its time into the eigensolver calls and the rest (QR, core products, transfers). Repeats stop early once a
figure's repeats have taken --budget seconds.

``--device cpu`` runs (c) on CPU torch (for tests at small sizes; not a GPU figure). ``--device cuda`` where
CUDA is not available: a one-line error and exit status 2.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
import os
import platform
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

_LAYER = None  # a pool worker's copy of the layer (set by _init_worker)


def mistral_layer(H: int, kv: int, n: int, N: int, D: int, seed: int = 0):
    """(W_Q (H, n, N) float32, W_K (kv, n, N) float32, kv_of_head (H,), gain (N,), rotations (D, n, n)): a rotary
    layer with Mistral-Small-24B's rope base and grouping (query head h reads key head h // (H / kv))."""
    import numpy as np
    from synthetic_checkpoints import FAMILIES

    from pipeline.families.rotary import rotation_matrices

    theta = FAMILIES["mistral-small-24b"][0]["rope_theta"]
    rng = np.random.default_rng(seed)
    W_Q = (rng.standard_normal((H, n, N)) / N**0.5).astype(np.float32)
    W_K = (rng.standard_normal((kv, n, N)) / N**0.5).astype(np.float32)
    gain = 1.0 + 0.1 * rng.standard_normal(N)
    return W_Q, W_K, np.arange(H) // (H // kv), gain, rotation_matrices(n, n, theta, D)


def profile(layer, heads=None, **route):
    """head_profiles of the layer (or of the query heads ``heads``), with statistics, as the pipeline calls it."""
    from pipeline.profile import head_profiles

    W_Q, W_K, kv_of_head, gain, R = layer
    if heads is not None:
        W_Q, kv_of_head = W_Q[heads], kv_of_head[heads]
    return head_profiles(W_Q, W_K, R, kv_of_head=kv_of_head, gain=gain, at_zero=True, **route).layer_values()


def _init_worker(layer) -> None:
    global _LAYER
    _LAYER = layer


def _worker_head(h: int):
    return profile(_LAYER, slice(h, h + 1), eigvalsh="numpy")  # one thread (head_profiles' numpy default)


def pooled(pool, H: int):
    """(b): every head as its own task on the pool; the results in head order, concatenated (the spectra of T and L,
    (3, H, k), along their head axis)."""
    import numpy as np

    parts = list(pool.map(_worker_head, range(H)))
    return tuple(np.concatenate([p[i] for p in parts], axis=1 if i == 4 else 0) for i in range(len(parts[0])))


def timed(name: str, f, repeats: int, budget: float, sync=None):
    """Best wall time of up to ``repeats`` calls (fewer once ``budget`` seconds are spent), printing each."""
    best, out, spent = float("inf"), None, 0.0
    for i in range(repeats):
        if sync is not None:
            sync()
        t0 = time.perf_counter()
        out = f()
        if sync is not None:
            sync()
        t = time.perf_counter() - t0
        best, spent = min(best, t), spent + t
        print(f"  {name}: run {i + 1}: {t:.3f} s", flush=True)
        if spent >= budget:
            break
    return best, out


def eig_split(layer, device: str, chunk_bytes, sync):
    """One more (c) run with the eigensolver calls timed (synchronised): (eigvalsh seconds, calls, total seconds)."""
    from timed_kernels import TORCH_EIG, TimedKernels

    kernels = TimedKernels(sync=sync)
    sync()
    t0 = time.perf_counter()
    profile(layer, eigvalsh="torch", device=device, chunk_bytes=chunk_bytes, kernels=kernels)
    sync()
    wall, _, calls = kernels.spent.get(TORCH_EIG, [0.0, 0.0, 0])
    return wall, calls, time.perf_counter() - t0


def usable_cores() -> int:
    """The cores this process may run on (a container's share), else os.cpu_count()."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="torch device of (c): cuda (default), cuda:1, cpu")
    ap.add_argument("--heads", type=int, default=32, help="query heads (default 32, Mistral-Small-24B)")
    ap.add_argument("--kv-heads", type=int, default=8, help="key heads, dividing --heads (default 8)")
    ap.add_argument("--n", type=int, default=128, help="head size (default 128)")
    ap.add_argument("--N", type=int, default=5120, help="model width (default 5120)")
    ap.add_argument("--offsets", type=int, default=129, help="offsets d = 0..OFFSETS-1 (default 129)")
    ap.add_argument("--repeats", type=int, default=3, help="timed calls per figure, best kept (default 3)")
    ap.add_argument("--budget", type=float, default=60.0,
                    help="stop a figure's repeats once they have taken this many seconds (default 60)")
    ap.add_argument("--workers", type=int, default=usable_cores(),
                    help=f"processes of (b), one thread each (default: the usable cores, here {usable_cores()})")
    ap.add_argument("--chunk-bytes", type=int, default=None,
                    help="chunk_bytes of (c) (default: the route's, DEVICE_CHUNK_BYTES off the CPU)")
    args = ap.parse_args(argv)
    for name in ("heads", "kv_heads", "n", "N", "offsets", "repeats", "workers"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.heads % args.kv_heads:
        ap.error(f"--kv-heads ({args.kv_heads}) must divide --heads ({args.heads})")
    # torch.cuda.is_available() through NVML: CUDA itself is first set up in (c), after (b) has forked its workers
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    try:
        import torch
    except ImportError:
        print("gpu_bench: torch is not installed; (c) needs it (pip install torch)", file=sys.stderr)
        return 2
    try:
        dev = torch.device(args.device)
    except RuntimeError as exc:
        print(f"gpu_bench: bad --device {args.device!r}: {exc}", file=sys.stderr)
        return 2
    if dev.type == "cuda" and not torch.cuda.is_available():
        print(f"gpu_bench: --device {args.device} asked for, but CUDA is not available to torch {torch.__version__} "
              "here (torch.cuda.is_available() is False); use --device cpu for a CPU-only run", file=sys.stderr)
        return 2
    import numpy as np

    from pipeline.profile.device import DEVICE_CHUNK_BYTES
    from pipeline.profile.spectra import CHUNK_BYTES

    H, kv, n, N, D = args.heads, args.kv_heads, args.n, args.N, args.offsets
    k = min(N, 2 * n)
    chunk = args.chunk_bytes or (CHUNK_BYTES if dev.type == "cpu" else DEVICE_CHUNK_BYTES)
    print(f"layer: {H} query heads, {kv} key heads, n = {n}, N = {N}, {D} offsets: {H * D} eigenproblems of "
          f"k = {k}; float32 weights, gain, at_zero=True")
    print(f"CPU: {cpu_name()}, os.cpu_count() = {os.cpu_count()}, usable {usable_cores()}", flush=True)
    layer = mistral_layer(H, kv, n, N, D)

    print("(a) numpy route, one process, one thread (one head first, untimed: imports and LAPACK set-up)", flush=True)
    profile(layer, slice(0, 1), eigvalsh="numpy")
    t_a, out_a = timed("(a)", lambda: profile(layer, eigvalsh="numpy"), args.repeats, args.budget)

    workers = min(args.workers, H)
    print(f"(b) numpy route, {workers} processes x 1 thread (pool started and warmed up first)", flush=True)
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker,
                                                initargs=(layer,)) as pool:
        pooled(pool, H)  # starts every worker and imports the pipeline in it
        t_b, out_b = timed("(b)", lambda: pooled(pool, H), args.repeats, args.budget)

    if dev.type == "cuda":
        name = f"{torch.cuda.get_device_name(dev)} (torch {torch.__version__}, CUDA {torch.version.cuda})"

        def sync():
            torch.cuda.synchronize(dev)
    else:
        name = f"CPU torch {torch.__version__}, {torch.get_num_threads()} threads: {cpu_name()} (not a GPU figure)"
        sync = None
    route = {"eigvalsh": "torch", "device": args.device, "chunk_bytes": args.chunk_bytes}
    print(f"(c) torch float64 route on {args.device}: {name}; chunk_bytes {chunk}; layer-batched (one warm-up call "
          "first)", flush=True)
    t0 = time.perf_counter()
    profile(layer, **route)
    if sync is not None:
        sync()
    print(f"  (c) warm-up: {time.perf_counter() - t0:.3f} s", flush=True)
    t_c, out_c = timed("(c)", lambda: profile(layer, **route), args.repeats, args.budget, sync)
    t_eig, calls, t_split = eig_split(layer, args.device, args.chunk_bytes, sync or (lambda: None))

    diff_b = float(np.max(np.abs(out_b[0] - out_a[0])))
    diff_c = float(np.max(np.abs(out_c[0] - out_a[0])))
    norm_c = float(np.max(np.abs(out_c[1] - out_a[1]) / out_a[1]))
    stat_c = float(np.nanmax(np.abs(out_c[2] - out_a[2])))
    print()
    print(f"(a) numpy, 1 thread:              {t_a:9.3f} s")
    print(f"(b) numpy, {workers:3d} processes:        {t_b:9.3f} s")
    print(f"(c) torch float64 on {args.device:12} {t_c:9.3f} s   ({name})")
    print(f"    of one more (c) run ({t_split:.3f} s): eigvalsh {t_eig:.3f} s in {calls} calls, the rest "
          f"(QR, core products, transfers, profiles) {t_split - t_eig:.3f} s")
    print(f"ratio (a) / (c): {t_a / t_c:.2f}")
    print(f"ratio (b) / (c): {t_b / t_c:.2f}   (target >= 5: {'met' if t_b / t_c >= 5 else 'not met'})")
    print(f"max |profile difference| (b) against (a): {diff_b:.1e}")
    print(f"max |profile difference| (c) against (a): {diff_c:.1e}")
    print(f"max relative norm difference (c) against (a): {norm_c:.1e}; max |statistics difference|: {stat_c:.1e}")
    if diff_c > 1e-12 or diff_b != 0.0:
        print("gpu_bench: the routes disagree beyond 1e-12 (see above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
