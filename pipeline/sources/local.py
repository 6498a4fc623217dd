"""A checkpoint in a local folder: ``config.json`` plus safetensors (single or sharded) or ``pytorch_model*.bin``.

Safetensors are preferred over ``.bin``. A sharded checkpoint's index is validated (repository-relative
file names only, every listed shard present) before any shard is opened. The revision is
``local-<12 hex>``, hashed from each weight file's fingerprint (size, header, first and last MiB).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np

from pipeline.schema import Provenance
from pipeline.sources.base import Checkpoint, CheckpointError, TensorSource
from pipeline.sources.names import weight_map
from pipeline.sources.safetensors_file import SafetensorsFile
from pipeline.sources.torch_bin import TorchBinFile

SHA256_MAX_BYTES = 1 << 30  # provenance carries the sha256 of a single weight file up to this size
_NOT_WEIGHTS = ("training_args.bin", "optimizer.bin", "scheduler.bin")


class IndexedSource:
    """A shard whose key list comes from the index (the shard is opened only when a tensor is read)."""

    def __init__(self, inner, names: list[str]):
        self.inner, self.names = inner, names

    def keys(self) -> list[str]:
        return self.names

    def shape(self, name: str) -> tuple[int, ...]:
        return self.inner.shape(name)

    def read(self, name: str) -> np.ndarray:
        return self.inner.read(name)

    def read_compact(self, name: str) -> np.ndarray:
        return self.inner.read_compact(name)

    def read_rows(self, name: str, ranges: list[tuple[int, int]]) -> np.ndarray:
        reader = getattr(self.inner, "read_rows", None)
        if reader is not None:
            return reader(name, ranges)
        whole = self.inner.read_compact(name)  # a .bin shard: torch.load reads the tensor whole anyway
        return np.concatenate([whole[a:b] for a, b in ranges])

    def finite(self, name: str) -> bool | None:
        test = getattr(self.inner, "finite", None)
        return None if test is None else test(name)

    def fingerprint(self) -> bytes:
        return self.inner.fingerprint()


def read_json(path: Path, what: str) -> object:
    """A JSON file, or CheckpointError saying it is not valid JSON."""
    try:
        return json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path} is not valid JSON ({exc}); fix or re-download the {what}.") from None


def _weight_sources(folder: Path) -> tuple[dict[str, TensorSource], Provenance]:
    """Tensor name -> source for the weights in ``folder``, and the provenance of those files."""
    for index_name, cls in (("model.safetensors.index.json", SafetensorsFile),
                            ("pytorch_model.bin.index.json", TorchBinFile)):
        index = folder / index_name
        if index.exists():
            wmap = weight_map(read_json(index, "index"), str(index))
            by_file: dict[str, list[str]] = {}
            for name, fname in wmap.items():
                by_file.setdefault(fname, []).append(name)
            missing = [f for f in by_file if not (folder / f).is_file()]
            if missing:
                raise CheckpointError(f"{index} lists shards that are not in {folder}: {missing}. "
                                      "Download the missing shards.")
            out = {}
            for fname, names in sorted(by_file.items()):
                src = IndexedSource(cls(folder / fname), names)
                out.update(dict.fromkeys(names, src))
            return out, Provenance(format=cls.format, file=index_name)
    for pattern, cls in (("*.safetensors", SafetensorsFile), ("*.bin", TorchBinFile)):
        files = sorted(p for p in folder.glob(pattern) if p.is_file() and p.name not in _NOT_WEIGHTS)
        if files:
            out = {}
            for p in files:
                src = cls(p)
                out.update(dict.fromkeys(src.keys(), src))
            single = len(files) == 1
            sha = (SafetensorsFile(files[0]).sha256()
                   if single and cls is SafetensorsFile and files[0].stat().st_size <= SHA256_MAX_BYTES else "")
            return out, Provenance(format=cls.format, file=files[0].name if single else "", sha256=sha)
    raise CheckpointError(f"no weights in {folder}: expected model.safetensors, a sharded "
                          "model.safetensors.index.json, or pytorch_model.bin. Point at a checkpoint folder.")


def local_revision(sources: dict[str, TensorSource]) -> str:
    h = hashlib.sha256()
    unique = {id(s): s for s in sources.values()}.values()
    for src in sorted(unique, key=lambda s: str(getattr(s, "inner", s).path)):
        h.update(src.fingerprint())
    return "local-" + h.hexdigest()[:12]


def open_folder(folder, source: str | None = None, revision: str | None = None, **provenance: str) -> Checkpoint:
    """A checkpoint from a local folder holding config.json and the weights; ``provenance``: fields of
    :class:`~pipeline.schema.Provenance` that override what the weight files give (``format="hub"``, a
    ``package``)."""
    folder = Path(folder)
    cfg = folder / "config.json"
    if not cfg.is_file():
        raise CheckpointError(f"{folder} has no config.json; point at a Hugging Face checkpoint folder "
                              "(as written by save_pretrained).")
    config = read_json(cfg, "config.json")
    if not isinstance(config, dict):
        raise CheckpointError(f"{cfg} holds a JSON {type(config).__name__}, not an object; fix or re-download it.")
    sources, prov = _weight_sources(folder)
    return Checkpoint(config=config, source=source or str(folder.resolve()),
                      revision=revision or local_revision(sources), sources=sources,
                      provenance=dataclasses.replace(prov, **provenance))
