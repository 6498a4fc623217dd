"""A store's values for one model against a fresh computation from its checkpoint.

Each checked layer is profiled again (``pipeline.run.tasks.compute_layer``, with the stored row's layer-norm
folding) and compared with what the store holds: the profile and ||L||_F at every d, and at d = 0 the head
statistics, the spectrum and the spectra of T and L where the layer has them. A value further than
:data:`STORE_TOLERANCE` from the fresh one names its row, layer, variable and head: the row is stale (written from
other weights) or damaged. A row written from another revision or of another shape is named stale before any
value is read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.schema import SPECTRA

# Stored values are float64 from the same code; a fresh run differs by rounding alone (threads, BLAS, about 1e-13).
STORE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class StoreCheck:
    """What the store's row ``name`` gave: ``lines`` to print, ``stale`` true where a row or a layer differs from
    the fresh computation (or could not be read)."""

    name: str
    lines: tuple[str, ...]
    stale: bool


def _differs(name: str, layer: int, variable: str, stored: np.ndarray, fresh: np.ndarray) -> str:
    stored = np.asarray(stored, dtype=np.float64)
    fresh = np.broadcast_to(np.asarray(fresh, dtype=np.float64), stored.shape)
    gap = np.where(np.isnan(stored) & np.isnan(fresh), 0.0, np.abs(stored - fresh))
    gap = np.where(np.isnan(gap), np.inf, gap)  # a value missing on one side only
    if not gap.size or gap.max() <= STORE_TOLERANCE:
        return ""
    head = int(np.unravel_index(int(np.argmax(gap)), gap.shape)[0])
    return (f"store row {name!r} layer {layer}: {variable} differs from a fresh computation by {gap.max():.1e} "
            f"(head {head})")


def check_store(store, name: str, ckpt, layout, layers, store_flag: str = "") -> StoreCheck:
    """Compare the store's row ``name`` with a fresh computation at ``layers`` (``store``: an open
    :class:`pipeline.store.Store`; ``ckpt``, ``layout``: the checkpoint and its Layout; ``store_flag``: what the
    recompute command needs to name the store, e.g. `` --store out.zarr``)."""
    from pipeline.run.tasks import compute_layer

    if name not in store.names():
        return StoreCheck(name, (f"store: {name!r} is not in {store.location}; nothing stored to compare "
                                 "(`python -m pipeline profiles` computes it)",), False)
    row = store.row(name)
    redo = f"recompute it with: {row.fix_command} --force{store_flag}"
    stale = []
    if row.revision and ckpt.revision and row.revision != ckpt.revision:
        stale.append(f"revision {row.revision}, the checkpoint is at {ckpt.revision}")
    for field in ("n_layers", "n_heads", "d_model", "d_head"):
        if getattr(row, field) != getattr(layout, field):
            stale.append(f"{field} {getattr(row, field)}, the checkpoint's is {getattr(layout, field)}")
    if stale:
        return StoreCheck(name, (f"store row {name!r} is stale: it was written from {'; '.join(stale)}; {redo}",),
                          True)
    done = store.layers_done(name)
    ds = store.dataset("profiles")
    i = store.names().index(name)
    H = layout.n_heads
    lines = []
    for layer in layers:
        if not done[layer]:
            lines.append(f"store row {name!r} layer {layer}: not written (the row is incomplete)")
            continue
        profile, norm, statistics, spectrum, spectra = compute_layer(ckpt, layout, layer, row.layernorm_folded)
        try:
            at = ds.isel(model=i, layer=layer, head=slice(0, H)).load()
        except Exception as exc:  # noqa: BLE001 - a garbled chunk fails in the codec, whichever error it raises
            lines.append(f"store row {name!r} layer {layer}: cannot be read ({type(exc).__name__}: {exc}); damaged")
            continue
        pairs = [("profile", at.profile.values, profile if profile.ndim == 3 else profile[:, None, :]),
                 ("norm", at.norm.values, norm if norm.ndim == 2 else norm[:, None])]
        if "head_statistics" in ds and np.isfinite(at.head_statistics.values).any():
            pairs.append(("head_statistics", at.head_statistics.values, statistics))
            pairs.append(("spectrum", at.spectrum.values[:, :spectrum.shape[1]], spectrum))
        if SPECTRA[0] in ds and np.isfinite(at[SPECTRA[0]].values).any():
            for variable, values in zip(SPECTRA, spectra, strict=True):
                pairs.append((variable, at[variable].values[:, :values.shape[1]], values))
        lines += [line for variable, stored, fresh in pairs if (line := _differs(name, layer, variable, stored, fresh))]
    if lines:
        return StoreCheck(name, (*lines, f"store row {name!r} is stale or damaged; {redo}"), True)
    return StoreCheck(name, (f"store row {name!r}: the {len(layers)} layer(s) checked equal a fresh computation",),
                      False)
