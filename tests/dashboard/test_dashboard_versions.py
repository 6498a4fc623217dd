"""dashboard.versions: the tested Bokeh and Panel range, the same in pyproject.toml, and the check that
refuses anything else (installed versions replaced by monkeypatching ``installed_version``)."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest

from dashboard import versions

ROOT = Path(__file__).resolve().parents[2]


def installed(monkeypatch, **found: str | None) -> None:
    """Pretend these distributions are installed at these releases (None: not installed)."""
    monkeypatch.setattr(versions, "installed_version", lambda name: found[name])


def test_pyproject_bounds_are_the_tested_range():
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert "bokeh>=3.9,<3.10" in deps and "panel>=1.9,<1.10" in deps
    for name in versions.TESTED:
        assert [d for d in deps if re.match(rf"{name}\b", d)] == [versions.requirement(name)]


def test_the_installed_releases_are_in_the_tested_range():
    """This environment is the tested one: the check passes on what is really installed."""
    assert versions.installed_version("bokeh") == metadata.version("bokeh")
    assert versions.problems() == []
    versions.check_versions()


@pytest.mark.parametrize("bokeh, panel", [("3.9.0", "1.9.0"), ("3.9.2", "1.9.4"), ("3.9.17rc1", "1.9.0.dev3")])
def test_releases_inside_the_range_pass(monkeypatch, bokeh, panel):
    installed(monkeypatch, bokeh=bokeh, panel=panel)
    assert versions.problems() == []
    versions.check_versions()


@pytest.mark.parametrize("bokeh, panel, wrong", [
    ("3.10.0", "1.9.4", ["bokeh 3.10.0 is installed, outside the tested range bokeh>=3.9,<3.10"]),
    ("3.8.2", "1.9.4", ["bokeh 3.8.2 is installed, outside the tested range bokeh>=3.9,<3.10"]),
    ("4.0.0", "1.9.4", ["bokeh 4.0.0 is installed, outside the tested range bokeh>=3.9,<3.10"]),
    ("3.9.2", "1.10.0rc1", ["panel 1.10.0rc1 is installed, outside the tested range panel>=1.9,<1.10"]),
    ("3.9.2", "1.5.0", ["panel 1.5.0 is installed, outside the tested range panel>=1.9,<1.10"]),
    ("3.9.2", "unknown", ["panel unknown is installed, outside the tested range panel>=1.9,<1.10"]),
    ("3.10.1", None, ["bokeh 3.10.1 is installed, outside the tested range bokeh>=3.9,<3.10",
                      "panel is not installed"]),
])
def test_releases_outside_the_range_are_refused_with_the_range(monkeypatch, bokeh, panel, wrong):
    installed(monkeypatch, bokeh=bokeh, panel=panel)
    assert versions.problems() == wrong
    with pytest.raises(versions.VersionError) as err:
        versions.check_versions()
    message = str(err.value)
    assert message.startswith("; ".join(wrong) + ". ")
    assert message.endswith("pip install 'bokeh>=3.9,<3.10' 'panel>=1.9,<1.10'")


def test_minor_reads_major_and_minor():
    assert versions.minor("3.9.2") == (3, 9)
    assert versions.minor("3.10.0rc1") == (3, 10)
    assert versions.minor("v1.9") == (1, 9)
    assert versions.minor("nightly") is None


UNTESTED_BOKEH = """
import dashboard.views  # the notebook API: no private names, no check
from dashboard import versions
real = versions.installed_version
versions.installed_version = lambda name: "3.10.0" if name == "bokeh" else real(name)
try:
    import dashboard.bokeh_internals
except Exception as exc:
    print(type(exc).__name__, exc)
else:
    print("imported")
"""


def test_the_internals_module_refuses_an_untested_release_before_any_private_use():
    """Every private Bokeh/Panel name is reached through dashboard.bokeh_internals, whose import checks the
    releases first: with an untested Bokeh it raises VersionError naming the tested range."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", UNTESTED_BOKEH], capture_output=True, text=True, timeout=300,
                         check=True).stdout.strip()
    assert out.startswith("VersionError bokeh 3.10.0 is installed, outside the tested range bokeh>=3.9,<3.10")
    assert out.endswith("pip install 'bokeh>=3.9,<3.10' 'panel>=1.9,<1.10'")
