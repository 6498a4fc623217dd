"""Eigen routes: which eigensolver a profile runs on, and the BLAS/LAPACK thread limits around it.

Routes (``eigvalsh``): ``"numpy"`` (float64 LAPACK ``dsyevd``, numpy's driver, called through scipy on a work
array in place when scipy is installed, else numpy's ``eigvalsh``; the fastest measured on this project's CPUs,
see benchmarks/scale_bench.py), ``"torch"`` (float64), ``"torch-float32"`` (needs an explicit ``tol``: thresholds
become max(rtol, tol) and the coordinates agree with the float64 route to within ``tol``), and ``"auto"`` (the
default): torch float64 on CUDA when torch is installed and sees a GPU, else numpy.
"""

from __future__ import annotations

import contextlib
import functools
import sys

import numpy as np

from pipeline import optional_imports

EIGVALSH = ("auto", "numpy", "torch", "torch-float32")


@functools.lru_cache(maxsize=1)
def cuda_available() -> bool:
    """torch sees a GPU. Without torch loaded and without GPU device nodes, torch is not imported to ask."""
    if "torch" not in sys.modules:
        if not optional_imports.installed("torch") or not optional_imports.gpu_device_nodes():
            return False
    return bool(optional_imports.torch().cuda.is_available())


def eigen_route(eigvalsh: str = "auto", device: str | None = None) -> tuple[str, str | None]:
    """Resolve ``eigvalsh`` / ``device`` to the route used: ("numpy", None) or ("torch[-float32]", device)."""
    if eigvalsh not in EIGVALSH:
        raise ValueError(f"eigvalsh must be one of {EIGVALSH}; got {eigvalsh!r}")
    if eigvalsh == "auto":
        if device is not None:
            return "torch", device
        return ("torch", "cuda") if cuda_available() else ("numpy", None)
    if eigvalsh == "numpy":
        if device not in (None, "cpu"):
            raise ValueError(f"the numpy eigen route runs on the CPU only; got device={device!r}. "
                             "Use eigvalsh='torch' for another device.")
        return "numpy", None
    return eigvalsh, device or ("cuda" if cuda_available() else "cpu")


def eigvalsh_fn(route: str, device: str | None):
    """A function (B, k, k) float64, upper triangle read -> (B, k) float64 ascending eigenvalues."""
    if route == "numpy":
        return functools.partial(np.linalg.eigvalsh, UPLO="U")
    torch = optional_imports.torch()
    eig_t = torch_eigvalsh(route)

    def eig(S: np.ndarray) -> np.ndarray:
        return eig_t(torch.from_numpy(S).to(device=device)).cpu().numpy()

    return eig


def torch_eigvalsh(route: str):
    """A function (B, k, k) float64 tensor, upper triangle read -> (B, k) float64 ascending eigenvalues on the same
    device, solved in float64 ("torch") or float32 ("torch-float32")."""
    torch = optional_imports.torch()
    dtype = torch.float32 if route == "torch-float32" else torch.float64

    def eig(S):
        return torch.linalg.eigvalsh(S.to(dtype=dtype), UPLO="U").to(dtype=torch.float64)

    return eig


_CONTROLLER: list = [None, -1]  # threadpoolctl's controller and len(sys.modules) when it was made


def _thread_controller():
    """threadpoolctl's ThreadpoolController of the BLAS/OpenMP libraries loaded now, made again only when a module
    was imported since (a new extension may have loaded a library). Making one scans the process's memory maps
    (about 1-4 ms); limiting through a kept one takes microseconds."""
    if _CONTROLLER[0] is None or _CONTROLLER[1] != len(sys.modules):
        _CONTROLLER[:] = [optional_imports.threadpoolctl().ThreadpoolController(), len(sys.modules)]
    return _CONTROLLER[0]


def default_threads(threads: int | None, route: str) -> int | None:
    """``threads`` as given; None on the numpy route becomes one thread when threadpoolctl is installed (its k x k
    problems are too small to gain from BLAS threads, and threads that wait on each other made a head 20-40 x
    slower on a loaded 2-core machine, benchmarks/scale_bench.py)."""
    if threads is None and route == "numpy" and optional_imports.installed("threadpoolctl"):
        return 1
    return threads


@contextlib.contextmanager
def thread_limit(threads: int | None, route: str):
    """Limit BLAS/LAPACK (and torch) threads inside the block; ``None`` leaves them as they are.

    threadpoolctl limits only the BLAS libraries loaded when its block starts, so scipy's is loaded first on the
    numpy route (left unlimited, its 2 threads on 256 x 256 problems ran 20-30 x slower in one measurement on a
    loaded 2-core machine)."""
    if threads is None:
        yield
        return
    if threads < 1:
        raise ValueError(f"threads must be a positive number of threads; got {threads}")
    if not optional_imports.installed("threadpoolctl"):  # pragma: no cover - depends on the environment
        raise ImportError("threads=... needs the threadpoolctl package: pip install threadpoolctl")
    torch = None
    if route == "numpy":
        optional_imports.scipy_linalg()
    else:
        torch = optional_imports.torch()
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
    try:
        with _thread_controller().limit(limits=threads):
            yield
    finally:
        if torch is not None:
            torch.set_num_threads(before)
