"""The Analyses tab: what its views draw, checked against direct numpy / scipy computations on the stored values
of two tiny models profiled by the pipeline (a rotary one with an i.i.d. baseline, a position-free one without),
and where the tab and the baselines show (the page, the model lists, the export)."""

from __future__ import annotations

import numpy as np
import pytest
from bokeh.models import Tabs
from scipy import stats

from dashboard import data
from dashboard.common.render import render
from dashboard.common.selection import statistics_table
from dashboard.profiles import analyses as views
from dashboard.profiles.analyses_data import P_BINS, SIGMA_PAIRS, analyses, baseline_of
from tests.dashboard.analyses_store import PLAIN, ROPE, ROPE_BASELINE, analyses_site, analyses_store
from tests.shared import ANALYSES_PAGES

pytestmark = ANALYSES_PAGES


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return analyses_store(tmp_path_factory)


@pytest.fixture(scope="module")
def ds(store):
    return data.profiles(store)


def stat(sel, name: str) -> np.ndarray:
    return statistics_table(sel)[name].ravel()


def source(fig, name: str) -> dict:
    return {k: np.asarray(v, dtype=float) for k, v in fig.select_one({"name": name}).data.items()
            if k not in ("layer", "head")}


def test_the_baseline_is_found_by_its_tag_and_only_for_its_model(ds):
    assert str(baseline_of(ds, ROPE)["model"].values) == ROPE_BASELINE
    assert baseline_of(ds, PLAIN) is None


def test_the_p_histogram_and_beta_law_are_scipys(ds):
    sel, base = ds.sel(model=ROPE), baseline_of(ds, ROPE)
    P = stat(sel, "pairing")
    fig = render(views.pairing_histogram(sel, base))
    want, edges = np.histogram(P, bins=P_BINS, range=(0, 1), density=True)
    bars = source(fig, "analyses_p")
    np.testing.assert_allclose(bars["top"], want, atol=1e-12)
    np.testing.assert_allclose(bars["left"], edges[:-1], atol=1e-12)
    a, b, _, _ = stats.beta.fit(P, floc=0, fscale=1)
    line = source(fig, "analyses_p_beta")
    np.testing.assert_allclose(line["density"], stats.beta.pdf(line["P"], a, b), rtol=1e-6)
    ks = stats.kstest(P, "beta", args=(a, b, 0, 1)).pvalue
    assert f"KS p = {ks:.2g}" in fig.title.text and f"a = {a:.2f}" in fig.title.text
    base_want, _ = np.histogram(stat(base, "pairing"), bins=P_BINS, range=(0, 1), density=True)
    np.testing.assert_allclose(source(fig, "analyses_p_baseline")["top"], base_want, atol=1e-12)
    assert fig.select_one({"name": "analyses_p_baseline_bars"}).visible


def test_p_against_its_bound_with_each_heads_percentiles_among_the_baselines(ds):
    sel, base = ds.sel(model=ROPE), baseline_of(ds, ROPE)
    fig = render(views.pairing_bound_view(sel, base))
    dots = source(fig, "analyses_bound_heads")
    rho = stat(sel, "rho")
    np.testing.assert_allclose(dots["P"], stat(sel, "pairing"), rtol=1e-6)  # float32 on the page
    np.testing.assert_allclose(dots["r"], np.where(rho <= 1, rho, 1 / rho), rtol=1e-6)
    for name in ("symmetric_energy", "pairing", "rho"):
        ref = stat(base, name)
        want = [stats.percentileofscore(ref, x, kind="mean") for x in stat(sel, name)]
        np.testing.assert_allclose(dots[f"percentile_{name}"], want, rtol=1e-6, err_msg=name)
    curve = source(fig, "analyses_bound_curve")
    r = curve["r"]
    np.testing.assert_allclose(curve["P"], 1 - (1 - r) / np.sqrt(1 + r ** 2))
    bound = 1 - np.abs(1 - rho) / np.sqrt(1 + rho ** 2)  # the stored statistic's own formula, at rho
    corr = np.corrcoef(stat(sel, "pairing"), bound)[0, 1]
    assert f"corr. {corr:+.3f}" in fig.title.text


def test_the_rho_histogram_counts_the_heads_above_its_range(ds):
    sel, base = ds.sel(model=ROPE), baseline_of(ds, ROPE)
    rho = stat(sel, "rho")
    fig = render(views.rho_histogram(sel, base))
    counts, edges = np.histogram(rho, bins=40, range=(0, 2))
    np.testing.assert_allclose(source(fig, "analyses_rho")["top"], counts / len(rho) / np.diff(edges))
    assert f"({int(np.sum(rho > 2))} heads above 2)" in fig.title.text
    base_want, _ = np.histogram(stat(base, "rho"), bins=40, range=(0, 2), density=True)
    np.testing.assert_allclose(source(fig, "analyses_rho_baseline")["top"], base_want, atol=1e-12)


def test_sigma_of_t_against_the_geometric_means_of_the_lobes(ds):
    sel = ds.sel(model=ROPE)
    k = 2 * int(sel["d_head"])
    spectrum = sel["spectrum"].values[:3, :4, :k].reshape(-1, k)
    sigma_t = sel["antisym_spectrum"].values[:3, :4, :k].reshape(-1, k)
    want = []
    for lam, sig in zip(spectrum, sigma_t, strict=True):
        plus = np.sort(lam[lam > 0])[::-1]
        minus = np.sort(-lam[lam < 0])[::-1]
        distinct = np.sort(sig)[::-1][::2]
        for i in range(SIGMA_PAIRS):
            g = np.sqrt(plus[i] * minus[i]) if i < min(len(plus), len(minus)) else 0.0
            want.append((distinct[i], g))
    got = source(render(views.sigma_geometric(sel)), "analyses_sigma")
    np.testing.assert_allclose(np.stack([got["σ(T)"], got["√(λ₊ λ₋)"]], axis=-1), np.array(want), rtol=1e-6)


def test_the_counts_and_tables(ds):
    sel = ds.sel(model=PLAIN)
    a = analyses(sel)
    summary = views.analyses_summary(a).data
    n_pos, n_neg = stat(sel, "n_pos"), stat(sel, "n_neg")
    assert f"n₊ = n₋ in <b>{int(np.sum(n_pos == n_neg))}</b> of 12 heads" in summary
    pr = stat(sel, "participation_ratio")
    assert f"&lt; 2 in <b>{int(np.sum(pr < 2))}</b>, &lt; 5 in <b>{int(np.sum(pr < 5))}</b>" in summary
    assert "no random baseline of this model" in summary
    profile = sel["profile"].values[:3, :4, 0].reshape(-1, 4)
    c, d = profile[:, 2], profile[:, 3]
    imbalance = (c - d) / (c + d)
    plus = int(np.sum((c + d > 0.01) & (imbalance > 0.2)))
    minus = int(np.sum((c + d > 0.01) & (imbalance < -0.2)))
    table = views.type_sensitivity_table(a).data
    assert f"give <b>{plus} / {12 - plus - minus} / {minus}</b>" in table
    fits = views.goodness_of_fit_table(a).data
    for sample in ("eig_L", "lambda_plus", "lambda_minus", "sigma_T"):
        assert f">{sample}</td>" in fits


def named(page) -> list[tuple[str, str]]:
    tab = page.select_one({"name": "analyses"})
    return sorted((m.name, type(m).__name__) for m in tab.references() if m.name)


def test_the_page_has_the_tab_with_the_same_named_models_for_every_model(analyses_pages):
    _, pages = analyses_pages
    assert named(pages[ROPE]) == named(pages[PLAIN])  # the served app switches models in place
    titles = [t.title for p in pages.values() for t in p.select_one({"type": Tabs}).tabs]
    assert titles == ["Profiles", "Analyses"] * 2
    assert not pages[PLAIN].select_one({"name": "analyses_p_baseline_bars"}).visible
    everything = [m.name for m in pages[ROPE].references() if m.name]
    assert all(everything.count(n) == 1 for n, _ in named(pages[ROPE]))  # the browser finds each by its name


def test_baselines_stay_out_of_the_trained_models_lists(store, ds, tmp_path_factory):
    from dashboard.compare.views import computed_models
    from dashboard.profiles.page_texts import selector_groups

    names = [n for group in selector_groups(data.rows(store)).values() for n in group]
    assert names == [ROPE, PLAIN] and computed_models(ds) == [ROPE, PLAIN]
    out, written = analyses_site(tmp_path_factory)
    pages = [p.name for p in written if p.name.startswith("profiles-")]
    assert len(pages) == 2 and not any("iid" in p for p in pages)
    assert ROPE_BASELINE not in (out / "index.html").read_text()
    rope_page = next(p for p in written if p.name.startswith(f"profiles-{ROPE}")).read_text()
    assert "analyses_p_baseline" in rope_page and ROPE_BASELINE in rope_page
