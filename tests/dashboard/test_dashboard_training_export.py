"""The exporter and the training runs: one page per run (its own, or the page of the model of its name), the index's
runs, and ``--run-d0-only``, which ships a run's frames at d = 0 alone and says what it left out."""

from __future__ import annotations

import re

import pytest

from dashboard.export import main, profile_page_name
from dashboard.training import frames as tf
from dashboard.training import runs
from tests.browser.conftest import ABSOLUTE_MODEL, ROPE_MODEL
from tests.dashboard.training_store import RUN, RUN_SHAPE, RUN_STEPS
from tests.shared import SYNTHETIC_PAGES, exported_once

pytestmark = SYNTHETIC_PAGES


@pytest.fixture(scope="module")
def site(tmp_path_factory, training_store):
    return exported_once(tmp_path_factory, "training-export", training_store)


def test_every_run_has_a_page_and_the_index_lists_the_runs(site, training_store):
    out, paths = site
    names = {p.name for p in paths}
    assert {profile_page_name(n) for n in (ROPE_MODEL, ABSOLUTE_MODEL, RUN)} <= names
    run_page = (out / profile_page_name(RUN)).read_text()
    assert '"training_frames"' in run_page and "--run-d0-only" not in run_page
    assert '"training_frames"' in (out / profile_page_name(ROPE_MODEL)).read_text()  # the model's Training tab
    assert '"training_frames"' not in (out / profile_page_name(ABSOLUTE_MODEL)).read_text()
    index = (out / "index.html").read_text()
    rows = re.findall(r"<tr><td><a href=\"([^\"]+)\">([^<]+)</a></td><td class='num'>(\d+)</td><td>([^<]+)</td>", index)
    assert (f"{profile_page_name(RUN)}?tab=training", RUN, str(len(RUN_STEPS)), f"0 to {RUN_STEPS[-1]}") in rows
    assert (f"{profile_page_name(ROPE_MODEL)}?tab=training", ROPE_MODEL) in {r[:2] for r in rows}
    assert "1 not complete" in index  # RUN's frame with one layer written


@pytest.mark.slow
def test_d0_only_ships_the_frames_at_d_0_and_says_what_it_left_out(tmp_path, site, training_store, capsys):
    full = site[0] / profile_page_name(RUN)
    assert main([str(tmp_path / "out"), "--store", str(training_store), "--run-d0-only"]) == 0
    printed = capsys.readouterr().out
    F, (L, H) = len(RUN_STEPS), RUN_SHAPE
    assert (f"{RUN}: exported at d = 0 alone (--run-d0-only); left out: the frames at d = 1 to 128 ({F} frames x "
            f"{L * H} heads x 128 offsets)") in printed
    page = (tmp_path / "out" / profile_page_name(RUN)).read_text()
    assert "Exported at d = 0 alone (&lt;code&gt;--run-d0-only&lt;/code&gt;): the frames at d = 1 to 128" in page
    # the frames of a run this small are a small part of its page; what is left out is 128 of every 129 offsets
    frames = tf.run_frames(runs.run(training_store, RUN), RUN)
    assert len(page) < full.stat().st_size - tf.frame_cube(frames.profile).nbytes // 20
