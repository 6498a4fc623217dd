"""Another git revision's ``pipeline`` package, for a benchmark's "before" arm measured in the same run as "after".

``revision_tree(rev)`` unpacks it into a temporary folder (``git archive``). A child process imports it with that
folder on ``PYTHONPATH``; a dask worker spawned while :func:`first_on_path` holds gets it first on ``sys.path``
(multiprocessing hands a spawned process its parent's ``sys.path``), while this process keeps the package it has
imported already.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@contextlib.contextmanager
def revision_tree(rev: str):
    """A temporary folder holding git revision ``rev``'s ``pipeline`` package."""
    with tempfile.TemporaryDirectory(prefix="headgeometry-before-") as tree:
        archive = subprocess.run(["git", "archive", rev, "pipeline"], cwd=ROOT, capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
        yield tree


@contextlib.contextmanager
def first_on_path(tree: str | None):
    """``tree`` first on ``sys.path`` while workers are spawned (nothing when None)."""
    if tree is None:
        yield
        return
    sys.path.insert(0, tree)
    try:
        yield
    finally:
        sys.path.remove(tree)


def pipeline_file() -> str:
    """The file of the ``pipeline`` package this process imports (run on workers by :func:`check_workers`)."""
    import pipeline

    return pipeline.__file__


def check_workers(client, tree: str | None) -> None:
    """Raise RuntimeError unless every worker of the dask ``client`` imports ``tree``'s ``pipeline`` (None: this
    checkout's)."""
    imported = set(client.run(pipeline_file).values())
    expected = os.path.join(tree or ROOT, "pipeline", "__init__.py")
    if imported != {expected}:
        raise RuntimeError(f"the workers imported {sorted(imported)}, not {expected}")
