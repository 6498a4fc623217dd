"""The paper's summaries of one model, as a plain dict (JSON-able) and as text.

:func:`report` takes a model's :class:`pipeline.analyses.head_data.HeadData` (and optionally a baseline's) and
gathers, each from its own module:

- ``pairing_law``: P's quantiles and beta law, the bound's correlation and share, the gap, rho, the balance count
  (:mod:`pipeline.analyses.pairing_law`);
- ``effective_rank``: heads with participation ratio below 2 and 5 (:mod:`pipeline.analyses.spectral_geometry`);
- ``types``: the type counts as the thresholds move (:mod:`pipeline.analyses.types`);
- ``clusters``: k-means on the unit spectra, silhouettes, and the agreement with the types
  (:mod:`pipeline.analyses.clusters`);
- ``goodness_of_fit``: generalised gamma against lognormal on each positive sample the data has
  (:mod:`pipeline.analyses.goodness_of_fit`);
- ``spectral_geometry``: sigma(T) against sqrt(lambda_+ lambda_-), when the singular values of T are known;
- ``baseline``: trained against baseline medians of ``symmetric_energy``, ``pairing`` and ``rho``, and where the
  trained heads fall among the baseline's (:func:`percentiles`).

A part whose inputs the data lacks is None, and ``missing`` says what is missing and how to add it; ``notes`` (when
present: a caller's) say what the reader must know to read the rest, as a run's step 0 being its own baseline.
:func:`format_text` writes the dict as the text the CLI prints.
"""

from __future__ import annotations

import json

import numpy as np

from pipeline.analyses import clusters as clusters_module
from pipeline.analyses import goodness_of_fit as gof
from pipeline.analyses import pairing_law, spectral_geometry, types
from pipeline.analyses.head_data import HeadData

BASELINE_STATISTICS = ("symmetric_energy", "pairing", "rho")


def percentiles(values: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """The percentile of each value among the finite reference values: 100 x (the share below it + half the share
    equal to it); NaN for a NaN value or an empty reference."""
    ref = np.sort(np.asarray(reference, dtype=float).ravel())
    ref = ref[np.isfinite(ref)]
    v = np.asarray(values, dtype=float)
    if not len(ref):
        return np.full(v.shape, np.nan)
    below = np.searchsorted(ref, v, side="left")
    upto = np.searchsorted(ref, v, side="right")
    return np.where(np.isfinite(v), 100.0 * (below + 0.5 * (upto - below)) / len(ref), np.nan)


def median(v: np.ndarray) -> float | None:
    """The median of the finite values (None when there are none)."""
    v = np.asarray(v, dtype=float)
    v = v[np.isfinite(v)]
    return float(np.median(v)) if len(v) else None


def baseline_comparison(trained: HeadData, baseline: HeadData, note: str = "") -> dict:
    """For each of BASELINE_STATISTICS: the two medians, the quantiles of the trained heads' percentiles among the
    baseline's heads, and the shares of trained heads below every baseline head and above every one. ``note``: what
    the baseline is, when its name does not say it (a run's first frame)."""
    out = {"name": baseline.name, "heads": baseline.heads} | ({"note": note} if note else {})
    for name in BASELINE_STATISTICS:
        t, b = trained.stat(name), baseline.stat(name)
        p = percentiles(t, b)
        ok = np.isfinite(p)
        out[name] = {"trained_median": median(t), "baseline_median": median(b),
                     "percentile": pairing_law.quantiles(p),
                     "below_all": float(np.mean(p[ok] == 0)) if ok.any() else None,
                     "above_all": float(np.mean(p[ok] == 100)) if ok.any() else None}
    return out


def _missing_spectra(data: HeadData) -> str:
    how = f"; recompute them with `{data.command}`" if data.command else ""
    return f"the singular values of T and the eigenvalues of L are not stored for {data.name}{how}"


def report(data: HeadData, baseline: HeadData | None = None, *, seed: int = clusters_module.SEED,
           baseline_note: str = "") -> dict:
    """The summaries of the module docstring for one model (and its baseline). ``seed``: the clusters' seed;
    ``baseline_note``: what the baseline is, when its name does not say it."""
    out = {"model": data.name, "heads": data.heads, "missing": []}
    if data.statistics is None or data.spectrum is None or not np.isfinite(data.statistics).any():
        how = f": add them with `{data.command}`" if data.command else ""
        out["missing"].append(f"head statistics not computed for {data.name}{how}")
        return out | dict.fromkeys(("pairing_law", "effective_rank", "types", "clusters", "goodness_of_fit",
                                    "spectral_geometry", "baseline"))
    s = data.stat
    out["pairing_law"] = pairing_law.pairing_law(s("pairing"), s("rho"), s("n_pos"), s("n_neg"))
    out["effective_rank"] = spectral_geometry.effective_rank_counts(s("participation_ratio"), s("stable_rank"))
    out["types"] = types.sensitivity(data.profile, s("c_sym"), s("d_sym"))
    found = clusters_module.clusters(data.spectrum, types.spectral_types(data.profile), seed=seed)
    labels = np.asarray(found.pop("labels"))
    if "ari" in found:
        kept = labels >= 0
        paper = types.paper_types(s("c_sym"), s("d_sym"))
        found["ari_paper_types"] = clusters_module.adjusted_rand_index(labels[kept], paper[kept])
    out["clusters"] = found
    antisym, eig_abs = data.spectrum_of("antisym_spectrum"), data.spectrum_of("eig_abs")
    out["goodness_of_fit"] = gof.goodness_of_fit(gof.samples(data.spectrum, eig_abs, antisym))
    if antisym is None:
        out["spectral_geometry"] = None
        out["missing"].append(_missing_spectra(data))
    else:
        out["spectral_geometry"] = spectral_geometry.spectral_geometry(data.spectrum, antisym)
    out["baseline"] = None if baseline is None else baseline_comparison(data, baseline, baseline_note)
    return out


def _f(x, spec: str = ".3f") -> str:
    return "n/a" if x is None else format(x, spec)


def _q(q: dict, spec: str = ".3f") -> str:
    return f"median {_f(q['q50'], spec)} [10%, 90%] = [{_f(q['q10'], spec)}, {_f(q['q90'], spec)}]"


def _pairing_lines(law: dict) -> list[str]:
    beta, bound, bal = law["beta"], law["bound"], law["balance"]
    holds = "n/a" if bound["holds"] is None else f"{100 * bound['holds']:.1f}%"
    return ["Pairing law",
            f"  P: {_q(law['P'])}",
            f"  beta law of P on [0, 1]: a = {_f(beta['a'], '.2f')}, b = {_f(beta['b'], '.2f')}, "
            f"Kolmogorov-Smirnov p = {_f(beta['ks_p'], '.3g')} ({beta['heads']} heads fitted, "
            f"{beta['left_out']} at P = 0 or 1 left out)",
            f"  bound 1 - (1 - r)/sqrt(1 + r^2), r = min(rho, 1/rho): correlation with P "
            f"{_f(bound['correlation'], '+.3f')}, holds for {holds} of {bound['heads']} heads",
            f"  gap bound - P: {_q(bound['gap'], '.4f')}",
            f"  rho: {_q(law['rho'])}; histogram on [0, {law['rho_histogram']['edges'][-1]:g}]: "
            f"{law['rho_histogram']['counts']}, above: {law['rho_histogram']['above']}",
            f"  balance: n_pos = n_neg in {bal['balanced']} of {bal['heads']} heads"]


def _type_lines(t: dict) -> list[str]:
    out = [f"Types at d = 0 ({' / '.join(t['names'])}) of {t['heads']} heads",
           f"  rule (imbalance > {types.IMBALANCE_CUT:g}, c + d > {types.CD_FLOOR:g}): {t['default']}; paper's "
           f"(radius {types.PAPER_RADIUS:g}): {t['paper_default']}",
           "  imbalance cut \\ c + d floor: " + "  ".join(f"{f:>14g}" for f in t["cd_floors"])]
    for cut, row in zip(t["imbalance_cuts"], t["counts"], strict=True):
        out.append(f"  {cut:>30.2f}: " + "  ".join(f"{'/'.join(map(str, c)):>14}" for c in row))
    out.append("  paper's rule by radius: " + ", ".join(
        f"{r:g}: {'/'.join(map(str, c))}" for r, c in zip(t["radii"], t["paper_counts"], strict=True)))
    return out


def _cluster_lines(c: dict) -> list[str]:
    sil = ", ".join(f"k = {k}: {v:.3f}" for k, v in c["silhouette"].items())
    out = [f"Clusters of the unit spectra of S ({c['heads']} heads, k-means, seed {c['seed']}, {c['restarts']} "
           "restarts)", f"  silhouette: {sil or 'n/a'}"]
    if str(c["k"]) in c["sizes"]:
        out.append(f"  k = {c['k']} sizes (positive-dominant first): {c['sizes'][str(c['k'])]}")
    if "ari" in c:
        out.append(f"  adjusted Rand index with the types: {c['ari']:.3f} (rule), {c['ari_paper_types']:.3f} "
                   f"(paper's); clusters x types: {c['contingency']}")
    return out


def _fit_lines(table: dict) -> list[str]:
    out = ["Goodness of fit per head (generalised gamma vs lognormal, location 0; shares of heads preferring each by "
           "AIC, median AIC(lognormal) - AIC(gengamma), median KS distances, fits at the power-law limit)",
           f"  {'sample':<13} {'heads':>5} {'size':>5} {'gengamma AIC':>13} {'lognormal AIC':>14} "
           f"{'dAIC median':>11} {'KS gg':>6} {'KS ln':>6} {'c at limit':>10}"]
    for name, row in table.items():
        share = lambda x: "n/a" if x is None else f"{100 * x:.0f}%"  # noqa: E731
        out.append(f"  {name:<13} {row['heads']:>5} {_f(row['sample_size'], '.0f'):>5} "
                   f"{share(row['gengamma']['aic_share']):>13} {share(row['lognormal']['aic_share']):>14} "
                   f"{_f(row['delta_aic']['q50'], '.2f'):>11} {_f(row['gengamma']['ks']['q50']):>6} "
                   f"{_f(row['lognormal']['ks']['q50']):>6} {row['c_limit']:>10}")
    return out


def format_text(rep: dict) -> str:
    """The report as text (what ``python -m pipeline report MODEL`` prints)."""
    lines = [f"{rep['model']}: {rep['heads']} heads"]
    if rep.get("pairing_law"):
        lines += _pairing_lines(rep["pairing_law"])
        e = rep["effective_rank"]
        lines += [f"Effective rank: participation ratio < 2 in {e['participation_below']['2']}, < 5 in "
                  f"{e['participation_below']['5']} of {e['heads']} heads (stable rank < 2 in "
                  f"{e['stable_rank_below_2']}); participation ratio {_q(e['participation_ratio'], '.1f')}"]
        lines += _type_lines(rep["types"]) + _cluster_lines(rep["clusters"]) + _fit_lines(rep["goodness_of_fit"])
    if rep.get("spectral_geometry"):
        g = rep["spectral_geometry"]
        lines += [f"Spectral geometry ({g['heads']} heads)",
                  f"  ||sigma(T) - sqrt(lambda_+ lambda_-)|| / ||sigma(T)||: {_q(g['geometric_error'])}",
                  f"  correlation of sigma(T) with |lambda(S)|: {_q(g['sigma_lambda_correlation'])}"]
    if rep.get("baseline"):
        b = rep["baseline"]
        note = f": {b['note']}" if b.get("note") else ""
        lines.append(f"Trained vs baseline {b['name']} ({b['heads']} heads){note}")
        for name in BASELINE_STATISTICS:
            r = b[name]
            lines.append(f"  {name}: median {_f(r['trained_median'], '.4f')} vs {_f(r['baseline_median'], '.4f')}; "
                         f"trained heads' percentile among the baseline's {_q(r['percentile'], '.1f')}")
    lines += [f"Note: {m}" for m in rep.get("notes", [])]
    lines += [f"Missing: {m}" for m in rep["missing"]]
    return "\n".join(lines)


def to_json(rep: dict) -> str:
    """The report as JSON (NaN-free: every value is a number, a string, a list, a dict or null)."""
    return json.dumps(rep, indent=2, allow_nan=False)
