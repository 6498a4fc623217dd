"""The journal: every structural change is recorded first and replayed to its end by the next open."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator

from pipeline.store import written_by
from pipeline.store.errors import StoreError
from pipeline.store.quiet import quiet_consolidate

JOURNAL = "journal.json"

Replay = Callable[[dict], str]  # finishes the change an entry records; returns the line that says what it did


class Journal:
    """Recording, replaying and cleaning up structural changes, in the backend's writer folder.

    Each part that journals a change names how to finish it (:meth:`on`: the entry's ``op`` -> a replay), and
    what to tidy after any replay (:meth:`after_replay`); :meth:`recover` runs them under the store lock.
    """

    def __init__(self, backend, mode: str, locks):
        self.backend, self.mode, self.locks = backend, mode, locks
        self.location = backend.location
        self._replays: dict[str, Replay] = {}
        self._tidy: list[Callable[[], None]] = []

    def on(self, op: str, replay: Replay) -> None:
        """``replay(entry)`` finishes an entry whose ``op`` is ``op`` (idempotent: it may run after a kill at any
        point of the change, or of an earlier replay)."""
        self._replays[op] = replay

    def after_replay(self, tidy: Callable[[], None]) -> None:
        """``tidy()`` runs after every replay, before the journal is cleared."""
        self._tidy.append(tidy)

    def entry(self) -> dict | None:
        """The recorded change a writer has not finished (``{"op": "unreadable"}`` for a garbled journal), or
        None."""
        raw = self.backend.read(JOURNAL)
        if raw is None:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return {"op": "unreadable"}

    def write(self, entry: dict) -> None:
        """Record ``entry`` (one atomic write): from here on the next open finishes the change."""
        self.backend.write_atomic(JOURNAL, json.dumps(entry).encode())

    def clear(self) -> None:
        self.backend.delete(JOURNAL)

    @contextlib.contextmanager
    def recording(self, entry: dict) -> Iterator[None]:
        """Record ``entry`` before a structural change; cleared (after consolidation) once it is done."""
        self.write(entry)
        yield
        self.consolidate()
        self.clear()

    def consolidate(self) -> None:
        """Write the root's consolidated metadata again (when the store exists)."""
        if self.backend.exists():
            written_by.record(self.location)  # every structural change ends here: the last writer's version
            quiet_consolidate(self.location)

    def recover_if_needed(self) -> None:
        """:meth:`recover` when a killed writer left something; a read-only handle that cannot recover reads
        the last consolidated state."""
        b = self.backend
        if self.entry() is None and not (b.stale_staging() or b.partials()):
            return
        try:
            self.recover()
        except (OSError, StoreError):
            if self.mode == "a":
                raise
            # a read-only store with a half-done change: readers see the last consolidated state

    def recover(self) -> list[str]:
        """Finish (or clean up) what a killed writer left; returns one line per action taken."""
        actions: list[str] = []
        with self.locks.store_lock():
            for f in self.backend.partials():  # first: zarr warns about them when it lists a group
                f.unlink(missing_ok=True)
                actions.append(f"removed the unfinished {f.relative_to(self.location)}")
            entry = self.entry()
            if entry is not None:
                replay = self._replays.get(entry.get("op"))
                if replay is not None:
                    actions.append(replay(entry))
                for tidy in self._tidy:
                    tidy()
                self.consolidate()
                self.clear()
            actions += self.backend.clean_staging()
            if actions and entry is None:
                self.consolidate()
        return actions
