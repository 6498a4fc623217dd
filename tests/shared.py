"""Folders built once per test run and shared by every pytest-xdist worker of it (each worker is a pytest session
of its own, so a session-scoped fixture alone is built once per worker)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

DONE = ".built"  # written into a folder once its build has returned


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
