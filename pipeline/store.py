"""The Zarr store: one handle for every read and write, safe under concurrent writers and crashes.

Light on purpose (numpy, xarray, zarr, filelock only): the dashboard imports this module and must never
pull in torch. The schema (names, dimensions, dtypes, attributes, version) lives in ``pipeline.schema``;
``docs/architecture.md`` explains the rules implemented here.

``Store.open(location, mode)`` opens a store by path or fsspec URL (``None``: :func:`default_store_path`).

- **Profiles** are written template -> regions -> metadata: ``register`` adds the model's row (all its
  fields, data NaN), ``write_layer`` writes one (model, layer) region with its checksum (processes may
  write different layers at once: no two layers share a chunk), ``mark_complete`` sets ``complete`` once
  every layer is written. Registering a larger model grows the layer/head dimensions in place.
- **Writers**: structural changes (register, reset, mark complete, replace a group, repair) hold the
  store lock, a file lock in the writer folder ``.<store name>.writer`` beside the store (zarr sees only
  its own files), so concurrent runs of different models never lose a registration.
  ``Store.writer(name)`` is the per-model lock a run holds from plan to completion: a second run of the
  same model is refused with a message naming the holder (or waits, ``wait=True``).
- **Crash safety**: every structural change is first recorded in a journal (in the writer folder) and
  replayed to its end by the next open, so a kill leaves either the old or the new state: never a model
  row without a name, never stale metadata over new arrays. A group is replaced by writing it whole in
  the writer folder's ``staging`` and exchanging the directories in one step where Linux can
  (``renameat2(RENAME_EXCHANGE)``: even plain xarray readers never find the group missing), else by two
  renames. Zarr writes each file atomically (temporary file, rename).
- **Verification**: each layer's checksum (``schema.layer_checksum``, profile and norm) and, when its
  statistics are written, their own checksum (``schema.statistics_checksum``, head_statistics and
  spectrum) are written with its values. ``verify`` re-reads every written layer, and a layer that does
  not decode or does not match a checksum (a garbled or deleted chunk) is cleared and its model marked
  ``damaged`` with the command that recomputes exactly those layers. A layer without statistics (a
  store written before them) is not damaged: its model reads as "statistics not computed". Readers
  check too, without writing: ``checked_models`` (``list``, the dashboard) shows such a model damaged
  with the repair.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import hashlib
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import uuid
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import xarray as xr
import zarr
from filelock import FileLock, Timeout

from pipeline.schema import (
    BOOL_FIELDS,
    COORDINATES,
    INT_FIELDS,
    N_OFFSETS,
    ORBITS,
    ORBITS_SEARCH,
    ORBITS_SWEEP,
    POSITIONAL_KINDS,
    PROFILE_ATTRS,
    PROFILE_DATA,
    PROFILES,
    ROW_FIELDS,
    SCHEMA_VERSION,
    STATISTICS,
    STATISTICS_DATA,
    STR_FIELDS,
    WRITE_COMMANDS,
    ModelRow,
    layer_checksum,
    problems,
    profile_chunks,
    rows_from_columns,
    spectrum_width,
    statistics_checksum,
)

ENV_VAR = "HEADGEOMETRY_STORE"
REPO_STORE = Path(__file__).resolve().parents[1] / "store.zarr"
STAGING = "staging"
JOURNAL = "journal.json"
LOCK_WAIT_S = 600.0  # structural changes take well under a second; a longer wait means a stuck writer

ModelInfo = ModelRow  # an alias: some callers name the row ModelInfo

__all__ = [
    "COORDINATES", "Damage", "ENV_VAR", "ModelInfo", "ModelRow", "N_OFFSETS", "ORBITS", "ORBITS_SEARCH",
    "ORBITS_SWEEP", "POSITIONAL_KINDS", "PROFILES", "SCHEMA_VERSION", "Store", "StoreError", "default_store_path",
    "is_complete", "layers_done", "mark_complete", "model_info", "open_group_dataset", "open_orbits",
    "open_profiles", "register_model", "reset_model", "write_group", "write_layer",
]


class StoreError(RuntimeError):
    """A problem with the store that the user can fix; the message says how."""


def default_store_path() -> str:
    """The one default store: ``$HEADGEOMETRY_STORE`` if set, else ``store.zarr`` at the repository root.

    The repository root is the folder holding the ``pipeline`` package, so the default does not depend on
    the current directory. Every pipeline command and the dashboard use this rule.
    """
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return env if _is_url(env) else str(Path(env).expanduser())
    return str(REPO_STORE)


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


def _is_url(location: str) -> bool:
    return "://" in location


RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100
_NO_EXCHANGE = (errno.EINVAL, errno.ENOSYS, errno.EXDEV, errno.EOPNOTSUPP)


@functools.cache
def _renameat2():
    """libc's ``renameat2`` (Linux, glibc >= 2.28), or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one atomic step (``renameat2(RENAME_EXCHANGE)``); False, with nothing changed,
    where that is not available (no such call, or the filesystem or kernel refuses it: the caller falls back
    to two renames). Other errors raise OSError."""
    fn = _renameat2()
    if fn is None:
        return False
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in _NO_EXCHANGE:
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def _quiet_consolidate(location: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "consolidated metadata is not part of the v3 spec"
        zarr.consolidate_metadata(location)


# ------------------------------------------------------------------------------------ the handle


class Store:
    """A store opened once; every method reopens the arrays it touches, so other writers' changes show."""

    def __init__(self, location: str, mode: str = "a"):
        if mode not in ("a", "r"):
            raise ValueError(f"mode must be 'a' or 'r'; got {mode!r}")
        self.location = location
        self.mode = mode
        self.url = _is_url(location)
        self._fs = None
        if self.url:
            from fsspec.core import url_to_fs

            self._fs, self._root = url_to_fs(location)
            self._aux_root = self._root.rstrip("/") + ".writer"
            lock_home = Path(tempfile.gettempdir()) / "headgeometry-locks"
            self._lock_dir = lock_home / hashlib.sha256(location.encode()).hexdigest()[:16]
        else:
            p = Path(location).absolute()
            self._aux = p.parent / f".{p.name}.writer"  # beside the store: zarr sees only its own files
            self._lock_dir = self._aux / "locks"

    # --------------------------------------------------------------------------- opening

    @classmethod
    def open(cls, location=None, mode: str = "a") -> Store:
        """Open the store at ``location`` (path or fsspec URL; None = :func:`default_store_path`).

        ``mode="r"`` needs an existing store; ``mode="a"`` creates it on the first write. Finishes any
        change a killed writer left half done (see the module docstring).
        """
        location = default_store_path() if location is None else str(location)
        if not _is_url(location):
            location = str(Path(location).expanduser())
        store = cls(location, mode)
        store._check_kind()
        store._recover_if_needed()
        return store

    def __repr__(self) -> str:
        return f"Store({self.location!r}, mode={self.mode!r})"

    def _check_kind(self) -> None:
        """No store, not a Zarr store, a Zarr v2 store: each a clear StoreError."""
        loc = self.location
        if self.url:
            try:
                exists = self._fs.exists(self._root)
            except Exception as exc:  # noqa: BLE001 - any fsspec backend error
                raise StoreError(f"cannot reach the store {loc!r} ({exc}).") from exc
            if not exists and self.mode == "r":
                raise StoreError(f"no store at {loc!r}. Create it with "
                                 f"`python -m pipeline profiles MODEL --store {loc}`.")
            if exists and self._fs.exists(f"{self._root}/.zgroup"):
                raise StoreError(_v2_message(loc))
            return
        p = Path(loc)
        if not p.exists():
            if self.mode == "r":
                raise StoreError(
                    f"no store at {loc!r}. Create it with `python -m pipeline profiles MODEL --store {loc}`, "
                    "or leave out --store to use the committed store.zarr."
                )
            return
        if not p.is_dir():
            raise StoreError(f"{loc!r} is a file, not a Zarr store (a folder). Choose another --store.")
        if (p / ".zgroup").exists() or (p / ".zarray").exists():
            raise StoreError(_v2_message(loc))
        meta = p / "zarr.json"
        if not meta.exists():
            # an empty folder becomes a store; zarr's temporary files are what a kill before its first write left
            partial = [n for n in os.listdir(p) if n.endswith(".partial")]
            if self.mode == "a" and len(partial) == len(os.listdir(p)):
                for n in partial:
                    with contextlib.suppress(OSError):
                        os.remove(p / n)
                return
            raise StoreError(f"{loc!r} is not a Zarr store (no zarr.json). Point at a store written by "
                             "`python -m pipeline`, or choose a new --store.")
        try:
            node = json.loads(meta.read_text())
        except (OSError, ValueError) as exc:
            raise StoreError(f"{loc!r} is not a readable Zarr store ({exc}).") from exc
        if node.get("zarr_format") != 3 or node.get("node_type") != "group":
            raise StoreError(f"{loc!r} is not a Zarr v3 group store (zarr.json says format "
                             f"{node.get('zarr_format')}, node {node.get('node_type')!r}).")

    def exists(self) -> bool:
        if self.url:
            return self._fs.exists(f"{self._root}/zarr.json")
        return (Path(self.location) / "zarr.json").exists()

    def _root_group(self, mode: str = "r") -> zarr.Group:
        try:
            return zarr.open_group(self.location, mode=mode, use_consolidated=False)
        except FileNotFoundError as exc:
            raise StoreError(f"no store at {self.location!r} ({exc}).") from exc

    def groups(self) -> list[str]:
        """The groups the store holds (empty when there is no store yet)."""
        if not self.exists():
            return []
        with _quiet_listing():
            return sorted(name for name, _ in self._root_group().groups())

    def _group(self, group: str, mode: str = "r") -> zarr.Group:
        """One group, its schema version checked (StoreError with the fix otherwise)."""
        if not self.exists() or group not in self.groups():
            fix = WRITE_COMMANDS.get(group, "python -m pipeline ...")
            raise StoreError(f"the store {self.location!r} has no {group!r} group. Write it with "
                             f"`{fix} --store {self.location}`.")
        g = zarr.open_group(self.location, path=group, mode=mode, use_consolidated=False)
        version = g.attrs.get("schema_version")
        if version != SCHEMA_VERSION:
            if isinstance(version, int) and version < SCHEMA_VERSION:
                fix = (f"Upgrade it in place (nothing is lost) with `python -m pipeline verify --upgrade "
                       f"--store {self.location}`.")
            else:
                fix = "Use the version of the pipeline that wrote it, or recompute the group."
            raise StoreError(f"the {group!r} group of {self.location!r} has schema version {version}; this code "
                             f"reads version {SCHEMA_VERSION}. {fix}")
        return g

    def dataset(self, group: str) -> xr.Dataset:
        """One group as a lazy xarray Dataset, validated against ``pipeline.schema``."""
        self._group(group)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # consolidated fallback on hand-made stores
                ds = xr.open_zarr(self.location, group=group)
        except Exception as exc:  # noqa: BLE001 - zarr raises several types for damaged metadata
            raise StoreError(f"the {group!r} group of {self.location!r} cannot be read ({exc}). Run "
                             f"`python -m pipeline verify --store {self.location}`.") from exc
        bad = problems(group, ds)
        if bad:
            fix = WRITE_COMMANDS.get(group, "python -m pipeline ...")
            raise StoreError(f"the {group!r} group of {self.location!r} does not follow the schema: "
                             f"{'; '.join(bad)}. Recompute it with `{fix} --store {self.location}`.")
        return ds

    # --------------------------------------------------------------------------- locks

    @contextlib.contextmanager
    def _store_lock(self) -> Iterator[None]:
        """The lock every structural change holds (reentrant within one process)."""
        lock = self._file_lock("store")
        with _THREAD_LOCKS.setdefault(lock.lock_file, threading.RLock()):  # the file lock is per process
            try:
                lock.acquire(timeout=LOCK_WAIT_S)
            except Timeout as exc:
                raise StoreError(f"the store {self.location!r} has been locked by another writer for "
                                 f"{LOCK_WAIT_S:.0f} s; is a run stuck?") from exc
            except OSError as exc:
                raise self._os_error(exc, "its lock file", "everything") from exc
            try:
                yield
            finally:
                lock.release()

    def _file_lock(self, name: str) -> FileLock:
        key = str(self._lock_dir / f"{name}.lock")
        lock = _LOCKS.get((os.getpid(), key))  # a forked child makes its own (it does not hold the parent's)
        if lock is None:
            try:
                self._lock_dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise self._os_error(exc, "its lock file", "nothing") from exc
            lock = _LOCKS[os.getpid(), key] = FileLock(key, thread_local=False)
        return lock

    def _model_lock_name(self, name: str) -> str:
        return "model-" + hashlib.sha256(name.encode()).hexdigest()[:16]

    @contextlib.contextmanager
    def writer(self, name: str, wait: bool = False) -> Iterator[None]:
        """The per-model writer lock a run holds while it writes ``name``.

        A second holder (another process) is refused with a StoreError naming the first, or waits for it
        with ``wait=True``. Reentrant within one process.
        """
        lock = self._file_lock(self._model_lock_name(name))
        owner = self._lock_dir / f"{self._model_lock_name(name)}.owner"
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
            raise self._os_error(exc, f"the writer lock of {name!r}", "everything") from exc
        try:
            if lock.lock_counter == 1:
                with contextlib.suppress(OSError):
                    tmp = owner.with_name(f"{owner.name}.{os.getpid()}.tmp")
                    tmp.write_text(f"process {os.getpid()} on {socket.gethostname()}")
                    os.replace(tmp, owner)
            yield
        finally:
            lock.release()

    def _check_not_written_elsewhere(self, name: str) -> None:
        """Refuse to touch ``name`` while another process holds its writer lock."""
        with self.writer(name, wait=False):
            pass

    # --------------------------------------------------------------------------- journal

    def _read(self, rel: str) -> bytes | None:
        try:
            if self.url:
                return self._fs.cat_file(f"{self._aux_root}/{rel}")
            return (self._aux / rel).read_bytes()
        except (FileNotFoundError, KeyError):
            return None

    def _write_atomic(self, rel: str, data: bytes) -> None:
        if self.url:
            self._fs.pipe_file(f"{self._aux_root}/{rel}", data)
            return
        path = self._aux / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    def _delete(self, rel: str) -> None:
        if self.url:
            with contextlib.suppress(FileNotFoundError):
                self._fs.rm_file(f"{self._aux_root}/{rel}")
            return
        with contextlib.suppress(FileNotFoundError):
            os.remove(self._aux / rel)

    def _journal(self) -> dict | None:
        raw = self._read(JOURNAL)
        if raw is None:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return {"op": "unreadable"}

    @contextlib.contextmanager
    def _journalled(self, entry: dict) -> Iterator[None]:
        """Record ``entry`` before a structural change; cleared (after consolidation) once it is done."""
        self._write_atomic(JOURNAL, json.dumps(entry).encode())
        yield
        self._consolidate()
        self._delete(JOURNAL)

    def _recover_if_needed(self) -> None:
        if self._journal() is None and not (self._legacy_leftovers() or self._stale_staging() or self._partials()):
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
            for f in self._partials():  # first: zarr warns about them when it lists a group
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
                self._delete(JOURNAL)
            actions += self._clean_legacy()
            actions += self._clean_staging()
            if actions and entry is None:
                self._consolidate()
        return actions

    def _stale_staging(self) -> bool:
        if self.url:
            return False
        staging = self._aux / STAGING
        return staging.is_dir() and any(staging.iterdir())

    def _clean_staging(self) -> list[str]:
        """Remove groups half written in staging by a killed writer (the old group is intact)."""
        if self.url:
            return []
        staging = self._aux / STAGING
        out = []
        if staging.is_dir():
            for p in staging.iterdir():
                shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
                out.append(f"removed the unfinished {p.name}")
        return out

    def _legacy_leftovers(self) -> list[Path]:
        if self.url or not Path(self.location).is_dir():
            return []
        return [p for p in Path(self.location).iterdir() if p.name.endswith(("__writing__", "__old__"))]

    def _partials(self) -> list[Path]:
        """Temporary files of writes a kill interrupted, where zarr would trip over them (root and groups)."""
        if self.url or not Path(self.location).is_dir():
            return []
        root = Path(self.location)
        dirs = [root] + [p for p in root.iterdir() if p.is_dir()]
        return [f for d in dirs for f in d.glob("*.partial") if f.is_file()]

    def _clean_legacy(self) -> list[str]:
        """Side groups an older writer left (``G.__writing__``, ``G.__old__``): swap in or remove."""
        out = []
        root = Path(self.location)
        for p in self._legacy_leftovers():
            group = p.name.rsplit(".", 1)[0]
            target = root / group
            if not target.exists() and p.name.endswith("__writing__") and (p / "zarr.json").exists():
                os.replace(p, target)  # the old writer had moved the old group away: the new one was complete
                out.append(f"moved {p.name} into place")
            elif not target.exists() and p.name.endswith("__old__"):
                os.replace(p, target)
                out.append(f"restored {p.name}")
            else:
                shutil.rmtree(p, ignore_errors=True)
                out.append(f"removed {p.name}")
        return out

    def _consolidate(self) -> None:
        if self.exists():
            _quiet_consolidate(self.location)

    # --------------------------------------------------------------------------- errors

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

    # --------------------------------------------------------------------------- profiles: reads

    def _profiles(self, mode: str = "r") -> zarr.Group:
        return self._group(PROFILES, mode)

    def models(self) -> list[ModelRow]:
        """Every model of the profiles group, in store order ([] when the store or group is missing)."""
        return self._models()[0]

    def _models(self) -> tuple[list[ModelRow], zarr.Group | None, list[str], dict[str, np.ndarray]]:
        """The rows, and the group, names and per-model columns they were read from."""
        if PROFILES not in self.groups():
            return [], None, [], {}
        self.dataset(PROFILES)  # validated
        g = self._profiles()
        names = _names(g)
        cols = {f: g[f][:] for f in INT_FIELDS + STR_FIELDS + BOOL_FIELDS + ("layer_done", "statistics_checksum")
                if f in g}
        return rows_from_columns(names, cols), g, names, cols

    def names(self) -> list[str]:
        if PROFILES not in self.groups():
            return []
        return [n for n in _names(self._profiles()) if n]

    def row(self, name: str) -> ModelRow:
        for r in self.models():
            if r.name == name:
                return r
        raise StoreError(f"model {name!r} is not in the store {self.location!r} (it has: "
                         f"{', '.join(self.names()) or 'none'}).")

    def layers_done(self, name: str) -> np.ndarray:
        """Boolean (n_layers,) of the layers of ``name`` already written."""
        g = self._profiles()
        i = _index(g, name, self.location)
        return np.asarray(g["layer_done"][i, : int(g["n_layers"][i])], dtype=bool)

    def layers_with_statistics(self, name: str) -> np.ndarray:
        """Boolean (n_layers,) of the layers of ``name`` written with their head statistics (all False in a store
        written before the statistics existed)."""
        g = self._profiles()
        i = _index(g, name, self.location)
        L = int(g["n_layers"][i])
        if "statistics_checksum" not in g:
            return np.zeros(L, dtype=bool)
        sums = g["statistics_checksum"][i, :L]
        done = np.asarray(g["layer_done"][i, :L], dtype=bool)
        return done & np.array([bool(str(x)) for x in sums], dtype=bool)

    def is_complete(self, name: str) -> bool:
        g = self._profiles()
        return bool(g["complete"][_index(g, name, self.location)])

    # --------------------------------------------------------------------------- profiles: writes

    def register(self, row: ModelRow) -> int:
        """Add a model row, or refresh the fields of a stored one; returns its index.

        The row appears whole or not at all. An existing row keeps its values, so an interrupted run
        resumes; a complete row with another shape is refused (use ``reset`` first to replace it).
        """
        bad = row.shape_problems()
        if bad:
            raise StoreError(f"cannot register {row.name!r}: {'; '.join(bad)}.")
        self._check_not_written_elsewhere(row.name)
        with self._writing(f"the registration of {row.name!r}", "every other model"), self._store_lock():
            self._refuse_other_shape(row)
            with self._journalled({"op": "register", "row": _row_dict(row)}):
                return self._apply_register(row)

    def _refuse_other_shape(self, row: ModelRow) -> None:
        if PROFILES not in self.groups():
            return
        g = self._profiles()
        names = _names(g)
        if row.name not in names:
            return
        i = names.index(row.name)
        if bool(g["complete"][i]):
            old = {f: int(g[f][i]) for f in ("n_layers", "n_heads", "d_model", "d_head")}
            new = {f: getattr(row, f) for f in old}
            if old != new:
                raise StoreError(
                    f"the store already holds a complete {row.name!r} with shape {old}, but this checkpoint "
                    f"has {new}. Use --name to store it under another name, or --force to replace it."
                )

    def _apply_register(self, row: ModelRow) -> int:
        """Idempotent: replaying it after a kill at any point gives the same row."""
        width = spectrum_width(row.d_head)
        if PROFILES not in self.groups():
            self._create_profiles(row.n_layers, row.n_heads, width)
        g = self._profiles("a")
        _ensure_statistics(g, width)
        _grow(g, row.n_layers, row.n_heads, width)
        n = _even_rows(g)
        names = _names(g)
        if row.name in names:
            i = names.index(row.name)
        elif "" in names:
            i = names.index("")  # a slot without a name: clear what a killed writer may have put there
            _clear_row(g, i)
        else:
            i = n
            _resize_rows(g, n + 1)  # new rows read as fill values (shrinking deleted their chunks)
        values = _row_dict(row)
        for f in INT_FIELDS:
            g[f][i] = int(values[f])
        for f in STR_FIELDS:
            if f != "damaged":
                g[f][i] = str(values[f])
        g["layernorm_folded"][i] = bool(row.layernorm_folded)
        g["model"][i] = row.name  # last: a row is a model once it has its name
        return i

    def _create_profiles(self, n_layers: int, n_heads: int, width: int) -> None:
        """An empty profiles group, built in staging and moved into place whole."""
        L, H = max(n_layers, 1), max(n_heads, 1)
        if self.url:
            target, path = self.location, PROFILES
        else:
            Path(self.location).mkdir(parents=True, exist_ok=True)
            if not (Path(self.location) / "zarr.json").exists():
                zarr.open_group(self.location, mode="a", zarr_format=3)
            target, path = str(self._aux / STAGING / f"{PROFILES}.{uuid.uuid4().hex}"), ""
        g = zarr.open_group(target, path=path, mode="w", zarr_format=3)

        def arr(name, shape, chunks, dtype, dims, fill):
            return g.create_array(name, shape=shape, chunks=chunks, dtype=dtype, fill_value=fill,
                                  dimension_names=dims)

        arr("model", (0,), (1,), str, ["model"], "")
        arr("layer", (L,), (4096,), "int32", ["layer"], 0)[:] = np.arange(L)
        arr("head", (H,), (4096,), "int32", ["head"], 0)[:] = np.arange(H)
        arr("d", (N_OFFSETS,), (N_OFFSETS,), "int32", ["d"], 0)[:] = np.arange(N_OFFSETS)
        arr("coordinate", (4,), (4,), str, ["coordinate"], "")[:] = np.array(COORDINATES, dtype=object)
        _data_arrays(g, PROFILE_DATA, {"model": 0, "layer": L, "head": H, "d": N_OFFSETS, "coordinate": 4})
        _ensure_statistics(g, width)
        for f in INT_FIELDS:
            arr(f, (0,), (1,), "int32", ["model"], 0)
        for f in STR_FIELDS:
            arr(f, (0,), (1,), str, ["model"], "")
        for f in BOOL_FIELDS:
            arr(f, (0,), (1,), bool, ["model"], False)
        g.attrs.update(PROFILE_ATTRS)
        if not self.url:
            os.replace(target, Path(self.location) / PROFILES)

    def _drop_ghost_rows(self) -> None:
        """Trailing rows without a name (a registration killed by an older writer) are removed."""
        if PROFILES not in self.groups():
            return
        g = self._profiles("a")
        n = _even_rows(g)
        names = _names(g)
        keep = n
        while keep > 0 and not names[keep - 1]:
            keep -= 1
        if keep < n:
            _resize_rows(g, keep)

    def write_layer(self, name: str, layer: int, profile: np.ndarray, norm: np.ndarray,
                    statistics: np.ndarray | None = None, spectrum: np.ndarray | None = None) -> None:
        """Region write of one (model, layer) with its checksums: profile (H, 4) or (H, 129, 4), norm (H,) or
        (H, 129), and the head statistics (H, 17) and spectrum (H, k <= 2 d_head) at d = 0.

        Position-independent layers pass (H, 4) and are repeated at every d. Without ``statistics`` and
        ``spectrum`` the layer's statistics read as not computed. Safe from several processes at once for
        different layers (no lock: no two layers share a chunk).
        """
        g = self._profiles("a")
        i = _index(g, name, self.location)
        H, L = int(g["n_heads"][i]), int(g["n_layers"][i])
        width = spectrum_width(int(g["d_head"][i]))
        if (statistics is None) != (spectrum is None):
            raise StoreError(f"layer {layer} of {name!r}: give both statistics and spectrum, or neither")
        if statistics is not None:
            statistics = np.asarray(statistics, dtype=np.float64)
            spectrum = np.asarray(spectrum, dtype=np.float64)
            if statistics.shape != (H, len(STATISTICS)) or spectrum.ndim != 2 or spectrum.shape[0] != H \
                    or spectrum.shape[1] > width:
                raise StoreError(f"layer {layer} of {name!r}: expected statistics ({H}, {len(STATISTICS)}) and "
                                 f"spectrum ({H}, k) with k <= {width}; got {statistics.shape} and {spectrum.shape}")
            spectrum = np.pad(spectrum, ((0, 0), (0, width - spectrum.shape[1])), constant_values=np.nan)
        if not 0 <= layer < L:
            raise StoreError(f"layer {layer} out of range for {name!r} with {L} layers")
        profile = np.asarray(profile, dtype=np.float64)
        norm = np.asarray(norm, dtype=np.float64)
        if profile.ndim == 2:
            profile = np.broadcast_to(profile[:, None, :], (profile.shape[0], N_OFFSETS, 4))
            norm = np.broadcast_to(norm[:, None], (norm.shape[0], N_OFFSETS))
        if profile.shape != (H, N_OFFSETS, 4) or norm.shape != (H, N_OFFSETS):
            raise StoreError(f"layer {layer} of {name!r}: expected profile ({H}, {N_OFFSETS}, 4) and norm "
                             f"({H}, {N_OFFSETS}); got {profile.shape} and {norm.shape}")
        with self._writing(f"layer {layer} of {name!r}", "the other layers"):
            if statistics is not None and "head_statistics" not in g:  # a store written before the statistics
                with self._store_lock():
                    _ensure_statistics(g, width)
                    self._consolidate()
            # order: values, checksums, then layer_done (a kill before the last leaves the layer to do)
            g["profile"][i, layer, :H] = profile
            g["norm"][i, layer, :H] = norm
            if statistics is not None:
                E = g["spectrum"].shape[-1]
                g["head_statistics"][i, layer, :H] = statistics
                g["spectrum"][i, layer, :H] = np.pad(spectrum, ((0, 0), (0, E - width)), constant_values=np.nan)
            elif "statistics_checksum" in g:
                g["head_statistics"][i, layer] = np.nan
                g["spectrum"][i, layer] = np.nan
            g["layer_checksum"][i, layer] = layer_checksum(profile, norm)
            if "statistics_checksum" in g:
                g["statistics_checksum"][i, layer] = ("" if statistics is None
                                                      else statistics_checksum(statistics, spectrum))
            g["layer_done"][i, layer] = True

    def mark_complete(self, name: str, revision: str | None = None) -> None:
        """Set ``complete`` (and clear ``damaged``) once every layer is written; refuses otherwise."""
        with self._writing(f"the completion of {name!r}", "every layer"), self._store_lock():
            g = self._profiles("a")
            i = _index(g, name, self.location)
            n_layers = int(g["n_layers"][i])
            if n_layers < 1:
                raise StoreError(f"cannot mark {name!r} complete: it has {n_layers} layers.")
            done = np.asarray(g["layer_done"][i, :n_layers], dtype=bool)
            if not done.all():
                missing = np.flatnonzero(~done).tolist()
                raise StoreError(f"cannot mark {name!r} complete: layers {missing} are not written")
            if revision is not None:
                g["revision"][i] = str(revision)
            g["damaged"][i] = ""
            g["complete"][i] = True

    def reset(self, name: str) -> None:
        """Forget the values of a model (for --force): data NaN, no layer done, not complete, not damaged."""
        self._check_not_written_elsewhere(name)
        with self._writing(f"the reset of {name!r}", "every other model"), self._store_lock():
            g = self._profiles("a")
            i = _index(g, name, self.location)
            g["complete"][i] = False  # first: a kill below leaves an incomplete model, resumable
            g["layer_done"][i] = False
            g["profile"][i] = np.nan
            g["norm"][i] = np.nan
            g["layer_checksum"][i] = ""
            _clear_statistics(g, i)
            g["damaged"][i] = ""

    # --------------------------------------------------------------------------- verify

    def verify(self, names: list[str] | None = None, mark: bool = True) -> list[Damage]:
        """Re-read every written layer (and every other group); returns what is damaged.

        A layer that does not decode (garbled chunk) or does not match its checksum (a deleted chunk reads
        as NaN) is damaged. With ``mark`` (the default, needs mode "a"), each damaged layer is cleared (not
        done, values NaN) and its model marked ``damaged`` and not complete, with the command that
        recomputes exactly those layers (the model's command, which resumes). Models marked damaged earlier
        and not repaired yet are listed too (layer None).
        """
        found: list[Damage] = []
        groups = self.groups()
        if PROFILES in groups:
            found += self._verify_profiles(names, mark)
        if names is None:
            for group in groups:
                if group != PROFILES:
                    found += self._verify_group(group)
        return found

    def _verify_profiles(self, names: list[str] | None, mark: bool) -> list[Damage]:
        g = self._profiles()
        try:
            stored = _names(g)
            meta = {f: g[f][:] for f in ("n_layers", "n_heads", "d_head", "command", "source", "damaged")}
            done = np.asarray(g["layer_done"][:], dtype=bool)
            sums = np.asarray(g["layer_checksum"][:])
            stat_sums = np.asarray(g["statistics_checksum"][:]) if "statistics_checksum" in g else None
        except Exception as exc:  # noqa: BLE001 - a garbled per-model chunk
            return [Damage(PROFILES, "", None, f"per-model metadata does not decode ({exc})",
                           f"restore {self.location!r} from a copy (git checkout, backup); the data cannot be "
                           "matched to models without it")]
        wanted = stored if names is None else list(names)
        unknown = [n for n in wanted if n not in stored]
        if unknown:
            raise StoreError(f"not in the store {self.location!r}: {', '.join(unknown)} (it has: "
                             f"{', '.join(n for n in stored if n) or 'none'}).")
        found = []
        for name in wanted:
            if not name:
                continue
            i = stored.index(name)
            L, H = int(meta["n_layers"][i]), int(meta["n_heads"][i])
            command = str(meta["command"][i]) or f"python -m pipeline profiles {meta['source'][i] or name}"
            command = _with_store(command, self.location)
            bad = _layer_problems(g, i, L, H, spectrum_width(int(meta["d_head"][i])), done[i], sums[i],
                                  None if stat_sums is None else stat_sums[i])
            if not bad:
                if str(meta["damaged"][i]):  # found earlier, not repaired yet
                    found.append(Damage(PROFILES, name, None, f"marked damaged: {meta['damaged'][i]}", command))
                continue
            found += [Damage(PROFILES, name, layer, why, command) for layer, why in sorted(bad.items())]
            if mark:
                self._mark_damaged(name, bad, command)
        return found

    def damage_found(self) -> dict[str, str]:
        """Read-only: the models whose written layers no longer match their checksums, not yet marked damaged.

        Model name -> one line: the damaged layers, why (verify's words), and the repair: ``verify`` (which
        clears those layers and marks the model), then the model's own command (which recomputes exactly
        them). Writes nothing, so it works on a read-only store; every reader (``list``, the dashboard)
        folds it into the rows it shows (:meth:`checked_models`).
        """
        return self._damage_found(*self._models())

    def checked_models(self) -> list[ModelRow]:
        """:meth:`models`, with the damage :meth:`damage_found` finds: such a model reads damaged and not complete,
        its ``damaged`` line naming the repair. Writes nothing."""
        read = self._models()
        found = self._damage_found(*read)
        return [replace(r, damaged=found[r.name], complete=False) if r.name in found else r for r in read[0]]

    def _damage_found(self, rows: list[ModelRow], g: zarr.Group | None, names: list[str],
                      cols: dict[str, np.ndarray]) -> dict[str, str]:
        """Only the models with written layers and no damage recorded are read, each in one block per variable."""
        todo = [r for r in rows if r.layers_done and not r.damaged]
        if not todo:
            return {}
        verify = _with_store("python -m pipeline verify", self.location)
        rows_at = [names.index(r.name) for r in todo]
        try:
            sums = np.asarray(g["layer_checksum"].get_orthogonal_selection((rows_at, slice(None))))
        except Exception as exc:  # noqa: BLE001 - a garbled checksum chunk
            return {r.name: f"its layer checksums do not decode ({type(exc).__name__}); find the damage with "
                    f"`{verify}`" for r in todo}
        stat_sums = cols.get("statistics_checksum")
        out = {}
        for k, (i, r) in enumerate(zip(rows_at, todo, strict=True)):
            bad = _layer_problems(g, i, r.n_layers, r.n_heads, spectrum_width(r.d_head),
                                  np.asarray(cols["layer_done"][i], dtype=bool), sums[k],
                                  None if stat_sums is None else stat_sums[i])
            if bad:
                out[r.name] = _damage_line(bad, f"{verify} && {_with_store(r.fix_command, self.location)}")
        return out

    def _mark_damaged(self, name: str, bad: dict[int, str], command: str) -> None:
        layers = sorted(bad)
        line = _damage_line(bad, command)
        with self._writing(f"the damage record of {name!r}", "the undamaged layers"), self._store_lock():
            g = self._profiles("a")
            i = _index(g, name, self.location)
            g["complete"][i] = False
            g["damaged"][i] = line
            for layer in layers:
                g["layer_done"][i, layer] = False
                g["layer_checksum"][i, layer] = ""
                g["profile"][i, layer] = np.nan  # whole chunks: replaces a garbled chunk without reading it
                g["norm"][i, layer] = np.nan
                _clear_statistics(g, i, layer)

    def _verify_group(self, group: str) -> list[Damage]:
        fix = _with_store(WRITE_COMMANDS.get(group, "python -m pipeline ..."), self.location)
        try:
            g = self._group(group)
        except StoreError as exc:
            return [Damage(group, "", None, str(exc), fix)]
        out = []
        for name, arr in g.arrays():
            try:
                arr[...]
            except Exception as exc:  # noqa: BLE001 - codec errors of a garbled chunk
                out.append(Damage(group, "", None, f"variable {name!r} does not decode ({type(exc).__name__})", fix))
        return out

    # --------------------------------------------------------------------------- whole groups

    def replace_group(self, group: str, ds: xr.Dataset, attrs: Mapping | None = None) -> None:
        """Replace one group (e.g. ``orbits``) with ``ds``, atomically on local stores; other groups untouched.

        Written whole in staging (beside the store), then exchanged with the stored group in one step
        (Linux ``renameat2(RENAME_EXCHANGE)``), so every reader, plain xarray included, sees the old group or
        the new one, never none. The root's consolidated metadata is dropped before the exchange and written
        again after it, so no reader takes the old group's metadata over the new arrays. Where the exchange
        is not available (another OS, a filesystem without it), the old group is moved aside and the new one
        moved in: a reader between the two renames finds no group, and a kill there is finished by the next
        open (the journal). On object stores (URLs) the group is rewritten in place.
        """
        if group == PROFILES:
            raise StoreError("the profiles group is written layer by layer; use register/write_layer")
        ds = _vlen_strings(ds)
        ds.attrs = dict(ds.attrs) | dict(attrs or {}) | {"schema_version": SCHEMA_VERSION}
        for v in ds.variables.values():
            v.encoding = {}
        bad = problems(group, ds)
        if bad:
            raise StoreError(f"refusing to write the {group!r} group: {'; '.join(bad)}.")
        with self._writing(f"the {group!r} group", f"the old {group!r} group and every other group"):
            if self.url:
                with self._store_lock():
                    ds.to_zarr(self.location, group=group, mode="w", consolidated=False, zarr_format=3)
                    self._consolidate()
                return
            root = Path(self.location)
            if not (root / "zarr.json").exists():
                root.mkdir(parents=True, exist_ok=True)
                zarr.open_group(self.location, mode="a", zarr_format=3)
            token = uuid.uuid4().hex
            new, old = f"{STAGING}/{group}.{token}", f"{STAGING}/{group}.old.{token}"
            with self._store_lock():  # held while staging too: recovery removes staging only of dead writers
                try:
                    ds.to_zarr(str(self._aux / new), mode="w", consolidated=False, zarr_format=3)
                    ino = os.stat(self._aux / new).st_ino  # tells the new group from the old after an exchange
                    self._write_atomic(JOURNAL, json.dumps({"op": "replace", "group": group, "new": new,
                                                            "old": old, "ino": ino}).encode())
                except BaseException:
                    shutil.rmtree(self._aux / new, ignore_errors=True)
                    raise
                self._apply_swap(group, new, old, ino)  # from here on a failure is finished by the next open
                self._consolidate()
                self._delete(JOURNAL)

    def _apply_swap(self, group: str, new: str, old: str, ino: int | None = None) -> None:
        """Idempotent: put the staged group ``new`` in place of ``group`` and drop the old one.

        ``ino`` is the staged group's inode: after an exchange the staging path holds the old group (another
        inode), which is then only removed. Without it (a journal of an older writer) the staging path is
        the new group whenever it exists.
        """
        root, staged = Path(self.location), self._aux / new
        if staged.exists() and (ino is None or os.stat(staged).st_ino == ino):
            self._drop_consolidated()  # else a reader would take the old group's metadata over the new arrays
            # one step where possible: the group becomes the new one, the staging path holds the old one
            if not ((root / group).exists() and exchange(staged, root / group)):
                if (root / group).exists():
                    os.replace(root / group, self._aux / old)
                os.replace(staged, root / group)
        if staged.exists():
            shutil.rmtree(staged, ignore_errors=True)  # the old group, exchanged out
        shutil.rmtree(self._aux / old, ignore_errors=True)

    def _drop_consolidated(self) -> None:
        """Remove the root's consolidated metadata (one atomic replace of its zarr.json) until the next
        consolidation: meanwhile every reader, plain xarray included, reads each group's own metadata, which
        travels with the group's folder."""
        meta = Path(self.location) / "zarr.json"
        node = json.loads(meta.read_text())
        if node.pop("consolidated_metadata", None) is None:
            return
        tmp = meta.with_name(f"zarr.json.{uuid.uuid4().hex}.partial")  # a leftover is removed by the next open
        tmp.write_text(json.dumps(node, indent=2))
        os.replace(tmp, meta)

    # --------------------------------------------------------------------------- upgrade

    def schema_versions(self) -> dict[str, object]:
        """The schema version of every group."""
        if not self.exists():
            return {}
        with _quiet_listing():
            return {name: g.attrs.get("schema_version") for name, g in self._root_group().groups()}

    def upgrade(self) -> list[str]:
        """Bring every group to SCHEMA_VERSION in place, keeping all data; returns what was done."""
        versions = self.schema_versions()
        todo = {g: v for g, v in versions.items() if v != SCHEMA_VERSION}
        if not todo:
            return []
        newer = {g: v for g, v in todo.items() if not isinstance(v, int) or v > SCHEMA_VERSION}
        if newer:
            raise StoreError(f"groups {newer} of {self.location!r} are not from an older version of this "
                             f"schema (this code writes version {SCHEMA_VERSION}); nothing changed.")
        with self._writing("the schema upgrade", "every group"), self._store_lock():
            with self._journalled({"op": "upgrade"}):
                self._apply_upgrade()
        return [f"{g}: schema version {v} -> {SCHEMA_VERSION}" for g, v in sorted(todo.items())]

    def _apply_upgrade(self) -> None:
        """Idempotent. Version 1 -> 2: the provenance and damage fields, and per-layer checksums of the
        layers already written (computed from the stored values)."""
        root = zarr.open_group(self.location, mode="a", use_consolidated=False)
        with _quiet_listing():
            groups = list(root.groups())
        for name, g in groups:
            if name == PROFILES and g.attrs.get("schema_version") != SCHEMA_VERSION:
                n = _even_rows(g)
                L = g["layer"].shape[0]
                for f in STR_FIELDS:
                    if f not in g:
                        g.create_array(f, shape=(n,), chunks=(1,), dtype=str, fill_value="", dimension_names=["model"])
                if "layer_checksum" not in g:
                    g.create_array("layer_checksum", shape=(n, L), chunks=(1, 1), dtype=str, fill_value="",
                                   dimension_names=["model", "layer"])
                sums = g["layer_checksum"]
                done = np.asarray(g["layer_done"][:], dtype=bool)
                for i in range(n):
                    H = int(g["n_heads"][i])
                    for layer in np.flatnonzero(done[i]):
                        if not str(sums[i, layer]):
                            sums[i, layer] = layer_checksum(g["profile"][i, layer, :H], g["norm"][i, layer, :H])
                g.attrs.update(PROFILE_ATTRS)
            g.attrs["schema_version"] = SCHEMA_VERSION


_LOCKS: dict[tuple[int, str], FileLock] = {}  # one FileLock per process and lock file: holding it is reentrant
_THREAD_LOCKS: dict[str, threading.RLock] = {}


def _v2_message(location: str) -> str:
    return (f"{location!r} is a Zarr v2 store; this pipeline reads and writes Zarr v3 only. Write a new store "
            f"(--store NEW.zarr) or recompute this one with `python -m pipeline profiles ... --store NEW.zarr`.")


def _with_store(command: str, location: str) -> str:
    if "--store" in command or location == default_store_path():
        return command
    return f"{command} --store {location}"


# ------------------------------------------------------------------------------------ zarr helpers


def _names(g: zarr.Group) -> list[str]:
    return [str(x) for x in g["model"][:]] if g["model"].shape[0] else []


def _index(g: zarr.Group, name: str, location: str = "") -> int:
    names = _names(g)
    if not name or name not in names:
        raise StoreError(f"model {name!r} is not in the store {location!r} (it has: "
                         f"{', '.join(n for n in names if n) or 'none'}).")
    return names.index(name)


def _model_arrays(g: zarr.Group) -> list[zarr.Array]:
    with _quiet_listing():
        arrays = [a for _, a in g.arrays()]
    return [a for a in arrays if a.metadata.dimension_names and a.metadata.dimension_names[0] == "model"]


@contextlib.contextmanager
def _quiet_listing() -> Iterator[None]:
    """A folder a killed writer left without its zarr.json is not a member; zarr's warning about it is noise."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not recognized as a component of a Zarr hierarchy")
        yield


def _resize_rows(g: zarr.Group, n: int) -> None:
    """Every model-dimension array to ``n`` rows; the ``model`` names last when growing, first when shrinking."""
    arrays = _model_arrays(g)
    names = [a for a in arrays if a.basename == "model"]
    others = [a for a in arrays if a.basename != "model"]
    for a in (others + names) if n >= g["model"].shape[0] else (names + others):
        if a.shape[0] != n:
            a.resize((n,) + a.shape[1:])


def _even_rows(g: zarr.Group) -> int:
    """Make every model-dimension array as long as ``model`` (a killed resize may leave them uneven)."""
    n = g["model"].shape[0]
    for a in _model_arrays(g):
        if a.shape[0] != n:
            a.resize((n,) + a.shape[1:])
    return n


def _clear_row(g: zarr.Group, i: int) -> None:
    """A fresh row's values: fill everywhere (whole chunks, so nothing is read)."""
    for a in _model_arrays(g):
        a[i] = a.metadata.fill_value


def _data_arrays(g: zarr.Group, variables: dict, sizes: dict[str, int]) -> None:
    """Create the data variables ``variables`` (schema: name -> (dims, dtype, fill)) at ``sizes``."""
    for name, (dims, dtype, fill) in variables.items():
        g.create_array(name, shape=tuple(sizes[d] for d in dims), chunks=profile_chunks(dims, sizes),
                       dtype=str if dtype == "str" else dtype, fill_value=fill, dimension_names=list(dims))


def _ensure_statistics(g: zarr.Group, width: int) -> None:
    """Idempotent: the statistics variables and their coordinates (``statistic``, ``eigen`` of ``width``), empty,
    in a profiles group that lacks them (a store written before them; its models read as not computed)."""
    if "statistic" not in g:
        g.create_array("statistic", shape=(len(STATISTICS),), chunks=(len(STATISTICS),), dtype=str, fill_value="",
                       dimension_names=["statistic"])[:] = np.array(STATISTICS, dtype=object)
    if "eigen" not in g:
        g.create_array("eigen", shape=(width,), chunks=(4096,), dtype="int32", fill_value=0,
                       dimension_names=["eigen"])[:] = np.arange(width)
    sizes = {"model": g["model"].shape[0], "layer": g["layer"].shape[0], "head": g["head"].shape[0],
             "statistic": len(STATISTICS), "eigen": g["eigen"].shape[0]}
    missing = {k: v for k, v in STATISTICS_DATA.items() if k not in g}
    if missing:
        _data_arrays(g, missing, sizes)
        g.attrs.update(PROFILE_ATTRS)


def _clear_statistics(g: zarr.Group, i: int, layer: int | None = None) -> None:
    """Forget the statistics of row ``i`` (one layer, or all): NaN values, no checksum (whole chunks)."""
    if "statistics_checksum" not in g:
        return
    where = (i,) if layer is None else (i, layer)
    g["head_statistics"][where] = np.nan
    g["spectrum"][where] = np.nan
    g["statistics_checksum"][where] = ""


def _damage_line(bad: dict[int, str], command: str) -> str:
    """The ``damaged`` line of a model: its damaged layers, why, and the command that repairs them."""
    return f"layers {sorted(bad)} damaged ({'; '.join(sorted(set(bad.values())))}); recompute them with `{command}`"


def _read(arr: zarr.Array, where: tuple, orthogonal: bool = False) -> tuple[np.ndarray | None, str]:
    """The values at ``where``, or (None, the error's type name) when a chunk there does not decode."""
    try:
        return np.asarray(arr.get_orthogonal_selection(where) if orthogonal else arr[where]), ""
    except Exception as exc:  # noqa: BLE001 - codec errors of a garbled chunk
        return None, type(exc).__name__


def _layer_problems(g: zarr.Group, i: int, L: int, H: int, width: int, done: np.ndarray, sums: np.ndarray,
                    stat_sums: np.ndarray | None) -> dict[int, str]:
    """Why each written layer of row ``i`` does not match its checksums (layer -> reason; {} when all do).

    The model's values are read in one block per variable (its chunks are fetched together); when a block
    does not decode, its layers are read one by one to find the garbled ones.
    """
    layers = [int(x) for x in np.flatnonzero(done[:L])]
    stats = stat_sums is not None and "head_statistics" in g and any(str(stat_sums[x]) for x in layers)
    heads = (slice(0, H),)
    where = {"profile": heads, "norm": heads, "head_statistics": heads, "spectrum": heads + (slice(0, width),)}
    blocks = {}
    for var in ("profile", "norm") + (("head_statistics", "spectrum") if stats else ()):
        if layers:
            blocks[var] = _read(g[var], (i, slice(0, L)) + where[var])[0]

    def values(var: str, layer: int) -> tuple[np.ndarray | None, str]:
        block = blocks.get(var)
        return (block[layer], "") if block is not None else _read(g[var], (i, layer) + where[var])

    bad: dict[int, str] = {}
    for layer in layers:
        (profile, e1), (norm, e2) = values("profile", layer), values("norm", layer)
        want = str(sums[layer])
        if e1 or e2:
            bad[layer] = f"its chunk does not decode ({e1 or e2})"
        elif not want:
            bad[layer] = "it was written without a checksum"
        elif layer_checksum(profile, norm) != want:
            if np.isnan(profile).all() or np.isnan(norm).all():
                bad[layer] = "its chunk is missing (the values read as NaN)"
            else:
                bad[layer] = "its values do not match the checksum written with them"
        elif stats and str(stat_sums[layer]):
            (st, e1), (spectrum, e2) = values("head_statistics", layer), values("spectrum", layer)
            if e1 or e2:
                bad[layer] = f"its statistics chunk does not decode ({e1 or e2})"
            elif statistics_checksum(st, spectrum) != str(stat_sums[layer]):
                bad[layer] = ("its statistics chunk is missing (the values read as NaN)"
                              if np.isnan(st).all() or np.isnan(spectrum).all()
                              else "its statistics do not match the checksum written with them")
    return bad


def _grow(g: zarr.Group, n_layers: int, n_heads: int, width: int = 0) -> None:
    """Grow the layer/head (and eigen) dimensions in place; resize keeps every chunk already written."""
    L0, H0 = g["layer"].shape[0], g["head"].shape[0]
    L, H = max(L0, n_layers), max(H0, n_heads)
    E = max(g["eigen"].shape[0], width) if "eigen" in g else 0
    variables = PROFILE_DATA | {k: v for k, v in STATISTICS_DATA.items() if k in g}
    for name, (dims, _dtype, _fill) in variables.items():
        a = g[name]
        new = {"layer": L, "head": H, "eigen": E}
        shape = tuple(new.get(d, s) for d, s in zip(dims, a.shape, strict=True))
        if shape != a.shape:
            a.resize(shape)
    if "eigen" in g and (g["eigen"].shape[0] != E or not np.array_equal(g["eigen"][:], np.arange(E))):
        g["eigen"].resize((E,))
        g["eigen"][:] = np.arange(E)
    if g["layer"].shape[0] != L or not np.array_equal(g["layer"][:], np.arange(L)):
        g["layer"].resize((L,))
        g["layer"][:] = np.arange(L)
    if g["head"].shape[0] != H or not np.array_equal(g["head"][:], np.arange(H)):
        g["head"].resize((H,))
        g["head"][:] = np.arange(H)


def _row_dict(row: ModelRow) -> dict:
    d = asdict(row)
    return {k: d[k] for k in ROW_FIELDS}


def _vlen_strings(ds: xr.Dataset) -> xr.Dataset:
    """Numpy fixed-width strings (<U) become variable-length strings in Zarr v3."""
    out = ds.copy()
    for name, var in list(out.variables.items()):
        if var.dtype.kind == "U":
            out[name] = var.astype(object)
    return out


# ------------------------------------------------------------------------------ module-level wrappers
# Thin calls into Store for code that passes a path around.


def open_group_dataset(path, group: str) -> xr.Dataset:
    """Open one group read-only as a validated xarray Dataset (StoreError says what to do otherwise)."""
    return Store.open(path, mode="r").dataset(group)


def open_profiles(path) -> xr.Dataset:
    return open_group_dataset(path, PROFILES)


def open_orbits(path) -> xr.Dataset:
    return open_group_dataset(path, ORBITS)


def write_group(path, group: str, ds: xr.Dataset, attrs: Mapping | None = None) -> None:
    Store.open(path).replace_group(group, ds, attrs)


def register_model(path, info: ModelRow) -> int:
    return Store.open(path).register(info)


def model_info(path, name: str) -> ModelRow:
    return Store.open(path, mode="r").row(name)


def layers_done(path, name: str) -> np.ndarray:
    return Store.open(path, mode="r").layers_done(name)


def is_complete(path, name: str) -> bool:
    return Store.open(path, mode="r").is_complete(name)


def write_layer(path, name: str, layer: int, profile: np.ndarray, norm: np.ndarray,
                statistics: np.ndarray | None = None, spectrum: np.ndarray | None = None) -> None:
    Store.open(path).write_layer(name, layer, profile, norm, statistics, spectrum)


def mark_complete(path, name: str, revision: str | None = None) -> None:
    Store.open(path).mark_complete(name, revision)


def reset_model(path, name: str) -> None:
    Store.open(path).reset(name)


def model_names(path) -> list[str]:
    """Names of the stored models; [] when there is no store or no profiles group yet."""
    return Store.open(path, mode="r").names() if Store(str(path), "r").exists() else []
