"""Writes of one model's layers: region writes of its values with their checksums, then ``layer_done``."""

from __future__ import annotations

import numpy as np

from pipeline.schema import (
    N_OFFSETS,
    SPECTRA,
    STATISTICS,
    layer_checksum,
    spectra_checksum,
    spectrum_width,
    statistics_checksum,
)
from pipeline.store.errors import StoreError, writing
from pipeline.store.profile_arrays import ensure_optional, row_index


class LayerWriter:
    """Writes layers of one model (:meth:`pipeline.store.profiles.ProfilesTable.layer_writer`): the group, the
    model's row and its arrays opened once."""

    def __init__(self, table, name: str):
        self.table, self.name = table, name
        with writing(table.location, table.mode, f"the layers of {name!r}", "the other layers"):
            self._open()

    def _open(self) -> None:
        g = self.group = self.table.open("a")
        self.row = row_index(g, self.name, self.table.location)
        self.n_heads, self.n_layers = int(g["n_heads"][self.row]), int(g["n_layers"][self.row])
        self.width = spectrum_width(int(g["d_head"][self.row]))
        names = ("profile", "norm", "layer_checksum", "layer_done")
        if "statistics_checksum" in g:
            names += ("head_statistics", "spectrum", "statistics_checksum")
        if "spectra_checksum" in g:
            names += (*SPECTRA, "spectra_checksum")
        self.arrays = {k: g[k] for k in names}  # each array's metadata read once

    def write(self, layer: int, profile: np.ndarray, norm: np.ndarray, statistics: np.ndarray | None = None,
              spectrum: np.ndarray | None = None, spectra: np.ndarray | None = None) -> None:
        """Region write of one layer with its checksums: profile (H, 4) or (H, 129, 4), norm (H,) or (H, 129), and
        at d = 0 the head statistics (H, 17), the spectrum (H, k <= 2 d_head) and the spectra of T and L (3, H, k),
        in the order of ``pipeline.schema.SPECTRA``.

        Position-independent layers pass (H, 4) and are repeated at every d. Without ``statistics`` and
        ``spectrum`` the layer's statistics read as not computed, without ``spectra`` its spectra (spectra need the
        statistics). Safe from several processes at once for different layers (no lock: no two layers share a
        chunk).
        """
        profile, norm, statistics, spectrum, spectra = self._checked(layer, profile, norm, statistics, spectrum,
                                                                     spectra)
        table, i = self.table, self.row
        with writing(table.location, table.mode, f"layer {layer} of {self.name!r}", "the other layers"):
            # a store without the optional variables (or some of them: ensure_optional adds what is missing)
            if (statistics is not None and "statistics_checksum" not in self.arrays) or \
                    (spectra is not None and "spectra_checksum" not in self.arrays):
                with table.locks.store_lock():
                    ensure_optional(self.group, self.width)
                    table.journal.consolidate()
                self._open()
            a = self.arrays
            # order: values, checksums, then layer_done (a kill before the last leaves the layer to do)
            a["profile"][i, layer, :self.n_heads] = profile
            a["norm"][i, layer, :self.n_heads] = norm
            if "statistics_checksum" in a:
                self._put(layer, {"head_statistics": statistics, "spectrum": spectrum})
            if "spectra_checksum" in a:
                self._put(layer, dict(zip(SPECTRA, [None] * 3 if spectra is None else spectra, strict=True)))
            a["layer_checksum"][i, layer] = layer_checksum(profile, norm)
            if "statistics_checksum" in a:
                a["statistics_checksum"][i, layer] = ("" if statistics is None
                                                      else statistics_checksum(statistics, spectrum))
            if "spectra_checksum" in a:
                a["spectra_checksum"][i, layer] = "" if spectra is None else spectra_checksum(spectra)
            a["layer_done"][i, layer] = True

    def _put(self, layer: int, values: dict) -> None:
        """Per-head values at d = 0 into their arrays (the ``eigen`` ones NaN-padded past the model's width to the
        store's); a None value clears the layer's row of that array."""
        a, i = self.arrays, self.row
        for name, v in values.items():
            if v is None:
                a[name][i, layer] = np.nan
            elif name == "head_statistics":
                a[name][i, layer, :self.n_heads] = v
            else:
                E = a[name].shape[-1]
                a[name][i, layer, :self.n_heads] = np.pad(v, ((0, 0), (0, E - self.width)), constant_values=np.nan)

    def _checked(self, layer: int, profile, norm, statistics, spectrum, spectra) -> tuple:
        return checked_values(self.name, self.n_heads, self.n_layers, self.width, layer, profile, norm, statistics,
                              spectrum, spectra)


def _eigen_values(name: str, H: int, width: int, layer: int, what: str, v) -> np.ndarray:
    """(H, k <= width) values as float64 padded with NaN to ``width``; StoreError otherwise."""
    v = np.asarray(v, dtype=np.float64)
    if v.ndim != 2 or v.shape[0] != H or v.shape[1] > width:
        raise StoreError(f"layer {layer} of {name!r}: expected {what} ({H}, k) with k <= {width}; got {v.shape}")
    return np.pad(v, ((0, 0), (0, width - v.shape[1])), constant_values=np.nan)


def checked_values(name: str, H: int, L: int, width: int, layer: int, profile, norm, statistics, spectrum,
                   spectra) -> tuple:
    """One layer's values as written (of a model ``name``, or a run's frame, of ``L`` layers, ``H`` heads and
    spectra ``width`` = 2 d_head): float64, position-independent ones repeated at every d, the spectra padded with
    NaN to ``width``; StoreError for a layer out of range or values of another shape."""
    if (statistics is None) != (spectrum is None):
        raise StoreError(f"layer {layer} of {name!r}: give both statistics and spectrum, or neither")
    if spectra is not None and statistics is None:
        raise StoreError(f"layer {layer} of {name!r}: the spectra of T and L are written with the statistics")
    if statistics is not None:
        statistics = np.asarray(statistics, dtype=np.float64)
        if statistics.shape != (H, len(STATISTICS)):
            raise StoreError(f"layer {layer} of {name!r}: expected statistics ({H}, {len(STATISTICS)}); got "
                             f"{statistics.shape}")
        spectrum = _eigen_values(name, H, width, layer, "spectrum", spectrum)
    if spectra is not None:
        if np.ndim(spectra) != 3 or len(spectra) != len(SPECTRA):
            raise StoreError(f"layer {layer} of {name!r}: expected the spectra ({len(SPECTRA)}, {H}, k) of "
                             f"{', '.join(SPECTRA)}; got shape {np.shape(spectra)}")
        spectra = np.stack([_eigen_values(name, H, width, layer, s, v) for s, v in zip(SPECTRA, spectra, strict=True)])
    if not 0 <= layer < L:
        raise StoreError(f"layer {layer} out of range for {name!r} with {L} layers")
    profile = np.asarray(profile, dtype=np.float64)
    norm = np.asarray(norm, dtype=np.float64)
    if profile.ndim == 2:
        profile = np.broadcast_to(profile[:, None, :], (profile.shape[0], N_OFFSETS, 4))
        norm = np.broadcast_to(norm[:, None], (norm.shape[0], N_OFFSETS))
    if profile.shape != (H, N_OFFSETS, 4) or norm.shape != (H, N_OFFSETS):
        raise StoreError(f"layer {layer} of {name!r}: expected profile ({H}, {N_OFFSETS}, 4) and norm "
                         f"({H}, {N_OFFSETS}); got {profile.shape} and {norm.shape}")
    return profile, norm, statistics, spectrum, spectra
