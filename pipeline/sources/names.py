"""File names that come from a checkpoint's index: repository-relative, or refused.

An index (``model.safetensors.index.json``, ``pytorch_model.bin.index.json``) maps tensor names to the
files that hold them. Those file names are data from the checkpoint's author: a name such as
``../other-repo/model.safetensors``, ``/etc/passwd`` or ``https://host/x`` would reach outside the
checkpoint (another Hub repository, the unpinned ``main`` revision, a local file). Only plain relative
paths inside the checkpoint are accepted, online, offline and for local folders alike.
"""

from __future__ import annotations

import re

from pipeline.sources.base import CheckpointError

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")  # "https:", "file:", "C:" ...


def repo_relative(name, where: str) -> str:
    """``name`` if it is a plain relative path inside the checkpoint, else CheckpointError naming it."""
    why = None
    if not isinstance(name, str) or not name:
        why = "is not a non-empty string"
    elif "\\" in name:
        why = "contains a backslash"
    elif name.startswith("/"):
        why = "is an absolute path"
    elif _SCHEME.match(name) or "://" in name:
        why = "is a URL"
    elif any(ord(c) < 32 for c in name):
        why = "contains control characters"
    elif any(part in ("", ".", "..") for part in name.split("/")):
        why = "has an empty, '.' or '..' path component"
    if why:
        raise CheckpointError(f"{where} names the file {name!r}, which {why}; only paths inside the checkpoint "
                              "are read. The index is damaged or hostile: use a trusted copy of the checkpoint.")
    return name


def weight_map(index: object, where: str) -> dict[str, str]:
    """The validated ``weight_map`` (tensor name -> file name) of a parsed index file."""
    if not isinstance(index, dict) or not isinstance(index.get("weight_map"), dict):
        raise CheckpointError(f"{where} has no 'weight_map' object; the index is damaged. Download it again.")
    out = {}
    for tensor, fname in index["weight_map"].items():
        out[str(tensor)] = repo_relative(fname, where)
    return out
