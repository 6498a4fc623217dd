"""Each head's quantities at d = 0 beyond the profile, gathered from the same cores the profile is computed from.

Every route hands :meth:`AtZeroCollector.keep` each head's unscaled top rows ``[A | B]`` (m, k) at d = 0: the whole
core there, ``C = [[A, B], [0, 0]]`` (k = min(N, 2n), m = min(n, k)), of which L = Q C Q^T with Q orthonormal
columns. So every spectrum of L at d = 0 is one of C: the singular values of L are those of C (the square roots of
the eigenvalues of the m x m Gram matrix ``[A | B] [A | B]^T``), tr L = tr A, and the eigenvalues of S are those of
sym(C), which the route solves for the profile anyway and hands to :meth:`AtZeroCollector.result`. The three spectra
of T and L (``pipeline.profile.core_spectra``) come from the same top rows, which ``keep`` copies (H m k numbers a
layer), and from the Gram eigenvalues, which ``keep`` solves head by head (H m numbers kept, not H m m). A quantity
is added as a field of :class:`AtZero`, computed in ``keep`` (per head, from its top rows) or in ``result`` (over the
layer's heads, in groups of bounded memory).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.profile.statistics import head_statistics, singular_energies, spectrum
from pipeline.schema import SPECTRA

from .core_spectra import CoreSpectra
from .spectra import CHUNK_BYTES


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
    (``result``); ``kernels`` (``pipeline.profile.kernels.Kernels``) solves the Gram matrices
    (``gram_eigenvalues``) and the spectra of T and L (``spectra``)."""

    def __init__(self, heads: int, m: int, kernels):
        self.m, self.kernels = m, kernels
        self.gram_eigenvalues = np.empty((heads, m))  # each head's, solved in keep: (m,) a head, not its (m, m)
        self.trace = np.empty(heads)
        self.tops = None  # (heads, m, k): made by the first keep, which knows k

    def keep(self, h: int, top: np.ndarray) -> None:
        """Head h's unscaled top rows ``[A | B]`` (m, k) of its core at d = 0 (copied: a route reuses its array)."""
        if self.tops is None:
            self.tops = np.empty((len(self.trace),) + top.shape)
        self.tops[h] = top
        self.gram_eigenvalues[h] = self.kernels.gram_eigenvalues((top @ top.T)[None])[0]
        self.trace[h] = np.trace(top[:, :self.m])

    def result(self, profile: np.ndarray, norm: np.ndarray, eigenvalues: np.ndarray) -> AtZero:
        """The :class:`AtZero` from the route's profiles (H, 4), norms ||C|| (H,) and eigenvalues of S (H, k) at
        d = 0."""
        h2, trace = singular_energies(self.gram_eigenvalues, self.trace, norm)
        k = eigenvalues.shape[-1]
        tops = self.tops if self.tops is not None else np.empty((0, self.m, k))
        # heads a group at a time, not the layer's at once: the spectra hold about 3.5 (heads, k, k) float64 arrays
        # (T, its Gram matrix, the eigensolver's copy, the scaled top rows): about 4 MB a head at k = 384 (66 MB
        # measured for 16 heads; a DeepSeek-V3 layer has 128); in groups they stay within CHUNK_BYTES. A head's
        # values are its own alone, whatever the group.
        step = max(1, CHUNK_BYTES // (4 * 8 * k * k))
        parts = [self.kernels.spectra(tops[a:a + step], h2[a:a + step]) for a in range(0, max(1, len(tops)), step)]
        spectra = CoreSpectra(**{name: np.concatenate([p.as_dict()[name] for p in parts]) for name in SPECTRA})
        return AtZero(profile, eigenvalues, h2, trace, spectra)
