"""One (frame, layer) task of a run of revisions: read the layer's Q/K from that revision's checkpoint, hash them,
and write the layer's values into the run's frame: copied from a frame whose same layer has equal Q/K (a repeat,
not computed again), else computed as any profiles run computes a layer.

A worker keeps, per process, one store handle, one open checkpoint per (source, commit) and one frame writer per
(store, run, run token), as it does for a model's layers (``pipeline.run.tasks``)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from pipeline.families import layout_from_config
from pipeline.run.tasks import compute_layer, read_layer, worker_checkpoint, worker_store
from pipeline.sources.base import CheckpointError


@dataclass(frozen=True)
class FrameTask:
    """One (frame, layer) of a run: the checkpoint to open (``source`` at the pinned ``revision``: the commit or
    the local folder's fingerprint), the revision's name, and where it writes (the frame's index along ``step``)."""

    store: str
    name: str  # the run
    source: str
    revision: str
    label: str  # the revision's name (stepN, checkpoint-N, a branch)
    index: int
    layer: int
    fold_ln: bool
    run: str = ""  # the run's token: a worker writes a run's frames through one writer


def qk_digest(qk) -> str:
    """sha256 (hex) of a layer's Q/K as read (``pipeline.families.LayerQK``): W_Q, W_K, the key head of each query
    head and any folded gain, each with its dtype and shape (heads formed from factors, latent attention's
    ``LatentHeads``: those factors). Equal digests, equal weights."""
    h = hashlib.sha256()
    parts = [getattr(x, "factors", (x,)) for x in (qk.W_Q, qk.W_K)]
    for x in (*parts[0], *parts[1], qk.kv_of_head, qk.gain):
        if x is None:
            h.update(b"none;")
            continue
        x = np.asarray(x)
        h.update(f"{x.dtype.str}{x.shape};".encode())
        _feed(h, x)
    return h.hexdigest()


def _feed(h, x: np.ndarray) -> None:
    """The bytes of ``x`` in C order into ``h``, read in place (no copy of the layer: a C-contiguous array whole, else
    its parts along the first axis, each in place where it is contiguous)."""
    if x.flags.c_contiguous:
        h.update(memoryview(x).cast("B"))
        return
    for part in x:
        _feed(h, part)


def qk_bytes(qk) -> int:
    """The bytes of a layer's Q/K as read (compact arrays, and the gain)."""
    return int(qk.W_Q.nbytes + qk.W_K.nbytes + (0 if qk.gain is None else qk.gain.nbytes))


def fetched(ckpt) -> int | None:
    """Bytes a Hub checkpoint fetched so far (None for a local one)."""
    snapshot = getattr(ckpt, "hub_snapshot", None)
    return None if snapshot is None else int(snapshot.bytes_fetched)


def write_frame_layer(writer, ckpt, layout, index: int, layer: int, fold_ln: bool, qk) -> bool:
    """Frame ``index``'s ``layer`` from its Q/K ``qk`` (read already): copied when the writer knows a frame whose
    same layer has equal Q/K and its values still match their checksums, else computed; True when copied."""
    digest = qk_digest(qk)
    source = writer.repeat_source(layer, digest)
    if source is not None and source != index and writer.copy(index, layer, source, digest):
        return True
    writer.write(index, layer, digest, *compute_layer(ckpt, layout, layer, fold_ln, qk=qk))
    return False


@lru_cache(maxsize=8)
def _worker_frame_writer(location: str, name: str, run: str):
    """One frame writer per (store, run, run token) per worker process (``run``: a later run on a long-lived worker
    opens its own)."""
    return worker_store(location).frame_writer(name)


def run_frame_task(task: FrameTask) -> tuple[str, int, int, bool]:
    """Read, then copy or profile, and write one layer of one frame: (revision, layer, bytes read, copied). The
    bytes are those the Hub sent for the layer, or those of its Q/K read from a local file."""
    ckpt = worker_checkpoint(task.source, task.revision)
    if ckpt.revision != task.revision:
        raise CheckpointError(f"{task.label} ({task.source}) is at {ckpt.revision} on this worker, but the run was "
                              f"planned for {task.revision}: the checkpoint changed. Rerun the command to plan it "
                              "again.")
    layout = layout_from_config(ckpt.config)
    before = fetched(ckpt)
    qk = read_layer(ckpt, layout, task.layer, task.fold_ln)
    nbytes = qk_bytes(qk) if before is None else fetched(ckpt) - before
    copied = write_frame_layer(_worker_frame_writer(task.store, task.name, task.run), ckpt, layout, task.index,
                               task.layer, task.fold_ln, qk)
    return task.label, task.layer, nbytes, copied
