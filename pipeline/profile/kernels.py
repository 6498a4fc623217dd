"""The linear-algebra kernels of the profile routes and their settings, as one object a caller may choose.

:class:`Kernels` holds every LAPACK/BLAS (and torch eigensolver) step the routes take: the span's factor, the
per-offset eigensolver and triangular product of the numpy route, the torch routes' batched eigensolver, the
eigenvalues of the head statistics' Gram matrices and the spectra of T and L at d = 0. Its fields are the settings
measured for this project's CPUs (``benchmarks/scale_bench.py`` prints the route with each changed):
``Kernels(gram_rcond=0)`` always factors a span by Householder QR, ``Kernels(qr_block=None, sytrd_block=None)``
takes LAPACK's default blocking. A subclass may wrap a method (the benchmarks time each step so); the values must
stay those of the method it wraps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .core_spectra import CoreSpectra, core_spectra
from .eigen import torch_eigvalsh
from .lapack import SYTRD_BLOCK, lapack_in_place
from .span import GRAM_RCOND, QR_BLOCK, Span, span_r


@dataclass(frozen=True)
class Kernels:
    """The routes' linear-algebra steps. ``gram_rcond``: a span is factored through its Gram matrix's Cholesky
    factor when the factor's reciprocal condition is at least this, else by QR (0: always QR); ``qr_block``:
    ``dgeqrt``'s block size for that QR (None: ``dgeqrf``); ``sytrd_block``: the block size of ``dsyevd``'s
    reduction to tridiagonal form on the per-offset route (None: LAPACK's queried default)."""

    gram_rcond: float = GRAM_RCOND
    qr_block: int | None = QR_BLOCK
    sytrd_block: int | None = SYTRD_BLOCK

    def span_factor(self, span: Span, work: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """An upper triangular R with R^T R = A^T A for a head's span A (``pipeline.profile.span.span_r``)."""
        return span_r(span, work, self.gram_rcond, self.qr_block)

    def in_place_eigensolver(self, k: int):
        """``(eig, trmm)`` of the per-offset route for k x k cores (``pipeline.profile.lapack.lapack_in_place``)."""
        return lapack_in_place(k, self.sytrd_block)

    def torch_eigensolver(self, route: str):
        """The torch routes' batched eigensolver (``pipeline.profile.eigen.torch_eigvalsh``)."""
        return torch_eigvalsh(route)

    def gram_eigenvalues(self, gram: np.ndarray) -> np.ndarray:
        """Ascending eigenvalues (H, m) of the statistics' Gram matrices (H, m, m): numpy's ``eigvalsh``."""
        return np.linalg.eigvalsh(gram)

    def spectra(self, tops: np.ndarray, energies: np.ndarray) -> CoreSpectra:
        """The spectra of T and L at d = 0 (``pipeline.profile.core_spectra``) from the heads' top rows (H, m, k) and
        the squared singular values (H, m) the Gram eigenvalues gave."""
        return core_spectra(tops, energies=energies)


DEFAULT_KERNELS = Kernels()
