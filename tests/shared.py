"""What the tests build once: folders built once per test run and shared by every pytest-xdist worker of it (each
worker is a pytest session of its own, so a session-scoped fixture alone is built once per worker), and the groups
that run the modules reading the same pages on one worker, so that the worker builds those pages once."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock

DONE = ".built"  # written into a folder once its build has returned

# The modules that read pages of the browser tests' synthetic store (tests/dashboard/conftest.py: ``static_page``,
# ``pages``, and the served app's ``rendered.PAGES``) run on one pytest-xdist worker (``--dist loadgroup``), which
# builds each of those pages once; spread over two workers, both built them all.
SYNTHETIC_PAGES = pytest.mark.xdist_group("dashboard-pages")
# The modules that read the pages of the Analyses tab's store (tests/dashboard/analyses_store.py), likewise.
ANALYSES_PAGES = pytest.mark.xdist_group("dashboard-analyses")


def built_once(tmp_path_factory, name: str, build: Callable[[Path], object]) -> Path:
    """The folder ``name`` in the temporary folder of this run (the one the workers' own folders are in, under
    pytest-xdist), filled by ``build(folder)`` in the first process to ask for it; the others wait for that build
    under a file lock, then read the same folder. A build that failed is started again by the next asker."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = shared / name
    with FileLock(str(shared / f"{name}.lock")):
        if not (folder / DONE).exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            (folder / DONE).touch()
    return folder


def exported_once(tmp_path_factory, name: str, store: Path) -> tuple[Path, list[Path]]:
    """(the folder of the static export of ``store``, the paths ``dashboard.export.export`` returned), exported once
    per test run into the folder ``name`` (:func:`built_once`); the tests only read it."""
    from dashboard.export import export

    def make(folder: Path) -> None:
        paths = export(folder / "out", store)
        (folder / "export.json").write_text(json.dumps([str(p) for p in paths]))

    folder = built_once(tmp_path_factory, name, make)
    return folder / "out", [Path(p) for p in json.loads((folder / "export.json").read_text())]
