"""What a profiles run can be told (:class:`RunOptions`), the checks of options that cannot work, and the errors a
user can cause. ``python -m pipeline profiles`` is generated from :class:`RunOptions` (``pipeline.cli_args``), so
this module stays light: ``--help`` imports it and nothing else of the run path."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from pipeline.registry.revisions import SPEC_HELP
from pipeline.store.location import DEFAULT_HELP


class UsageError(ValueError):
    """Options that do not go together; the message says how to call it."""


class ClusterError(RuntimeError):
    """The cluster could not be reached or its tasks failed; the message says what to do."""


class RevisionsFailed(RuntimeError):
    """A run of revisions finished with some revisions failed (each named, with why); the others are written, and
    rerunning the command retries those."""


def _opt(default, help: str, **meta):
    """A RunOptions field: its default and its ``--help`` line (plus argparse hints in ``meta``)."""
    if isinstance(default, list):
        return field(default_factory=list, metadata={"help": help, **meta})
    return field(default=default, metadata={"help": help, **meta})


@dataclass
class RunOptions:
    """Everything a profiles run can be told. ``python -m pipeline profiles`` is generated from these fields."""

    models: list[str] = _opt([], "checkpoint folder, .gguf/.onnx file, registry name or Hub id",
                             positional=True, metavar="MODEL_OR_PATH")
    seed_models: bool = _opt(False, "add the seed models of the registry")
    store: str | None = _opt(None, f"Zarr store to write (default: {DEFAULT_HELP}); a path or an fsspec URL")
    fold_ln: bool = _opt(False, "fold the gain g of the layer norm whose output enters attention: L -> diag(g) L "
                                "diag(g) (pre-norm: the norm in front of attention; post-norm OPT/BERT: the previous "
                                "layer's output norm, or BERT's embedding norm for layer 0). Default: raw weights")
    name: str | None = _opt(None, "name in the store (one model only; default: see above)")
    force: bool = _opt(False, "recompute a model the store already holds")
    revision: str | None = _opt(None, "Hub branch, tag or commit to read (Hub ids only)")
    revisions: str | None = _opt(None, "profile the revisions of a training run as one run of frames, one per "
                                       "training step, stored as runs/NAME (one MODEL: a folder of checkpoint-N or "
                                       "stepN checkpoints, or a Hub id whose branches are the revisions). " + SPEC_HELP,
                                 metavar="SPEC")
    register_only: bool = _opt(False, "only register registry models in the store as not yet computed (shapes "
                                      "from the registry, the command that computes them; no weights read)")
    quiet: bool = _opt(False, "no progress bars")
    workers: int | None = _opt(None, "run the (model, layer) tasks on a pool of N local worker processes",
                               metavar="N")
    scheduler: str | None = _opt(None, "run the tasks on an existing dask cluster (e.g. tcp://host:8786); the store "
                                       "must be a path or fsspec URL that every worker can write", metavar="ADDRESS")


def check_options(opts: RunOptions) -> None:
    """Options that cannot work, refused before anything is opened."""
    if opts.workers is not None and opts.workers < 1:
        raise UsageError(f"--workers must be at least 1 (worker processes); got {opts.workers}")
    if opts.workers is not None and opts.scheduler:
        raise UsageError("--workers starts local worker processes and --scheduler uses an existing cluster; "
                         "give one of them")
    if opts.name is not None and len(opts.models) != 1:
        raise UsageError("--name names one model; give exactly one MODEL_OR_PATH with it")
    if opts.name is not None and not opts.name.strip():
        raise UsageError("--name must not be empty")
    if opts.revisions is not None:
        check_revisions_options(opts)
    if opts.scheduler:
        check_scheduler(opts.scheduler)


def check_revisions_options(opts: RunOptions) -> None:
    """--revisions profiles one model's revisions: the options that cannot go with it, refused."""
    if len(opts.models) != 1 or opts.seed_models:
        raise UsageError("--revisions profiles the revisions of one run; give exactly one MODEL_OR_PATH (a folder "
                         "of checkpoints or a Hub id) and no --seed-models")
    if opts.revision is not None:
        raise UsageError("--revision reads one revision and --revisions a run of them; give one of them")
    if opts.register_only:
        raise UsageError("--register-only registers registry models; it does not go with --revisions")


def check_scheduler(address: str, timeout: float = 5.0) -> None:
    """A dask scheduler address ``[tcp://|tls://]host:port`` that accepts a connection, else ClusterError."""
    scheme = address.split("://", 1)[0] if "://" in address else "tcp"
    rest = address.split("://", 1)[-1]
    try:
        parts = urlsplit(f"//{rest}")
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if scheme not in ("tcp", "tls") or not host or port is None or parts.path not in ("", "/"):
        raise ClusterError(f"--scheduler {address!r} is not a dask scheduler address; write it as "
                           "tcp://HOST:PORT (e.g. tcp://127.0.0.1:8786)")
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        raise ClusterError(f"cannot reach the dask scheduler at {address!r} ({exc.strerror or exc}). Start it with "
                           "`dask scheduler` (and workers with `dask worker ADDRESS`), or use --workers N for "
                           "local worker processes.") from None
