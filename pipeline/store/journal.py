"""The journal: every structural change is recorded first and replayed to its end by the next open."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

from pipeline.schema import (
    SCHEMA_VERSION,
    ModelRow,
)
from pipeline.store import written_by
from pipeline.store.errors import StoreError
from pipeline.store.quiet import quiet_consolidate

JOURNAL = "journal.json"


class Journal:
    """Recording, replaying and cleaning up structural changes."""

    def _journal(self) -> dict | None:
        raw = self.backend.read(JOURNAL)
        if raw is None:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return {"op": "unreadable"}

    @contextlib.contextmanager
    def _journalled(self, entry: dict) -> Iterator[None]:
        """Record ``entry`` before a structural change; cleared (after consolidation) once it is done."""
        self.backend.write_atomic(JOURNAL, json.dumps(entry).encode())
        yield
        self._consolidate()
        self.backend.delete(JOURNAL)

    def _recover_if_needed(self) -> None:
        b = self.backend
        if self._journal() is None and not (b.stale_staging() or b.partials()):
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
        with self._store_lock():
            for f in self.backend.partials():  # first: zarr warns about them when it lists a group
                f.unlink(missing_ok=True)
                actions.append(f"removed the unfinished {f.relative_to(self.location)}")
            entry = self._journal()
            if entry is not None:
                op = entry.get("op")
                if op == "register":
                    row = ModelRow(**entry["row"])
                    self._apply_register(row)
                    actions.append(f"finished registering {row.name!r}")
                elif op == "replace":
                    self._apply_swap(entry["group"], entry["new"], entry["old"], entry.get("ino"))
                    actions.append(f"finished replacing the {entry['group']!r} group")
                elif op == "upgrade":
                    self._apply_upgrade()
                    actions.append(f"finished upgrading to schema version {SCHEMA_VERSION}")
                self._drop_ghost_rows()
                self._consolidate()
                self.backend.delete(JOURNAL)
            actions += self.backend.clean_staging()
            if actions and entry is None:
                self._consolidate()
        return actions

    def _consolidate(self) -> None:
        if self.exists():
            written_by.record(self.location)  # every structural change ends here: the last writer's version
            quiet_consolidate(self.location)
