"""``report RUN --over-steps`` and ``report RUN --step S`` on a small run of checkpoints, through the command.

The run: four tiny random GPT-NeoX checkpoints (tests/pipeline/test_revisions_run.py's ``make_run``) at steps 0, 5,
10 and 100, the last with the weights of step 10 (a repeat, copied by the run). The independent computation reads
the run group with zarr alone and computes each number in plain numpy: the type rule head by head, medians, the
beta law by its own maximum likelihood (scipy.optimize on the log-density), the displacement by np.linalg.norm.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import zarr
from scipy import optimize, special

from pipeline.__main__ import build_parser
from pipeline.__main__ import main as pipeline_main
from pipeline.analyses.head_data import HeadData
from pipeline.analyses.report import report, to_json
from pipeline.schema import SPECTRA, STATISTICS
from tests.pipeline.test_cli_profiles import cli
from tests.pipeline.test_revisions_run import make_run

STEPS = (0, 5, 10, 100)
RUN = "trainer-out"
NAMES = ("Type I₊", "Type II", "Type I₋")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root, _ = make_run(tmp_path_factory.mktemp("trainer") / RUN, STEPS, seeds=(0, 5, 10, 10))
    path = tmp_path_factory.mktemp("store") / "s.zarr"
    assert cli("profiles", root, "--revisions", "all", "--store", path, "--quiet") == 0
    return path


def command(capsys, *argv) -> tuple[int, str, str]:
    code = pipeline_main(["report", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


class Raw:
    """The run group as zarr holds it, in numpy: per frame (store order) its step, revision, repeat_of, layers
    written, profile at d = 0 (L, H, 4), statistics (L, H, 17, in STATISTICS' order), spectrum and spectra."""

    def __init__(self, path, name: str = RUN):
        g = zarr.open_group(str(path), path=f"runs/{name}", mode="r")
        self.attrs = dict(g.attrs)
        self.steps = [int(s) for s in g["step"][:]]
        n = len(self.steps)
        self.revision = [str(r) for r in g["revision"][:n]]
        self.repeat_of = [int(r) for r in g["repeat_of"][:n]]
        self.done = np.asarray(g["layer_done"][:n], dtype=bool)
        self.profile = np.asarray(g["profile"][:n])[:, :, :, 0, :]
        names = [str(s) for s in g["statistic"][:]]
        self.stats = np.asarray(g["head_statistics"][:n])[..., [names.index(s) for s in STATISTICS]]
        self.spectrum = np.asarray(g["spectrum"][:n])
        self.spectra = {s: np.asarray(g[s][:n]) for s in SPECTRA}

    def at(self, step: int) -> int:
        return self.steps.index(step)

    def stat(self, step: int, name: str) -> np.ndarray:
        return self.stats[self.at(step), :, :, STATISTICS.index(name)].ravel()

    def head_data(self, step: int) -> HeadData:
        i, a = self.at(step), self.attrs
        L, H = self.profile.shape[1:3]
        k = min(a["d_model"], 2 * a["d_head"])
        return HeadData(f"{RUN} step {step} ({self.revision[i]})", a["d_model"], a["d_head"],
                        np.repeat(np.arange(L), H), np.tile(np.arange(H), L), self.profile[i].reshape(-1, 4),
                        self.stats[i].reshape(L * H, -1), self.spectrum[i].reshape(L * H, -1)[:, :k],
                        {s: v[i].reshape(L * H, -1)[:, :k] for s, v in self.spectra.items()}, a["command"])


def type_of(p: np.ndarray) -> int:
    """The project's rule for one head, written out: 0 = I+, 1 = II, 2 = I-."""
    a, b, c, d = p
    s = c + d
    imbalance = (c - d) / s if s > 0 else 0.0
    if s > 0.01 and imbalance > 0.2:
        return 0
    if s > 0.01 and imbalance < -0.2:
        return 2
    return 1


def beta_mle(P: np.ndarray) -> tuple[float, float]:
    """The beta law's maximum likelihood (a, b) of the P strictly inside (0, 1), from its log-density."""
    x = P[np.isfinite(P) & (P > 0) & (P < 1)]

    def nll(t):
        a, b = np.exp(t)
        return -np.sum((a - 1) * np.log(x) + (b - 1) * np.log1p(-x) - special.betaln(a, b))

    m, v = x.mean(), x.var()
    common = m * (1 - m) / v - 1  # the method of moments as the start
    res = optimize.minimize(nll, np.log([m * common, (1 - m) * common]), method="Nelder-Mead",
                            options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000})
    return tuple(np.exp(res.x))


def expected_row(raw: Raw, step: int, first: int) -> dict:
    i, j = raw.at(step), raw.at(first)
    p, q = raw.profile[i].reshape(-1, 4), raw.profile[j].reshape(-1, 4)
    counts = [0, 0, 0]
    for head in p:
        counts[type_of(head)] += 1
    return {"types": counts,
            "medians": {s: float(np.median(raw.stat(step, s))) for s in ("symmetric_energy", "pairing", "rho")},
            "beta": beta_mle(raw.stat(step, "pairing")),
            "displacement": float(np.mean([np.sqrt(np.sum((p[h] - q[h]) ** 2)) for h in range(len(p))]))}


def check_rows(got: dict, raw: Raw, first: int, skip=()) -> None:
    assert [r["step"] for r in got["steps"]] == sorted(raw.steps)
    for r in got["steps"]:
        i = raw.at(r["step"])
        assert r["revision"] == raw.revision[i] and r["repeat_of"] == raw.repeat_of[i]
        if r["step"] in skip:
            assert r == {"step": r["step"], "revision": raw.revision[i], "repeat_of": -1, "complete": False}
            continue
        want = expected_row(raw, r["step"], first)
        assert r["complete"] and r["heads"] == raw.profile[i].shape[0] * raw.profile[i].shape[1]
        assert r["types"] == want["types"], r["step"]
        for s, m in want["medians"].items():
            assert r["medians"][s] == pytest.approx(m, rel=1e-12), (r["step"], s)
        assert (r["beta"]["a"], r["beta"]["b"]) == pytest.approx(want["beta"], rel=2e-3), r["step"]
        assert r["displacement"] == pytest.approx(want["displacement"], rel=1e-12, abs=1e-15), r["step"]


def test_over_steps_json_equals_the_numpy_computation(store, capsys):
    raw = Raw(store)
    code, out, err = command(capsys, RUN, "--over-steps", "--json", "--store", store)
    assert code == 0, err
    got = json.loads(out)
    assert got["run"] == RUN and got["type_names"] == list(NAMES)
    assert got["first"]["step"] == 0 and got["first"]["initialisation"]
    assert "its own random baseline" in got["first"]["note"]
    assert raw.repeat_of[raw.at(100)] == 10  # the run copied step 100 from step 10
    check_rows(got, raw, first=0)
    rows = {r["step"]: r for r in got["steps"]}
    assert rows[0]["displacement"] == 0.0 and rows[5]["displacement"] > 1e-3
    assert rows[100]["medians"] == rows[10]["medians"] and rows[100]["displacement"] == rows[10]["displacement"]
    # the text prints the same numbers and says what the first frame is
    code, text, _ = command(capsys, RUN, "--over-steps", "--store", store)
    assert code == 0
    assert "from the first frame (step 0, the run's initialisation: its own random baseline)" in text
    line = next(x for x in text.splitlines() if x.split()[:2] == ["5", "checkpoint-5"])
    r = rows[5]
    assert line.split()[2:] == [str(r["heads"]), "/".join(map(str, r["types"])),
                                f"{r['medians']['symmetric_energy']:.4f}", f"{r['medians']['pairing']:.4f}",
                                f"{r['medians']['rho']:.4f}", f"{r['beta']['a']:.2f}", f"{r['beta']['b']:.2f}",
                                f"{r['displacement']:.4f}"]
    assert "(repeats step 10)" in next(x for x in text.splitlines() if x.split()[:1] == ["100"])


def test_a_step_report_reads_its_frame_and_compares_with_step_0(store, capsys):
    raw = Raw(store)
    code, out, err = command(capsys, RUN, "--step", 10, "--json", "--store", store)
    assert code == 0, err
    got = json.loads(out)
    note = "step 0, the run's initialisation: its own random baseline"
    want = report(raw.head_data(10), raw.head_data(0), seed=0, baseline_note=note)
    want |= {"run": RUN, "step": 10}
    assert got == json.loads(to_json(want))
    # the frames' values themselves, against the raw arrays
    b = got["baseline"]
    assert b["name"] == f"{RUN} step 0 (checkpoint-0)" and b["note"] == note and b["heads"] == 8
    assert b["pairing"]["trained_median"] == pytest.approx(np.median(raw.stat(10, "pairing")), rel=1e-12)
    assert b["pairing"]["baseline_median"] == pytest.approx(np.median(raw.stat(0, "pairing")), rel=1e-12)
    assert got["types"]["default"] == expected_row(raw, 10, 0)["types"]
    code, text, _ = command(capsys, RUN, "--step", 10, "--store", store)
    assert code == 0 and text.startswith(f"{RUN} step 10 (checkpoint-10): 8 heads")
    assert f"Trained vs baseline {RUN} step 0 (checkpoint-0) (8 heads): {note}" in text


def test_step_0_is_the_baseline_itself_and_says_so(store, capsys):
    code, out, _ = command(capsys, RUN, "--step", 0, "--json", "--store", store)
    got = json.loads(out)
    assert code == 0 and got["baseline"] is None
    assert got["notes"] == ["step 0 is the run's initialisation: it is the run's own random baseline, the one its "
                            "other steps' reports compare with"]
    _, text, _ = command(capsys, RUN, "--step", 0, "--store", store)
    assert f"Note: {got['notes'][0]}" in text


def test_without_a_complete_step_0_the_first_frame_is_no_baseline(store, tmp_path, capsys):
    """Step 0's second layer cleared (as verify clears a damaged layer) and step 5's too: step 0 is not complete,
    so the first frame is step 5's, which is no random baseline; a step's report has no baseline and says why."""
    copy = tmp_path / "s.zarr"
    shutil.copytree(store, copy)
    g = zarr.open_group(str(copy), path=f"runs/{RUN}", mode="r+")
    steps = [int(s) for s in g["step"][:]]
    g["layer_done"][steps.index(0), 1] = False
    raw = Raw(copy)
    code, out, err = command(capsys, RUN, "--over-steps", "--json", "--store", copy)
    assert code == 0, err
    got = json.loads(out)
    assert got["first"] == {"step": 5, "initialisation": False, "note": "step 5: the run has no complete frame of "
                            "step 0 (initialisation), so no baseline of its own"}
    check_rows(got, raw, first=5, skip=(0,))
    code, text, _ = command(capsys, RUN, "--over-steps", "--store", copy)
    assert "checkpoint-0     not complete" in text and "first frame (step 5: the run has no complete" in text
    code, out, _ = command(capsys, RUN, "--step", 10, "--json", "--store", copy)
    got = json.loads(out)
    assert code == 0 and got["baseline"] is None
    assert got["missing"] == [f"no baseline of the run {RUN}: it has no complete frame of step 0 (initialisation), "
                              "its own random baseline; compare with --baseline init, iid or a model of the store"]
    code, out, _ = command(capsys, RUN, "--step", 0, "--json", "--store", copy)
    assert code == 0 and "the frame of step 0 is not complete" in json.loads(out)["missing"][0]


@pytest.mark.parametrize(("argv", "line"), [
    ((RUN, "--step", 7), f"error: step 7 is not a frame of the run '{RUN}'; the nearest: 5, 10 (4 frames; "
                         "`python -m pipeline list` shows them)"),
    ((RUN,), f"error: '{RUN}' is a run of the store (runs/{RUN}): give --step S for one frame's report or "
             "--over-steps for the summary by step"),
    (("no-such-run", "--over-steps"), "error: no run 'no-such-run' in the store"),
    ((RUN, "--over-steps", "--baseline", "init"), "error: --over-steps takes no --baseline: its reference is the "
                                                  "run's first frame"),
])
def test_bad_input_is_one_line_and_exit_2(store, capsys, argv, line):
    code, out, err = command(capsys, *argv, "--store", store)
    assert code == 2 and out == "" and err.startswith(line) and err.count("\n") == 1


def test_help_says_what_the_baseline_and_the_displacement_are():
    sub = next(a for a in build_parser()._subparsers._group_actions if a.choices)
    text = " ".join(sub.choices["report"].format_help().split())
    assert "the first frame of a run that starts at initialisation is its own random baseline" in text
    assert ("the mean over heads of the Euclidean distance between a head's (a, b, c, d) at d = 0 in that frame and "
            "in the run's first frame") in text
