"""The package as a user installs it: the sdist and the wheel built as a release builds them, then the wheel
installed with the dependencies it declares into a fresh virtual environment and used from an empty folder, away
from the clone.

The distributions are built once per run, offline (``python -m build --no-isolation``: the build tools of this
environment) from a copy of the working tree, so nothing is written into the clone.

The venv is a plain ``python -m venv`` made by the interpreter that runs the tests (``sys.executable``: run from a
venv, that makes a venv of the base interpreter), without system site-packages: none of this environment's packages
(a venv's, the system interpreter's or a user site's) is on its path, which the test checks, so it passes or fails
alike whether pytest runs in a venv or in the system interpreter. The venv's own pip installs the wheel as a user's
``pip install`` does, with its base dependencies from the package registries pip is configured with. With that base
install alone: ``--version``, ``list``, ``demo``, ``profiles`` refusing the bundled demo, the dashboard's export
(every page, none with a view that could not be drawn) and its server (its page, the first tab drawn). Then the
``pipeline`` extra goes into the same venv, from a wheelhouse that ``pip download`` fills while the base install's
commands run, and ``headgeometry profiles`` computes a tiny checkpoint into the user store, checked against an
independent computation.

Every command runs in an empty temporary folder, with ``HOME`` and ``XDG_DATA_HOME`` in temporary ones, offline,
and with no ``PYTHONPATH``, ``$HEADGEOMETRY_STORE`` or ``VIRTUAL_ENV``. pip runs with this environment's ``HOME``
(its configuration and cache), as the user's pip would; the installs are the test's only traffic beyond loopback,
as the README's install is a user's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import site
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
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

# The pipeline extra's torch: the release the README's test command installs first (a CPU build that lies on disk
# on this project's machines), so that the extra downloads nothing large; the extra itself accepts any torch>=2.2.
TORCH = "torch==2.13.0"
PIP_INSTALL = ("-m", "pip", "install", "--quiet")
# The base install compiles its bytecode, as pip does by default: the base install's commands then start from it
# side by side (none compiles the same modules again, nor depends on whether PYTHONDONTWRITEBYTECODE is set). The
# extra is installed without (its bytecode is what the one command that needs the extra compiles as it imports):
# compiled, its install took 52 s of CPU; without, 17 s, and that command 4 s more than from compiled bytecode.
# What is installed is the same either way.
NO_COMPILE = "--no-compile"
POLL = 0.2  # seconds between two looks at a condition awaited (the server listening, its page drawn)

# the venv's interpreter: where pipeline and dashboard come from, its sys.path, and which of the modules named on
# its command line it can find
PROBE = """import importlib.util, json, sys
import dashboard, pipeline
print(json.dumps({"files": [pipeline.__file__, dashboard.__file__], "path": sys.path,
                  "found": [name for name in sys.argv[1:] if importlib.util.find_spec(name) is not None]}))"""


@pytest.fixture(scope="module")
def venv(dists, tmp_path_factory) -> dict:
    """A fresh venv that sees none of this environment's packages, with the wheel and its base dependencies
    installed by its own pip; an empty working folder; HOME and XDG_DATA_HOME of its own."""
    tmp = tmp_path_factory.mktemp("installed")
    run([sys.executable, "-m", "venv", tmp / "venv"], tmp)
    bin_ = tmp / "venv" / "bin"
    python = bin_ / "python"
    outer = {k: v for k, v in os.environ.items() if k not in CLEARED}
    path = f"{bin_}{os.pathsep}{outer.get('PATH', '')}"
    # pip: this environment's HOME (pip's user configuration and cache), the registries it is configured with
    pip_env = outer | {"PATH": path}
    # the commands: offline, HOME and the user data folder in temporary folders
    env = outer | {"HOME": str(tmp / "home"), "XDG_DATA_HOME": str(tmp / "data"), "PATH": path,
                   "HF_HUB_OFFLINE": "1", "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    (tmp / "home").mkdir()
    work = tmp / "work"
    work.mkdir()
    run([python, *PIP_INSTALL, dists["wheel"]], tmp, pip_env, timeout=600)
    purelib = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], work, env)
                   .stdout.strip())
    return {"python": python, "bin": bin_, "env": env, "pip_env": pip_env, "work": work, "site": purelib,
            "user_store": tmp / "data" / "headgeometry" / "store.zarr", "tmp": tmp}


def snapshot(site: Path) -> dict[str, tuple[int, int]]:
    """The installed package's own files, the demo store's included: size and mtime of each."""
    return {str(p.relative_to(site)): (p.stat().st_size, p.stat().st_mtime_ns)
            for top in ("pipeline", "dashboard") for p in (site / top).rglob("*")}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bokeh_models(content) -> Iterator[dict]:
    """Every model of a pulled document's content (serialised as ``{"type": "object", "name": CLASS, ...}``)."""
    if isinstance(content, dict):
        if content.get("type") == "object":
            yield content
        for value in content.values():
            yield from bokeh_models(value)
    elif isinstance(content, list):
        for value in content:
            yield from bokeh_models(value)


def drawn_page(url: str, deadline: float, log: Path) -> tuple[str, dict]:
    """The page and the document of a session of ``url`` once its tab is drawn. A session shows a page that is still
    being prepared as its "Building …" line (``dashboard.app.building_view``, named ``building``): sessions are
    opened one after another until one shows the page itself. A page whose drawing failed is built again for the
    next session, so the server's log (``dashboard.app``: "drawing TITLE failed") says so at once."""
    while True:
        page, content = pull_document(url, timeout=max(deadline - time.monotonic(), 1))
        if not any(m.get("attributes", {}).get("name") == "building" for m in bokeh_models(content)):
            return page, content
        failed = [line for line in log.read_text().splitlines() if re.search(r" drawing .* failed$", line)]
        assert not failed, f"{url}: {failed[0]}\n{log.read_text()[-6000:]}"
        assert time.monotonic() < deadline, f"{url} was still building its page after the deadline"
        time.sleep(POLL)


def served_page(venv: dict, timeout: float = 300) -> tuple[str, dict]:
    """``headgeometry-dashboard serve`` from the venv: the page and its document as a browser pulls them once its
    first tab is drawn; the server is stopped after.

    The served check is the server's own path (the page, a session, the profiles page as it is first shown); the
    compare and orbits pages are drawn by the export from the same install, and every tab of the served base
    install is opened in a browser by CI (.ci/served_pages.py)."""
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
            time.sleep(POLL)
        return drawn_page(f"http://127.0.0.1:{port}/app", deadline, log)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def download_pipeline_extra(venv: dict, wheel: Path, dest: Path) -> None:
    """``pip download`` of the wheel with its ``pipeline`` extra, every dependency included, into ``dest``: the
    wheelhouse that the extra is then installed from, offline."""
    run([venv["python"], "-m", "pip", "download", "--quiet", "--dest", dest, f"{wheel}[pipeline]", TORCH],
        venv["tmp"], venv["pip_env"], timeout=600)


def tiny_checkpoint(folder: Path):
    """A tiny random GPT-2 saved with save_pretrained; returns the model (its Q/K weights are the oracle's input)."""
    from tests.tiny_models import build_tiny, save

    model = build_tiny("gpt2")
    save(model, folder)
    return model


def gpt2_forms(model) -> list[list[np.ndarray]]:
    """L = W_K^T W_Q of each head, [layer][head], from c_attn's columns (Q, K, V; Conv1D: x @ W)."""
    cfg = model.config
    n = cfg.n_embd // cfg.n_head
    forms = []
    for block in model.transformer.h:
        W = block.attn.c_attn.weight.detach().numpy()
        forms.append([W[:, cfg.n_embd + h * n:cfg.n_embd + (h + 1) * n] @ W[:, h * n:(h + 1) * n].T
                      for h in range(cfg.n_head)])
    return forms


def span_spectrum(L: np.ndarray, k: int) -> np.ndarray:
    """The k eigenvalues of S = sym(L / ||L||_F) of largest magnitude (the others are 0: S lives on the head's span
    of dimension k), decreasing."""
    L = L / np.linalg.norm(L)
    lam = np.linalg.eigvalsh((L + L.T) / 2)
    return np.sort(lam[np.argsort(np.abs(lam))[len(lam) - k:]])[::-1]


def test_the_installed_wheel_shows_the_demo_and_computes_into_the_user_store(venv, dists, tmp_path):
    from dashboard.export import profile_page_name

    demo = venv["site"] / DEMO_IN_WHEEL
    env, work, bin_, python = venv["env"], venv["work"], venv["bin"], venv["python"]
    before = snapshot(venv["site"])
    demo_models = st.Store.open(ROOT / "store.zarr", "r").models()
    computed = [r.name for r in demo_models if r.computed and not r.is_baseline]  # baselines: their models' pages
    baselines = [r.name for r in demo_models if r.computed and r.is_baseline]
    site_out, copied, wheelhouse = tmp_path / "site", tmp_path / "copy.zarr", tmp_path / "wheelhouse"
    outer_sites = {str(Path(p).resolve())  # this environment's site folders, its base interpreter's included
                   for p in [*site.getsitepackages([sys.prefix, sys.base_prefix]), site.getusersitepackages()]}

    # The base install's commands run side by side, as many at a time as there are cores, and all have finished
    # before the extra is installed: none of them writes the user store, so each finds it empty (the first list,
    # the export and the served page show the demo store). The export, the copy of the demo and the tiny checkpoint
    # each write a folder of their own. The export takes the longest: it starts first and keeps its core while the
    # others take turns on the rest. The pipeline extra's wheelhouse downloads meanwhile on a thread of its own
    # (mostly the network's time); it writes only its own folder, so the venv stays the base install.
    with ThreadPoolExecutor(max_workers=1) as background, \
            ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        downloaded = background.submit(download_pipeline_extra, venv, dists["wheel"], wheelhouse)
        exported = pool.submit(run, [bin_ / "headgeometry-dashboard", "export", site_out], work, env)
        served = pool.submit(served_page, venv)
        probe = pool.submit(run, [python, "-c", PROBE, "pytest", "torch", "transformers"], work, env)
        version = pool.submit(run, [bin_ / "headgeometry", "--version"], work, env)
        dashboard_version = pool.submit(run, [bin_ / "headgeometry-dashboard", "--version"], work, env)
        listed = pool.submit(run, [bin_ / "headgeometry", "list"], work, env)
        refused = pool.submit(subprocess.run, [bin_ / "headgeometry", "profiles", "gpt2", "--store", demo,
                                               "--register-only"], cwd=work, env=env, capture_output=True, text=True,
                              timeout=300)
        copy = pool.submit(run, [bin_ / "headgeometry", "demo", copied], work, env)
        tiny = pool.submit(tiny_checkpoint, tmp_path / "tiny")

    # the venv sees only what the wheel declared: the package from the venv, not from a checkout; none of this
    # environment's site folders on its path; neither pytest (which runs this test) nor the extra's packages
    probe = json.loads(probe.result().stdout)
    assert all(Path(p).is_relative_to(venv["site"]) for p in probe["files"]), probe["files"]
    assert [p for p in probe["path"] if p and str(Path(p).resolve()) in outer_sites] == [], probe["path"]
    assert probe["found"] == []

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
    pages = {p.name: p.read_text() for p in site_out.glob("*.html")}
    assert {"index.html", "compare.html", "orbits.html"} <= set(pages)
    assert all(profile_page_name(name) in pages for name in computed)
    assert all(name in pages["index.html"] for name in computed) and "demo.zarr" in pages["index.html"]
    assert baselines and not any(name in pages["index.html"] for name in baselines)  # on their models' Analyses tabs
    assert [name for name, text in pages.items() if "could not be drawn" in text] == []

    page, content = served.result()
    doc = json.dumps(content)
    assert "<title>Attention-head geometry</title>" in page
    assert "could not be drawn" not in doc, doc[doc.index("could not be drawn") - 300:][:1000]
    assert any(m["name"] == "Figure" for m in bokeh_models(content))  # its plots
    assert "Showing the demo store (read-only, bundled with headgeometry" in doc
    assert "headgeometry profiles gpt2" in doc and computed[0] in doc

    refused = refused.result()
    assert refused.returncode == 2 and "headgeometry demo PATH" in refused.stderr, refused.stderr

    copy.result()
    assert [r.name for r in st.Store.open(copied, "r").models()] == [r.name for r in demo_models]
    assert snapshot(venv["site"]) == before  # nothing written into the installed package, its demo included

    # the pipeline extra, into the same venv, from the wheelhouse only
    downloaded.result()
    run([python, *PIP_INSTALL, NO_COMPILE, "--no-index", "--find-links", wheelhouse, f"{dists['wheel']}[pipeline]",
         TORCH], venv["tmp"], venv["pip_env"], timeout=600)
    before = snapshot(venv["site"])

    model = tiny.result()
    run([bin_ / "headgeometry", "profiles", tmp_path / "tiny", "--name", "tiny", "--quiet"], work, env, timeout=600)
    stored = st.Store.open(venv["user_store"], "r")
    assert [r.name for r in stored.models() if r.complete] == ["tiny"]
    ds = stored.dataset("profiles").sel(model="tiny").isel(d=0)
    forms = gpt2_forms(model)
    n_layers, n_heads = len(forms), len(forms[0])
    k = 2 * model.config.n_embd // n_heads  # the dimension of a head's span: 2 d_head (< d_model here)
    got = {v: ds[v].values[:n_layers, :n_heads] for v in ("profile", "norm", "spectrum")}
    np.testing.assert_allclose(got["profile"], [[naive_oracle(L) for L in layer] for layer in forms],
                               atol=1e-10)
    np.testing.assert_allclose(got["norm"], [[np.linalg.norm(L) for L in layer] for layer in forms], rtol=1e-12)
    np.testing.assert_allclose(got["spectrum"][..., :k], [[span_spectrum(L, k) for L in layer] for layer in forms],
                               atol=1e-10)

    listed = run([bin_ / "headgeometry", "list"], work, env).stdout
    assert f"The store {venv['user_store']} (user store), last written by headgeometry " in listed
    assert "The demo store" not in listed

    assert snapshot(venv["site"]) == before
    assert sorted(p.name for p in work.iterdir()) == []  # nothing written into the folder the commands ran in
