"""The build's one step beyond pyproject.toml: the committed store.zarr goes into the wheel as the demo store.

``build_py`` copies ``store.zarr`` (beside this file, in the repository and in the sdist, which carries it through
MANIFEST.in) to ``pipeline/store/demo.zarr`` in the build folder, so the repository holds one copy of the data and
the sdist builds the same wheel as the repository. The installed package reads it there
(``pipeline.store.location.BUNDLED_DEMO``). An editable install copies nothing: a checkout's demo is its own store.zarr.
Temporary files of an interrupted write (``*.partial``) and hidden files are left out.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
STORE = ROOT / "store.zarr"
DEMO = Path("pipeline", "store", "demo.zarr")  # inside the package: pipeline.store.location.BUNDLED_DEMO


def demo_files() -> list[Path]:
    """The store's files to bundle, relative to it, in a fixed order."""
    if not (STORE / "zarr.json").is_file():
        raise SystemExit(f"the demo store {STORE} is missing: build from a checkout or an sdist that has store.zarr")
    return sorted(p.relative_to(STORE) for p in STORE.rglob("*")
                  if p.is_file() and not p.name.endswith(".partial")
                  and not any(part.startswith(".") for part in p.relative_to(STORE).parts))


class BuildWithDemo(build_py):
    """setuptools' build_py, then the store copied into the build folder as the demo."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        for rel in demo_files():
            target = Path(self.build_lib) / DEMO / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(STORE / rel, target)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        demo = [] if self.editable_mode else [str(Path(self.build_lib) / DEMO / rel) for rel in demo_files()]
        return super().get_outputs(include_bytecode) + demo


setup(cmdclass={"build_py": BuildWithDemo})
