"""zarr's warnings that are noise here, silenced where they arise."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

import zarr


def quiet_consolidate(location: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "consolidated metadata is not part of the v3 spec"
        zarr.consolidate_metadata(location)


@contextlib.contextmanager
def quiet_listing() -> Iterator[None]:
    """A folder a killed writer left without its zarr.json is not a member; zarr's warning about it is noise."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not recognized as a component of a Zarr hierarchy")
        yield
