"""The 14 seed models at their real shapes, end to end: what ``python -m pipeline profiles --seed-models`` costs.

    python benchmarks/seed_shapes_bench.py [--models distilgpt2,gpt2,...] [--modes inline,dask] [--dir DIR]

For each seed model of the registry (``pipeline.registry.models``, ``seed=True``), a synthetic checkpoint with the real
model's config, tensor names, layout and dtype is written (benchmarks/synthetic_checkpoints.py): the Q/K
tensors only, random normal / sqrt(N): GPT-2's fused ``c_attn`` (N, 3N) in float32, BLOOM's and GPT-NeoX's fused
``query_key_value`` (3N, N) in float16 (V rides along in the fused tensor: the pipeline reads it whole), OPT's
``q_proj``/``k_proj`` in float16, Mistral-Small's grouped 32/8 heads in bfloat16; one ``model.safetensors``
where the real model has one file, shards where it has several. The folder is named after the registry entry, so
the run checks its shapes against it. ``python -m pipeline profiles FOLDER --store TMP --quiet`` then runs on it
in a child process once inline with one thread (OMP/OPENBLAS/MKL_NUM_THREADS=1) and once with ``--workers 2`` (a
local dask cluster of 2 one-thread worker processes), each into a fresh store; the checkpoint is deleted after
its runs, so the disk holds one model's Q/K at a time.

Per run: wall time; CPU time of the command and its workers (``wait4``'s rusage, which gathers the reaped
worker processes); peak memory (the largest VmHWM among the command's processes, read from /proc every 0.1 s:
VmHWM starts afresh at exec, where ru_maxrss carries the parent's over) and that peak over the RSS of a process
that has only imported what the run imports; disk read (the process tree's block reads, ``ru_inblock``: the
checkpoint's files are dropped from the page cache before each run with ``posix_fadvise(DONTNEED)``, so every
byte read comes from the disk), against the checkpoint's size. A run is flagged when its peak over the imports
exceeds the largest layer's Q/K bytes + 200 MB. The totals of each mode close the table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from synthetic_checkpoints import write_checkpoint  # noqa: E402

from pipeline.registry.models import MODELS, SEED_MODELS  # noqa: E402

MB = 1e6
SLACK_MB = 200.0  # the memory target: the largest layer's Q/K + this
SINGLE_FILE_BYTES = 2e9  # Q/K of fewer bytes: one model.safetensors (as gpt2 ... bloom-3b ship), else shards
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# what a run imports, for the RSS baseline its peak is measured over
IMPORTS = ("import numpy, torch, safetensors, xarray, zarr, tqdm, pipeline.run, pipeline.profile, "
           "pipeline.families, pipeline.registry.checkpoints, pipeline.store")
MODES = {"inline": ([], ONE_THREAD), "dask": (["--workers", "2"], ONE_THREAD)}


# ------------------------------------------------------------------------------------------ checkpoints


@dataclass(frozen=True)
class Layout:
    """A seed model's checkpoint: config, dtype, per-layer Q/K tensors (name pattern, shape), layers per shard
    (None: one model.safetensors)."""

    config: dict
    dtype: str
    tensors: list
    layers_per_shard: int | None

    def layer_bytes(self) -> int:
        size = {"float32": 4, "float16": 2, "bfloat16": 2}[self.dtype]
        return sum(r * c for _, (r, c) in self.tensors) * size


def layout(name: str) -> Layout:
    """The real layout of seed model ``name`` (shapes from the registry entry)."""
    lay = _layout(name)
    big = MODELS[name].n_layers * lay.layer_bytes() >= SINGLE_FILE_BYTES
    return Layout(lay.config, lay.dtype, lay.tensors, (4 if MODELS[name].family == "mistral" else 8) if big else None)


def _layout(name: str) -> Layout:
    s = MODELS[name]
    N, H, L = s.d_model, s.n_heads, s.n_layers
    shards = None  # decided by layout()
    if s.family == "gpt2":
        config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": N, "n_head": H, "n_layer": L,
                  "n_positions": 1024, "vocab_size": 50257, "torch_dtype": "float32"}
        return Layout(config, "float32", [("h.{l}.attn.c_attn.weight", (N, 3 * N))], shards)
    if s.family == "opt":
        post = name == "opt-350m"
        config = {"model_type": "opt", "architectures": ["OPTForCausalLM"], "hidden_size": N,
                  "num_attention_heads": H, "ffn_dim": 4 * N, "word_embed_proj_dim": 512 if post else N,
                  "do_layer_norm_before": not post, "max_position_embeddings": 2048, "vocab_size": 50272,
                  "torch_dtype": "float16"}
        qk = [(f"model.decoder.layers.{{l}}.self_attn.{p}_proj.weight", (N, N)) for p in ("q", "k")]
        return Layout(config, "float16", qk, shards)
    if s.family == "bloom":
        config = {"model_type": "bloom", "architectures": ["BloomForCausalLM"], "hidden_size": N, "n_head": H,
                  "n_layer": L, "vocab_size": 250880, "torch_dtype": "float16"}
        return Layout(config, "float16", [("h.{l}.self_attention.query_key_value.weight", (3 * N, N))], shards)
    if s.family == "gpt_neox":
        config = {"model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"], "hidden_size": N,
                  "num_attention_heads": H, "intermediate_size": 4 * N, "rotary_pct": s.rotary_dim / s.d_head,
                  "rotary_emb_base": s.rope_theta, "max_position_embeddings": 2048, "vocab_size": 50304,
                  "torch_dtype": "float16"}
        return Layout(config, "float16", [("gpt_neox.layers.{l}.attention.query_key_value.weight", (3 * N, N))],
                      shards)
    if s.family == "mistral":
        config = {"model_type": "mistral", "architectures": ["MistralForCausalLM"], "hidden_size": N,
                  "num_attention_heads": H, "num_key_value_heads": s.n_kv_heads, "head_dim": s.d_head,
                  "intermediate_size": 32768, "rope_theta": s.rope_theta, "max_position_embeddings": 32768,
                  "vocab_size": 131072, "rms_norm_eps": 1e-05, "torch_dtype": "bfloat16"}
        qk = [("model.layers.{l}.self_attn.q_proj.weight", (H * s.d_head, N)),
              ("model.layers.{l}.self_attn.k_proj.weight", (s.n_kv_heads * s.d_head, N))]
        return Layout(config, "bfloat16", qk, shards)
    raise ValueError(f"no synthetic layout for the {s.family} family of {name}")


def write(name: str, folder: Path) -> tuple[Path, float]:
    """The checkpoint of ``name`` in ``folder / name``, synced and dropped from the page cache; (folder, seconds)."""
    lay = layout(name)
    t0 = time.perf_counter()
    out = write_checkpoint(folder / name, lay.config, lay.dtype, lay.tensors, MODELS[name].n_layers,
                           lay.layers_per_shard or 1, single_file=lay.layers_per_shard is None)
    drop_from_cache(out)
    return out, time.perf_counter() - t0


def drop_from_cache(folder: Path) -> None:
    """Write every file of ``folder`` to disk and drop it from the page cache: the next read comes from the disk."""
    for path in folder.iterdir():
        with open(path, "rb") as fh:
            os.fsync(fh.fileno())
            os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def size_of(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir())


# ------------------------------------------------------------------------------------------ measuring


def _status_kb(pid: int, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _tree(pid: int) -> list[int]:
    """``pid`` and every process below it (/proc/PID/task/TID/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo += [int(c) for c in fh.read().split()]
        except OSError:
            continue
    return out


@dataclass(frozen=True)
class Measure:
    wall: float
    cpu: float
    peak_mb: float
    read_mb: float


def measure(cmd: list[str], env: dict, cwd: Path | None = None) -> Measure:
    """Run ``cmd``; wall and CPU seconds, the largest VmHWM among its processes (MB), the bytes it read from disk."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    peaks: dict[int, int] = {}
    done = threading.Event()

    def poll() -> None:
        while not done.wait(0.1):
            for p in _tree(proc.pid):
                peaks[p] = max(peaks.get(p, 0), _status_kb(p, "VmHWM"))

    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    output = proc.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    done.set()
    watcher.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{output[-3000:]}")
    return Measure(wall, usage.ru_utime + usage.ru_stime, max(peaks.values(), default=0) / 1e3,
                   usage.ru_inblock * 512 / MB)


def import_baseline_mb(env: dict) -> float:
    """The RSS of a process that has imported what a run imports (MB)."""
    code = f"{IMPORTS}\nprint(open('/proc/self/status').read().split('VmRSS:')[1].split()[0])"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return int(out.stdout.strip()) / 1e3


def profile_run(folder: Path, mode: str, env: dict) -> Measure:
    """``profiles NAME`` run in the checkpoint's parent folder: the folder named like the registry entry is read
    as the checkpoint and checked against the entry's shapes."""
    extra, threads = MODES[mode]
    with tempfile.TemporaryDirectory(prefix="seed-store-") as tmp:
        cmd = [sys.executable, "-m", "pipeline", "profiles", folder.name, "--store", str(Path(tmp) / "s.zarr"),
               "--quiet", *extra]
        return measure(cmd, env | threads, cwd=folder.parent)


# ------------------------------------------------------------------------------------------ the table


def row(cells: list, widths: list[int]) -> str:
    return "  ".join(str(c).rjust(w) if i else str(c).ljust(w)
                     for i, (c, w) in enumerate(zip(cells, widths, strict=True)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(SEED_MODELS),
                    help="comma-separated seed models (default: all 14)")
    ap.add_argument("--modes", default="inline,dask", help="inline (one thread), dask (--workers 2), or both")
    ap.add_argument("--dir", default=None, help="folder for the checkpoints (default: a temporary folder)")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [n for n in names if n not in SEED_MODELS] + [m for m in modes if m not in MODES]
    if unknown:
        ap.error(f"unknown: {', '.join(unknown)} (seed models: {', '.join(SEED_MODELS)}; modes: {', '.join(MODES)})")
    env = {k: v for k, v in os.environ.items() if k not in ONE_THREAD} | {"PYTHONPATH": str(ROOT),
                                                                           "HF_HUB_OFFLINE": "1"}
    base = import_baseline_mb(env | ONE_THREAD)
    print(f"{os.cpu_count()} cores; RSS after the run's imports: {base:.0f} MB; flag: peak over imports > the "
          f"largest layer's Q/K + {SLACK_MB:.0f} MB")
    widths = [24, 16, 9, 8, 6, 8, 8, 9, 9, 6]
    print(row(["model", "shape L x H, N", "dtype", "Q/K MB", "mode", "wall s", "CPU s", "peak MB", "+imports",
               "read MB"], widths) + "  memory")
    totals = {m: [0.0, 0.0] for m in modes}
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="seed-shapes-"))
    try:
        for name in names:
            spec, lay = MODELS[name], layout(name)
            folder, _secs = write(name, work)
            qk_mb = size_of(folder) / MB
            target = lay.layer_bytes() / MB + SLACK_MB
            for mode in modes:
                drop_from_cache(folder)
                m = profile_run(folder, mode, env)
                totals[mode][0] += m.wall
                totals[mode][1] += m.cpu
                over = m.peak_mb - base
                flag = "ok" if over <= target else f"EXCEEDS {target:.0f}"
                print(row([name, f"{spec.n_layers} x {spec.n_heads}, {spec.d_model}", lay.dtype, f"{qk_mb:.0f}",
                           mode, f"{m.wall:.1f}", f"{m.cpu:.1f}", f"{m.peak_mb:.0f}", f"{over:.0f}",
                           f"{m.read_mb:.0f}"], widths) + f"  {flag}", flush=True)
            shutil.rmtree(folder)
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    for mode in modes:
        wall, cpu = totals[mode]
        print(f"total of {len(names)} models, {mode}: wall {wall:.0f} s ({wall / 60:.1f} min), CPU {cpu:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
