"""The metrics a checkpoint folder may carry beside its weights, stored with its frame of a run.

``metrics.json`` in a checkpoint folder: ``{"scalars": {name: number}, "heads": {name: [[per head] per layer]}}``
(both keys optional; the induction trainer, ``pipeline.induction``, writes it). The run stores a scalar ``x`` as
``metric_x`` (step) and a per-head ``y`` as ``head_metric_y`` (step, layer, head) (``pipeline.schema.runs``). A
folder without the file has no metrics (nothing is stored for its frame, NaN where other frames have some); a file
that is not of this shape is refused, with what is wrong, before anything is written. Hub revisions are read
without it: their files are range-read for the Q/K alone.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from pipeline.schema.runs import metric_name_problems
from pipeline.sources.base import CheckpointError

METRICS_FILE = "metrics.json"


def read_metrics(folder, n_layers: int, n_heads: int) -> dict | None:
    """The metrics of a checkpoint folder (``{"scalars": {...}, "heads": {...}}``), None when it has no
    metrics.json; CheckpointError naming the file when it is not of the shape above (per-head values must be
    ``n_layers`` lists of ``n_heads`` numbers)."""
    path = Path(folder) / METRICS_FILE
    if not path.is_file():
        return None

    def bad(why: str) -> CheckpointError:
        return CheckpointError(f"{path}: {why}; metrics.json holds {{\"scalars\": {{name: number}}, \"heads\": "
                               f"{{name: [[per head] per layer]}}}}. Fix or remove it.")

    try:
        data = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise bad(f"not valid JSON ({exc})") from None
    if not isinstance(data, dict) or set(data) - {"scalars", "heads"}:
        raise bad("not an object of 'scalars' and 'heads'")
    scalars, heads = data.get("scalars") or {}, data.get("heads") or {}
    if not isinstance(scalars, dict) or not isinstance(heads, dict):
        raise bad("'scalars' and 'heads' must be objects")
    out: dict[str, dict] = {"scalars": {}, "heads": {}}
    for name, value in scalars.items():
        if metric_name_problems(name):
            raise bad(f"scalar {metric_name_problems(name)[0]}")
        if not _number(value):
            raise bad(f"scalar {name!r} is {value!r}, not a number")
        out["scalars"][name] = float(value)
    for name, value in heads.items():
        if metric_name_problems(name):
            raise bad(f"per-head metric {metric_name_problems(name)[0]}")
        rows = value if isinstance(value, list) else None
        if rows is None or len(rows) != n_layers or any(not isinstance(r, list) or len(r) != n_heads for r in rows) \
                or not all(_number(x) for r in rows for x in r):
            raise bad(f"per-head metric {name!r} is not {n_layers} lists (layers) of {n_heads} numbers (heads)")
        out["heads"][name] = [[float(x) for x in r] for r in rows]
    return out


def _number(x) -> bool:
    """A JSON number (NaN allowed: a metric that was not computed), not a bool."""
    return isinstance(x, int | float) and not isinstance(x, bool) and not (isinstance(x, float) and math.isinf(x))
