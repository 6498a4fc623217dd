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
    """The file of the ``pipeline`` package this process imports (run it on workers to check which they have)."""
    import pipeline

    return pipeline.__file__


def expected_file(tree: str | None) -> str:
    """The ``pipeline/__init__.py`` that :func:`pipeline_file` should give for ``tree`` (None: this checkout)."""
    return os.path.join(tree or ROOT, "pipeline", "__init__.py")
