"""The checkpoint interface every reader plugs into: a config dict plus tensors read one at a time.

A *tensor source* is one weight file (or remote shard): ``keys()``, ``read(name)`` (float64) and
``fingerprint()``, optionally ``read_compact(name)`` (the smallest float dtype that holds the stored values
exactly: :func:`compact_dtype`) and ``finite(name)`` (True,
False, or None when it cannot tell without reading). A :class:`Checkpoint`
maps tensor names to sources and carries the Hugging Face style ``config`` dict that
``pipeline.families.layout_from_config`` turns into a Layout. Readers of other formats (GGUF, ONNX)
build the same object: they translate their metadata into such a config and their tensors into the
Hugging Face names of the family, so that everything downstream is format-blind.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from pipeline.schema import Provenance

# stored safetensors dtype -> the smallest numpy dtype holding its values exactly (numpy has no bfloat16): a
# layer's Q/K stay in it until each head is widened to float64 while it is profiled, so fp16 checkpoints cost
# their own bytes, not twice them (benchmarks/seed_shapes_bench.py: opt-13b's peak against its target)
COMPACT = {"F16": np.float16, "BF16": np.float32, "F32": np.float32}


def compact_dtype(stored: str) -> np.dtype:
    """The dtype ``read_compact`` gives a tensor stored as ``stored`` (a safetensors dtype name): float16 for
    F16, float32 for BF16 and F32, float64 for the rest."""
    return np.dtype(COMPACT.get(stored, np.float64))


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be opened or read as asked; the message says what to do."""


def format_reader(package: str, path, what: str):
    """The reader package of a file format (imported now) and the file's path, or a one-line CheckpointError: the
    package is missing (with the install command) or the file is not there. ``what`` names the format."""
    try:
        module = importlib.import_module(package)
    except ImportError as exc:
        raise CheckpointError(f"reading {what} files needs the {package} package: "
                              "pip install -e '.[pipeline]'") from exc
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no such {what} file: {path}")
    return module, path


class TensorSource(Protocol):
    """One weight file (or remote shard): the tensors it holds, read one at a time."""

    def keys(self) -> list[str]: ...

    def read(self, name: str) -> np.ndarray: ...

    def fingerprint(self) -> bytes: ...


def all_finite(x: np.ndarray, chunk: int = 1 << 16) -> bool:
    """np.all(np.isfinite(x)) without a full-size boolean temporary: ``chunk`` elements at a time, whose 64 KiB
    boolean temporary ``malloc`` serves from its heap (a block of 128 KiB or more may be mapped and faulted in
    afresh each time, as in dask's workers: ``pipeline.profile.span_work``)."""
    flat = x.reshape(-1)
    return all(np.isfinite(flat[i:i + chunk]).all() for i in range(0, flat.size, chunk))


@dataclass
class Checkpoint:
    """A checkpoint's config and lazily readable tensors.

    config : the parsed config.json;  source : Hub id or local folder;  revision : Hub commit sha, or
    ``local-<12 hex>`` hashed from the weight files' sizes, headers and first and last MiB of data;
    provenance : where the weights came from (stored in the model's row);  own_name : the name the checkpoint
    gives itself (GGUF ``general.name``, an ONNX file's stem; "" for none), the default store name.
    """

    config: dict
    source: str
    revision: str
    sources: dict[str, TensorSource] = field(repr=False)  # tensor name -> the file holding it
    provenance: Provenance = field(default_factory=Provenance)
    own_name: str = ""

    def tensor_names(self) -> list[str]:
        return list(self.sources)

    def read(self, name: str) -> np.ndarray:
        """One tensor as float64; CheckpointError if it is missing or holds NaN/Inf."""
        return self._checked(name, compact=False)

    def read_compact(self, name: str) -> np.ndarray:
        """One tensor in its compact dtype (:func:`compact_dtype`: float16 for fp16, float32 for bf16 and fp32,
        where the source gives one), else float64; checked like :meth:`read`. Sources without ``read_compact``
        give float64."""
        return self._checked(name, compact=True)

    def shape(self, name: str) -> tuple[int, ...]:
        """A tensor's shape, from its file's header where the source gives it (else by reading it)."""
        if name not in self.sources:
            raise CheckpointError(f"tensor {name!r} is not in the checkpoint {self.source}")
        shape = getattr(self.sources[name], "shape", None)
        return tuple(shape(name)) if shape is not None else tuple(np.shape(self.read_compact(name)))

    def read_rows(self, name: str, ranges: list[tuple[int, int]]) -> np.ndarray:
        """Rows [a, b) of a 2-d tensor for each (a, b) of ``ranges``, stacked in that order, compact as
        :meth:`read_compact` gives them and checked like it. Sources with ``read_rows(name, ranges)`` read those
        rows alone (a fused QKV tensor's q and k rows, never its v rows); the others read the tensor and take them."""
        if name not in self.sources:
            raise CheckpointError(f"tensor {name!r} is not in the checkpoint {self.source}")
        shape = self.shape(name)
        if len(shape) != 2 or any(not 0 <= a < b <= shape[0] for a, b in ranges):
            raise CheckpointError(f"rows {ranges} are not rows of tensor {name!r} of shape {shape}")
        reader = getattr(self.sources[name], "read_rows", None)
        if reader is None:
            whole = self.read_compact(name)
            return np.concatenate([whole[a:b] for a, b in ranges]) if len(ranges) > 1 else whole[slice(*ranges[0])]
        return self._finite(name, reader(name, ranges))

    def check_finite(self, name: str) -> None:
        """CheckpointError (as :meth:`read` gives it) when ``name`` has a NaN or Inf value. Sources with
        ``finite(name)`` test the stored bits without converting the tensor; the others read it compact."""
        if name not in self.sources:
            raise CheckpointError(f"tensor {name!r} is not in the checkpoint {self.source}")
        test = getattr(self.sources[name], "finite", None)
        if test is None or test(name) is not True:
            self._checked(name, compact=True)  # reads it; raises with the count of bad values

    def _checked(self, name: str, compact: bool) -> np.ndarray:
        if name not in self.sources:
            raise CheckpointError(f"tensor {name!r} is not in the checkpoint {self.source}")
        src = self.sources[name]
        reader = getattr(src, "read_compact", None) if compact else None
        return self._finite(name, reader(name) if reader is not None else src.read(name))

    def _finite(self, name: str, x: np.ndarray) -> np.ndarray:
        if not all_finite(x):
            bad = int(np.size(x) - np.count_nonzero(np.isfinite(x)))
            raise CheckpointError(f"tensor {name!r} of {self.source} has {bad} NaN/Inf values; the checkpoint is "
                                  "damaged or was saved from a diverged run. Use a good copy of the weights.")
        return x
