"""What the family table costs, and what reading a fused QKV tensor by its q and k rows saves, side by side.

    python benchmarks/families_bench.py [--before REV] [--repeats 3]

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


def merge_base() -> str:
    return subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


def main(argv=None) -> None:
    from revisions import revision_tree
    from synthetic_checkpoints import write_synthetic

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=None, help="the revision of the 'before' arm (default: the merge base "
                                                        "with main)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
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
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
