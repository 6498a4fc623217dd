"""benchmarks/scaling_bench.py --quick: the script runs the three ways, its printed ratios follow from its printed
times, and each of its stores holds every layer with the profiles the profile core gives for that layer."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
NUM = r"([0-9]+(?:\.[0-9]+)?)"

pytest.importorskip("distributed", reason="the scaling benchmark runs dask LocalClusters (pip install -e .[pipeline])")


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scaling")
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "scaling_bench.py"), "--quick", "--dir",
                          str(folder)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    return folder, out.stdout


@pytest.mark.slow
def test_the_quick_run(quick):
    """One run of the script serves both checks (it takes minutes; one test, so that pytest-xdist does not run
    the module's fixture once per worker)."""
    printed_ratios_follow_from_the_printed_times(quick)
    every_store_holds_every_layer_with_the_profile_cores_values(quick)


def printed_ratios_follow_from_the_printed_times(quick):
    _, text = quick
    times = re.search(rf"times: inline 1 thread {NUM} s; 1 worker x 1 thread {NUM} s; 2 workers x 1 thread {NUM} s",
                      text)
    assert times, text
    inline, one, two = map(float, times.groups())
    assert min(inline, one, two) > 0
    ratios = re.search(rf"1 worker / inline {NUM} .*2 workers speed-up over 1 worker {NUM} \(target >= 1.8: "
                       r"(met|MISSED)\); inline / 2 workers " + NUM, text)
    assert ratios, text
    over, speedup, verdict, inline_two = ratios.groups()
    # the printed times are rounded to 0.01 s: the ratios agree with them to that rounding
    for printed, want in ((over, one / inline), (speedup, one / two), (inline_two, inline / two)):
        assert float(printed) == pytest.approx(want, rel=0.02, abs=0.01)
    assert verdict == ("met" if float(speedup) >= 1.8 else "MISSED")
    for workers in (8, 64):
        assert re.search(rf"lock at {workers} workers: 4 layers x {NUM} ms = {NUM} ms of store lock", text), text
    assert re.search(rf"a layer's write {NUM} ms per layer", text), text


def every_store_holds_every_layer_with_the_profile_cores_values(quick):
    from pipeline.families import layout_from_config, rotations
    from pipeline.registry.checkpoints import open_checkpoint
    from pipeline.run import compute_layer
    from pipeline.store import Store

    folder, text = quick
    assert "profiles bit-equal across them: yes" in text
    stores = sorted(folder.glob("*.zarr"))
    assert [s.name.split("-")[0] for s in stores] == ["1", "2", "inline"]
    ckpt = open_checkpoint(str(folder / "rotary-256-4"))
    layout = layout_from_config(ckpt.config)
    assert layout.n_layers == 4 and layout.n_heads == 4 and layout.n_kv_heads == 2
    want = np.stack([compute_layer(ckpt, layout, layer, False, rotations(layout))[0] for layer in range(4)])
    assert want.shape == (4, 4, 129, 4)
    for location in stores:
        store = Store.open(str(location), mode="r")
        assert store.layers_done("scaling").tolist() == [True] * 4 and store.is_complete("scaling")
        got = np.asarray(store.dataset("profiles")["profile"].sel(model="scaling").values)
        np.testing.assert_allclose(got[:4, :4], want, rtol=0, atol=1e-12)


def test_help_teaches():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "scaling_bench.py"), "--help"], capture_output=True,
                         text=True, timeout=60, cwd=ROOT, env=dict(os.environ))
    assert out.returncode == 0 and "--quick" in out.stdout and "2 workers x 1 thread" in out.stdout
