"""A run as a model of the profiles page: its last complete frame, the trained model.

**How a run relates to a model of the profiles page.** A run is drawn on the profiles page of the model of the same
name, as that page's Training tab; a run whose name no model of the profiles group carries (what ``profiles MODEL
--revisions SPEC`` writes: the group ``runs/NAME`` alone) is an entry of its own in the model picker, whose page
shows the run's last complete frame as the model (its Profiles and Analyses tabs) beside the Training tab. Why: the
run's last checkpoint is the model it trained, the profiles page already draws everything about one set of weights,
and the Training tab adds the frames before it; a name shared by a model and a run is one entry, not two pages that
differ by which checkpoint they open on. A run that is the same weights as a stored model under another name stays
two entries: nothing in the store says they are one.

:func:`last_frame` gives that model's row and arrays as the profiles page takes them (``dashboard.data.ModelData`` and
the Dataset of one model, as ``data.profiles(store).sel(model=name)`` gives a stored model's).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from dashboard.common.selection import profile_array, scales
from dashboard.data import ModelData
from pipeline.schema import model_rows
from pipeline.schema.runs import FRAME_DATA, LAYER_DATA

# The run's attributes that are the per-model fields of a profiles row (the rest of RUN_MODEL_ATTRS: the shape, the
# conventions, where the weights came from).
ROW_ATTRS = ("family", "n_layers", "n_heads", "n_kv_heads", "d_model", "d_head", "positional", "rotary_dim", "tower",
             "qk_norm", "scale", "scale_rule", "softcap", "layernorm_folded", "source", "format", "command")


def last_complete(ds: xr.Dataset) -> int | None:
    """The index along ``step`` of the run's last frame (by step) whose layers are all written, or None."""
    L = int(ds.attrs["n_layers"])
    done = np.asarray(ds["layer_done"].values, dtype=bool)[:, :L].all(axis=1)
    steps = np.asarray(ds["step"].values)
    kept = np.flatnonzero(done)
    return int(kept[np.argmax(steps[kept])]) if kept.size else None


def last_frame(ds: xr.Dataset, name: str) -> tuple[ModelData, xr.Dataset]:
    """The run ``ds`` (``Store.run(name)``) as the model its profiles page draws: the row (the run's shape,
    conventions and command, the last complete frame's revision, a note naming the run) and profile of its last
    complete frame, and that frame as the Dataset of one model. ValueError when no frame is complete."""
    i = last_complete(ds)
    if i is None:
        raise ValueError(f"the run {name!r} has no complete frame yet (`{ds.attrs.get('command', '')}` writes them)")
    frame = ds.isel(step=i)
    keep = [v for v in (*FRAME_DATA, *LAYER_DATA) if v in frame and v != "qk_sha256"]
    sel = frame[keep].drop_vars("step").assign_coords(model=name)
    a = ds.attrs
    F = int(np.asarray(ds["layer_done"].values, dtype=bool)[:, :int(a["n_layers"])].all(axis=1).sum())
    fields = {k: a[k] for k in ROW_ATTRS if k in a}
    fields |= {"revision": str(frame["revision"].values), "complete": True, "damaged": "",
               "note": f"the last frame (step {int(frame['step'].values)}) of the training run {name} ({F} frames); "
                       "its Training tab shows every frame"}
    sel = sel.assign({k: ((), v) for k, v in fields.items()})
    row = model_rows(sel.expand_dims("model"))[0]
    profile = profile_array(sel)
    if not row.rotary:
        profile = profile[:, :, :1]
    return ModelData(row, profile, "", *scales(profile)), sel
