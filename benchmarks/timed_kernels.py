"""The profile routes' kernels with each step timed: the benchmarks' view of where a head's time goes.

:class:`TimedKernels` is ``pipeline.profile.Kernels`` (the same settings, the same values) with every step wrapped:
the span's factor, the in-place eigensolver and triangular product of the numpy route, the statistics' Gram
eigenvalues, the spectra of T and L at d = 0 and the torch routes' batched eigensolver. Each adds its wall time
and the CPU time of the calling thread (single-threaded LAPACK) into ``spent[name]``, and counts its calls. Give it
to ``head_profiles(..., kernels=...)``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from pipeline.profile import Kernels

SPAN = "span factor (Gram + Cholesky, or QR)"
EIG = "eigenvalues (dsyevd: cores 2n x 2n, statistics' Gram n x n)"
TRMM = "core product (trmm)"
TORCH_EIG = "torch eigvalsh"
SPECTRA = "spectra of T and L at d = 0"


@dataclass(frozen=True)
class TimedKernels(Kernels):
    """``Kernels`` with each step's time added into ``spent[name]`` = [wall s, CPU s, calls]. ``sync``: called
    before and after each torch eigensolver call (``torch.cuda.synchronize`` on a GPU), or None."""

    spent: dict = field(default_factory=dict, compare=False)
    sync: object = field(default=None, compare=False)

    def timed(self, name: str, f):
        """``f`` wrapped to add its time into ``spent[name]``."""
        def g(*args, **kwargs):
            w, c = time.perf_counter(), time.thread_time()
            try:
                return f(*args, **kwargs)
            finally:
                acc = self.spent.setdefault(name, [0.0, 0.0, 0])
                acc[0] += time.perf_counter() - w
                acc[1] += time.thread_time() - c
                acc[2] += 1
        return g

    def seconds(self, name: str, cpu: bool = True) -> float:
        """CPU (or wall) seconds spent in ``name`` so far."""
        return self.spent.get(name, [0.0, 0.0, 0])[1 if cpu else 0]

    def span_factor(self, span, work=None):
        return self.timed(SPAN, super().span_factor)(span, work)

    def in_place_eigensolver(self, k: int):
        eig, trmm = super().in_place_eigensolver(k)
        return self.timed(EIG, eig), None if trmm is None else self.timed(TRMM, trmm)

    def gram_eigenvalues(self, gram):
        return self.timed(EIG, super().gram_eigenvalues)(gram)

    def spectra(self, tops, energies):
        return self.timed(SPECTRA, super().spectra)(tops, energies)

    def torch_eigensolver(self, route: str):
        eig = self.timed(TORCH_EIG, super().torch_eigensolver(route))
        if self.sync is None:
            return eig

        def synced(S):
            self.sync()
            try:
                return eig(S)
            finally:
                self.sync()
        return synced
