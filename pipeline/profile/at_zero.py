"""Each head's quantities at d = 0 beyond the profile, gathered from the same cores the profile is computed from.

Every route hands :meth:`AtZeroCollector.keep` each head's unscaled top rows ``[A | B]`` (m, k) at d = 0: the whole
core there, ``C = [[A, B], [0, 0]]`` (k = min(N, 2n), m = min(n, k)), of which L = Q C Q^T with Q orthonormal
columns. So every spectrum of L at d = 0 is one of C: the singular values of L are those of C (the square roots of
the eigenvalues of the m x m Gram matrix ``[A | B] [A | B]^T``), tr L = tr A, and the eigenvalues of S are those of
sym(C), which the route solves for the profile anyway and hands to :meth:`AtZeroCollector.result`. The three spectra
of T and L (``pipeline.profile.core_spectra``) come from the same top rows, which ``keep`` copies (H m k numbers a
layer), and from the Gram eigenvalues. A quantity is added as a field of :class:`AtZero`, computed in ``keep`` (per
head, from its top rows) or in ``result`` (batched over the layer's heads).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.profile.statistics import head_statistics, singular_energies, spectrum

from .core_spectra import CoreSpectra


@dataclass(frozen=True)
class AtZero:
    """The d = 0 quantities of H heads, with ||L||_F = 1.

    profile : (H, 4), the profile at d = 0
    eigenvalues : (H, k), the eigenvalues of S, ascending, |lambda| <= rtol set to 0; a row of NaN where L = 0
    singular_energies : (H, m), the squared singular values of L, ascending; zeros where L = 0
    trace : (H,), tr L
    spectra : the singular values of T, |eigenvalues| of L and singular values of L (each (H, k), decreasing; NaN
        rows where L = 0)
    """

    profile: np.ndarray
    eigenvalues: np.ndarray
    singular_energies: np.ndarray
    trace: np.ndarray
    spectra: CoreSpectra

    def statistics(self) -> np.ndarray:
        """(H, 17) in the order of ``pipeline.schema.STATISTICS`` (``pipeline.profile.statistics``)."""
        return head_statistics(self.eigenvalues, self.singular_energies, self.trace, self.profile)

    def spectrum(self) -> np.ndarray:
        """(H, k): the eigenvalues of S, decreasing."""
        return spectrum(self.eigenvalues)

    def spectra_values(self) -> np.ndarray:
        """The three spectra (3, H, k), in the order of ``pipeline.schema.SPECTRA``."""
        return np.stack(list(self.spectra.as_dict().values()))


class AtZeroCollector:
    """Gathers the heads' d = 0 quantities while a route runs (``keep``), then makes the :class:`AtZero`
    (``result``)."""

    def __init__(self, heads: int, m: int):
        self.m = m
        self.gram = np.empty((heads, m, m))
        self.trace = np.empty(heads)
        self.tops = None  # (heads, m, k): made by the first keep, which knows k

    def keep(self, h: int, top: np.ndarray) -> None:
        """Head h's unscaled top rows ``[A | B]`` (m, k) of its core at d = 0 (copied: a route reuses its array)."""
        if self.tops is None:
            self.tops = np.empty((len(self.trace),) + top.shape)
        self.tops[h] = top
        np.matmul(top, top.T, out=self.gram[h])
        self.trace[h] = np.trace(top[:, :self.m])

    def result(self, profile: np.ndarray, norm: np.ndarray, eigenvalues: np.ndarray, kernels) -> AtZero:
        """The :class:`AtZero` from the route's profiles (H, 4), norms ||C|| (H,) and eigenvalues of S (H, k) at
        d = 0; ``kernels.gram_eigenvalues`` solves the Gram matrices, ``kernels.spectra`` the spectra of T and L."""
        h2, trace = singular_energies(self.gram, self.trace, norm, kernels.gram_eigenvalues)
        tops = self.tops if self.tops is not None else np.empty((0, self.m, eigenvalues.shape[-1]))
        return AtZero(profile, eigenvalues, h2, trace, kernels.spectra(tops, h2))
