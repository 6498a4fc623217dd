"""A run of revisions read from the Hub (the loopback Hub of tests/hub_server.py, its branches the revisions, the real
huggingface_hub client talking HTTP to it): only the Q/K bytes of each revision are fetched, nothing of the weights
lands in the Hugging Face cache, memory holds a layer's Q/K as a plain run's does, and a revision that is missing or
stalls fails alone, within the Hub timeout, naming it."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("huggingface_hub", reason="the Hub tests need huggingface_hub")
transformers = pytest.importorskip("transformers", reason="the Hub tests write their configs with transformers")

from safetensors.numpy import save_file  # noqa: E402

from pipeline.run import run_profiles  # noqa: E402
from pipeline.store import Store  # noqa: E402
from tests.hub_server import LoopbackHub  # noqa: E402
from tests.pipeline.test_cli_profiles import cli  # noqa: E402

REPO = "test-org/pythia-like"
SMALL = "test-org/pythia-tiny"  # the memory test's first runs, which import what the measured runs use
LAYERS = 2  # Pythia's layout (fused query_key_value, [q | k | v] per head), rotary on 2 of each head's 8 dimensions
REVISIONS = 20
DISTINCT = 5  # the revisions' Q/K take 5 values, each in 4 revisions whose v rows and other weights differ




def write_checkpoint(folder: Path, qk_seed: int, other_seed: int, width: int, heads: int,
                     layers: int = LAYERS) -> Path:
    """A GPT-NeoX checkpoint as Pythia's are stored: config.json and one float16 model.safetensors holding each
    layer's fused query_key_value (weight and bias) and the input embedding. The q and k rows come from
    ``qk_seed``, everything else from ``other_seed``."""
    folder.mkdir(parents=True, exist_ok=True)
    transformers.GPTNeoXConfig(hidden_size=width, num_attention_heads=heads, num_hidden_layers=layers,
                               rotary_pct=0.25, intermediate_size=64, vocab_size=256,
                               torch_dtype="float16").to_json_file(str(folder / "config.json"))
    n = width // heads
    qk, other = np.random.default_rng(qk_seed), np.random.default_rng(other_seed)
    tensors = {"gpt_neox.embed_in.weight": other.standard_normal((256, width)).astype(np.float16)}
    for layer in range(layers):
        w = other.standard_normal((heads, 3, n, width)).astype(np.float16)
        w[:, :2] = qk.standard_normal((heads, 2, n, width)).astype(np.float16) / np.sqrt(width)
        prefix = f"gpt_neox.layers.{layer}.attention.query_key_value"
        tensors[f"{prefix}.weight"] = w.reshape(3 * width, width)
        tensors[f"{prefix}.bias"] = other.standard_normal(3 * width).astype(np.float16)
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


def header_bytes(path: Path) -> int:
    return 8 + int.from_bytes(path.read_bytes()[:8], "little")


def branch_files(folder: Path) -> dict[str, Path]:
    return {p.name: p for p in folder.iterdir()}


def write_run(root: Path, width: int, heads: int, distinct: int = DISTINCT) -> dict[str, Path]:
    """branch -> checkpoint folder, step1000 ... step20000, the Q/K of revision k those of k % ``distinct``."""
    return {f"step{1000 * (k + 1)}": write_checkpoint(root / f"step{1000 * (k + 1)}", k % distinct, 100 + k, width,
                                                      heads) for k in range(REVISIONS)}


def serve(branches: dict[str, Path], small: dict[str, Path] | None = None) -> LoopbackHub:
    """The revisions ``branches`` as the branches of REPO (and ``small``'s as those of SMALL)."""
    repos = {REPO: branches} | ({SMALL: small} if small else {})
    main = {r: {"config.json": b[next(iter(b))] / "config.json"} for r, b in repos.items()}  # no trainer_state
    return LoopbackHub(main, branches={r: {b: branch_files(f) for b, f in named.items()} for r, named in repos.items()})


def cache_files(home: Path) -> list[Path]:
    return [p for p in home.rglob("*") if p.is_file()]


def quiet(**kw):
    return dict(progress=False, log=lambda *_: None, **kw)


def test_twenty_revisions_fetch_their_qk_bytes_alone(hub_env, tmp_path):
    """20 revisions of a Pythia-layout checkpoint (width 256, 32 heads): the bytes fetched are their Q/K rows and the
    files' headers (<= 1.0001 x the Q/K bytes beside those), the Hugging Face cache holds their configs alone, and
    the frames are those of a plain run of each checkpoint (the 15 repeats copied from their first)."""
    width, heads = 256, 32
    branches = write_run(tmp_path / "checkpoints", width, heads)
    with serve(branches) as hub:
        hub_env.setenv("HF_ENDPOINT", hub.endpoint)
        store = tmp_path / "s.zarr"
        run_profiles([REPO], str(store), revisions="all", **quiet())
        hub.total_bytes()  # every answer counted
        served = {f: n for (repo, f), n in hub.bytes_served.items() if repo == REPO}
        for step in ("step1000", "step5000"):
            run_profiles([str(branches[step])], str(tmp_path / "plain.zarr"), name=step, **quiet())
    one = branches["step1000"]
    qk = REVISIONS * LAYERS * 2 * width * width * 2  # the q and k rows of every layer of every revision, float16
    headers = REVISIONS * header_bytes(one / "model.safetensors")
    configs = REVISIONS * (one / "config.json").stat().st_size
    # every byte of the weight files is a Q/K byte or a header byte: the v rows, biases and embeddings stay there
    assert qk <= served["model.safetensors"] - headers <= 1.0001 * qk, (served, qk, headers)
    assert sum(served.values()) <= 1.0001 * qk + headers + configs
    assert set(served) == {"model.safetensors", "config.json"}  # no index, no trainer_state: the names give steps
    # the Hugging Face cache holds the configs alone: no weight file, no blob larger than a config
    files = cache_files(tmp_path / "hf-home")
    assert files and not [p for p in files if p.suffix in (".safetensors", ".bin", ".gguf", ".onnx")]
    assert max(p.stat().st_size for p in files) <= (one / "config.json").stat().st_size
    # the frames: each revision's, as a plain run of its checkpoint folder computes it
    ds = Store.open(store, "r").run("pythia-like").load()
    assert list(ds.revision.values) == list(branches) and ds.layer_done.values.all()
    assert list(ds.commit.values) == [hub.refs[REPO][b] for b in branches]
    plain = Store.open(tmp_path / "plain.zarr", "r").dataset("profiles").load()
    for i, step in ((0, "step1000"), (4, "step5000")):
        for var in ("profile", "norm", "head_statistics", "spectrum"):
            np.testing.assert_array_equal(ds[var].values[i], plain[var].sel(model=step).values[:LAYERS],
                                          err_msg=f"{step} {var}")
    assert list(ds.repeat_of.values) == [-1] * DISTINCT + [1000 * (k % DISTINCT + 1) for k in range(DISTINCT, 20)]
    np.testing.assert_array_equal(ds.profile.values[DISTINCT:], np.tile(ds.profile.values[:DISTINCT], (3, 1, 1, 1, 1)))


CHILD = r"""
import json, sys, tracemalloc
from pipeline.run import run_profiles

def status(key):
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith(key + ":"))

store, scratch, kw, warm, model, warm_model, measure = sys.argv[1:8]
quiet = dict(progress=False, log=lambda *_: None)
run_profiles([warm_model], scratch, **json.loads(warm), **quiet)  # the same kind of run first: its modules imported
if measure == "traced":
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
else:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # the peak resident size (VmHWM) starts again from the present one
    before = status("VmRSS")
run_profiles([model], store, **json.loads(kw), **quiet)
peak = tracemalloc.get_traced_memory()[1] if measure == "traced" else status("VmHWM")
print(json.dumps({"over": peak - before}))
"""


def peak_over(tmp_path: Path, name: str, kw: dict, warm: dict, measure: str) -> int:
    """The peak memory of one ``run_profiles(REPO, **kw)`` in a fresh process (after a first run of the same kind,
    ``run_profiles(SMALL, **warm)`` into another store, so that what it imports is there before), over what the
    process held before it: what Python and numpy allocate (``measure`` "traced": tracemalloc), or the resident
    size ("resident": VmHWM, the allocator's retention included)."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / f"{name}.zarr"),
                          str(tmp_path / f"{name}-warm.zarr"), json.dumps(kw), json.dumps(warm), REPO, SMALL, measure],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["over"]


@pytest.mark.slow
def test_a_run_of_twenty_revisions_holds_a_layer_as_a_plain_run_does(hub_env, tmp_path):
    """Memory, over a Pythia-layout run of 20 revisions of width 1024 and 128 heads (4 MiB of Q/K a layer, 160 MiB in
    all): what the run allocates at its peak (tracemalloc: Python objects and numpy arrays) is within one layer's
    Q/K of what a plain run of one revision allocates; and its peak resident size does not grow with the revisions
    (20 against 10, within one layer's Q/K). The resident size is compared between runs of revisions, not with a
    plain run: glibc keeps freed memory in the arenas of the threads that opened the revisions (8 at once), some
    8 to 10 MB more than a plain run's (measured over the start: 18.8 to 21.3 MB for runs of 5, 10 and 20 revisions,
    10.2 MB for a plain run; with MALLOC_MMAP_THRESHOLD_=65536 MALLOC_ARENA_MAX=1, 11.7 against 10.6 MB), not
    growing with the revisions."""
    width, heads = 1024, 128
    branches = write_run(tmp_path / "checkpoints", width, heads, distinct=2)
    small = {b: write_checkpoint(tmp_path / "small" / b, k, 100 + k, 64, 8) for k, b in enumerate(("step1", "step2"))}
    warm_run = {"revisions": "all"}
    with serve(branches, small) as hub:
        hub_env.setenv("HF_ENDPOINT", hub.endpoint)
        plain = peak_over(tmp_path, "plain", {"revision": "step1000", "name": "plain"},
                          {"revision": "step1", "name": "warm"}, "traced")
        run = peak_over(tmp_path, "run", {"revisions": "all"}, warm_run, "traced")
        ten = peak_over(tmp_path, "ten", {"revisions": ",".join(f"step{1000 * k}" for k in range(4, 14))}, warm_run,
                        "resident")
        twenty = peak_over(tmp_path, "twenty", {"revisions": "all"}, warm_run, "resident")
    qk_layer = 2 * width * width * 2  # the q and k rows of one layer, float16 (as they are held: compact)
    print(f"peak over the start, MB: traced plain {plain / 1e6:.1f}, run of 20 {run / 1e6:.1f}; resident run of 10 "
          f"{ten / 1e6:.1f}, of 20 {twenty / 1e6:.1f}; a layer's Q/K {qk_layer / 1e6:.1f}")
    assert plain >= qk_layer, plain  # the measure sees a layer's Q/K
    assert run <= plain + qk_layer, (run, plain, qk_layer)
    assert twenty <= ten + qk_layer, (twenty, ten, qk_layer)
    for name in ("run", "twenty"):
        ds = Store.open(tmp_path / f"{name}.zarr", "r").run("pythia-like")
        assert ds.layer_done.values.all() and ds.sizes["step"] == REVISIONS


class StallingHub(LoopbackHub):
    """A loopback Hub whose branches in ``stalled`` send the headers of any weight-file answer, then nothing until
    ``release`` is set (or the server stops)."""

    def __init__(self, *args, stalled=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.stalled = {self.refs[REPO][b] for b in stalled}
        self.release = threading.Event()
        self.held = 0

    def read(self, repo, filename, start, end, commit=None):
        if commit in self.stalled and filename.endswith(".safetensors") and not self.release.is_set():
            self.held += 1
            self.release.wait(120)
        return super().read(repo, filename, start, end, commit)


def test_a_missing_and_a_stalled_revision_fail_alone_within_the_timeout(hub_env, tmp_path, capsys):
    from tests.pipeline.test_cli_profiles import expected_profiles
    from tests.tiny_models import build_tiny, save

    models = {}
    branches = {}
    for k, step in enumerate((1000, 2000, 4000)):
        models[step] = build_tiny("gpt_neox", seed=k)
        branches[f"step{step}"] = Path(save(models[step], tmp_path / f"step{step}"))
    named = {b: branch_files(f) for b, f in branches.items()} | {"step3000": {}}  # listed, its files gone
    hub = StallingHub({REPO: {"config.json": branches["step1000"] / "config.json"}}, branches={REPO: named},
                      stalled=["step2000"])
    store = tmp_path / "s.zarr"
    capsys.readouterr()
    with hub:
        hub_env.setenv("HF_ENDPOINT", hub.endpoint)
        hub_env.setenv("HEADGEOMETRY_HUB_TIMEOUT", "1")
        t0 = time.perf_counter()
        assert cli("profiles", REPO, "--revisions", "all", "--store", store, "--quiet") == 1
        elapsed = time.perf_counter() - t0
        err = capsys.readouterr().err
        hub.release.set()
    assert elapsed < 30, elapsed  # the stalled answer would have held it 120 s
    assert hub.held >= 1
    assert err.count("\n") == 1 and err.startswith("error: 2 of 4 revisions of test-org/pythia-like failed"), err
    assert re.search(r"step2000: the Hub at \S+ stalled while reading the header of model.safetensors of "
                     r"test-org/pythia-like: no data .*within 1 s", err), err
    assert re.search(r"step3000: \S+@\w+ at \S+ has no config.json", err), err
    ds = Store.open(store, "r").run("pythia-like").load()
    assert list(ds.revision.values) == ["step1000", "step2000", "step3000", "step4000"]
    assert ds.layer_done.values.tolist() == [[True, True], [False, False], [False, False], [True, True]]
    assert list(ds.commit.values) == [hub.refs[REPO]["step1000"], "", "", hub.refs[REPO]["step4000"]]
    for i, step in ((0, 1000), (3, 4000)):
        want, _ = expected_profiles(models[step], "gpt_neox")
        np.testing.assert_allclose(ds.profile.values[i], want, rtol=0, atol=1e-9)
    capsys.readouterr()
    assert cli("list", "--store", store) == 0
    out = capsys.readouterr().out
    assert "step2000 (0/2 layers), step3000 (0/2 layers)" in out and "1000 to 4000" in out

    # the Hub answers again (step3000's files back): a rerun reads and computes the two missing frames alone
    named["step3000"] = branch_files(branches["step1000"])
    with LoopbackHub({REPO: {"config.json": branches["step1000"] / "config.json"}}, branches={REPO: named}) as again:
        hub_env.setenv("HF_ENDPOINT", again.endpoint)
        assert cli("profiles", REPO, "--revisions", "all", "--store", store, "--quiet") == 0
        served = again.total_bytes(REPO)
    ds = Store.open(store, "r").run("pythia-like").load()
    assert ds.layer_done.values.all() and list(ds.repeat_of.values) == [-1, -1, 1000, -1]
    want, _ = expected_profiles(models[2000], "gpt_neox")
    np.testing.assert_allclose(ds.profile.values[1], want, rtol=0, atol=1e-9)
    qk = LAYERS * 2 * 64 * 64 * 8  # a revision's Q/K: tests.tiny_models' gpt_neox, 2 layers of 64 x 64, float64
    weights = branches["step1000"] / "model.safetensors"
    # the two revisions' Q/K, the headers of all four (each checked again), step3000's config (new in the cache)
    config = (weights.parent / "config.json").stat().st_size
    assert 2 * qk <= served <= 1.0001 * 2 * qk + 4 * header_bytes(weights) + config
