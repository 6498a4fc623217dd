"""A local ``pytorch_model*.bin`` read with ``torch.load(weights_only=True)``: never full unpickling."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from pipeline.sources.base import CheckpointError


def compact_numpy(t) -> np.ndarray:
    """A torch tensor as numpy: float32 when that holds it exactly (bf16, fp16, fp32), else float64."""
    import torch

    exact32 = t.dtype in (torch.bfloat16, torch.float16, torch.float32)
    return t.to(torch.float32 if exact32 else torch.float64).numpy()


class TorchBinFile:
    """A tensor source over one ``.bin`` state dict, loaded once (memory-mapped when the format allows)."""

    format = "bin"

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
                raise CheckpointError(f"cannot read {self.path} with torch.load ({str(exc).splitlines()[0]}); "
                                      "re-download it.") from exc
            if not isinstance(state, dict):
                raise CheckpointError(f"{self.path} does not hold a state dict (got {type(state).__name__})")
            self._state = {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}
        return self._state

    def keys(self) -> list[str]:
        return list(self._load())

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(int(x) for x in self._load()[name].shape)

    def read(self, name: str) -> np.ndarray:
        import torch

        return self._load()[name].to(torch.float64).numpy()

    def read_compact(self, name: str) -> np.ndarray:
        return compact_numpy(self._load()[name])

    def fingerprint(self) -> bytes:
        """File size and its last MiB (the zip central directory holds a CRC-32 of every record)."""
        size = self.path.stat().st_size
        with open(self.path, "rb") as fh:
            fh.seek(max(0, size - (1 << 20)))
            return str(size).encode() + fh.read()
