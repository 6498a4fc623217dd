"""The store lock every structural change holds, and the per-model writer lock of a run."""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import threading
from collections.abc import Iterator

from filelock import FileLock, Timeout

from pipeline.store.errors import StoreError, os_error

LOCK_WAIT_S = 600.0  # structural changes take well under a second; a longer wait means a stuck writer
_LOCKS: dict[tuple[int, str], FileLock] = {}  # one FileLock per process and lock file: holding it is reentrant
_THREAD_LOCKS: dict[str, threading.RLock] = {}


class Locks:
    """File locks in the backend's lock folder, reentrant within one process (every handle of a process on the
    same store shares them)."""

    def __init__(self, backend):
        self.backend = backend
        self.location = backend.location

    @contextlib.contextmanager
    def store_lock(self) -> Iterator[None]:
        """The lock every structural change holds (reentrant within one process)."""
        lock = self._file_lock("store")
        with _THREAD_LOCKS.setdefault(lock.lock_file, threading.RLock()):  # the file lock is per process
            try:
                lock.acquire(timeout=LOCK_WAIT_S)
            except Timeout as exc:
                raise StoreError(f"the store {self.location!r} has been locked by another writer for "
                                 f"{LOCK_WAIT_S:.0f} s; is a run stuck?") from exc
            except OSError as exc:
                raise os_error(exc, self.location, "its lock file", "everything") from exc
            try:
                yield
            finally:
                lock.release()

    def _file_lock(self, name: str) -> FileLock:
        key = str(self.backend.lock_dir / f"{name}.lock")
        lock = _LOCKS.get((os.getpid(), key))  # a forked child makes its own (it does not hold the parent's)
        if lock is None:
            try:
                self.backend.lock_dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise os_error(exc, self.location, "its lock file", "nothing") from exc
            lock = _LOCKS[os.getpid(), key] = FileLock(key, thread_local=False)
        return lock

    @staticmethod
    def _model_lock_name(name: str) -> str:
        return "model-" + hashlib.sha256(name.encode()).hexdigest()[:16]

    @contextlib.contextmanager
    def writer(self, name: str, wait: bool = False) -> Iterator[None]:
        """The per-model writer lock a run holds while it writes ``name``.

        A second holder (another process) is refused with a StoreError naming the first, or waits for it
        with ``wait=True``. Reentrant within one process.
        """
        lock = self._file_lock(self._model_lock_name(name))
        owner = self.backend.lock_dir / f"{self._model_lock_name(name)}.owner"
        try:
            lock.acquire(timeout=-1 if wait else 0)
        except Timeout as exc:  # (a subclass of OSError: caught first)
            try:
                holder = owner.read_text().strip() or "another process"
            except OSError:
                holder = "another process"  # (it has not written its name yet)
            raise StoreError(f"{name!r} is being written to {self.location!r} by {holder}. Wait for that run "
                             "to finish (finished layers are kept), or store this one under another --name.") from exc
        except OSError as exc:
            raise os_error(exc, self.location, f"the writer lock of {name!r}", "everything") from exc
        try:
            if lock.lock_counter == 1:
                with contextlib.suppress(OSError):
                    tmp = owner.with_name(f"{owner.name}.{os.getpid()}.tmp")
                    tmp.write_text(f"process {os.getpid()} on {socket.gethostname()}")
                    os.replace(tmp, owner)
            yield
        finally:
            lock.release()

    def refuse_if_held(self, name: str) -> None:
        """Refuse (StoreError) to touch ``name`` while another process holds its writer lock."""
        with self.writer(name, wait=False):
            pass
