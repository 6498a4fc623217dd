"""Writes of one model's layers: region writes of its values with their checksums, then ``layer_done``."""

from __future__ import annotations

import numpy as np

from pipeline.schema import N_OFFSETS, STATISTICS, layer_checksum, spectrum_width, statistics_checksum
from pipeline.store.errors import StoreError, writing
from pipeline.store.profile_arrays import ensure_statistics, row_index


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
        self.arrays = {k: g[k] for k in names}  # each array's metadata read once

    def write(self, layer: int, profile: np.ndarray, norm: np.ndarray, statistics: np.ndarray | None = None,
              spectrum: np.ndarray | None = None) -> None:
        """Region write of one layer with its checksums: profile (H, 4) or (H, 129, 4), norm (H,) or (H, 129), and
        the head statistics (H, 17) and spectrum (H, k <= 2 d_head) at d = 0.

        Position-independent layers pass (H, 4) and are repeated at every d. Without ``statistics`` and
        ``spectrum`` the layer's statistics read as not computed. Safe from several processes at once for
        different layers (no lock: no two layers share a chunk).
        """
        profile, norm, statistics, spectrum = self._checked(layer, profile, norm, statistics, spectrum)
        table, i = self.table, self.row
        with writing(table.location, table.mode, f"layer {layer} of {self.name!r}", "the other layers"):
            # a store without the statistics variables (or with some: ensure_statistics adds what is missing)
            if statistics is not None and "statistics_checksum" not in self.arrays:
                with table.locks.store_lock():
                    ensure_statistics(self.group, self.width)
                    table.journal.consolidate()
                self._open()
            a = self.arrays
            # order: values, checksums, then layer_done (a kill before the last leaves the layer to do)
            a["profile"][i, layer, :self.n_heads] = profile
            a["norm"][i, layer, :self.n_heads] = norm
            if "statistics_checksum" in a:
                if statistics is not None:
                    E = a["spectrum"].shape[-1]
                    a["head_statistics"][i, layer, :self.n_heads] = statistics
                    a["spectrum"][i, layer, :self.n_heads] = np.pad(spectrum, ((0, 0), (0, E - self.width)),
                                                                    constant_values=np.nan)
                else:
                    a["head_statistics"][i, layer] = np.nan
                    a["spectrum"][i, layer] = np.nan
            a["layer_checksum"][i, layer] = layer_checksum(profile, norm)
            if "statistics_checksum" in a:
                a["statistics_checksum"][i, layer] = ("" if statistics is None
                                                      else statistics_checksum(statistics, spectrum))
            a["layer_done"][i, layer] = True

    def _checked(self, layer: int, profile, norm, statistics, spectrum) -> tuple:
        """The values as written: float64, position-independent ones repeated at every d, the spectrum padded
        with NaN to the model's width; StoreError for a layer out of range or values of another shape."""
        name, H, L, width = self.name, self.n_heads, self.n_layers, self.width
        if (statistics is None) != (spectrum is None):
            raise StoreError(f"layer {layer} of {name!r}: give both statistics and spectrum, or neither")
        if statistics is not None:
            statistics = np.asarray(statistics, dtype=np.float64)
            spectrum = np.asarray(spectrum, dtype=np.float64)
            if statistics.shape != (H, len(STATISTICS)) or spectrum.ndim != 2 or spectrum.shape[0] != H \
                    or spectrum.shape[1] > width:
                raise StoreError(f"layer {layer} of {name!r}: expected statistics ({H}, {len(STATISTICS)}) and "
                                 f"spectrum ({H}, k) with k <= {width}; got {statistics.shape} and {spectrum.shape}")
            spectrum = np.pad(spectrum, ((0, 0), (0, width - spectrum.shape[1])), constant_values=np.nan)
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
        return profile, norm, statistics, spectrum
