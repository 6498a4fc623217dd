"""The optional dependencies the pipeline imports only when it uses them, all named here.

Why not at the top of the modules that use them:

- ``torch`` and ``dask.distributed`` are heavy: importing torch alone costs about 180 MB of resident memory and a
  second per process, and ``distributed`` starts its configuration and thread pools. Importing ``pipeline``,
  ``pipeline.schema``, ``pipeline.store`` or ``dashboard``, and every ``--help``, must not load them
  (``tests/test_light_imports.py``); a profiles run loads torch only on a torch eigen route and ``distributed``
  only with ``--scheduler`` or a dask client.
- ``scipy.linalg`` (LAPACK called in place) and ``threadpoolctl`` (BLAS thread limits) are optional: without them
  the numpy route falls back to numpy's own ``eigvalsh`` and ``qr``, and ``threads=`` is refused with a message.
  Looking them up at call time is also what lets a test run that fallback (a ``None`` in ``sys.modules`` makes the
  import fail).

Each function imports its module when called (Python caches it after the first call) and returns it.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import sys


def torch():
    """The ``torch`` module (ImportError where it is not installed)."""
    import torch

    return torch


def distributed():
    """The ``distributed`` module (dask.distributed; ImportError where it is not installed)."""
    import distributed

    return distributed


def scipy_linalg():
    """``(blas, lapack)`` of ``scipy.linalg``, or None where scipy is not installed."""
    try:
        from scipy.linalg import blas, lapack
    except ImportError:
        return None
    return blas, lapack


def threadpoolctl():
    """The ``threadpoolctl`` module (ImportError where it is not installed)."""
    import threadpoolctl

    return threadpoolctl


def installed(name: str) -> bool:
    """The package ``name`` can be imported (without importing it)."""
    return name in sys.modules or importlib.util.find_spec(name) is not None


def gpu_device_nodes() -> bool:
    """An NVIDIA or AMD GPU device node exists: without one, torch is not imported to ask CUDA (the import alone
    costs its memory in every process)."""
    return bool(glob.glob("/dev/nvidia[0-9]*") or os.path.exists("/dev/kfd"))
