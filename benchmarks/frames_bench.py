"""What a training run's checkpoints cost as frames: a revision against a plain run, 154 Pythia revisions over the
loopback Hub, and every Pythia size projected onto a dask cluster.

    python benchmarks/frames_bench.py [--sections ratio,hub,projection] [--revisions 154] [--repeats 3]
                                      [--modes inline,pool,cluster]

The checkpoint is pythia-160m's shape in Pythia's layout (GPT-NeoX, 12 layers x 12 heads, d_model 768, rotary on a
quarter of each head): each layer's fused ``query_key_value`` weight (2304, 768) and bias (2304,) in float16, the
real shapes, random normal / sqrt(768) (benchmarks/synthetic_checkpoints.py), one ``model.safetensors`` of 42 MB.
Every command runs in a child process with one BLAS thread per process (OMP/OPENBLAS/MKL_NUM_THREADS=1); wall and
CPU seconds come from ``wait4`` (the command and the worker processes it reaped), as in
benchmarks/seed_shapes_bench.py.

**ratio**: a revision's cost against one plain profiles run of the same checkpoint, side by side, ``--repeats``
times each, alternating (medians): locally (``profiles FOLDER`` against ``profiles RUN --revisions all`` where RUN
holds the one subfolder ``checkpoint-0``, a link to FOLDER) and over the loopback Hub (``profiles REPO``, its main
branch, against ``profiles REPO --revisions step0``, a branch of the same bytes). Both sides pay the same start-up
(imports, store, the checkpoint's opening), so the ratio is the run path's own cost per revision. Target <= 1.1x.

**hub**: ``profiles REPO --revisions all`` over the loopback Hub of tests/hub_server.py (its real HTTP, talked to by
huggingface_hub) serving ``--revisions`` branches named as Pythia's (step0, step1, step2, step4 ... step512, step1000
... step143000: 154), on 1 worker (the command alone, ``inline``), 2 workers (``--workers 2``: a pool of two
processes, ``pool``) and a dask LocalCluster of 2 one-thread worker processes started here (``--scheduler
ADDRESS``, ``cluster``; the workers' CPU is read from each worker's own rusage). The disk holds one checkpoint: every
branch serves the same file, and the server changes one float16 element of each layer's Q rows per branch (XOR of
its low mantissa bits with the branch's index), so each revision's Q/K differ (a run copies a revision whose Q/K
hash equals another's instead of computing it) at the cost of two bytes. Bytes read are the server's body bytes,
against the Q/K bytes (2 x 768 x 768 float16 per layer); the server's own CPU (this process's, with the dask
scheduler in ``cluster`` mode) is printed apart. The Hugging Face cache is checked to hold no weight file.

**projection**: every Pythia size's 154 revisions (shapes from their config.json files: layers, d_model, heads;
Q/K bytes = layers x 2 x d_model^2 x 2, float16) projected onto dask clusters of 16 and 64 workers from two
measured costs: the CPU per head of the profile at each size's (d_model, d_head), timed here on a few random heads
(one BLAS thread, the statistics at d = 0 included), and the CPU per Q/K byte: what the hub section's ``inline``
run spent per revision (beyond the ratio section's one-revision run of the same Hub, so without the start-up)
beyond its heads' profile (reading, hashing, the HTTP client, the store's writes, the per-task overheads), per Q/K
byte. The projection assumes: one core per worker at this machine's speed; the 154 x
layers (frame, layer) tasks spread evenly (a task is one layer, so 924 to 5,760 tasks for 16 or 64 workers); the
Hub delivers the Q/K bytes as fast as the workers read them (the transfer time at 1 Gb/s is printed beside); no
start-up or scheduler cost.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from seed_shapes_bench import ONE_THREAD, Measure, measure, row  # noqa: E402
from synthetic_checkpoints import write_checkpoint  # noqa: E402

os.environ.update(ONE_THREAD)  # this process's profile timings and the dask workers it spawns: one BLAS thread

from tests.hub_server import LoopbackHub  # noqa: E402

MB, GB = 1e6, 1e9
REPO = "bench/pythia-160m"
QKV = "gpt_neox.layers.{l}.attention.query_key_value.{w}"
# Pythia's 154 revisions: step0, the 10 log-spaced steps 1 ... 512, then every 1000 steps to 143000
PYTHIA_STEPS = (0, *(2 ** k for k in range(10)), *range(1000, 143001, 1000))
# (layers, d_model, heads) of each Pythia size, from its config.json on the Hub (EleutherAI/pythia-*)
PYTHIA = {"pythia-14m": (6, 128, 4), "pythia-70m": (6, 512, 8), "pythia-160m": (12, 768, 12),
          "pythia-410m": (24, 1024, 16), "pythia-1b": (16, 2048, 8), "pythia-1.4b": (24, 2048, 16),
          "pythia-2.8b": (32, 2560, 32), "pythia-6.9b": (32, 4096, 32), "pythia-12b": (36, 5120, 40)}
WORKERS = (16, 64)
LINK_BITS = 1e9  # the transfer time printed beside the projection: 1 Gb/s
MODES = {"inline": [], "pool": ["--workers", "2"], "cluster": None}  # cluster: --scheduler of a LocalCluster


def pythia_config(layers: int, d_model: int, heads: int) -> dict:
    """A Pythia config.json (GPTNeoXConfig's keys, the values Pythia's configs give)."""
    return {"model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"], "hidden_size": d_model,
            "num_attention_heads": heads, "num_hidden_layers": layers, "intermediate_size": 4 * d_model,
            "rotary_pct": 0.25, "rotary_emb_base": 10000, "max_position_embeddings": 2048, "vocab_size": 50304,
            "use_parallel_residual": True, "torch_dtype": "float16"}


def qk_bytes(layers: int, d_model: int) -> int:
    """The Q/K bytes of one revision: the q and k rows of each layer's fused weight, float16."""
    return layers * 2 * d_model * d_model * 2


def write_pythia(folder: Path, name: str = "pythia-160m") -> Path:
    layers, N, H = PYTHIA[name]
    tensors = [(QKV.format(l="{l}", w="weight"), (3 * N, N)), (QKV.format(l="{l}", w="bias"), (3 * N,))]
    return write_checkpoint(folder, pythia_config(layers, N, H), "float16", tensors, layers, single_file=True)


def weight_offsets(path: Path) -> list[int]:
    """The file offset of each layer's query_key_value weight data (its first element: head 0's first Q row)."""
    with open(path, "rb") as fh:
        size = int.from_bytes(fh.read(8), "little")
        header = json.loads(fh.read(size))
    return sorted(8 + size + v["data_offsets"][0] for k, v in header.items()
                  if k != "__metadata__" and k.endswith("query_key_value.weight"))


class PerturbedHub(LoopbackHub):
    """The loopback Hub serving one checkpoint under every branch, each branch's Q/K made its own: the low bytes of
    the first two float16 elements of each layer's weight XORed with the branch's index (its low and high byte;
    the exponent bits are in the high bytes, so every value stays finite). The main branch is served as written."""

    def __init__(self, weights: Path, branches: dict[str, dict[str, Path]], main: dict[str, Path]):
        super().__init__({REPO: main}, branches={REPO: branches})
        self.index = {self.refs[REPO][b]: k for k, b in enumerate(branches)}
        self.spots = weight_offsets(weights)

    def read(self, repo, filename, start, end, commit=None):
        block = super().read(repo, filename, start, end, commit)
        k = self.index.get(commit)
        if not k or not filename.endswith(".safetensors"):
            return block
        out = bytearray(block)
        for spot in self.spots:
            for pos, value in ((spot, k & 0xFF), (spot + 2, k >> 8)):
                if start <= pos < end:
                    out[pos - start] ^= value
        return bytes(out)


def serve(checkpoint: Path, n: int) -> PerturbedHub:
    files = {p.name: p for p in checkpoint.iterdir()}
    branches = {f"step{s}": files for s in PYTHIA_STEPS[:n]}
    return PerturbedHub(checkpoint / "model.safetensors", branches, files)


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def hub_env(hub: LoopbackHub, home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_TOKEN", "HF_HUB_CACHE")}
    return env | {"PYTHONPATH": str(ROOT), "HF_ENDPOINT": hub.endpoint, "HF_HOME": str(home)}


def profiles(*args, env: dict, cwd: Path) -> Measure:
    return measure([sys.executable, "-m", "pipeline", "profiles", *map(str, args), "--quiet"], env, cwd)


def med(ms: list[Measure]) -> tuple[float, float]:
    return statistics.median(m.wall for m in ms), statistics.median(m.cpu for m in ms)


# ------------------------------------------------------------------------------------------ ratio


def ratio_section(work: Path, checkpoint: Path, repeats: int) -> dict:
    """One revision against one plain run of the same checkpoint, locally and over the loopback Hub."""
    run = work / "run"
    run.mkdir(exist_ok=True)
    if not (run / "checkpoint-0").exists():
        (run / "checkpoint-0").symlink_to(checkpoint, target_is_directory=True)
    env = os.environ | {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    out = {}
    print(f"\nA revision against a plain run of the same checkpoint (pythia-160m's shape; medians of {repeats}, "
          "alternating; target run / plain <= 1.1)")
    widths = [8, 34, 8, 8, 8, 8]
    print(row(["where", "commands", "wall s", "CPU s", "wall x", "CPU x"], widths))
    with serve(checkpoint, 1) as hub:
        sides = {
            "local": (lambda s: profiles(checkpoint, "--store", s, env=env, cwd=work),
                      lambda s: profiles(run, "--revisions", "all", "--store", s, env=env, cwd=work),
                      "FOLDER / RUN --revisions all"),
            "hub": (lambda s: profiles(REPO, "--store", s, env=hub_env(hub, work / "hf-plain"), cwd=work),
                    lambda s: profiles(REPO, "--revisions", "step0", "--store", s,
                                       env=hub_env(hub, work / "hf-run"), cwd=work),
                    "REPO (main) / REPO --revisions step0"),
        }
        for where, (plain_cmd, run_cmd, what) in sides.items():
            plain, one = [], []
            for i in range(repeats):
                for cmd, into in ((plain_cmd, plain), (run_cmd, one)):
                    store = work / f"ratio-{where}-{i}-{len(into)}.zarr"
                    into.append(cmd(store))
                    shutil.rmtree(store)
                shutil.rmtree(work / "hf-plain", ignore_errors=True)
                shutil.rmtree(work / "hf-run", ignore_errors=True)
            (pw, pc), (rw, rc) = med(plain), med(one)
            out[where] = {"plain": (pw, pc), "run": (rw, rc)}
            print(row([where, what, f"{pw:.1f} / {rw:.1f}", f"{pc:.1f} / {rc:.1f}", f"{rw / pw:.2f}",
                       f"{rc / pc:.2f}"], widths), flush=True)
    return out


# ------------------------------------------------------------------------------------------ hub


def cluster_cpu(client) -> float:
    """The CPU seconds of every worker process of the cluster so far."""
    def own():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime
    return sum(client.run(own).values())


def hub_section(work: Path, checkpoint: Path, n: int, modes: list[str]) -> dict:
    """``profiles REPO --revisions all`` of ``n`` branches on each mode."""
    layers, N, _ = PYTHIA["pythia-160m"]
    qk = n * qk_bytes(layers, N)
    print(f"\n{n} revisions of pythia-160m's shape over the loopback Hub (Q/K {qk / GB:.2f} GB; one BLAS thread per "
          "process)")
    widths = [8, 9, 9, 9, 10, 10, 8, 8, 9, 8, 7]
    print(row(["mode", "wall s", "CPU s", "hub CPU", "s/revision", "CPU/rev.", "wall x", "CPU x", "read GB",
               "read/QK", "cache"], widths))
    out = {}
    for mode in modes:
        home, store = work / f"hf-{mode}", work / f"hub-{mode}.zarr"
        with serve(checkpoint, n) as hub:
            env = hub_env(hub, home)
            extra, cluster, before = MODES[mode], None, 0.0
            if mode == "cluster":
                from pipeline.run.cluster import open_cluster

                os.environ.update({k: env[k] for k in ("HF_ENDPOINT", "HF_HOME", "PYTHONPATH")})  # the workers' env
                cluster = open_cluster(workers=2)
                extra, before = ["--scheduler", cluster.client.scheduler.address], cluster_cpu(cluster.client)
            try:
                mine = self_cpu()
                m = profiles(REPO, "--revisions", "all", "--store", store, *extra, env=env, cwd=work)
                served = hub.total_bytes(REPO)
                server = self_cpu() - mine
                cpu = m.cpu + (cluster_cpu(cluster.client) - before if cluster else 0.0)
            finally:
                if cluster is not None:
                    cluster.close()
                    for k in ("HF_ENDPOINT", "HF_HOME"):
                        os.environ.pop(k, None)
        weights = [p for p in home.rglob("*") if p.is_file() and p.suffix in (".safetensors", ".bin")]
        done, repeats = _frames(store)
        if done != n or repeats:  # each branch's Q/K are their own: every frame computed, none copied
            raise RuntimeError(f"{mode}: {done} of {n} frames complete, {repeats} repeats, in {store}")
        out[mode] = {"wall": m.wall, "cpu": cpu, "server_cpu": server, "served": served, "qk": qk}
        first = out[modes[0]]  # wall x, CPU x: against the first mode run (inline by default)
        print(row([mode, f"{m.wall:.0f}", f"{cpu:.0f}", f"{server:.0f}", f"{m.wall / n:.2f}", f"{cpu / n:.2f}",
                   f"{m.wall / first['wall']:.2f}", f"{cpu / first['cpu']:.2f}", f"{served / GB:.3f}",
                   f"{served / qk:.5f}", "weights!" if weights else "clean"], widths), flush=True)
        shutil.rmtree(store)
        shutil.rmtree(home, ignore_errors=True)
    return out


def _frames(store: Path) -> tuple[int, int]:
    """(complete frames, frames stored as repeats) of the store's one run."""
    from pipeline.store import Store

    (summary,) = Store.open(str(store), "r").runs()
    return len(summary.frames) - len(summary.missing), len(summary.repeats)


# ------------------------------------------------------------------------------------------ projection


def head_cost(d_model: int, heads: int, timed: int) -> float:
    """CPU seconds per head of the profile (every offset, the statistics at d = 0) at a Pythia size's shape: ``timed``
    random float16 heads, one BLAS thread."""
    import numpy as np

    from pipeline.families import layout_from_config
    from pipeline.families import rotations as rotations_of
    from pipeline.profile import head_profiles

    n = d_model // heads
    layout = layout_from_config(pythia_config(1, d_model, heads))
    rot = rotations_of(layout, layer=0)
    rng = np.random.default_rng(0)
    W = (rng.standard_normal((2, timed, n, d_model)) / d_model ** 0.5).astype(np.float16)
    head_profiles(W[0, :1], W[1, :1], rot, at_zero=True).layer_values()  # warm: imports, first calls
    t0 = time.process_time()
    head_profiles(W[0], W[1], rot, at_zero=True).layer_values()
    return (time.process_time() - t0) / timed


def projection_section(hub: dict | None, ratio: dict | None, timed: int) -> list[dict]:
    print(f"\nPer-head CPU of the profile at each Pythia shape ({timed} random heads each, one BLAS thread)")
    costs = {}
    for name, (_layers, N, H) in PYTHIA.items():
        key = (N, H)
        if key not in costs:
            costs[key] = head_cost(N, H, min(timed, H))
        print(f"  {name:<12} d_model {N:>5}, d_head {N // H:>3}: {costs[key]:.3f} s per head", flush=True)
    layers, N, H = PYTHIA["pythia-160m"]
    if hub and "inline" in hub:
        h = hub["inline"]
        revisions = round(h["qk"] / qk_bytes(layers, N))
        # The start-up (imports, the store, the Hub's listing) is no revision's cost. The ratio section's
        # ``profiles REPO --revisions step0`` is that start-up and one revision over the same Hub, so when it ran
        # (and the hub run has more than one revision) the difference is the cost of the other revisions alone;
        # else the start-up is spread over the revisions, an overestimate by start-up / revisions.
        one = (ratio or {}).get("hub", {}).get("run")
        if one is not None and revisions > 1:
            per_rev, how = (h["cpu"] - one[1]) / (revisions - 1), "beyond the ratio section's one-revision run"
        else:
            per_rev, how = h["cpu"] / revisions, "its start-up included"
        heads_cpu = layers * H * costs[(N, H)]
        rest = per_rev - heads_cpu
        # A rest below zero is the timings' noise (the heads' profile is timed apart, on other arrays): counted as 0.
        per_byte = max(rest, 0.0) / qk_bytes(layers, N)
        print(f"  the inline hub run: {per_rev:.2f} CPU s per revision ({how}), of which the heads' profile "
              f"{heads_cpu:.2f} s; the rest, {rest:.2f} s, is {per_byte * GB:.2f} CPU s per Q/K GB"
              + (" (counted as 0)" if rest < 0 else ""))
    else:
        per_byte = None
        print("  (no inline hub run in this invocation: the per-byte cost is left out)")
    print(f"\nProjection: every Pythia size's {len(PYTHIA_STEPS)} revisions on a dask cluster (one core per worker at "
          "this machine's speed, tasks spread evenly, the Hub as fast as the workers, no start-up)")
    widths = [12, 7, 6, 6, 9, 9, 10, 10, 10, 11]
    print(row(["model", "layers", "heads", "d_head", "Q/K GB", "CPU h", *(f"{w} workers" for w in WORKERS),
               "per task s", "1 Gb/s"], widths))
    table = []
    for name, (layers, N, H) in PYTHIA.items():
        total_bytes = len(PYTHIA_STEPS) * qk_bytes(layers, N)
        cpu = len(PYTHIA_STEPS) * layers * H * costs[(N, H)] + (per_byte or 0.0) * total_bytes
        per_task = cpu / (len(PYTHIA_STEPS) * layers)
        table.append({"model": name, "layers": layers, "heads": layers * H, "d_head": N // H, "qk_gb": total_bytes / GB,
                      "cpu_h": cpu / 3600, **{f"w{w}": cpu / w for w in WORKERS}, "per_task": per_task})
        print(row([name, layers, layers * H, N // H, f"{total_bytes / GB:.1f}", f"{cpu / 3600:.2f}",
                   *(_duration(cpu / w) for w in WORKERS), f"{per_task:.1f}",
                   _duration(total_bytes * 8 / LINK_BITS)], widths), flush=True)
    return table


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sections", default="ratio,hub,projection", help="ratio, hub, projection (comma list)")
    ap.add_argument("--revisions", type=int, default=len(PYTHIA_STEPS),
                    help=f"branches served in the hub section (default {len(PYTHIA_STEPS)}, Pythia's)")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each side in the ratio section (default 3)")
    ap.add_argument("--modes", default=",".join(MODES), help="hub section: inline, pool, cluster (comma list)")
    ap.add_argument("--timed-heads", type=int, default=4, help="heads timed per Pythia shape (default 4)")
    ap.add_argument("--dir", default=None, help="working folder (default: a temporary one, removed)")
    args = ap.parse_args(argv)
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [s for s in sections if s not in ("ratio", "hub", "projection")] + [m for m in modes if m not in MODES]
    if bad or not 1 <= args.revisions <= len(PYTHIA_STEPS):
        ap.error(f"unknown: {', '.join(bad)}" if bad else f"--revisions: 1 to {len(PYTHIA_STEPS)}")
    load = os.getloadavg()[0]
    print(f"{os.cpu_count()} cores, load average {load:.1f} at the start (other work on this machine inflates wall "
          "times; CPU seconds less so)")
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="frames-bench-"))
    try:
        checkpoint = write_pythia(work / "pythia-160m")
        ratio = ratio_section(work, checkpoint, args.repeats) if "ratio" in sections else None
        hub = hub_section(work, checkpoint, args.revisions, modes) if "hub" in sections else None
        if "projection" in sections:
            projection_section(hub, ratio, args.timed_heads)
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
