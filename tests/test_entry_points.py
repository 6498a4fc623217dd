"""The console scripts `headgeometry` and `headgeometry-dashboard` (pyproject.toml [project.scripts]).

Each installed script is run as a user runs it and its output compared with the module form it stands for:
`headgeometry` = `python -m pipeline`, `headgeometry-dashboard serve` = `python -m dashboard`,
`headgeometry-dashboard export` = `python -m dashboard.export`. The scripts exist once the project is
installed (`pip install -e .`, as the README's test command does).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

import pytest

from dashboard import cli, versions
from tests.browser.conftest import ROPE_MODEL, write_synthetic_store

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = {"headgeometry": "pipeline.__main__:main", "headgeometry-dashboard": "dashboard.cli:main"}
# an id bokeh draws at random for each page (documents, roots, divs)
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def script(name: str) -> str:
    path = Path(sysconfig.get_path("scripts")) / name
    if not path.is_file():
        pytest.fail(f"{path} is not installed: run `pip install -e .` to register the console scripts")
    return str(path)


def run(argv: list[str], env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, cwd=str(ROOT), timeout=timeout,
                          env=os.environ | (env or {}))


def run_both(first: list[str], second: list[str], env: dict | None = None
             ) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """``run(first, env)`` and ``run(second, env)`` at the same time (two commands that do not depend on each
    other); their results in that order."""
    with ThreadPoolExecutor(2) as pool:
        a, b = pool.submit(run, first, env), pool.submit(run, second, env)
        return a.result(), b.result()


@pytest.fixture(scope="module")
def small_store(tmp_path_factory) -> Path:
    return write_synthetic_store(tmp_path_factory.mktemp("entry") / "store.zarr")


def test_the_scripts_are_declared_and_installed():
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert declared == SCRIPTS
    installed = {e.name: e.value for e in metadata.entry_points(group="console_scripts") if e.name in SCRIPTS}
    assert installed == SCRIPTS, "the installed metadata is stale: run `pip install -e .` again"
    for name in SCRIPTS:
        assert os.access(script(name), os.X_OK)


def test_headgeometry_help_is_python_m_pipeline_help():
    by_script, by_module = run_both([script("headgeometry"), "--help"], [sys.executable, "-m", "pipeline", "--help"])
    assert by_script.returncode == by_module.returncode == 0, by_script.stderr
    assert by_script.stdout == by_module.stdout
    assert "profiles" in by_script.stdout and "orbits" in by_script.stdout


@pytest.mark.slow
def test_headgeometry_list_is_python_m_pipeline_list(small_store):
    env = {"HEADGEOMETRY_STORE": str(small_store)}
    by_script, by_module = run_both([script("headgeometry"), "list"], [sys.executable, "-m", "pipeline", "list"], env)
    assert by_script.returncode == by_module.returncode == 0, by_script.stderr
    assert by_script.stdout == by_module.stdout
    assert re.search(rf"^{ROPE_MODEL}\s+complete\s+4\s+8\b", by_script.stdout, re.M), by_script.stdout


def normalised_pages(folder: Path) -> dict[str, str]:
    return {p.name: UUID.sub("<id>", p.read_text()) for p in sorted(folder.iterdir())}


@pytest.mark.slow
def test_dashboard_export_is_python_m_dashboard_export(small_store, tmp_path):
    by_script, by_module = run_both(  # two folders: the exports do not share what they write
        [script("headgeometry-dashboard"), "export", str(tmp_path / "a"), "--store", str(small_store)],
        [sys.executable, "-m", "dashboard.export", str(tmp_path / "b"), "--store", str(small_store)])
    assert by_script.returncode == by_module.returncode == 0, by_script.stderr
    listed = {Path(re.sub(r"\s+\(.*", "", line)).name for line in by_script.stdout.splitlines()}
    assert listed == {p.name for p in (tmp_path / "a").iterdir()}
    assert by_script.stdout.replace(str(tmp_path / "a"), "OUT") == by_module.stdout.replace(str(tmp_path / "b"), "OUT")
    pages = normalised_pages(tmp_path / "a")
    assert "index.html" in pages and "orbits.html" in pages and any(n.startswith("profiles-") for n in pages)
    assert pages == normalised_pages(tmp_path / "b")


@pytest.mark.slow
@pytest.mark.parametrize("command, module", [("serve", "dashboard"), ("export", "dashboard.export")])
def test_dashboard_command_help_is_the_module_help(command, module):
    by_script, by_module = run_both([script("headgeometry-dashboard"), command, "--help"],
                                    [sys.executable, "-m", module, "--help"])
    assert by_script.returncode == by_module.returncode == 0, by_script.stderr
    assert by_script.stdout == by_module.stdout and "--store" in by_script.stdout


def test_dashboard_help_names_every_command_and_its_module_form(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name, (_module, form, _what) in cli.COMMANDS.items():
        assert re.search(rf"^\s+{name}\s", out, re.M) and form in out
    assert "headgeometry-dashboard export site/" in out
    assert cli.main([]) == 2  # no command: the help, and the usage-error status


def test_an_unknown_dashboard_command_is_one_line(capsys):
    assert cli.main(["sreve"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown command 'sreve'" in err and "serve, export" in err


def test_serve_passes_its_options_to_python_m_dashboard(monkeypatch):
    """`serve` runs dashboard.__main__.main with the options unchanged (it execs panel serve)."""
    import dashboard.__main__ as serve_module

    seen = []
    monkeypatch.setattr(serve_module, "main", lambda argv: seen.append(argv) or 0)
    assert cli.main(["serve", "--port", "5123", "--store", "x.zarr"]) == 0
    assert seen == [["--port", "5123", "--store", "x.zarr"]]


def test_python_m_dashboard_runs_the_console_scripts_commands(monkeypatch, capsys):
    """`python -m dashboard export OUT ...` is `headgeometry-dashboard export OUT ...`: dashboard.export.main gets the
    rest unchanged; without a command, `python -m dashboard` serves and its help names the export."""
    import dashboard.__main__ as entry
    import dashboard.export as export_module

    seen = []
    monkeypatch.setattr(export_module, "main", lambda argv: seen.append(argv) or 0)
    assert entry.main(["export", "site", "--store", "x.zarr"]) == 0
    assert seen == [["site", "--store", "x.zarr"]]
    with pytest.raises(SystemExit) as exit_:
        entry.main(["--help"])
    assert exit_.value.code == 0 and "python -m dashboard export OUT" in capsys.readouterr().out


def test_an_untested_bokeh_stops_the_command_before_it_starts(monkeypatch, tmp_path, capsys):
    real = versions.installed_version
    monkeypatch.setattr(versions, "installed_version", lambda name: "3.10.0" if name == "bokeh" else real(name))
    assert cli.main(["export", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "bokeh 3.10.0 is installed, outside the tested range bokeh>=3.9,<3.10" in err
    assert not (tmp_path / "out").exists()
