"""Seed-steps per second of the batched trainer (``pipeline.orbits.batch.train_batch``) at K = 1, 8, 32, 128
against single-seed ``train`` runs, side by side in one run, on one device.

    python benchmarks/orbits_batch.py                      # CPU, one torch thread, 12 steps per K
    python benchmarks/orbits_batch.py --device cuda --ks 1 32 128 256 512 --steps 40
    python benchmarks/orbits_batch.py --malloc default       # glibc's default malloc, for comparison

Both sides run the prototype's recipe (32 heads, d_model 128, d_head 24, the penalty with 4 contexts a step)
for ``--steps`` AdamW epochs, after one warm-up epoch; the single-seed side records no frames. The timed span of
a batch includes its setup (inits, splits) and the final evaluation of every seed, as a search pays them. On
CUDA it also prints the peak memory per seed. The first line says whether glibc keeps freed memory for reuse: this
script is an entry point, and with ``--malloc kept`` (the default) it sets that as the orbit experiment's entry
points do (``pipeline.orbits.malloc.keep_freed_memory``); ``--malloc default`` leaves glibc's default.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import torch

from pipeline.orbits.batch import resolve_device, train_batch
from pipeline.orbits.config import Config
from pipeline.orbits.malloc import keep_freed_memory
from pipeline.orbits.train import train


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ks", type=int, nargs="+", default=[1, 8, 32, 128])
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--malloc", choices=("kept", "default"), default="kept",
                    help="kept: glibc keeps freed memory, as the entry points set it (default); default: glibc's own")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    freed = keep_freed_memory() if args.malloc == "kept" else "default"
    dev = resolve_device(args.device)
    cfg = Config(epochs=args.steps, frame_every=10**9, frame_every_late=10**9)
    train_batch(replace(cfg, epochs=1), [0], device=str(dev))  # warm-up (index caches, allocator)
    single = []
    for s in range(2):
        t = time.perf_counter()
        train(replace(cfg, seed=s), progress=False)
        single.append(args.steps / (time.perf_counter() - t))
    ref = max(single)
    print(f"device {dev}, torch threads {torch.get_num_threads()}, {args.steps} AdamW steps per run, "
          f"freed memory: {freed}")
    print(f"single-seed train(): {ref:.2f} seed-steps/s")
    print("   K  seed-steps/s  ms/seed-step  vs single" + ("  peak MiB/seed" if dev.type == "cuda" else ""))
    for K in args.ks:
        if dev.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t = time.perf_counter()
        train_batch(cfg, list(range(K)), device=str(dev))
        if dev.type == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t
        rate = K * args.steps / dt
        line = f"{K:4d}  {rate:12.2f}  {1000 / rate:12.2f}  {rate / ref:9.2f}"
        if dev.type == "cuda":
            line += f"  {torch.cuda.max_memory_allocated() / K / 2**20:14.1f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
