"""The orbits search over the ``orbits_search`` group: in how many runs an orbit of each size appeared, the
heads of each frequency family, and one row per searched recipe (its hypotheses)."""

from __future__ import annotations

import re

import holoviews as hv
import numpy as np
import xarray as xr

NO_SEARCH = ("<p class='note'>No orbits search in this store: <code>python -m pipeline orbits search</code> "
             "adds the <code>orbits_search</code> group, and its distribution of orbit sizes appears here.</p>")


def family_sizes(search: xr.Dataset | None) -> dict[str, np.ndarray]:
    """Over the searched runs: for each orbit size, how many runs found at least one orbit of that size
    at the strictest stored tolerance (``size``, ``runs``), and the number of runs (``n_runs``)."""
    if search is None or "orbit_count" not in search:
        return {"size": np.zeros(0, int), "runs": np.zeros(0, int), "n_runs": np.array(0)}
    counts = search["orbit_count"]
    if "tol" in counts.dims:
        counts = counts.isel(tol=int(np.argmin(np.asarray(search["tol"].values, dtype=float))))
    values = np.asarray(counts.transpose("run", "size").values)
    return {"size": np.asarray(search["size"].values, dtype=int), "runs": (values > 0).sum(axis=0).astype(int),
            "n_runs": np.array(values.shape[0])}


def search_families(search: xr.Dataset | None, width: int = 430):
    """The orbits search: in how many runs an orbit of each size appeared (bars), or a message when the
    store has no ``orbits_search`` group."""
    if search is None or "orbit_count" not in search:
        return hv.Div(NO_SEARCH).opts(width=width, height=50)
    f = family_sizes(search)
    tol = float(np.min(search["tol"].values)) if "tol" in search else float("nan")
    bars = hv.Bars((f["size"].astype(str), f["runs"]), "orbit size", "runs with such an orbit")
    return bars.opts(width=width, height=190, color="#1f77b4", default_tools=[], toolbar=None,
                     ylim=(0, max(1, int(f["runs"].max(initial=0)))),
                     title=f"{int(f['n_runs'])} runs: orbits within {tol:.0%}")


def family_heads(search: xr.Dataset | None, width: int = 430):
    """The orbits search's frequency families: one dot per run and key frequency k with live heads, at the
    number of heads there, and a red dash at the heads an orbit at k needs, 24 / gcd(k, 24). A family can
    only form an orbit where its dots reach the dash (12 heads at k = 2 or 10 for the original 12-orbit)."""
    if search is None or "family_heads" not in search:
        return hv.Div(NO_SEARCH).opts(width=width, height=50)
    k = np.asarray(search["k"].values, dtype=int)
    heads = np.asarray(search["family_heads"].transpose("run", "k").values, dtype=int)
    run, col = np.nonzero(heads > 0)
    dots = hv.Scatter((k[col], heads[run, col]), "key frequency k", "heads").opts(
        color="#1f77b4", alpha=0.6, size=6)
    ks = k[k > 0]
    need = hv.Scatter((ks, 24 // np.gcd(ks, 24)), "key frequency k", "heads").opts(
        color="#c62828", marker="dash", size=14)
    return (dots * need).opts(width=width, height=190, default_tools=[], toolbar=None,
                              title=f"{heads.shape[0]} runs: heads per k")



SEED_SUFFIX = re.compile(r"-s\d+$")
HYPOTHESIS_KS = (2, 10, 6)  # a 12-orbit's key frequencies (2 or 10) and a 4-orbit's (6)


def recipe_label(run: str) -> str:
    """A searched run's recipe: its name without the ``-sSEED`` suffix (``long+qk_init_scale=0.5-s9`` ->
    ``long+qk_init_scale=0.5``)."""
    return SEED_SUFFIX.sub("", str(run))


def gap_to_12_4(k2_k10: np.ndarray, k6: np.ndarray) -> np.ndarray:
    """How far each run's frequency families are from the counts a 12-orbit and a 4-orbit need: the heads to move
    for 12 at k = 2 or 10 (the nearer of the two) plus those for 4 at k = 6, |12 - h| + |4 - h6|, where too many
    heads count as much as too few (an orbit of C_24 at k has exactly 24 / gcd(k, 24) heads). 0: the families have
    the counts of 12 + 4 (the orbits themselves still have to form). k2_k10 (runs, 2), k6 (runs,) -> (runs,)."""
    return np.abs(12 - np.asarray(k2_k10)).min(axis=-1) + np.abs(4 - np.asarray(k6))


def hypotheses(search: xr.Dataset | None) -> list[dict]:
    """One row per recipe of the ``orbits_search`` group (``recipe_label``; labels sorted), over its runs:
    ``hypothesis`` (the label), ``runs``; for k in ``HYPOTHESIS_KS`` the frequency family at k (``family_heads``:
    the merged live heads whose strongest key frequency is k) as ``k{k}_max`` and ``k{k}_mean``; ``gap_min`` and
    ``gap_mean``, each run's family counts' distance from 12 + 4 (``gap_to_12_4``) least and on average; ``tol`` (the
    strictest stored tolerance, 2%) and ``largest_orbit``, the largest orbit found within it in any run (0:
    none); ``heldout``, the mean held-out accuracy, and ``e3``, the median equivariance error (runs without a
    value left out). [] without a search."""
    if search is None or any(v not in search for v in ("family_heads", "orbit_count")):
        return []
    labels = np.array([recipe_label(r) for r in search["run"].values], dtype=object)
    k = [int(x) for x in search["k"].values]
    fam = np.asarray(search["family_heads"].transpose("run", "k").values)
    t = int(np.argmin(np.asarray(search["tol"].values, dtype=float)))
    found = np.asarray(search["orbit_count"].transpose("run", "tol", "size").values)[:, t, :] > 0
    sizes = np.asarray(search["size"].values, dtype=int)
    held = np.asarray(search["heldout_accuracy"].values, dtype=float)
    e3 = np.asarray(search["e3"].values, dtype=float)
    rows = []
    for label in sorted(set(labels)):
        runs = np.flatnonzero(labels == label)
        row = {"hypothesis": label, "runs": len(runs)}
        for kk in HYPOTHESIS_KS:
            heads = fam[runs, k.index(kk)]
            row[f"k{kk}_max"], row[f"k{kk}_mean"] = int(heads.max()), float(heads.mean())
        gaps = gap_to_12_4(fam[runs][:, [k.index(2), k.index(10)]], fam[runs, k.index(6)])
        row["gap_min"], row["gap_mean"] = int(gaps.min()), float(gaps.mean())
        row["tol"] = float(search["tol"].values[t])
        row["largest_orbit"] = int(sizes[found[runs].any(axis=0)].max(initial=0))
        row["heldout"] = float(np.nanmean(held[runs])) if np.isfinite(held[runs]).any() else float("nan")
        row["e3"] = float(np.nanmedian(e3[runs])) if np.isfinite(e3[runs]).any() else float("nan")
        rows.append(row)
    return rows


def hypotheses_table(search: xr.Dataset | None, width: int = 1200):
    """``hypotheses`` as a HoloViews table: the family heads at each k as "max / mean", the largest orbit within
    the strictest tolerance, the mean held-out accuracy and the median equivariance error (E3); a message when
    the store has no ``orbits_search`` group."""
    rows = hypotheses(search)
    if not rows:
        return hv.Div(NO_SEARCH).opts(width=width, height=50)
    tol = rows[0]["tol"]

    def pct(v):
        return f"{v:.1%}" if np.isfinite(v) else "—"

    table = [(r["hypothesis"], r["runs"], *(f"{r[f'k{k}_max']} / {r[f'k{k}_mean']:.1f}" for k in HYPOTHESIS_KS),
              f"{r['gap_min']} / {r['gap_mean']:.1f}", str(r["largest_orbit"]) if r["largest_orbit"] else "none",
              pct(r["heldout"]),
              f"{r['e3']:.1e}" if np.isfinite(r["e3"]) else "—") for r in rows]
    vdims = [hv.Dimension("runs"),
             *(hv.Dimension(f"k{k}", label=f"k = {k}: max/mean") for k in HYPOTHESIS_KS),
             hv.Dimension("gap", label="from 12 + 4: min/mean"),
             hv.Dimension("largest", label=f"largest orbit ≤ {tol:.0%}"),
             hv.Dimension("heldout", label="held-out (mean)"), hv.Dimension("e3", label="E3 (median)")]
    return hv.Table(table, [hv.Dimension("hypothesis", label="recipe (run names without -sSEED)")], vdims).opts(
        width=width, height=min(30 + 25 * len(rows), 800), hooks=[_hypotheses_columns])


def _hypotheses_columns(plot, element) -> None:
    """A render hook: no index column, and the recipe column wide enough for the longest label (the columns
    share the table's width in proportion to their widths)."""
    table = plot.handles["table"]
    table.index_position = None
    for column, w in zip(table.columns, (500, 45, 110, 110, 110, 120, 120, 100, 95), strict=False):
        column.width = w
