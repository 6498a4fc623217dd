"""A run's heads step by step: a few numbers per frame of a run of checkpoints (``runs/NAME``), as a JSON-able dict
and as a table.

Per frame, in step order (:func:`over_steps`, each from its own module):

- ``types``: the heads of each type at d = 0 by the project's rule at its own thresholds (I₊, II, I₋:
  :func:`pipeline.analyses.types.spectral_types`), over the heads whose profile is finite;
- ``medians``: the medians of ``symmetric_energy``, ``pairing`` and ``rho`` (the statistics the report compares
  with a baseline, :data:`pipeline.analyses.report.BASELINE_STATISTICS`);
- ``beta``: the beta law of the pairing score P, its a and b (:func:`pipeline.analyses.pairing_law.beta_fit`);
- ``displacement``: the mean over heads of the Euclidean distance between a head's (a, b, c, d) at d = 0 in this
  frame and in the first frame, the heads finite in both.

The first frame is the first complete one in step order. A run that starts at initialisation (step 0) has its own
random baseline there: the displacement is then the distance travelled from initialisation, and the summary says
so (``first``). A frame whose layers are not all written has no numbers (``complete`` false), so that no step's
numbers are over a part of its heads.

The dict: ``run``, ``type_names``, ``statistics`` (the medians' names), ``first`` (``step``, ``initialisation``: whether
it is step 0, ``note``: what it is, in words) and ``steps``: per frame ``step``, ``revision``, ``repeat_of`` (-1 or
the step whose values it copies), ``complete`` and, when complete, ``heads``, ``types`` (I₊, II, I₋), ``medians``,
``beta`` (``a``, ``b``) and ``displacement``. A number that cannot be computed (a beta law of fewer than 3 heads
inside (0, 1)) is None.
"""

from __future__ import annotations

import numpy as np

from pipeline.analyses import pairing_law, types
from pipeline.analyses.head_data import HeadData
from pipeline.analyses.report import BASELINE_STATISTICS, median

INITIALISATION = 0  # the step of a run's initialisation: the frame that is its own random baseline


def first_note(step: int | None) -> str:
    """What the first frame is, for the texts that use it as a reference."""
    if step is None:
        return "no complete frame"
    if step == INITIALISATION:
        return "step 0, the run's initialisation: its own random baseline"
    return f"step {step}: the run has no complete frame of step 0 (initialisation), so no baseline of its own"


def displacement(profile: np.ndarray, first: np.ndarray) -> float | None:
    """The mean over heads of ||p - p_first|| (Euclidean, on (a, b, c, d)), over the heads finite in both; None
    when there are none."""
    p, q = np.asarray(profile, dtype=float).reshape(-1, 4), np.asarray(first, dtype=float).reshape(-1, 4)
    ok = np.isfinite(p).all(axis=1) & np.isfinite(q).all(axis=1)
    return float(np.linalg.norm(p[ok] - q[ok], axis=1).mean()) if ok.any() else None


def step_summary(data: HeadData, first: HeadData) -> dict:
    """The numbers of the module docstring for one frame (``first``: the run's first frame)."""
    finite = np.isfinite(data.profile).all(axis=1)
    beta = pairing_law.beta_fit(data.stat("pairing"))
    return {"heads": int(finite.sum()),
            "types": types.type_counts(types.spectral_types(data.profile), finite).tolist(),
            "medians": {name: median(data.stat(name)) for name in BASELINE_STATISTICS},
            "beta": {"a": beta["a"], "b": beta["b"]},
            "displacement": displacement(data.profile, first.profile)}


def over_steps(run: str, frames: list[dict]) -> dict:
    """The summary of a run. ``frames``: one dict per frame in step order, with ``step``, ``revision``,
    ``repeat_of`` and ``data`` (its :class:`HeadData`, or None for a frame not complete)."""
    first = next((f for f in frames if f["data"] is not None), None)
    rows = []
    for f in frames:
        row = {"step": int(f["step"]), "revision": str(f["revision"]), "repeat_of": int(f["repeat_of"]),
               "complete": f["data"] is not None}
        if f["data"] is not None:
            row |= step_summary(f["data"], first["data"])
        rows.append(row)
    first_step = None if first is None else int(first["step"])
    return {"run": run, "type_names": list(types.TYPE_NAMES), "statistics": list(BASELINE_STATISTICS),
            "first": {"step": first_step, "initialisation": first_step == INITIALISATION,
                      "note": first_note(first_step)},
            "steps": rows}


def _f(x, spec: str) -> str:
    return "n/a" if x is None else format(x, spec)


def format_text(rep: dict) -> str:
    """The summary as the table ``python -m pipeline report RUN --over-steps`` prints."""
    names = rep["type_names"]
    lines = [f"{rep['run']}: {len(rep['steps'])} frames, by step",
             f"  types at d = 0 by the rule (imbalance > {types.IMBALANCE_CUT:g}, c + d > {types.CD_FLOOR:g}): "
             f"{' / '.join(names)}; medians of {', '.join(rep['statistics'])}; beta law of the pairing score "
             "(a, b)",
             "  displacement: the heads' mean Euclidean distance in the simplex, (a, b, c, d) at d = 0, from the "
             f"first frame ({rep['first']['note']})",
             f"  {'step':>8} {'revision':<16} {'heads':>5} {'I+/II/I-':>12} {'sym.energy':>10} {'pairing':>8} "
             f"{'rho':>8} {'beta a':>7} {'beta b':>7} {'displ.':>7}"]
    for r in rep["steps"]:
        head = f"  {r['step']:>8} {r['revision'][:16]:<16}"
        if not r["complete"]:
            lines.append(f"{head} not complete: rerun the run's command to finish it")
            continue
        m = r["medians"]
        repeat = f"  (repeats step {r['repeat_of']})" if r["repeat_of"] >= 0 else ""
        lines.append(f"{head} {r['heads']:>5} {'/'.join(map(str, r['types'])):>12} "
                     f"{_f(m['symmetric_energy'], '.4f'):>10} {_f(m['pairing'], '.4f'):>8} {_f(m['rho'], '.4f'):>8} "
                     f"{_f(r['beta']['a'], '.2f'):>7} {_f(r['beta']['b'], '.2f'):>7} "
                     f"{_f(r['displacement'], '.4f'):>7}{repeat}")
    return "\n".join(lines)
