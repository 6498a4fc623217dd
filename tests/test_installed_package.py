"""The package as a user installs it: the sdist and the wheel built as a release builds them, then the wheel
installed into a fresh virtual environment and used from an empty folder, away from the clone.

The distributions are built once per session, offline (``python -m build --no-isolation``: the build tools of
this environment) from a copy of the working tree, so nothing is written into the clone. The wheel goes into a
venv made with ``--system-site-packages`` and installed with ``--no-deps``: the dependencies come from this
environment, the package itself only from the wheel (each command checks that ``pipeline`` is imported from the
venv, not from an editable install of a checkout). Every command runs in an empty temporary folder, with
``HOME`` in another one and no ``XDG_DATA_HOME``, ``PYTHONPATH`` or ``$HEADGEOMETRY_STORE``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from pipeline import store as st
from tests.pipeline.test_profile import naive_oracle
from tests.shared import built_once

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bokeh_session import pull_document  # noqa: E402 - the benchmarks' Bokeh client: a session pulled as a browser

pytestmark = pytest.mark.slow

DEMO_IN_WHEEL = "pipeline/store/demo.zarr/"
CLEARED = ("PYTHONPATH", "XDG_DATA_HOME", "HEADGEOMETRY_STORE", "VIRTUAL_ENV", "PYTHONHOME")


def run(argv: list, cwd: Path, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    out = subprocess.run([str(a) for a in argv], cwd=str(cwd), env=env, capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, f"{argv} exited {out.returncode}:\n{out.stdout}\n{out.stderr}"
    return out


def working_tree(dest: Path) -> Path:
    """The clone's files as git sees them (tracked and new, not ignored), copied to ``dest``."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        if (ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)
    return dest


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> dict[str, Path]:
    """``python -m build`` of the working tree: the sdist, the wheel it builds, and the tree's own copy. Built once
    per run: pytest-xdist's workers share the first one's build (``tests.shared.built_once``)."""
    if shutil.which("git") is None:
        pytest.skip("copying the working tree needs git")

    def build(tmp: Path) -> None:
        src = working_tree(tmp / "src")
        run([sys.executable, "-m", "build", "--no-isolation", "--outdir", tmp / "out", src], tmp, timeout=600)

    tmp = built_once(tmp_path_factory, "installed-package-dist", build)
    (wheel,), (sdist,) = (tmp / "out").glob("*.whl"), (tmp / "out").glob("*.tar.gz")
    return {"sdist": sdist, "wheel": wheel, "src": tmp / "src", "tmp": tmp_path_factory.mktemp("dist")}


def wheel_files(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {name: z.read(name) for name in z.namelist()}


def test_twine_check_passes(dists):
    out = run([sys.executable, "-m", "twine", "check", "--strict", dists["sdist"], dists["wheel"]], dists["tmp"])
    assert out.stdout.count("PASSED") == 2, out.stdout


def test_the_sdist_builds_the_wheel_of_the_tree(dists):
    """``python -m build`` builds the wheel from the sdist; the tree's own wheel has the same files, byte for byte."""
    out = dists["tmp"] / "tree"
    run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", out, dists["src"]], dists["tmp"],
        timeout=600)
    from_sdist, from_tree = wheel_files(dists["wheel"]), wheel_files(next(out.glob("*.whl")))
    assert sorted(from_sdist) == sorted(from_tree)
    assert [n for n in from_sdist if from_sdist[n] != from_tree[n]] == []


def test_the_wheel_carries_the_committed_store_as_its_demo_and_no_tests(dists):
    files = wheel_files(dists["wheel"])
    committed = subprocess.run(["git", "ls-files", "store.zarr"], cwd=ROOT, capture_output=True, text=True,
                               check=True).stdout.split()
    bundled = {n[len(DEMO_IN_WHEEL):]: data for n, data in files.items() if n.startswith(DEMO_IN_WHEEL)}
    assert sorted(bundled) == sorted(rel[len("store.zarr/"):] for rel in committed)
    assert all(bundled[rel[len("store.zarr/"):]] == (ROOT / rel).read_bytes() for rel in committed)
    assert {n.split("/")[0] for n in files} == {"pipeline", "dashboard", dists["wheel"].name.split("-py3")[0]
                                                + ".dist-info"}
    metadata = files[next(n for n in files if n.endswith(".dist-info/METADATA"))].decode()
    assert "License-Expression: MIT" in metadata and "Requires-Dist: platformdirs" in metadata


# ------------------------------------------------------------------------------------------ installed


@pytest.fixture(scope="module")
def venv(dists, tmp_path_factory) -> dict:
    """A fresh venv (system site-packages visible) with the wheel installed, without its dependencies; an empty
    working folder; a HOME of its own."""
    tmp = tmp_path_factory.mktemp("installed")
    run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", tmp / "venv"], tmp)
    python = tmp / "venv" / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env |= {"HOME": str(tmp / "home"), "PATH": f"{tmp / 'venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}",
            "HF_HUB_OFFLINE": "1", "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    (tmp / "home").mkdir()
    work = tmp / "work"
    work.mkdir()
    run([python, "-m", "pip", "install", "--no-deps", "--no-index", dists["wheel"]], work, env)
    site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], work, env)
                .stdout.strip())
    return {"python": python, "bin": tmp / "venv" / "bin", "env": env, "work": work, "site": site,
            "user_store": tmp / "home" / ".local" / "share" / "headgeometry" / "store.zarr", "tmp": tmp}


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def served_document(venv: dict, timeout: float = 180) -> tuple[str, str]:
    """``headgeometry-dashboard serve`` from the venv: the page and its document, pulled as a browser pulls it."""
    port = free_port()
    log = venv["tmp"] / "serve.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([venv["bin"] / "headgeometry-dashboard", "serve", "--port", str(port)],
                                cwd=venv["work"], env=venv["env"], stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while True:
            assert proc.poll() is None, f"serve exited {proc.returncode}:\n{log.read_text()}"
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline, f"serve did not listen within {timeout} s:\n{log.read_text()}"
            time.sleep(0.2)
        page, content = pull_document(f"http://127.0.0.1:{port}/app", timeout=timeout)
        return page, json.dumps(content)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def tiny_checkpoint(folder: Path):
    """A tiny random GPT-2 saved with save_pretrained; returns the model (its Q/K weights are the oracle's input)."""
    from tests.tiny_models import build_tiny, save

    model = build_tiny("gpt2")
    save(model, folder)
    return model


def naive_gpt2_profiles(model) -> np.ndarray:
    """(layers, heads, 4): each head's profile from its dense L = W_K^T W_Q (c_attn's columns: Q, K, V)."""
    cfg = model.config
    n = cfg.n_embd // cfg.n_head
    out = []
    for block in model.transformer.h:
        W = block.attn.c_attn.weight.detach().numpy()
        out.append([naive_oracle(W[:, cfg.n_embd + h * n:cfg.n_embd + (h + 1) * n]
                                 @ W[:, h * n:(h + 1) * n].T) for h in range(cfg.n_head)])
    return np.array(out)


def test_the_installed_wheel_shows_the_demo_and_computes_into_the_user_store(venv, tmp_path):
    demo = venv["site"] / DEMO_IN_WHEEL
    env, work, bin_ = venv["env"], venv["work"], venv["bin"]
    before = snapshot(venv["site"])
    demo_models = st.Store.open(ROOT / "store.zarr", "r").models()
    computed = [r.name for r in demo_models if r.computed and not r.is_baseline]  # baselines: their models' pages
    baselines = [r.name for r in demo_models if r.computed and r.is_baseline]
    site_out, copied = tmp_path / "site", tmp_path / "copy.zarr"

    # The commands before the computation run side by side, as many at a time as there are cores, and all have
    # finished before it starts: none of them writes the user store, so each finds it empty (the first list, the
    # export and the served document show the demo store). The export, the copy of the demo and the tiny checkpoint
    # each write a folder of their own. The export takes the longest: it starts first and keeps its core while the
    # others take turns on the rest.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        exported = pool.submit(run, [bin_ / "headgeometry-dashboard", "export", site_out], work, env)
        served = pool.submit(served_document, venv)
        where = pool.submit(run, [venv["python"], "-c", "import pipeline, dashboard; print(pipeline.__file__,"
                                  " dashboard.__file__)"], work, env)
        version = pool.submit(run, [bin_ / "headgeometry", "--version"], work, env)
        dashboard_version = pool.submit(run, [bin_ / "headgeometry-dashboard", "--version"], work, env)
        listed = pool.submit(run, [bin_ / "headgeometry", "list"], work, env)
        refused = pool.submit(subprocess.run, [bin_ / "headgeometry", "profiles", "gpt2", "--store", demo,
                                               "--register-only"], cwd=work, env=env, capture_output=True, text=True,
                              timeout=300)
        copy = pool.submit(run, [bin_ / "headgeometry", "demo", copied], work, env)
        tiny = pool.submit(tiny_checkpoint, tmp_path / "tiny")

    where = where.result().stdout.split()
    assert all(Path(p).is_relative_to(venv["site"]) for p in where), where  # the wheel's copy, not a checkout

    from importlib import metadata

    version = version.result().stdout
    assert version == f"python -m pipeline (headgeometry {metadata.version('headgeometry')})\n"
    assert dashboard_version.result().stdout.endswith(f"(headgeometry {metadata.version('headgeometry')})\n")

    listed = listed.result().stdout
    assert f"The store {venv['user_store']} (user store) holds no profiles yet." in listed
    assert f"The demo store {demo} (read-only, bundled with headgeometry" in listed
    for name in computed + baselines:
        assert f"\n{name} " in listed.split("The demo store")[1], name

    exported.result()
    index = (site_out / "index.html").read_text()
    assert all(name in index for name in computed) and "demo.zarr" in index
    assert baselines and not any(name in index for name in baselines)  # shown on their models' Analyses tabs only

    page, doc = served.result()
    assert "<title>Attention-head geometry</title>" in page
    assert "Showing the demo store (read-only, bundled with headgeometry" in doc
    assert "headgeometry profiles gpt2" in doc and computed[0] in doc

    refused = refused.result()
    assert refused.returncode == 2 and "headgeometry demo PATH" in refused.stderr, refused.stderr

    model = tiny.result()
    run([bin_ / "headgeometry", "profiles", tmp_path / "tiny", "--name", "tiny", "--quiet"], work, env, timeout=600)
    stored = st.Store.open(venv["user_store"], "r")
    assert [r.name for r in stored.models() if r.complete] == ["tiny"]
    profile = stored.dataset("profiles")["profile"].sel(model="tiny").isel(d=0).values[:2, :4]
    np.testing.assert_allclose(profile, naive_gpt2_profiles(model), atol=1e-10)

    listed = run([bin_ / "headgeometry", "list"], work, env).stdout
    assert f"The store {venv['user_store']} (user store), last written by headgeometry " in listed
    assert "The demo store" not in listed

    copy.result()
    assert [r.name for r in st.Store.open(copied, "r").models()] == [r.name for r in demo_models]

    assert snapshot(venv["site"]) == before  # nothing written into the installed package, its demo included
    assert sorted(p.name for p in work.iterdir()) == []  # nor into the folder the commands ran in
