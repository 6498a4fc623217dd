"""The store's errors: one-line StoreErrors that say what to do, Damage records, and the guard around every write
(a read-only handle refused, an OSError turned into a StoreError)."""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator
from dataclasses import dataclass


class StoreError(RuntimeError):
    """A problem with the store that the user can fix; the message says how."""


@dataclass(frozen=True)
class Damage:
    """One damaged piece of a store found by :meth:`Store.verify`."""

    group: str
    model: str  # "" for a whole-group problem
    layer: int | None  # None for a whole-model or whole-group problem
    problem: str
    repair: str  # the exact command that repairs it
    frame: str = ""  # the revision of a run's frame ("" outside a run group)

    def line(self) -> str:
        where = f"{self.group}"
        if self.model:
            where += f" model {self.model!r}"
        if self.frame:
            where += f" frame {self.frame!r}"
        if self.layer is not None:
            where += f" layer {self.layer}"
        return f"{where}: {self.problem}; repair: {self.repair}"


def v2_message(location: str) -> str:
    return (f"{location!r} is a Zarr v2 store; this pipeline reads and writes Zarr v3 only. Write a new store "
            f"(--store NEW.zarr) or recompute this one with `python -m pipeline profiles ... --store NEW.zarr`.")


def os_error(exc: OSError, location: str, what: str, kept: str) -> StoreError:
    """A StoreError for an OSError while writing ``what`` to the store at ``location``: what happened, what is
    kept, what to do."""
    code = errno.errorcode.get(exc.errno or 0, "")
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return StoreError(f"the store {location!r} is read-only ({exc.strerror or exc}; {code}) while "
                          f"writing {what}; nothing was changed there. Write to a store you can write "
                          f"(--store PATH).")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StoreError(f"no space left on the device of {location!r} while writing {what} ({code}). "
                          f"Nothing already written was lost ({kept} kept). Free some space and run the same "
                          "command again: it resumes.")
    return StoreError(f"could not write {what} to {location!r}: {exc.strerror or exc} ({code or 'OSError'})."
                      f" Nothing already written was lost ({kept} kept); run the same command again to resume.")


@contextlib.contextmanager
def writing(location: str, mode: str, what: str, kept: str = "everything written before") -> Iterator[None]:
    """Around a write of ``what``: refused on a store opened read-only (``mode`` "r"), and an OSError inside
    becomes :func:`os_error`'s StoreError."""
    if mode != "a":
        raise StoreError(f"the store {location!r} was opened read-only; cannot write {what}.")
    try:
        yield
    except StoreError:
        raise
    except OSError as exc:
        raise os_error(exc, location, what, kept) from exc
