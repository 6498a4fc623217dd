"""Writes of a run's frames, layer by layer: region writes of a layer's values with their checksums and its Q/K
hash, then ``layer_done`` (the order a model's layer is written in), or a verified copy of the same layer of a frame
whose Q/K hash equal (a repeat, not computed again)."""

from __future__ import annotations

import numpy as np

from pipeline.schema import SPECTRA, layer_checksum, spectra_checksum, spectrum_width, statistics_checksum
from pipeline.schema.runs import run_group
from pipeline.store.errors import writing
from pipeline.store.layer_writer import checked_values

# what a layer of a frame holds beside layer_done, its checksums and its hash, in the order they are written
_VALUES = ("profile", "norm", "head_statistics", "spectrum", *SPECTRA)
_SUMS = ("layer_checksum", "statistics_checksum", "spectra_checksum")


class FrameWriter:
    """Writes the frames of one run (:meth:`pipeline.store.runs.RunGroups.frame_writer`): its group and arrays
    opened once. A frame's index never changes (frames are only appended), and no two layers share a chunk, so
    processes write different layers at once without a lock.

    It knows which (layer, Q/K hash) are written, to find a repeat (:meth:`repeat_source`): those written when it
    was opened and those it wrote itself (a layer another process writes meanwhile is computed here again, equal)."""

    def __init__(self, groups, name: str):
        self.groups, self.name = groups, name
        self.location, self.mode = groups.location, groups.mode
        with writing(self.location, self.mode, f"the frames of the run {name!r}", "the other frames"):
            g = self.group = groups.open(name, "a")
            self.n_layers, self.n_heads = int(g.attrs["n_layers"]), int(g.attrs["n_heads"])
            self.width = spectrum_width(int(g.attrs["d_head"]))
            self.arrays = {k: g[k] for k in (*_VALUES, *_SUMS, "qk_sha256", "layer_done")}
        self._known: dict[tuple[int, str], int] | None = None

    def _load_known(self) -> dict[tuple[int, str], int]:
        n = self.group["step"].shape[0]
        done = np.asarray(self.arrays["layer_done"][:n], dtype=bool)
        sums = np.asarray(self.arrays["qk_sha256"][:n], dtype=object)
        known: dict[tuple[int, str], int] = {}
        for i, layer in zip(*np.nonzero(done), strict=True):
            if str(sums[i, layer]):
                known.setdefault((int(layer), str(sums[i, layer])), int(i))
        return known

    def repeat_source(self, layer: int, digest: str) -> int | None:
        """The index of a frame whose ``layer`` is written with the Q/K hash ``digest``, or None."""
        if self._known is None:
            self._known = self._load_known()
        return self._known.get((layer, digest))

    def write(self, index: int, layer: int, digest: str, profile: np.ndarray, norm: np.ndarray,
              statistics: np.ndarray, spectrum: np.ndarray, spectra: np.ndarray) -> None:
        """Region write of frame ``index``'s ``layer``: its values (as ``Store.write_layer`` takes them) with their
        checksums, its Q/K hash ``digest``, then ``layer_done`` (a kill before the last leaves the layer to do)."""
        where = f"{run_group(self.name)} frame {index}"
        profile, norm, statistics, spectrum, spectra = checked_values(
            where, self.n_heads, self.n_layers, self.width, layer, profile, norm, statistics, spectrum, spectra)
        sums = (layer_checksum(profile, norm), statistics_checksum(statistics, spectrum), spectra_checksum(spectra))
        self._put(index, layer, (profile, norm, statistics, spectrum, *spectra), sums, digest)

    def copy(self, index: int, layer: int, source: int, digest: str) -> bool:
        """Write frame ``source``'s ``layer`` as frame ``index``'s (a repeat: equal Q/K hash ``digest``), after
        checking the values read against their checksums; False, nothing written, when they do not match (the
        caller computes the layer instead)."""
        a, H = self.arrays, self.n_heads
        with writing(self.location, self.mode, f"frame {index} of the run {self.name!r}", "the other frames"):
            if not bool(a["layer_done"][source, layer]) or str(a["qk_sha256"][source, layer]) != digest:
                return False
            values = [np.asarray(a[v][source, layer, :H]) for v in _VALUES]
            sums = tuple(str(a[c][source, layer]) for c in _SUMS)
        profile, norm, statistics, spectrum, *spectra = values
        width = slice(0, self.width)
        if (layer_checksum(profile, norm), statistics_checksum(statistics, spectrum[:, width]),
                spectra_checksum(np.stack([s[:, width] for s in spectra]))) != sums:
            return False  # damaged since it was written: verify finds it
        self._put(index, layer, values, sums, digest)
        return True

    def _put(self, index: int, layer: int, values, sums, digest: str) -> None:
        a, H = self.arrays, self.n_heads
        with writing(self.location, self.mode, f"layer {layer} of frame {index} of the run {self.name!r}",
                     "the other layers"):
            for var, v in zip(_VALUES, values, strict=True):  # values, checksums, hash, then layer_done
                a[var][index, layer, :H] = v
            for var, s in zip(_SUMS, sums, strict=True):
                a[var][index, layer] = s
            a["qk_sha256"][index, layer] = digest
            a["layer_done"][index, layer] = True
        if self._known is not None:
            self._known.setdefault((layer, digest), index)
