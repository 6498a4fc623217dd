"""Checks on lean/ that need no Lean toolchain (none can be installed where this CI runs).

- No escape hatch anywhere under lean/: the three words that would let an unfinished proof or an
  unproved assumption through must not appear, not even in comments or prose.
- lean-toolchain names a released Lean 4 version and lakefile.toml requires Mathlib at the tag of
  that same version, so `lake exe cache get` finds a matching cache.
- The root module imports every part, and lean/README.md maps every theorem.
- The GitHub workflow that does build lean/ exists and points the standard action at it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LEAN = ROOT / "lean"
FORBIDDEN = re.compile(r"\b(sorry|axiom|admit)\b", re.IGNORECASE)
BUILD_DIRS = {".lake", "lake-packages", "build"}  # what `lake build` writes; ignored by git
RELEASE = re.compile(r"leanprover/lean4:v(\d+)\.(\d+)\.(\d+)")


def lean_tree_files():
    return [p for p in LEAN.rglob("*") if p.is_file() and not BUILD_DIRS.intersection(p.relative_to(LEAN).parts)]


def lean_sources():
    return sorted(p for p in lean_tree_files() if p.suffix == ".lean")


def test_lean_project_files_exist():
    for name in ("lakefile.toml", "lean-toolchain", "HeadGeometry.lean", "README.md"):
        assert (LEAN / name).is_file(), f"lean/{name} is missing"
    assert len(list((LEAN / "HeadGeometry").glob("*.lean"))) >= 5


def test_no_escape_hatch_words_under_lean():
    offending = []
    for path in lean_tree_files():
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if FORBIDDEN.search(line):
                offending.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offending, "forbidden word in lean/:\n" + "\n".join(offending)


def test_forbidden_word_pattern():
    """The pattern catches the words as words, in code and in prose, and nothing else."""
    for text in ("  sorry", "exact sorry", "(by admit)", "axiom foo : False", "-- TODO: Sorry"):
        assert FORBIDDEN.search(text), text
    for text in ("sorryless", "axioms_used", "admits", "Axiomatic"):
        assert not FORBIDDEN.search(text), text


def toolchain_version():
    text = (LEAN / "lean-toolchain").read_text(encoding="utf-8").strip()
    match = RELEASE.fullmatch(text)
    assert match, f"lean-toolchain must name a released version like leanprover/lean4:v4.15.0, not {text!r}"
    return match.group(0).split(":")[1]


def test_toolchain_names_a_release():
    version = toolchain_version()
    assert int(version[1:].split(".")[0]) == 4


def test_mathlib_required_at_the_matching_tag():
    tomllib = pytest.importorskip("tomllib", reason="reading TOML needs Python 3.11 or later")
    with open(LEAN / "lakefile.toml", "rb") as f:
        lakefile = tomllib.load(f)
    requires = [r for r in lakefile.get("require", []) if r.get("name") == "mathlib"]
    assert len(requires) == 1, "lakefile.toml must require mathlib exactly once"
    mathlib = requires[0]
    assert mathlib.get("rev") == toolchain_version(), (
        f"mathlib rev {mathlib.get('rev')!r} does not match lean-toolchain {toolchain_version()!r}"
    )
    source = mathlib.get("git", "") or mathlib.get("scope", "")
    assert "leanprover-community" in source
    libs = [lib["name"] for lib in lakefile.get("lean_lib", [])]
    assert "HeadGeometry" in libs


def module_name(path):
    return ".".join(path.relative_to(LEAN).with_suffix("").parts)


def test_root_imports_every_part():
    root = (LEAN / "HeadGeometry.lean").read_text(encoding="utf-8")
    imported = set(re.findall(r"^import\s+(\S+)", root, re.MULTILINE))
    parts = {module_name(p) for p in (LEAN / "HeadGeometry").rglob("*.lean")}
    assert parts <= imported, f"HeadGeometry.lean does not import {sorted(parts - imported)}"


DECLARATION = re.compile(r"^(?:theorem|lemma)\s+([\w.']+)", re.MULTILINE)


def test_readme_maps_every_theorem():
    readme = (LEAN / "README.md").read_text(encoding="utf-8")
    names = {name for p in lean_sources() for name in DECLARATION.findall(p.read_text(encoding="utf-8"))}
    assert names, "no theorem found under lean/"
    missing = sorted(name for name in names if f"`{name}`" not in readme)
    assert not missing, f"lean/README.md does not mention {missing}"


@pytest.mark.parametrize("needle", ["leanprover/lean-action", "lake-package-directory: lean"])
def test_github_workflow_builds_lean(needle):
    workflow = ROOT / ".github" / "workflows" / "lean.yml"
    assert workflow.is_file()
    assert needle in workflow.read_text(encoding="utf-8")
