"""What every group of the store shares, and the profiles group's per-layer variables that a run's frames repeat
along ``step``: the schema version, the offsets d = 0..128, the simplex's coordinates. ``pipeline.schema`` and
``pipeline.schema.runs`` both build on these names (this module imports neither)."""

from __future__ import annotations

import numpy as np

SCHEMA_VERSION = 2
N_OFFSETS = 129
COORDINATES = ("a", "b", "c", "d")

# Data variables of the profiles group: name -> (dims, dtype, fill value).
PROFILE_DATA = {
    "profile": (("model", "layer", "head", "d", "coordinate"), "float64", np.nan),
    "norm": (("model", "layer", "head", "d"), "float64", np.nan),
    "layer_done": (("model", "layer"), "bool", False),
    "layer_checksum": (("model", "layer"), "str", ""),
}
