"""Fault injection: kills, concurrent writers, damaged data and bad inputs.

Each test asserts what is kept and what the user is told. Helpers shared by the fault tests:

- :func:`run_killed_at` runs a function in a forked child that dies (``os._exit``, as SIGKILL would leave
  it: no cleanup, no ``finally``) just before its n-th filesystem change;
- :func:`kill_points` spreads such kills over every filesystem change the function makes;
- :func:`tree_digest` fingerprints a folder, to assert a refused command left it byte-identical.

The figures the fault tests print in pytest's summary are :mod:`tests.faults.figures`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

# the calls every file write, rename and removal goes through (zarr writes a temporary file, then renames it)
FS_CHANGES = ("replace", "rename", "unlink", "remove", "mkdir", "rmdir")
KILLED = 137
CHILD_FAILED = 3


def _would_change(name: str, args: tuple) -> bool:
    """Whether the call ``name(*args)`` changes the filesystem (a mkdir of a folder that exists or whose parent
    is missing, a removal of a path that is gone, is not a change). zarr writes chunks from several threads, each
    making its chunk's folders with ``exist_ok``: counting only real changes keeps a run's count the same however
    they race."""
    if not args or not isinstance(args[0], (str, bytes, os.PathLike)):
        return True
    target = args[0]
    if name == "mkdir":  # pathlib's mkdir(parents=True) tries the folder itself first, failing without its parent
        return not os.path.lexists(target) and os.path.isdir(os.path.dirname(os.path.abspath(target)))
    if name == "rmdir":
        return os.path.isdir(target)
    return os.path.lexists(target)  # replace, rename, unlink, remove, rmtree: their source must exist


def _hook(n: int | None, counted: list[int]) -> None:
    """Count filesystem changes; with ``n``, die just before the n-th. A change and the check that it is one
    hold one lock, so the count does not depend on how threads interleave (rmtree's own removals nest)."""
    guard = threading.RLock()

    def wrap(fn, name):
        def inner(*args, **kwargs):
            with guard:
                if _would_change(name, args):
                    counted[0] += 1
                    if n is not None and counted[0] >= n:
                        os._exit(KILLED)
                return fn(*args, **kwargs)

        return inner

    for name in FS_CHANGES:
        setattr(os, name, wrap(getattr(os, name), name))
    shutil.rmtree = wrap(shutil.rmtree, "rmtree")


def _in_child(fn: Callable[[], object], n: int | None) -> tuple[int, int]:
    """Run ``fn`` in a forked child (killed at its n-th change); (exit status, changes made)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read)
        counted, code = [0], 0
        try:
            _hook(n, counted)
            fn()
        except BaseException:  # noqa: BLE001 - reported through the exit status
            traceback.print_exc()
            code = CHILD_FAILED
        os.write(write, str(counted[0]).encode())
        os._exit(code)
    os.close(write)
    with os.fdopen(read) as f:
        out = f.read()
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == CHILD_FAILED:
        raise AssertionError(f"the operation raised in the child (kill point {n}); see its traceback above")
    assert code in (0, KILLED), f"child exit status {code}"
    return code, int(out or 0)


def run_killed_at(n: int, fn: Callable[[], object]) -> bool:
    """Run ``fn()`` in a forked child killed just before its n-th filesystem change; True if it finished."""
    return _in_child(fn, n)[0] == 0


def kill_points(fn: Callable[[], object], prepare: Callable[[], None], stride: int | None = None) -> Iterator[int]:
    """For kill points n spread over the whole of ``fn``: ``prepare()`` a fresh store, run ``fn`` killed just
    before its n-th filesystem change, yield n. At the end the store is prepared again and ``fn`` run to the
    end (in a child), so the caller can check the finished state too.

    ``fn`` makes N changes (counted in a first run); every ``stride``-th n = 1..N is tried (and the last), by
    default HEADGEOMETRY_KILL_STRIDE's (a knob for a run of the fault tests: ``HEADGEOMETRY_KILL_STRIDE=1`` tries
    every change), else about 8 points from the first to the last change.
    """
    prepare()
    _, total = _in_child(fn, None)
    assert total > 0, "the operation changed nothing on disk"
    stride = stride or int(os.environ.get("HEADGEOMETRY_KILL_STRIDE", 0)) or max(1, total // 8)
    for n in sorted(set(range(1, total + 1, stride)) | {total}):
        prepare()
        # the count is the same in every run (see _hook), so each kill point up to the total is reached
        assert not run_killed_at(n, fn), f"the operation finished before its change {n} of {total}"
        yield n
    prepare()
    assert _in_child(fn, None) == (0, total), "a run to the end made a different number of changes"


def tree_digest(root: Path) -> str:
    """sha256 over every file's relative path and bytes under ``root`` (missing root: a fixed value)."""
    h = hashlib.sha256()
    root = Path(root)
    if not root.exists():
        return "absent"
    for p in sorted(root.rglob("*")):
        h.update(str(p.relative_to(root)).encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()
