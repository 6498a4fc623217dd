"""What the family table costs, what reading a fused QKV tensor by its q and k rows saves, and each family's
profile core against the eigensolver floor, side by side.

    python benchmarks/families_bench.py [--before REV] [--repeats 3] [--sections 123] [--width 4096] [--heads 2]
                                         [--head-dim 128]

1. **The table costs nothing per head.** The run path's task (``pipeline.run.compute_layer``: read one layer's
   Q/K, profile every head at d = 0..128) on a synthetic rotary Llama checkpoint (benchmarks/synthetic_checkpoints.py,
   ``rotary-1024``), timed in a child process of this checkout and of ``--before`` (default: the commit this
   branch left main at, whose architectures.py was an if-chain), alternately, ``--repeats`` times each: the
   medians and their ratio. Also the table's own work per layer in this checkout (resolving the entry, naming
   and checking the layer's tensors), against the layer's whole task.
2. **Fused tensors by rows.** One Phi-3-mini-shaped layer (``qkv_proj`` of 3 x 3072 rows by 3072, bf16) read with
   ``layer_qk``: through ``read_rows`` (its q and k rows alone) and through a checkpoint that reads whole
   tensors (the whole fused tensor, then views), each in a child process: peak resident memory above the
   child's level before the read (Linux: /proc/self/status VmHWM, reset through /proc/self/clear_refs), against
   the layer's compact Q/K (float32) bytes. Times are CPU times of one thread.
3. **The profile core of every family against the eigensolver floor.** Every entry of the family table
   (``pipeline.families.FAMILIES``, each tower of a multi-tower one) gets its layout from a tiny config of its own: the
   family's case in tests/pipeline/families/cases.py (the case named as the family, else its first), else
   tests/tiny_models.py's, else transformers' config of that ``model_type`` with the Mistral kind's sizes (Llama,
   Qwen2); a standalone tower (``clip_text_model``, ...) is its parent's tower's entry and sub-config. Of each distinct
   positional kind among its layers (a hybrid's layers without a form have none to time), one layer of ``--heads`` query
   heads over the family's key grouping, at ``--width`` N and ``--head-dim`` n (the rotary dimensions the tiny head's
   fraction of it, to an even count), random weights: the profile core (``pipeline.profile.head_profiles``, as
   benchmarks/scale_bench.py --sections c times it), the run path's core (the same with ``at_zero=True``, as
   ``pipeline.run.compute_layer`` calls it), and the eigensolver floor (numpy's ``eigvalsh`` on the stack of every
   head's symmetric k x k cores at every offset, built beforehand, untimed), and that floor with the span's Gram
   matrices A^T A, A = [W_K^T | W_Q^T] (N x 2n): the one product over the model's width any route needs before its
   k x k work, which outweighs a position-free head's one eigensolve at N = 4096 (N k^2 against ~k^3 flops). The Gram
   matrices are timed two ways: of float64 spans made beforehand (untimed), and from the layer's float32 weights
   (:func:`grams_from_weights`: each head's span converted to float64 into one reused array, then numpy's product),
   which is what a route starts from. A rotary kind is held to the eigensolver floor, a position-free kind to the floor
   with the Gram matrices from the weights: a line ends in OVER 1.1 where that ratio is over 1.1. All interleaved in
   rotated order ``--repeats`` times on one BLAS thread (scale_bench's ``interleaved``), in CPU time of the thread; the
   ratios are the medians of the per-repeat ratios. The weights' values do not change the work (QK-norm gains and
   latent products are folded into W_Q, W_K before the core), so random weights of the family's shape time what the
   family's layers cost. The section starts with one line on the span's factor (:func:`gram_by_blocks`): its Gram
   matrix by blocks of rows against one block of the whole span.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TASK = r"""
import json, statistics, sys, time
from pipeline.families import layout_from_config
from pipeline.registry.checkpoints import open_checkpoint
from pipeline.run import compute_layer
ckpt = open_checkpoint(sys.argv[1])
layout = layout_from_config(ckpt.config)
compute_layer(ckpt, layout, 0, False)  # warm: imports, caches
times = []
for layer in range(layout.n_layers):
    t = time.process_time()  # CPU time (one thread): a loaded machine's waits for a core do not count
    compute_layer(ckpt, layout, layer, False)
    times.append(time.process_time() - t)
table = None
try:
    from pipeline.families import check_layer
    t = time.process_time()
    for _ in range(20):
        lay = layout_from_config(ckpt.config)
        for layer in range(lay.n_layers):
            check_layer(ckpt, lay, layer)
    table = (time.process_time() - t) / (20 * layout.n_layers)
except ImportError:
    pass
print(json.dumps({"layer_s": statistics.median(times), "table_s": table}))
"""

READ = r"""
import json, sys
import numpy as np
from pipeline.families import layer_qk, layout_from_config
from pipeline.registry.checkpoints import open_checkpoint
ckpt = open_checkpoint(sys.argv[1])
layout = layout_from_config(ckpt.config)

class Whole:  # a checkpoint that reads whole tensors: no read_rows
    def __init__(self, c):
        self.c = c
    def tensor_names(self):
        return self.c.tensor_names()
    def shape(self, name):
        return self.c.shape(name)
    def read(self, name):
        return self.c.read(name)
    def read_compact(self, name):
        return self.c.read_compact(name)

def status(key):
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith(key + ":"))

source = ckpt if sys.argv[2] == "rows" else Whole(ckpt)
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # the peak resident size (VmHWM) starts again from the present one
before = status("VmRSS")
qk = layer_qk(source, layout, 0)
print(json.dumps({"extra_bytes": status("VmHWM") - before, "qk_bytes": qk.W_Q.nbytes + qk.W_K.nbytes}))
"""


def child(code: str, args: list[str], tree: str | None = None) -> dict:
    env = dict(os.environ, PYTHONPATH=tree or ROOT, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def fused_checkpoint(folder: str, width: int = 3072, heads: int = 32) -> str:
    """One Phi-3-mini-shaped layer: qkv_proj (3 x width, width) bf16, with its config."""
    import torch
    from safetensors.torch import save_file

    os.makedirs(folder, exist_ok=True)
    config = {"model_type": "phi3", "hidden_size": width, "num_attention_heads": heads, "num_key_value_heads": heads,
              "num_hidden_layers": 1, "rope_theta": 10000.0, "max_position_embeddings": 4096}
    with open(os.path.join(folder, "config.json"), "w") as fh:
        json.dump(config, fh)
    w = torch.randn(3 * width, width, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    save_file({"model.layers.0.self_attn.qkv_proj.weight": w}, os.path.join(folder, "model.safetensors"))
    return folder


def family_configs() -> dict[str, tuple[dict, str | None]]:
    """``family[/tower]`` -> (a tiny config dict of that family, the tower) for every entry of the family table."""
    from dataclasses import replace

    from pipeline.families import FAMILIES
    from tests.pipeline.families.cases import CASES
    from tests.tiny_models import KINDS, transformers

    found: dict[str, tuple[dict, str | None]] = {}
    named = sorted(CASES.items(), key=lambda kv: kv[0].split("/")[0] != transformers_type(kv[1].config))
    for _key, case in named:  # the case named as its family first, then the others in the file's order
        config = getattr(transformers, case.config)(**case.kw).to_dict()
        found.setdefault(config["model_type"] + (f"/{case.tower}" if case.tower else ""), (config, case.tower))
    for family, cls, kw, _model, _proj in KINDS.values():
        found.setdefault(family, (getattr(transformers, cls)(**kw).to_dict(), None))
    out = {}
    for name, entry in FAMILIES.items():
        for tower in [t for t, _ in entry.towers] or [None]:
            key = name + (f"/{tower}" if tower else "")
            if key in found:
                out[key] = found[key]
                continue
            parent = next(((f, t) for f, e in FAMILIES.items() for t, _ in e.towers
                           if entry == replace(e.tower(t), name=name, sub_config="")), None)
            if parent is not None:  # a standalone tower: the parent's tower's sub-config under this model_type
                config, _ = found[f"{parent[0]}/{parent[1]}"]
                sub = FAMILIES[parent[0]].tower(parent[1]).sub_config
                out[key] = (dict(config[sub] if sub else config, model_type=name), None)
            else:  # no tiny config in the tests (Llama, Qwen2): transformers' own, with the Mistral kind's sizes
                out[key] = (transformers.AutoConfig.for_model(name, **KINDS["mistral"][2]).to_dict(), tower)
    return out


def transformers_type(config_class: str) -> str:
    from tests.tiny_models import transformers

    return getattr(transformers, config_class).model_type


def scaled_rotations(layout, layer: int, n: int):
    """R(d), d = 0..128, of ``layer``'s positional kind at head size ``n`` (its rotary dimensions scaled from the
    layout's head size, to an even count); None for a layer without rotary."""
    from pipeline.families.rotary import N_OFFSETS, rotation_matrices, scaled_inverse_frequencies

    p = layout.positional_of(layer)
    if p.kind != "rope":
        return None
    rd = max(2, 2 * round(p.rotary_dim * n / layout.d_head / 2))
    return rotation_matrices(n, rd, p.rope_theta, N_OFFSETS, style=p.style,
                             inv_freq=scaled_inverse_frequencies(rd, p.rope_theta, dict(p.scaling)))


def kind_label(layout, layer: int) -> str:
    p = layout.positional_of(layer)
    if p.kind != "rope":
        return p.kind
    scaling = dict(p.scaling).get("rope_type", "")
    return f"rope {p.rotary_dim}/{layout.d_head} {p.style}" + (f" {scaling}" if scaling not in ("", "default") else "")


def family_cases(width: int, heads: int, n: int, seed: int = 0, only: list[str] | None = None):
    """(label, W_Q, W_K, kv_of_head, R, floor stack, span inputs A (H, N, 2n)) per family and distinct positional
    kind of its layers; ``only``: those families and towers (``family[/tower]``), else all."""
    import numpy as np

    from pipeline.families import layout_from_config
    from pipeline.profile import cores, span_cores

    rng = np.random.default_rng(seed)
    configs = family_configs()
    unknown = sorted(set(only or ()) - set(configs))
    if unknown:
        raise SystemExit(f"families_bench: no family or tower {', '.join(unknown)}; the table has {', '.join(configs)}")
    for key, (config, tower) in configs.items():
        if only is not None and key not in only:
            continue
        layout = layout_from_config(config, tower)
        seen = {}
        for layer in range(layout.n_layers):
            p = layout.positional_of(layer)
            if p.kind != "no form":
                seen.setdefault(p, layer)
        kv = heads if layout.n_kv_heads == layout.n_heads else 1
        kv_of_head = np.arange(heads) // (heads // kv)
        for layer in seen.values():
            R = scaled_rotations(layout, layer, n)
            W_Q = (rng.normal(size=(heads, n, width)) / width ** 0.5).astype(np.float32)  # a bf16 layer's compact
            W_K = (rng.normal(size=(kv, n, width)) / width ** 0.5).astype(np.float32)
            K, P = span_cores(W_Q.astype(np.float64), W_K[kv_of_head].astype(np.float64))
            C = cores(K, P, R)
            A = np.concatenate([W_K[kv_of_head], W_Q], axis=1).transpose(0, 2, 1).astype(np.float64)
            label = f"{key} L{layer}: {kind_label(layout, layer)}, H {heads}/{kv}"
            yield label, W_Q, W_K, kv_of_head, R, 0.5 * (C + np.swapaxes(C, -1, -2)), A


def grams_from_weights(W_Q, W_K, kv_of_head, buf) -> None:
    """Each head's span Gram matrix A^T A from the layer's stored (float32) weights: A = [W_K^T | W_Q^T] converted
    to float64 into ``buf`` (N, 2n), F-ordered, made beforehand and reused, then numpy's product (one ``dsyrk``)."""
    n = W_Q.shape[1]
    for h in range(len(W_Q)):
        buf[:, :n] = W_K[kv_of_head[h]].T
        buf[:, n:] = W_Q[h].T
        buf.T @ buf


def gram_by_blocks(width: int, n: int, heads: int, repeats: int) -> None:
    """Section 3's first line: a span's factor (``pipeline.profile.span.span_r``) with its Gram matrix accumulated
    over blocks of rows (``span_work``'s block array, about ``SPAN_BLOCK_BYTES``), against the same with one block of
    the whole span (its float64 conversion a pass of its own before one ``dsyrk``), on ``heads`` heads' float32
    weights (a layer's: larger than the CPU's caches at the default sizes), interleaved, CPU time of one thread."""
    import time

    import numpy as np
    from scale_bench import interleaved

    from pipeline import optional_imports
    from pipeline.profile.span import Span, span_r, span_work

    # scipy's BLAS loaded before interleaved's thread limit starts, which limits only the libraries loaded by then
    # (else dsyrk runs on two threads, and the CPU time of this one counts half of it)
    optional_imports.scipy_linalg()
    rng = np.random.default_rng(1)
    W_Q, W_K = ((rng.normal(size=(heads, n, width)) / width ** 0.5).astype(np.float32) for _ in range(2))
    block, G = span_work(n, width)
    whole = np.empty((width, 2 * n), order="F")

    def timed(work):
        c = time.thread_time()
        for h in range(heads):
            span_r(Span(W_K[h], W_Q[h]), work)
        return 0.0, time.thread_time() - c

    _, cpu = interleaved({"blocks": lambda: timed((block, G)), "whole": lambda: timed((whole, G))}, repeats)
    print(f"   the span's factor, Gram matrix by blocks of {len(block)} rows / by the whole span converted first: "
          f"{1e3 * np.median(cpu['blocks']) / heads:.2f} / {1e3 * np.median(cpu['whole']) / heads:.2f} ms a head, "
          f"ratio {np.median(cpu['blocks'] / cpu['whole']):.3f} (N = {width}, n = {n}, {heads} heads, median of "
          f"{repeats})", flush=True)


def families_against_floor(width: int, heads: int, n: int, repeats: int,
                           only: list[str] | None = None) -> list[tuple[str, float, float, float, float, float]]:
    """Section 3: per family and positional kind, the profile core's and the run path's core's CPU time over the
    eigensolver floor's, and the core's over the floor with the span's Gram, made from float64 spans and from the
    float32 weights (medians of the per-repeat ratios); prints a line each and returns (label, core, run, core over
    floor + Gram, core over floor + Gram(w), the ratio the kind is held to: core for rotary, the last otherwise)."""
    import time

    import numpy as np
    from scale_bench import interleaved

    from pipeline.profile import head_profiles

    def timed(f):
        w, c = time.perf_counter(), time.thread_time()
        f()
        return time.perf_counter() - w, time.thread_time() - c

    rows = []
    print(f"3. profile core / eigensolver floor, CPU time of one thread, N = {width}, n = {n}, median of {repeats} "
          "interleaved repeats (core: head_profiles; run: with at_zero, as compute_layer; floor + Gram: with the "
          "Gram matrices of float64 spans made beforehand; floor + Gram(w): of the spans converted from the float32 "
          "weights; a position-free kind is held to the last):", flush=True)
    gram_by_blocks(width, n, 8, repeats)
    buf = np.empty((width, 2 * n), order="F")
    for label, W_Q, W_K, kv, R, S, A in family_cases(width, heads, n, only=only):
        runs = {"floor": lambda S=S: timed(lambda: np.linalg.eigvalsh(S)),
                "floor+G": lambda S=S, A=A: timed(lambda: (np.linalg.eigvalsh(S), np.swapaxes(A, 1, 2) @ A)),
                "floor+Gw": lambda S=S, a=(W_Q, W_K, kv): timed(lambda: (np.linalg.eigvalsh(S),
                                                                         grams_from_weights(*a, buf))),
                "core": lambda a=(W_Q, W_K, R, kv): timed(lambda: head_profiles(*a[:3], kv_of_head=a[3])),
                "run": lambda a=(W_Q, W_K, R, kv): timed(lambda: head_profiles(*a[:3], kv_of_head=a[3],
                                                                                at_zero=True).layer_values())}
        _, cpu = interleaved(runs, repeats)
        core, run = np.median(cpu["core"] / cpu["floor"]), np.median(cpu["run"] / cpu["floor"])
        gram, gram_w = np.median(cpu["core"] / cpu["floor+G"]), np.median(cpu["core"] / cpu["floor+Gw"])
        held = core if R is not None else gram_w
        rows.append((label, float(core), float(run), float(gram), float(gram_w), float(held)))
        print(f"   {label:58} floor {1e3 * np.median(cpu['floor']):6.1f} ms  core {core:5.2f}x  run {run:5.2f}x  "
              f"core / (floor + Gram) {gram:5.2f}x  / (floor + Gram(w)) {gram_w:5.2f}x"
              f"{'  OVER 1.1' if held > 1.1 else ''}", flush=True)
    with open("/proc/loadavg") as fh:
        load = " ".join(fh.read().split()[:3])
    held = np.array([r[5] for r in rows])
    rope = [r for r in rows if ": rope" in r[0]]
    flat = [r for r in rows if ": rope" not in r[0]]
    worst = rows[int(np.argmax(held))]
    print(f"   {len(rows)} layers' kinds over {len({r[0].split(' L')[0] for r in rows})} families and towers (load "
          f"average {load}), each held to its floor (rotary: the eigensolver's; position-free: with the Gram "
          f"matrices from the weights): median {np.median(held):.2f}, worst {worst[5]:.2f} ({worst[0]}), "
          f"{int((held > 1.1).sum())} over 1.1")
    if rope:
        worst_rope = max(rope, key=lambda r: r[1])
        print(f"   rotary kinds ({len(rope)}): core / floor median {np.median([r[1] for r in rope]):.2f}, worst "
              f"{worst_rope[1]:.2f} ({worst_rope[0]}), {sum(r[1] > 1.1 for r in rope)} over 1.1; run / floor median "
              f"{np.median([r[2] for r in rope]):.2f}")
    if flat:
        print(f"   position-free kinds ({len(flat)}): core / floor median {np.median([r[1] for r in flat]):.2f}; "
              f"core / (floor + Gram) median {np.median([r[3] for r in flat]):.2f}, worst "
              f"{max(r[3] for r in flat):.2f}; core / (floor + Gram(w)) median {np.median([r[4] for r in flat]):.2f}, "
              f"worst {max(r[4] for r in flat):.2f}, {sum(r[4] > 1.1 for r in flat)} over 1.1")
    return rows


def merge_base() -> str:
    return subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--before", default=None, help="the revision of the 'before' arm (default: the merge base "
                                                        "with main)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sections", default="123", help="which sections to run (default: 123; 1 and 2 run "
                                                                    "together, they share a temporary folder)")
    parser.add_argument("--width", type=int, default=4096, help="section 3's model width N (default 4096)")
    parser.add_argument("--heads", type=int, default=2, help="section 3's query heads per layer (default 2)")
    # one head size for every family, the most common one of the models of 2025-2026, so that the families' ratios
    # differ by their positional kind, rotary fraction and style and key grouping alone (the floor's cost grows as n^3)
    parser.add_argument("--head-dim", type=int, default=128, help="section 3's head size n (default 128)")
    parser.add_argument("--families", default=None, help="section 3's families and towers, comma-separated as its "
                                                         "lines name them (gpt2,t5/encoder,...); default: all")
    args = parser.parse_args(argv)
    if set(args.sections) & set("12"):
        table_and_reads(args)
    if "3" in args.sections:
        families_against_floor(args.width, args.heads, args.head_dim, args.repeats,
                               None if args.families is None else args.families.split(","))


def table_and_reads(args) -> None:
    """Sections 1 and 2."""
    from revisions import revision_tree
    from synthetic_checkpoints import write_synthetic

    before = args.before or merge_base()
    with tempfile.TemporaryDirectory() as tmp, revision_tree(before) as tree:
        rotary = os.path.join(tmp, "rotary")
        write_synthetic("rotary-1024", rotary, 2)
        runs = {"after": [], "before": []}
        for _ in range(args.repeats):
            runs["after"].append(child(TASK, [rotary]))
            runs["before"].append(child(TASK, [rotary], tree))
        med = {k: sorted(r["layer_s"] for r in v)[len(v) // 2] for k, v in runs.items()}
        table = sorted(r["table_s"] for r in runs["after"])[len(runs["after"]) // 2]
        print(f"1. one layer's task (rotary-1024, d = 0..128), CPU: this checkout {med['after']:.3f} s, {before[:12]} "
              f"{med['before']:.3f} s: ratio {med['after'] / med['before']:.3f} (median of {args.repeats})")
        print(f"   the table's own work per layer (entry, names, shapes): {table * 1e3:.3f} ms = "
              f"{table / med['after']:.2e} of the layer's task")
        fused = fused_checkpoint(os.path.join(tmp, "phi3"))
        rows, whole = child(READ, [fused, "rows"]), child(READ, [fused, "whole"])
        mib = 1 << 20
        print(f"2. one Phi-3-mini-shaped fused layer, compact Q/K {rows['qk_bytes'] / mib:.0f} MiB: peak memory above "
              f"the read's start by rows {rows['extra_bytes'] / mib:.0f} MiB, whole tensor "
              f"{whole['extra_bytes'] / mib:.0f} MiB: ratio {rows['extra_bytes'] / whole['extra_bytes']:.2f}")


if __name__ == "__main__":
    sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), ROOT]  # benchmarks/ helpers; tests/ for the cases
    main()
