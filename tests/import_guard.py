"""An import guard: a Python process that can import only the modules an install of headgeometry declares.

The parent side (:func:`declared_modules`, :func:`guarded_env`, :func:`refusals`) computes the declared set and
prepares a process; the child side (:func:`install`) runs in that process, from the ``sitecustomize`` that
:func:`guarded_env` writes onto its ``PYTHONPATH``, so every Python process the command starts (``python -m
dashboard`` re-executing ``panel serve``, dask's worker processes) is guarded too.

The declared set of an install is the standard library, the project's own packages and the top-level modules of
every distribution in the transitive closure of headgeometry's requirements for that install, read from the
installed distribution's metadata (so it follows pyproject.toml once the install is refreshed), each requirement's
marker evaluated for this interpreter and the extras asked of its distribution, and mapped to import names through
the distributions' installed files (``importlib.metadata.packages_distributions``). Nothing else counts: not pip or
setuptools, which some virtual environments hold without being asked (a requirement has to ask for them).

The guard replaces ``sys.meta_path`` by one finder that holds the original finders: a module whose top-level name
is outside the declared set is not found (``import`` raises ModuleNotFoundError, ``importlib.util.find_spec``
returns None), exactly as where the package is not installed, so a library's optional import (``try: import
pyarrow except ImportError``) takes the path it takes on a real install of the declared packages. Every refusal is
appended to a report file, one JSON line (the top-level module, the name asked for, the importer's file, line and
function, whether it was an import or a ``find_spec`` probe, the entry point, the process), for the test to judge:
a refusal may be caught (the served app draws a failed view as a line on the page and goes on).

What the guard does not see: the modules imported before it (the interpreter's start, ``.pth`` files), which stay
importable, and a finder a library adds to ``sys.meta_path`` later, which is asked after the guard. Only imports
are guarded; the distributions' metadata stays visible (``python -m pipeline real`` reads the installed file list
of the ``real`` extra's packages and imports nothing from them).

This module is loaded into the guarded process before the guard exists: at its top it imports only the standard
library, and only what the guard itself needs while it runs.
"""

from __future__ import annotations

import functools
import json
import os
import sys

PROJECT = "headgeometry"
PROJECT_PACKAGES = ("pipeline", "dashboard")
ALLOWED_ENV = "IMPORT_GUARD_ALLOWED"  # a JSON file: the list of top-level module names a process may import
REPORT_ENV = "IMPORT_GUARD_REPORT"  # the file every refusal is appended to, one JSON object a line
ENTRY_ENV = "IMPORT_GUARD_ENTRY"  # the entry point the process runs, for the report

# the bootstrap's frames between an import (or a find_spec probe) and the finder
_IMPORT_MACHINERY = ("<frozen importlib", os.path.join(os.path.dirname(os.__file__), "importlib", ""))


# ---- the parent: what an install declares, and a process guarded by it


def requirement_closure(extras: tuple[str, ...] = ()) -> dict[str, frozenset[str]]:
    """{canonical distribution name: the extras asked of it} for headgeometry (with ``extras``) and every installed
    distribution its requirements reach, each requirement's marker evaluated for this interpreter with each extra
    asked of the distribution that states it (a requirement without an extra in its marker holds for every one). A
    required distribution that is not installed is left out (nothing of it can be imported here either):
    :func:`missing` names them."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    asked: dict[str, frozenset[str]] = {}
    todo = [(PROJECT, frozenset(extras))]
    while todo:
        name, wanted = todo.pop()
        key = canonicalize_name(name)
        if key in asked and wanted <= asked[key]:
            continue
        try:
            dist = metadata.distribution(key)
        except metadata.PackageNotFoundError:
            continue
        asked[key] = asked.get(key, frozenset()) | wanted
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in {"", *asked[key]}):
                todo.append((req.name, frozenset(req.extras)))
    return asked


def missing(extras: tuple[str, ...] = ()) -> list[str]:
    """headgeometry's own requirements for an install with ``extras`` that are not installed here."""
    from importlib import metadata

    from packaging.requirements import Requirement

    out = []
    for line in metadata.distribution(PROJECT).requires or []:
        req = Requirement(line)
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in {"", *extras}):
            try:
                metadata.distribution(req.name)
            except metadata.PackageNotFoundError:
                out.append(req.name)
    return out


def standard_library() -> frozenset[str]:
    """The standard library's top-level modules: ``sys.stdlib_module_names`` and the modules of the interpreter's
    own library folders, which hold a few that list leaves out (``_sysconfigdata_*``, which ``sysconfig`` imports by
    a name made for the platform)."""
    import pkgutil
    import sysconfig

    folders = {sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib")}
    folders |= {os.path.join(f, "lib-dynload") for f in folders}
    return frozenset(sys.stdlib_module_names) | {m.name for m in pkgutil.iter_modules(sorted(folders))}


def declared_modules(extras: tuple[str, ...] = ()) -> frozenset[str]:
    """The top-level module names an install of headgeometry with ``extras`` may import: the standard library
    (:func:`standard_library`), the project's packages and the import names of every distribution in
    :func:`requirement_closure`."""
    from packaging.utils import canonicalize_name

    dists = set(requirement_closure(extras))
    tops = {top for top, names in _packages_distributions().items()
            if any(canonicalize_name(n) in dists for n in names)}
    return standard_library() | frozenset(PROJECT_PACKAGES) | frozenset(tops)


@functools.cache
def _packages_distributions() -> dict[str, list[str]]:
    """``importlib.metadata.packages_distributions()``, read once (it reads every installed distribution's files)."""
    from importlib import metadata

    return metadata.packages_distributions()


SITECUSTOMIZE = """\
import importlib.util as _util
import sys as _sys

_spec = _util.spec_from_file_location("_import_guard", {path!r})
_guard = _util.module_from_spec(_spec)
_sys.modules["_import_guard"] = _guard
_spec.loader.exec_module(_guard)
_guard.install_from_env()
"""


def guarded_env(folder, allowed, entry: str, env: dict | None = None) -> tuple[dict, str]:
    """(the environment of a process guarded to the modules ``allowed``, the path of its report file): the guard's
    ``sitecustomize`` and the allowed list are written into ``folder``, which goes first on ``PYTHONPATH`` (a
    ``sitecustomize`` of the interpreter's own is not run then: this project's environments have none).
    ``entry`` names the entry point in each refusal; ``env``: the environment to start from (default
    ``os.environ``)."""
    folder = os.fspath(folder)
    site = os.path.join(folder, "guard-site")
    os.makedirs(site, exist_ok=True)
    with open(os.path.join(site, "sitecustomize.py"), "w") as fh:
        fh.write(SITECUSTOMIZE.format(path=os.path.abspath(__file__)))
    allowed_file, report = os.path.join(folder, "allowed.json"), os.path.join(folder, "refusals.jsonl")
    with open(allowed_file, "w") as fh:
        json.dump(sorted(allowed), fh)
    open(report, "w").close()
    out = dict(os.environ if env is None else env)
    out["PYTHONPATH"] = os.pathsep.join(p for p in (site, out.get("PYTHONPATH")) if p)
    out.update({ALLOWED_ENV: allowed_file, REPORT_ENV: report, ENTRY_ENV: entry})
    return out, report


def refusals(report: str) -> list[dict]:
    """The refusals in the report file ``report``, each once (a module asked for again is refused again)."""
    seen: dict[tuple, dict] = {}
    with open(report) as fh:
        for line in fh:
            r = json.loads(line)
            seen.setdefault((r["name"], r["file"], r["line"], r["kind"]), r)
    return list(seen.values())


# ---- the child: the guard


class ImportGuard:
    """The one finder of ``sys.meta_path``: it finds nothing outside ``allowed`` (and records that it refused) and
    asks the original ``finders``, in their order, for everything else."""

    def __init__(self, allowed: frozenset[str], finders: list, report: str, entry: str):
        self.allowed, self.finders, self.report, self.entry = allowed, finders, report, entry

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] not in self.allowed:
            self._record(name)
            return None
        for finder in self.finders:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                return spec
        return None

    def find_distributions(self, *args, **kwargs):
        """The original finders' distributions (importlib.metadata asks every finder of sys.meta_path)."""
        for finder in self.finders:
            find = getattr(finder, "find_distributions", None)
            if find is not None:
                yield from find(*args, **kwargs)

    def invalidate_caches(self) -> None:
        for finder in self.finders:
            if hasattr(finder, "invalidate_caches"):
                finder.invalidate_caches()

    def _record(self, name: str) -> None:
        frame, kind = sys._getframe(2), "probe"
        while frame is not None and (frame.f_code.co_filename.startswith(_IMPORT_MACHINERY)
                                     or frame.f_code.co_filename == __file__):
            if frame.f_code.co_name == "_find_and_load_unlocked":
                kind = "import"
            frame = frame.f_back
        where = ({"file": frame.f_code.co_filename, "line": frame.f_lineno, "function": frame.f_code.co_name}
                 if frame is not None else {"file": "", "line": 0, "function": ""})
        line = json.dumps({"module": name.partition(".")[0], "name": name, **where, "kind": kind,
                           "entry": self.entry, "pid": os.getpid()})
        with open(self.report, "a") as fh:
            fh.write(line + "\n")


def install(allowed, report: str, entry: str) -> ImportGuard:
    """Guard this process: from now on only the top-level modules ``allowed`` (and those already imported) can be
    imported; refusals are appended to ``report``."""
    loaded = {name.partition(".")[0] for name in sys.modules}
    guard = ImportGuard(frozenset(allowed) | frozenset(loaded), list(sys.meta_path), report, entry)
    sys.meta_path[:] = [guard]
    return guard


def install_from_env() -> None:
    """:func:`install` as :func:`guarded_env` set it up (the guarded process's ``sitecustomize``)."""
    with open(os.environ[ALLOWED_ENV]) as fh:
        allowed = json.load(fh)
    install(allowed, os.environ[REPORT_ENV], os.environ.get(ENTRY_ENV, " ".join(sys.argv)))
