"""The store's errors: one-line StoreErrors that say what to do, and Damage records."""

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

    def line(self) -> str:
        where = f"{self.group}"
        if self.model:
            where += f" model {self.model!r}"
        if self.layer is not None:
            where += f" layer {self.layer}"
        return f"{where}: {self.problem}; repair: {self.repair}"


def v2_message(location: str) -> str:
    return (f"{location!r} is a Zarr v2 store; this pipeline reads and writes Zarr v3 only. Write a new store "
            f"(--store NEW.zarr) or recompute this one with `python -m pipeline profiles ... --store NEW.zarr`.")


class Errors:
    """OSError while writing -> StoreError."""

    def _os_error(self, exc: OSError, what: str, kept: str) -> StoreError:
        """A StoreError for an OSError while writing ``what``: what happened, what is kept, what to do."""
        code = errno.errorcode.get(exc.errno or 0, "")
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return StoreError(f"the store {self.location!r} is read-only ({exc.strerror or exc}; {code}) while "
                              f"writing {what}; nothing was changed there. Write to a store you can write "
                              f"(--store PATH).")
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return StoreError(f"no space left on the device of {self.location!r} while writing {what} ({code}). "
                              f"Nothing already written was lost ({kept} kept). Free some space and run the same "
                              "command again: it resumes.")
        return StoreError(f"could not write {what} to {self.location!r}: {exc.strerror or exc} ({code or 'OSError'})."
                          f" Nothing already written was lost ({kept} kept); run the same command again to resume.")

    @contextlib.contextmanager
    def _writing(self, what: str, kept: str = "everything written before") -> Iterator[None]:
        if self.mode != "a":
            raise StoreError(f"the store {self.location!r} was opened read-only; cannot write {what}.")
        try:
            yield
        except StoreError:
            raise
        except OSError as exc:
            raise self._os_error(exc, what, kept) from exc
