"""Production code reads no environment variable that only tests set.

Every read of the environment in ``pipeline/`` and ``dashboard/`` (``os.environ.get``, ``os.environ[...]``,
``os.getenv``, ``... in os.environ``) is found with ``ast`` (nothing is imported), its variable's name resolved
(a literal, a module-level string constant, or a parameter to which every call in the module passes one of those),
and each variable must be documented for users in README.md or be one of ``NOT_IN_README``, each with its
reason. A switch that only tests or benchmarks set belongs in the test (a monkeypatch) or in a seam that
production needs anyway, not in the environment.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pipeline", "dashboard")
README = ROOT / "README.md"

# Read by production code, not documented in README.md: variable -> why it is read.
NOT_IN_README = {
    "HF_ENDPOINT": "the Hugging Face Hub's own variable (documented by huggingface_hub); "
                   "pipeline/sources/hub_env.py reads it at call time, as huggingface_hub reads it at import",
    "HF_HUB_OFFLINE": "the Hugging Face Hub's own variable, read at call time (pipeline/sources/hub_env.py)",
    "HF_HUB_CACHE": "the Hugging Face Hub's own variable, read at call time (pipeline/sources/hub_env.py)",
    "HF_HOME": "the Hugging Face Hub's own variable, read at call time (pipeline/sources/hub_env.py)",
    "HF_TOKEN": "the Hugging Face Hub's own variable, read at call time (pipeline/sources/hub_env.py)",
    "HUGGING_FACE_HUB_TOKEN": ("huggingface_hub's older name for HF_TOKEN, read at call time "
                               "(pipeline/sources/hub_env.py)"),
}
# Switches that only tests or benchmarks set: a read of one of them in production code fails this test, named with
# the reason here (the test monkeypatches instead, or uses a seam the production code needs anyway).
TEST_ONLY = {
    "HEADGEOMETRY_MALLOC": "pipeline/orbits/train.py: a test's and benchmark's switch for glibc's malloc settings",
}


def _is_environ(node: ast.AST) -> bool:
    """``os.environ`` (or a bare ``environ`` imported from os)."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name)
            and node.value.id == "os") or (isinstance(node, ast.Name) and node.id == "environ")


def _key_nodes(tree: ast.AST) -> list[tuple[ast.AST, int]]:
    """(the expression naming the variable, line) of every read of the environment."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in ("get", "setdefault", "pop") and _is_environ(f.value):
                out.append((node.args[0], node.lineno))
            elif isinstance(f, ast.Attribute) and f.attr == "getenv" and isinstance(f.value, ast.Name) \
                    and f.value.id == "os":
                out.append((node.args[0], node.lineno))
        elif isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load):
            out.append((node.slice, node.lineno))
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) \
                and any(_is_environ(c) for c in node.comparators):
            out.append((node.left, node.lineno))
    return out


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level string constants: ``NAME = "string"`` and ``A, B = "a", "b"``."""
    out = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            pairs = [(target, node.value)]
            if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                pairs = list(zip(target.elts, node.value.elts, strict=False))
            for name, value in pairs:
                if isinstance(name, ast.Name) and isinstance(value, ast.Constant) and isinstance(value.value, str):
                    out[name.id] = value.value
    return out


def _enclosing_parameter(tree: ast.Module, name: str, line: int) -> tuple[str, int] | None:
    """(function name, parameter index) when ``name`` at ``line`` is a parameter of the function around it."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= line <= node.end_lineno:
            params = [a.arg for a in node.args.posonlyargs + node.args.args]
            if name in params:
                return node.name, params.index(name)
    return None


def _string(node: ast.AST | None, constants: dict[str, str]) -> str | None:
    """The string a literal or a module-level constant's name gives; None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return constants.get(node.id) if isinstance(node, ast.Name) else None


def _argument_strings(tree: ast.Module, constants: dict[str, str], function: str, index: int,
                      param: str) -> list[str] | None:
    """The strings every call of ``function`` in the module passes for its parameter (literals or module
    constants); None when a call passes something else."""
    values = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == function:
            given = node.args[index] if index < len(node.args) else next(
                (k.value for k in node.keywords if k.arg == param), None)
            value = _string(given, constants)
            if value is None:
                return None
            values.append(value)
    return values or None


def environment_reads() -> dict[str, list[str]]:
    """Variable name -> the places (``path:line``) that read it; unresolvable reads under ``"?"``."""
    reads: dict[str, list[str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            constants = _constants(tree)
            where = lambda line, p=path: f"{p.relative_to(ROOT)}:{line}"  # noqa: E731
            for key, line in _key_nodes(tree):
                names: list[str] | None = None
                if (value := _string(key, constants)) is not None:
                    names = [value]
                elif isinstance(key, ast.Name) and (found := _enclosing_parameter(tree, key.id, line)):
                    names = _argument_strings(tree, constants, *found, key.id)
                for name in names or ["?"]:
                    reads.setdefault(name, []).append(where(line))
    return reads


def test_the_scan_finds_the_reads_it_must():
    """The scan itself: the default store's variable (a module constant), the Hub's timeouts (constants passed to
    a helper's parameter) and the Hugging Face variables (literals) are all found."""
    reads = environment_reads()
    assert {"HEADGEOMETRY_STORE", "HEADGEOMETRY_HUB_TIMEOUT", "HEADGEOMETRY_HUB_RETRIES", "HF_HUB_OFFLINE",
            "HF_TOKEN"} <= set(reads), sorted(reads)
    assert any(p.startswith("pipeline/store/location.py:") for p in reads["HEADGEOMETRY_STORE"])


def test_no_production_module_reads_a_variable_only_tests_set():
    reads = environment_reads()
    assert "?" not in reads, (f"cannot tell which variable these reads name: {reads['?']}; read the environment "
                              "by a literal name or a module-level constant")
    readme = README.read_text()
    test_only = {name: places for name, places in reads.items() if name in TEST_ONLY}
    assert test_only == {}, "production code reads switches that only tests set: " + "; ".join(
        f"{name} at {', '.join(places)} ({TEST_ONLY[name]})" for name, places in sorted(test_only.items()))
    undocumented = {name: places for name, places in reads.items()
                    if name not in readme and name not in NOT_IN_README}
    assert undocumented == {}, ("read by production code but neither documented in README.md nor listed in "
                                f"NOT_IN_README with a reason: {undocumented}")


def test_the_named_lists_hold_only_what_is_read():
    """A variable no longer read, or documented in README.md, leaves NOT_IN_README (so the list never excuses a
    read that comes back unnoticed)."""
    reads = environment_reads()
    readme = README.read_text()
    assert sorted(set(NOT_IN_README) - set(reads)) == []
    assert [name for name in NOT_IN_README if name in readme] == []  # documented: it needs no excuse
