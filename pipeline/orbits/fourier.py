"""Shifts of heads and the planar Fourier projections in which an orbit of C_p is a regular polygon.

With theta = 2 pi / p and T_s e_a = e_(a+s), the shift group acts on a head by
``M -> T_s M T_s^-1`` (QK: ``M'[a, b] = M[a - s, b - s]``) and ``R -> T_2s R T_s^-1``
(OV: ``R'[c, b] = R[c - 2s, b - s]``). The planes

    QK (w_q, w_k, eps):  z = sqrt(2)/p sum_ab M[a, b] exp(+i theta (w_q a + eps w_k b))
    OV (w_o, w_i, eps):  z = sqrt(2)/p sum_cb R[c, b] exp(+i theta (w_o c + eps w_i b))

turn a shift by s into a rotation of z by ``rotation * s * theta`` with rotation = w_q + eps w_k (QK) or
2 w_o + eps w_i (OV), taken mod p. (numpy's FFT uses exp(-i ...), which would flip every rotation.)
A panel (QK 0 x A, eps +1) and (OV A x A, eps -1) both rotate by A: an orbit of k heads whose
stabiliser is {0, k, 2k, ...} shows as a regular k-gon where gcd(A, p) = p / k, and sits at the
origin where k does not divide A.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

import numpy as np

from .task import P


def shift_qk(M: np.ndarray, s: int) -> np.ndarray:
    """T_s M T_s^-1 for M (..., p, p)."""
    return np.roll(M, (s, s), axis=(-2, -1))


def shift_ov(R: np.ndarray, s: int) -> np.ndarray:
    """T_2s R T_s^-1 for R (..., p, p) (rows: output class, columns: input token)."""
    return np.roll(R, (2 * s, s), axis=(-2, -1))


def centre(M: np.ndarray, R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Remove the gauge: M's rows, and R's columns and rows, to mean zero.

    - A constant added to a row of M (one query) cancels in that query's softmax.
    - A constant added to a column of R adds the same amount to every logit.
    - A vector v_h added to every column of R_h (R_h[c, b] + v_h[c]) adds v_h to the output at every query,
      since each head's attention weights sum to one. Only sum_h v_h is seen, so the split of it over the
      heads is arbitrary (any v_h with sum 0 leaves the layer unchanged). Each head's row means over inputs
      are therefore dropped: the heads are compared on what they do with their input.
    All three commute with the shifts, so an orbit stays an orbit.
    """
    Rc = R - R.mean(axis=-2, keepdims=True)
    return M - M.mean(axis=-1, keepdims=True), Rc - Rc.mean(axis=-1, keepdims=True)


@dataclass(frozen=True)
class Panel:
    kind: str  # "QK" or "OV"
    freq_a: int  # query frequency (QK) or output frequency (OV)
    freq_b: int  # key frequency (QK) or input frequency (OV)
    eps: int  # +1 or -1

    @property
    def rotation(self) -> int:
        """r such that a shift by s rotates the dot by r s 2 pi / p (r in 0..p-1)."""
        return rotation(self.kind, self.freq_a, self.freq_b, self.eps)

    @property
    def label(self) -> str:
        return f"{self.kind} {self.freq_a}x{self.freq_b}"


def rotation(kind: str, freq_a: int, freq_b: int, eps: int, p: int = P) -> int:
    if kind == "QK":
        return (freq_a + eps * freq_b) % p
    if kind == "OV":
        return (2 * freq_a + eps * freq_b) % p
    raise ValueError(f"panel kind must be 'QK' or 'OV'; got {kind!r}")


def project(X: np.ndarray, freq_a: int, freq_b: int, eps: int) -> np.ndarray:
    """z of X (..., p, p) in the plane (freq_a, freq_b, eps): complex (...)."""
    p = X.shape[-1]
    theta = 2 * np.pi / p
    idx = np.arange(p)
    phase = np.exp(1j * theta * (freq_a * idx[:, None] + eps * freq_b * idx[None, :]))
    return np.sqrt(2) / p * np.einsum("...ab,ab->...", X, phase)


def panel_positions(M: np.ndarray, R: np.ndarray, panels: list[Panel]) -> np.ndarray:
    """Planar positions (..., panel, 2) = (Re z, Im z) of heads M, R (..., p, p) in each panel."""
    out = []
    for pn in panels:
        X = M if pn.kind == "QK" else R
        z = project(X, pn.freq_a, pn.freq_b, pn.eps)
        out.append(np.stack([z.real, z.imag], axis=-1))
    return np.stack(out, axis=-2)


def panels_for(A: int, B: int) -> list[Panel]:
    """[QK 0 x A, OV A x A, QK 0 x B, OV B x B] with eps chosen so each rotates by its frequency."""
    return [Panel("QK", 0, A, 1), Panel("OV", A, A, -1), Panel("QK", 0, B, 1), Panel("OV", B, B, -1)]


def frequency_energy(M: np.ndarray, R: np.ndarray) -> np.ndarray:
    """(p // 2 + 1,) energy per frequency r: sum over heads of |z|^2 in QK 0 x r and OV r x r (eps -1)."""
    Mc, Rc = centre(M, R)
    p = M.shape[-1]
    e = np.zeros(p // 2 + 1)
    for r in range(1, p // 2 + 1):
        e[r] = (np.abs(project(Mc, 0, r, 1)) ** 2).sum() + (np.abs(project(Rc, r, r, -1)) ** 2).sum()
    return e


def polygon_frequencies(size: int, p: int = P) -> list[int]:
    """Frequencies r (1..p/2) at which an orbit of ``size`` heads shows as a regular size-gon."""
    return [r for r in range(1, p // 2 + 1) if gcd(r, p) == p // size] if p % size == 0 else []


def choose_frequencies(M: np.ndarray, R: np.ndarray, orbits: list[tuple[np.ndarray, int]],
                       seed_pair=(10, 6)) -> tuple[int, int]:
    """The two panel frequencies (A, B) of a run.

    ``orbits``: (heads, size) per orbit, size counting merged heads once (``Orbits.members`` and
    ``Orbits.sizes``). Each orbit (largest first) gets the polygon frequency where its heads carry the most energy; the
    seed's 10 and 6 are kept when they are that frequency. Remaining slots take the run's strongest
    frequencies (``frequency_energy`` over all heads).
    """
    chosen: list[int] = []
    for heads, size in sorted(orbits, key=lambda o: o[1], reverse=True):
        cands = [r for r in polygon_frequencies(size) if r not in chosen]
        if not cands:
            continue
        e = frequency_energy(M[heads], R[heads])
        best = max(cands, key=lambda r: e[r])
        if any(r in seed_pair and np.isclose(e[r], e[best]) for r in cands):
            best = next(r for r in cands if r in seed_pair and np.isclose(e[r], e[best]))
        chosen.append(best)
        if len(chosen) == 2:
            break
    e = frequency_energy(M, R)
    for r in np.argsort(-e):
        if len(chosen) == 2:
            break
        if r > 0 and int(r) not in chosen:
            chosen.append(int(r))
    return chosen[0], chosen[1]
