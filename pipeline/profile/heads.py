"""The profiles of one layer's heads: the inputs checked, a route chosen, a :class:`HeadProfiles` returned.

Routes: the numpy route (``pipeline.profile.lapack``: one head at a time, a rotary head's offsets one by one in the
CPU cache, LAPACK in place) and the torch routes (``pipeline.profile.device``: the whole layer batched on a torch
device, the CPU as a GPU); ``pipeline.profile.eigen`` says which ``eigvalsh`` takes which.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .at_zero import AtZero, AtZeroCollector
from .device import device_layer
from .eigen import default_threads, eigen_route, thread_limit
from .kernels import DEFAULT_KERNELS, Kernels
from .lapack import numpy_layer
from .spectra import DEFAULT_RTOL, thresholds


@dataclass(frozen=True)
class HeadProfiles:
    """The profiles of H heads: ``profile`` (H, 4), or (H, D, 4) with rotations; ``norm`` (H,) or (H, D), ||L||_F;
    ``at_zero``: the d = 0 quantities (:class:`pipeline.profile.at_zero.AtZero`: statistics, spectra) when asked
    for, else None."""

    profile: np.ndarray
    norm: np.ndarray
    at_zero: AtZero | None = None

    def layer_values(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Profile, norm, head statistics (H, 17), spectrum (H, k) and the three spectra of T and L (3, H, k), in the
        order of ``pipeline.schema.SPECTRA``: the arrays ``Store.write_layer`` takes, in its order. Needs the d = 0
        quantities (``head_profiles(..., at_zero=True)``)."""
        if self.at_zero is None:
            raise ValueError("layer_values needs the d = 0 quantities: call head_profiles(..., at_zero=True)")
        z = self.at_zero
        return self.profile, self.norm, z.statistics(), z.spectrum(), z.spectra_values()


def _checked_weights(W_Q, W_K, kv_of_head, gain) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # stacks of heads formed on demand (``heads_on_demand``: pipeline.families.latent.LatentHeads) are taken as they
    # are: the routes index them a head, or a bounded group of heads, at a time
    W_Q, W_K = (w if getattr(w, "heads_on_demand", False) else np.asarray(w) for w in (W_Q, W_K))
    if W_Q.ndim != 3 or W_K.ndim != 3 or W_Q.shape[1:] != W_K.shape[1:]:
        raise ValueError(f"W_Q and W_K must both have shape (heads, n, N); got {W_Q.shape} and {W_K.shape}")
    H, n, N = W_Q.shape
    if kv_of_head is None:
        if W_K.shape[0] != H:
            raise ValueError(f"W_K has {W_K.shape[0]} heads and W_Q {H}; pass kv_of_head (the key head of each "
                             "query head) for grouped-query attention")
        kv_of_head = np.arange(H)
    kv_of_head = np.asarray(kv_of_head, dtype=np.int64)
    if kv_of_head.shape != (H,) or (H and (kv_of_head.min() < 0 or kv_of_head.max() >= W_K.shape[0])):
        raise ValueError(f"kv_of_head must give one key head in 0..{W_K.shape[0] - 1} per query head ({H}); "
                         f"got {kv_of_head}")
    if gain is not None and np.shape(gain) != (N,):
        raise ValueError(f"gain must have shape ({N},); got {np.shape(gain)}")
    return W_Q, W_K, kv_of_head


def _checked_rotations(rotations, n: int) -> np.ndarray | None:
    if rotations is None:
        return None
    rotations = np.asarray(rotations, dtype=np.float64)
    if rotations.ndim != 3 or rotations.shape[1:] != (n, n):
        raise ValueError(f"rotations must have shape (D, {n}, {n}); got {rotations.shape}")
    return rotations


def head_profiles(W_Q: np.ndarray, W_K: np.ndarray, rotations: np.ndarray | None = None, rtol: float = DEFAULT_RTOL,
                  *, kv_of_head: np.ndarray | None = None, gain: np.ndarray | None = None, eigvalsh: str = "auto",
                  tol: float | None = None, device: str | None = None, threads: int | None = None,
                  chunk_bytes: int | None = None, progress=None, at_zero: bool = False,
                  kernels: Kernels | None = None) -> HeadProfiles:
    """Profiles of the heads of one layer, through the low-rank route (``pipeline.profile``).

    W_Q : (H, n, N), any float dtype (float32 from bf16/fp16 checkpoints is exact); each head is turned into
        float64 when it is used, so results do not depend on the storage dtype.
    W_K : (H, n, N), or (Hkv, n, N) with ``kv_of_head`` (the key head of each query head, grouped-query attention).
    rotations : (D, n, n) R(d) for the offsets d = 0..D-1 (``pipeline.families.rotary``), or None
        (position-independent).
    rtol : threshold for exact zeros, relative to ||L||_F (``pipeline.profile``).
    gain : (N,) or None, the layer-norm gain folded on both sides (W_Q diag(g), W_K diag(g)), applied in float64.
    eigvalsh, tol, device : the eigen route (``pipeline.profile.eigen``); "auto" takes torch float64 on CUDA when
        available, else numpy.
    threads : BLAS/LAPACK (and torch) threads during the call. None: one thread on the numpy route when threadpoolctl
        is installed (``eigen.default_threads``), the process setting on the torch routes.
    chunk_bytes : bound on the torch routes' float64 work arrays (the (heads x offsets, k, k) cores and the heads'
        (N, 2n) QR inputs). None: ``spectra.CHUNK_BYTES`` on the CPU, ``device.DEVICE_CHUNK_BYTES`` elsewhere.
    progress : called with each head index when it is done (e.g. a tqdm update).
    at_zero : also gather each head's quantities at the first offset d = 0 from the same cores (statistics, spectrum
        and the spectra of T and L: ``pipeline.profile.at_zero``): per head an m x m Gram eigenproblem, the k x k
        symmetric eigenproblem (or SVD) of T and the m x m nonsymmetric eigenproblem of L on top of the profile's.
    kernels : the linear-algebra steps and their settings (``pipeline.profile.kernels.Kernels``); None: the
        defaults.

    Returns a :class:`HeadProfiles`: profile (H, 4) or (H, D, 4), norm (H,) or (H, D), and ``at_zero``.
    """
    W_Q, W_K, kv_of_head = _checked_weights(W_Q, W_K, kv_of_head, gain)
    route, device = eigen_route(eigvalsh, device)
    rtol = thresholds(rtol, route, tol)
    rotations = _checked_rotations(rotations, W_Q.shape[1])
    kernels = DEFAULT_KERNELS if kernels is None else kernels
    H, n, N = W_Q.shape
    collector = AtZeroCollector(H, min(n, N), kernels) if at_zero else None
    keep = None if collector is None else collector.keep
    with thread_limit(default_threads(threads, route), route):
        if route == "numpy":
            prof, norm, lam0 = numpy_layer(W_Q, W_K, rotations, kv_of_head, gain, rtol, kernels, keep, progress)
        else:
            prof, norm, lam0 = device_layer(W_Q, W_K, rotations, kv_of_head, gain, rtol, route, device, chunk_bytes,
                                            kernels, keep, progress)
        zero = None if collector is None else collector.result(prof[:, 0], norm[:, 0], lam0)
    if rotations is None:
        prof, norm = prof[:, 0], norm[:, 0]
    return HeadProfiles(prof, norm, zero)
