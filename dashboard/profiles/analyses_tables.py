"""The Analyses tab's numbers as HTML: the summary counts, the goodness-of-fit table and the type rule's
sensitivity table, each written from the dicts of :func:`pipeline.analyses.report.report` (no number computed
here)."""

from __future__ import annotations

import html

from pipeline.analyses import types
from pipeline.analyses.report import BASELINE_STATISTICS

TABLE = "<table style='border-collapse: collapse; font-size: 12px; margin: 0.3em 0'>"
CELL = "style='padding: 0.15em 0.6em; border-bottom: 1px solid #e3e7ec; text-align: right; white-space: nowrap'"
HEAD = "style='padding: 0.15em 0.6em; border-bottom: 2px solid #c9d0d8; text-align: right; white-space: nowrap'"


def _f(x, spec: str = ".3f") -> str:
    return "n/a" if x is None else format(x, spec)


def _share(x) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def _row(cells, head: bool = False) -> str:
    tag, style = ("th", HEAD) if head else ("td", CELL)
    return "<tr>" + "".join(f"<{tag} {style}>{c}</{tag}>" for c in cells) + "</tr>"


def summary_html(a) -> str:
    """The pairing law's numbers, the balance and effective-rank counts, and the baseline's medians (an
    ``analyses_data.Analyses`` with a report)."""
    rep = a.report
    law, eff = rep["pairing_law"], rep["effective_rank"]
    beta, bound, bal = law["beta"], law["bound"], law["balance"]
    lines = [f"<b>{rep['heads']}</b> heads at d = 0",
             f"P: median {_f(law['P']['q50'])}; beta law a = {_f(beta['a'], '.2f')}, b = {_f(beta['b'], '.2f')}, "
             f"KS p = {_f(beta['ks_p'], '.3g')} ({beta['heads']} heads fitted, {beta['left_out']} at P = 0 or 1 "
             "left out)",
             f"bound 1 − (1 − r)/√(1 + r²): correlation with P {_f(bound['correlation'], '+.3f')}, holds for "
             f"{_share(bound['holds'])} of {bound['heads']} heads; gap median {_f(bound['gap']['q50'], '.4f')}",
             f"balance: n₊ = n₋ in <b>{bal['balanced']}</b> of {bal['heads']} heads",
             f"effective rank: participation ratio &lt; 2 in <b>{eff['participation_below']['2']}</b>, &lt; 5 in "
             f"<b>{eff['participation_below']['5']}</b> of {eff['heads']} heads (stable rank &lt; 2 in "
             f"{eff['stable_rank_below_2']})"]
    lines += _cluster_lines(rep["clusters"])
    base = rep.get("baseline")
    if base:
        lines.append(f"against the baseline <code>{html.escape(base['name'])}</code> ({base['heads']} heads), "
                     "median trained vs baseline:")
        lines += [f"&nbsp;&nbsp;{s}: {_f(base[s]['trained_median'], '.4f')} vs {_f(base[s]['baseline_median'], '.4f')}"
                  f"; trained heads' median percentile {_f(base[s]['percentile']['q50'], '.1f')}"
                  for s in BASELINE_STATISTICS]
    else:
        lines.append("no random baseline of this model in the store (<code>python -m pipeline baseline MODEL</code> "
                     "makes one)")
    lines += [f"missing: {html.escape(m)}" for m in rep["missing"]]
    return "<h2>Pairing law and counts</h2>" + "".join(f"<p>{line}</p>" for line in lines)


def _cluster_lines(c: dict) -> list[str]:
    """k-means of the unit spectra of S (``pipeline.analyses.clusters.clusters``): silhouettes, the chosen k's
    sizes and its agreement with the types."""
    sil = ", ".join(f"{k}: {v:.2f}" for k, v in c["silhouette"].items()) or "n/a"
    out = [f"clusters of the unit spectra of S (k-means): silhouette by k {sil}"]
    if str(c["k"]) in c["sizes"] and "ari" in c:
        out.append(f"&nbsp;&nbsp;k = {c['k']}: sizes {c['sizes'][str(c['k'])]}, adjusted Rand index with the types "
                   f"{c['ari']:.2f} (rule), {c['ari_paper_types']:.2f} (paper's)")
    return out


def fit_table_html(table: dict) -> str:
    """The goodness-of-fit table (``pipeline.analyses.goodness_of_fit.goodness_of_fit``): one row per sample."""
    head = ["sample", "heads", "median size", "gengamma by AIC", "lognormal by AIC", "median ΔAIC (ln − gg)",
            "median KS gg", "median KS ln", "gg at the power-law limit"]
    rows = [_row(head, head=True)]
    for name, r in table.items():
        rows.append(_row([html.escape(name), r["heads"], _f(r["sample_size"], ".0f"),
                          _share(r["gengamma"]["aic_share"]), _share(r["lognormal"]["aic_share"]),
                          _f(r["delta_aic"]["q50"], ".2f"), _f(r["gengamma"]["ks"]["q50"]),
                          _f(r["lognormal"]["ks"]["q50"]), r["c_limit"]]))
    return ("<h2>Goodness of fit per head: generalised gamma against lognormal</h2>"
            "<p class='note'>Each head's positive spectrum fitted by maximum likelihood (location 0); the shares "
            "of heads whose AIC prefers each law.</p>" + TABLE + "".join(rows) + "</table>")


def sensitivity_table_html(t: dict) -> str:
    """The type counts I₊ / II / I₋ over the imbalance cut (rows) and the c + d floor (columns), and the paper's
    radius rule beside (``pipeline.analyses.types.sensitivity``)."""
    rows = [_row(["imbalance cut \\ c + d floor", *[f"{f:g}" for f in t["cd_floors"]]], head=True)]
    for cut, counts in zip(t["imbalance_cuts"], t["counts"], strict=True):
        cells = [" / ".join(map(str, c)) for c in counts]
        cells = [f"<b>{c}</b>" if (cut, f) == (types.IMBALANCE_CUT, types.CD_FLOOR) else c
                 for c, f in zip(cells, t["cd_floors"], strict=True)]
        rows.append(_row([f"{cut:.2f}", *cells]))
    paper = [_row(["paper's radius", *[f"{r:g}" for r in t["radii"]]], head=True),
             _row(["I₊ / II / I₋", *[" / ".join(map(str, c)) for c in t["paper_counts"]]])]
    return (f"<h2>Type rule's sensitivity ({t['heads']} heads, d = 0)</h2>"
            f"<p class='note'>Counts of {' / '.join(t['names'])}; the rule's own thresholds (imbalance &gt; "
            f"{types.IMBALANCE_CUT:g}, c + d &gt; {types.CD_FLOOR:g}) give <b>{' / '.join(map(str, t['default']))}"
            f"</b>, the paper's radius {types.PAPER_RADIUS:g} rule "
            f"<b>{' / '.join(map(str, t['paper_default']))}</b>.</p>"
            + TABLE + "".join(rows) + "</table>" + TABLE + "".join(paper) + "</table>")
