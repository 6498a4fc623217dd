"""A local ``.safetensors`` file read through the ``safetensors`` library, one tensor (in row blocks) at a time.

A tensor's chosen rows can be read alone (``read_rows``: a fused QKV tensor's q and k rows).

The library parses and validates the header (its size is capped at 100 MB, offsets must cover the file
exactly), so a damaged or hostile file is refused before any tensor byte is read. Tensors are read by
row blocks of ``get_slice`` and converted block by block, and the file is mapped afresh for each block,
so reading a tensor costs its compact copy plus one block, never the whole tensor twice.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from pipeline.sources.base import CheckpointError, compact_dtype

_BLOCK = 1 << 21  # elements per block read (bounds the temporary memory of a conversion)
# stored dtype -> (unsigned view, exponent mask): a value is NaN or Inf exactly when its exponent bits are all ones
_EXPONENT = {"F16": ("uint16", 0x7C00), "BF16": ("uint16", 0x7F80), "F32": ("uint32", 0x7F800000)}


def _damaged(path, exc) -> CheckpointError:
    return CheckpointError(f"cannot read {path} as safetensors ({str(exc).splitlines()[0]}); the file is damaged, "
                           "truncated or not safetensors. Download or save it again.")


class SafetensorsFile:
    """A tensor source (``pipeline.sources.base.TensorSource``) over one local ``.safetensors`` file."""

    format = "safetensors"

    def __init__(self, path):
        self.path = Path(path)
        self._meta: dict[str, tuple[str, tuple[int, ...]]] | None = None

    def _open(self):
        from safetensors import safe_open

        try:
            return safe_open(str(self.path), framework="pt")
        except Exception as exc:  # noqa: BLE001 - the library raises its own error types
            raise _damaged(self.path, exc) from exc

    def _entries(self) -> dict[str, tuple[str, tuple[int, ...]]]:
        """name -> (dtype, shape), from the library's parsed header (read once)."""
        if self._meta is None:
            with self._open() as fh:
                meta = {}
                for name in fh.keys():
                    s = fh.get_slice(name)
                    meta[name] = (s.get_dtype(), tuple(int(x) for x in s.get_shape()))
            self._meta = meta
        return self._meta

    def keys(self) -> list[str]:
        return list(self._entries())

    def shape(self, name: str) -> tuple[int, ...]:
        return self._entries()[name][1]

    def _read(self, name: str, compact: bool, ranges: list[tuple[int, int]] | None = None) -> np.ndarray:
        """The tensor (or, with ``ranges``, its rows [a, b) for each (a, b), stacked), converted block by block."""
        import torch

        dtype, shape = self._entries()[name]
        out_dtype = compact_dtype(dtype) if compact else np.dtype(np.float64)
        try:
            if len(shape) == 0:
                out = np.empty(shape, dtype=out_dtype)
                with self._open() as fh:
                    out[...] = fh.get_slice(name)[...].to(torch.from_numpy(out).dtype).numpy()
                return out
            ranges = [(0, shape[0])] if ranges is None else ranges
            out = np.empty((sum(b - a for a, b in ranges), *shape[1:]), dtype=out_dtype)
            rows = max(1, _BLOCK // max(1, int(np.prod(shape[1:]))))
            into, at = torch.from_numpy(out), 0
            for a, b in ranges:
                for i in range(a, b, rows):
                    j = min(b, i + rows)
                    with self._open() as fh:  # reopened per block: the pages mapped for one block are let go
                        into[at:at + j - i].copy_(fh.get_slice(name)[i:j])  # converted into out: no temporary
                    at += j - i
        except CheckpointError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise _damaged(self.path, exc) from exc
        return out

    def read_rows(self, name: str, ranges: list[tuple[int, int]]) -> np.ndarray:
        """Rows [a, b) for each (a, b) of ``ranges``, stacked, compact (as :meth:`read_compact`): only those rows
        are read from the file."""
        return self._read(name, compact=True, ranges=ranges)

    def read(self, name: str) -> np.ndarray:
        return self._read(name, compact=False)

    def finite(self, name: str) -> bool | None:
        """Whether every value of ``name`` is finite, tested on the stored bits (an all-ones exponent) row block
        by row block, without converting the tensor; None for dtypes without such a test (read it instead)."""
        import torch

        dtype, shape = self._entries()[name]
        if dtype not in _EXPONENT or len(shape) == 0:
            return None
        bits, mask = _EXPONENT[dtype]
        int_dtype = torch.int16 if bits == "uint16" else torch.int32
        rows = max(1, _BLOCK // max(1, int(np.prod(shape[1:]))))
        try:
            for i in range(0, shape[0], rows):
                with self._open() as fh:
                    u = fh.get_slice(name)[i:i + rows].view(int_dtype).numpy().view(bits)
                    if ((u & mask) == mask).any():
                        return False
        except Exception as exc:  # noqa: BLE001
            raise _damaged(self.path, exc) from exc
        return True

    def read_compact(self, name: str) -> np.ndarray:
        """In the compact dtype of its stored dtype (``pipeline.sources.base.compact_dtype``)."""
        return self._read(name, compact=True)

    def fingerprint(self) -> bytes:
        """File size, the header bytes (names, dtypes, shapes, offsets) and the first and last MiB of data.

        The header has been validated by the library (``_entries``) before its bytes are hashed here."""
        self._entries()
        size = self.path.stat().st_size
        with open(self.path, "rb") as fh:
            head = fh.read(8)
            n = int.from_bytes(head, "little")
            out = str(size).encode() + head + fh.read(n) + fh.read(1 << 20)
            fh.seek(max(fh.tell(), size - (1 << 20)))
            return out + fh.read()

    def sha256(self) -> str:
        """sha256 of the whole file (read in 1 MiB blocks)."""
        h = hashlib.sha256()
        with open(self.path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()

    def size(self) -> int:
        return os.path.getsize(self.path)
