"""A run's revisions (pipeline.registry.revisions): local checkpoint folders and Hub branches listed over the
loopback Hub (tests/hub_server.py, the real huggingface_hub client), their steps (names, trainer_state.json), the
SPEC forms against computations of their own, every refusal's exact line, and ``HUB_ID@BRANCH`` references."""

from __future__ import annotations

import json
import os
import socket
import time

import numpy as np
import pytest

pytest.importorskip("huggingface_hub", reason="the revision listing reads the Hub through huggingface_hub")

from pipeline.registry.checkpoints import CheckpointError, open_checkpoint, resolve  # noqa: E402
from pipeline.registry.revisions import Revision, RevisionError, list_revisions, select  # noqa: E402
from tests.hub_server import LoopbackHub  # noqa: E402

REPO = "test-org/tiny-run"
CONFIG = json.dumps({"model_type": "gpt2", "n_embd": 8, "n_head": 2, "n_layer": 1}).encode()

# Pythia's 154 revisions: step0, the powers of two to 512, then every 1000th step to 143000.
PYTHIA_STEPS = [0, *(2**i for i in range(10)), *range(1000, 143001, 1000)]


def state(step) -> bytes:
    return json.dumps({"global_step": step, "epoch": 1.0, "log_history": []}).encode()


def revisions(steps, prefix="step") -> list[Revision]:
    return [Revision(f"{prefix}{s}", s, f"{REPO}@{prefix}{s}") for s in steps]


def names(revs) -> list[str]:
    return [r.name for r in revs]


def one_line(message: str) -> str:
    assert "\n" not in message
    return message


# ------------------------------------------------------------------------------------------------ local folders
def make_run(root, subfolders: dict[str, dict[str, bytes]]):
    for sub, files in subfolders.items():
        (root / sub).mkdir(parents=True)
        for name, data in files.items():
            (root / sub / name).write_bytes(data)
    return root


def test_local_steps_are_ordered_as_numbers(tmp_path):
    run = make_run(tmp_path / "run", {
        "checkpoint-10": {"config.json": CONFIG}, "checkpoint-5": {"config.json": CONFIG},
        "checkpoint-100": {"config.json": CONFIG, "trainer_state.json": state(999)},  # the name wins
        "checkpoint-50": {}, "step0": {},
        "final": {"config.json": CONFIG, "trainer_state.json": state(120)},
        "runs": {"events.out": b"x"}, ".cache": {"config.json": CONFIG},  # not checkpoints
    })
    (run / "config.json").write_bytes(CONFIG)  # the Trainer's final model at the top: not a revision
    got = list_revisions(str(run))
    assert [(r.name, r.step) for r in got] == [("step0", 0), ("checkpoint-5", 5), ("checkpoint-10", 10),
                                               ("checkpoint-50", 50), ("checkpoint-100", 100), ("final", 120)]
    assert [r.ref for r in got] == [os.path.abspath(run / r.name) for r in got]
    assert sorted(names(got)) != names(got)  # as text, checkpoint-10 would come before checkpoint-5


def test_a_trainer_state_step_orders_an_unnamed_checkpoint(tmp_path):
    run = make_run(tmp_path / "run", {"early": {"trainer_state.json": state(3)},
                                      "late": {"trainer_state.json": state(40)},
                                      "step7": {}})
    assert [(r.name, r.step) for r in list_revisions(str(run))] == [("early", 3), ("step7", 7), ("late", 40)]


@pytest.mark.parametrize("case, message", [
    ("empty", "no checkpoints in {run}: no subfolder named checkpoint-N or stepN, nor one holding "
              "trainer_state.json."),
    ("one", "no checkpoints in {run} (it is one checkpoint: profile it without a revision spec): no subfolder named "
            "checkpoint-N or stepN, nor one holding trainer_state.json."),
    ("unnamed", "revision 'final' of {run}: no step in its name (stepN, checkpoint-N) and no trainer_state.json with "
                "a global_step; name it stepN or checkpoint-N, or move it out of the folder."),
    ("no-global-step", "revision 'late' of {run}: its trainer_state.json has no global_step (a whole number >= 0), "
                       "but None."),
    ("negative", "revision 'late' of {run}: its trainer_state.json has no global_step (a whole number >= 0), but -1."),
    ("fraction", "revision 'late' of {run}: its trainer_state.json has no global_step (a whole number >= 0), "
                 "but 2.5."),
    ("not-json", "revision 'late' of {run}: its trainer_state.json is not valid JSON (Expecting value)."),
    ("same-step", "revisions 'checkpoint-500' and 'step500' of {run} are both step 500; a run holds one revision per "
                  "step, so keep one of them."),
])
def test_bad_folders_are_refused_in_one_line(tmp_path, case, message):
    run = tmp_path / "run"
    run.mkdir()
    subs = {"empty": {"runs": {"log.txt": b"x"}}, "one": {}, "unnamed": {"step1": {}, "final": {"config.json": CONFIG}},
            "no-global-step": {"late": {"trainer_state.json": b'{"epoch": 3}'}},
            "negative": {"late": {"trainer_state.json": state(-1)}},
            "fraction": {"late": {"trainer_state.json": state(2.5)}},
            "not-json": {"late": {"trainer_state.json": b"oops"}},
            "same-step": {"checkpoint-500": {}, "step500": {}}}[case]
    make_run(run, subs)
    if case == "one":
        (run / "config.json").write_bytes(CONFIG)
    with pytest.raises(RevisionError) as err:
        list_revisions(str(run))
    assert one_line(str(err.value)) == message.format(run=run)


def test_what_is_not_a_run_is_refused_in_one_line(tmp_path):
    weights = tmp_path / "model.gguf"
    weights.write_bytes(b"GGUF")
    cases = {
        str(weights): f"{str(weights)!r} is one checkpoint (a file), not a run; pass a folder of checkpoints "
                      "(checkpoint-N, stepN) or a Hub id whose branches are the revisions.",
        f"{REPO}@step1": f"'{REPO}@step1' names one revision; pass the Hub id alone ({REPO}): its branches are the "
                         "run's revisions, and the revision spec picks among them.",
        "./no/such/run": "unknown model './no/such/run': not a folder, not a registry name, not a Hub id (org/name).",
    }
    for model, message in cases.items():
        with pytest.raises(RevisionError) as err:
            list_revisions(model)
        assert one_line(str(err.value)).startswith(message)


# ------------------------------------------------------------------------------------------------ the Hub


WEIGHTS = b"\0" * 4096  # stands for a weight file: the listing must never ask for it


def branch(step_state=None) -> dict[str, bytes]:
    files = {"config.json": CONFIG, "model.safetensors": WEIGHTS}
    return files if step_state is None else files | {"trainer_state.json": state(step_state)}


def serve(hub_env, branches: dict[str, dict[str, bytes]], main=None, **kw) -> LoopbackHub:
    hub = LoopbackHub({REPO: main if main is not None else branch()}, branches={REPO: branches}, **kw).start()
    hub_env.setenv("HF_ENDPOINT", hub.endpoint)
    return hub


def test_hub_branches_are_the_revisions_in_step_order(hub_env):
    branches = {f"step{s}": branch() for s in (1000, 0, 2, 10, 1, 143000)} | {"v2-final": branch(150000)}
    hub = serve(hub_env, branches)
    try:
        got = list_revisions(REPO)
        assert [(r.name, r.step, r.ref) for r in got] == [
            (n, s, f"{REPO}@{n}") for n, s in [("step0", 0), ("step1", 1), ("step2", 2), ("step10", 10),
                                               ("step1000", 1000), ("step143000", 143000), ("v2-final", 150000)]]
        # main (no trainer_state.json) is passed over; only the refs and two trainer_state.json were asked for
        fetched = {path for _method, path, _range in hub.requests if REPO in path}
        assert fetched == {f"/api/models/{REPO}/refs", f"/{REPO}/resolve/main/trainer_state.json",
                           f"/{REPO}/resolve/v2-final/trainer_state.json"}
        assert hub.total_bytes(REPO) == len(state(150000))
    finally:
        hub.stop()


@pytest.mark.parametrize("main_step, listed", [(5, ["step1", "main", "step9"]), (9, ["step1", "step9"])])
def test_main_counts_only_with_a_step_of_its_own(hub_env, main_step, listed):
    """main is taken when its trainer_state.json gives a step no other branch has, and dropped as the published
    copy of the branch that has its step."""
    hub = serve(hub_env, {"step1": branch(), "step9": branch()}, main=branch(main_step))
    try:
        assert names(list_revisions(REPO)) == listed
    finally:
        hub.stop()


def test_hub_refusals_are_one_line(hub_env):
    hub = serve(hub_env, {"step1": branch(), "experiment": branch()})
    try:
        with pytest.raises(RevisionError) as err:
            list_revisions(REPO)
        assert one_line(str(err.value)) == (
            f"revision 'experiment' of {REPO}: no step in its name (stepN, checkpoint-N) and no trainer_state.json "
            "with a global_step; a run's revisions are ordered by step, so it cannot be placed.")
        with pytest.raises(RevisionError) as err:
            list_revisions("test-org/absent")
        assert one_line(str(err.value)) == (
            f"no model repository 'test-org/absent' at {hub.endpoint} (or it is private: set HF_TOKEN). Check the "
            "spelling of the Hub id, or pass a local folder.")
    finally:
        hub.stop()
    lone = serve(hub_env, {})
    try:
        with pytest.raises(RevisionError) as err:
            list_revisions(REPO)
        assert one_line(str(err.value)) == (
            f"{REPO} has no revision branches at {lone.endpoint} (its branches: main); revisions are branches named "
            "stepN or checkpoint-N, or holding trainer_state.json.")
    finally:
        lone.stop()


def test_a_private_run_is_listed_with_the_token(hub_env):
    hub = serve(hub_env, {"step3": branch(), "step1": branch()}, token="hf_secret")
    try:
        with pytest.raises(RevisionError, match="^no model repository .* set HF_TOKEN"):
            list_revisions(REPO)
        hub_env.setenv("HF_TOKEN", "hf_secret")
        assert names(list_revisions(REPO)) == ["step1", "step3"]
    finally:
        hub.stop()


def test_a_stalled_listing_gives_up_within_the_hub_timeout(hub_env):
    """A server that accepts the connection and never answers: the listing ends after HEADGEOMETRY_HUB_TIMEOUT."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        hub_env.setenv("HF_ENDPOINT", endpoint)
        hub_env.setenv("HEADGEOMETRY_HUB_TIMEOUT", "0.4")
        start = time.monotonic()
        with pytest.raises(RevisionError) as err:
            list_revisions(REPO)
        waited = time.monotonic() - start
    assert 0.4 <= waited < 5.0
    assert one_line(str(err.value)) == (
        f"the Hub at {endpoint} did not list the branches of {REPO} within 0.4 s (HEADGEOMETRY_HUB_TIMEOUT); try "
        "again later, or raise HEADGEOMETRY_HUB_TIMEOUT.")


def test_a_stalled_trainer_state_gives_up_within_the_download_deadline(hub_env):
    hub = serve(hub_env, {"step1": branch(), "late": branch(70)})
    hub.stall_downloads = 30.0  # headers, then nothing (until stop())
    hub_env.setenv("HEADGEOMETRY_HUB_TIMEOUT", "0.3")
    endpoint = hub.endpoint
    try:
        start = time.monotonic()
        with pytest.raises(RevisionError) as err:
            list_revisions(REPO)
        waited = time.monotonic() - start
    finally:
        hub.stop()
    assert 0.3 <= waited < 5.0
    assert one_line(str(err.value)) == (
        f"the Hub at {endpoint} sent no trainer_state.json of revision 'late' of {REPO} within 0.3 s (the "
        "download deadline: HEADGEOMETRY_HUB_RETRIES + 1 times HEADGEOMETRY_HUB_TIMEOUT, plus pauses); try again "
        "later, or raise HEADGEOMETRY_HUB_TIMEOUT.")


def test_offline_the_revisions_are_the_branches_the_cache_holds(hub_env):
    from huggingface_hub import hf_hub_download

    from pipeline.sources.hub_env import hub_cache

    hub = serve(hub_env, {"step1": branch(), "step2": branch(), "late": branch(70)})
    try:
        online = list_revisions(REPO)  # reads main's and late's trainer_state.json into the cache
        assert names(online) == ["step1", "step2", "late"]
        # as a run of step2 does (pipeline.sources.hub downloads config.json by the branch's name)
        hf_hub_download(REPO, "config.json", revision="step2", endpoint=hub.endpoint, cache_dir=hub_cache())
        hub.reset_counts()
        hub_env.setenv("HF_HUB_OFFLINE", "1")
        offline = list_revisions(REPO)
        assert [(r.name, r.step) for r in offline] == [("step2", 2), ("late", 70)]  # step1 was never read
        assert hub.requests == []
    finally:
        hub.stop()
    empty = os.environ["HF_HOME"] + "-empty"
    hub_env.setenv("HF_HOME", empty)
    with pytest.raises(RevisionError) as err:
        list_revisions(REPO)
    assert one_line(str(err.value)) == (
        f"HF_HUB_OFFLINE is set and the Hugging Face cache ({empty}/hub) holds no branch of {REPO}; unset "
        "HF_HUB_OFFLINE to list its branches on the Hub.")


# ------------------------------------------------------------------------------------------------ HUB_ID@BRANCH
def test_a_branch_reference_opens_that_branch(hub_env, tiny_model):
    from tests.tiny_models import torch  # noqa: F401 - the tiny models need torch

    trees = {}
    for seed in (0, 1):
        _, folder = tiny_model("gpt2", seed=seed)
        trees[f"step{seed}"] = {p: open(os.path.join(folder, p), "rb").read() for p in os.listdir(folder)}
    hub = serve(hub_env, trees, main=trees["step1"])
    name = "transformer.h.0.attn.c_attn.weight"
    try:
        from safetensors.numpy import load

        want = {b: load(t["model.safetensors"])[name].astype(np.float64) for b, t in trees.items()}
        assert not np.array_equal(want["step0"], want["step1"])
        for rev in list_revisions(REPO):
            ckpt = open_checkpoint(rev.ref)
            assert ckpt.revision == hub.refs[REPO][rev.name]
            np.testing.assert_array_equal(ckpt.read(name), want[rev.name])
        # an explicit revision (a plan's pinned commit) wins over the reference's own
        pinned = open_checkpoint(f"{REPO}@step0", hub.refs[REPO]["step1"])
        assert pinned.revision == hub.refs[REPO]["step1"]
        np.testing.assert_array_equal(pinned.read(name), want["step1"])
    finally:
        hub.stop()


def test_branch_references_resolve():
    ref = resolve(f"{REPO}@step1000")
    assert (ref.kind, ref.hub_id, ref.revision, ref.default_name()) == ("hub", REPO, "step1000", "tiny-run")
    assert resolve(REPO).revision is None
    gpt2 = resolve("gpt2@step5")
    assert (gpt2.kind, gpt2.hub_id, gpt2.revision, gpt2.spec.name) == ("hub", "openai-community/gpt2", "step5", "gpt2")
    for text, message in {
        f"{REPO}@": f"'{REPO}@' names no revision after '@'; write HUB_ID@BRANCH",
        "all-MiniLM-L6-v2@step1": "'all-MiniLM-L6-v2' is read from a PyPI package, which has no Hub revisions; name "
                                  "its Hub id (sentence-transformers/all-MiniLM-L6-v2@step1)",
        "not a model@x": "unknown model 'not a model@x': not a folder, not a registry name, not a Hub id",
    }.items():
        with pytest.raises(CheckpointError) as err:
            resolve(text)
        assert one_line(str(err.value)).startswith(message)


# ------------------------------------------------------------------------------------------------ SPEC
def test_all_and_names():
    revs = revisions([0, 1, 2, 10, 1000])
    assert select(revs, "all") == revs
    assert select(revs, " all ") == revs
    assert names(select(revs, "step1000,step0, step2")) == ["step0", "step2", "step1000"]  # step order
    assert names(select(revs, "step2,step2")) == ["step2"]


@pytest.mark.parametrize("n", [1, 2, 7, 154])
def test_every_k_is_a_stride_from_the_first(n):
    revs = revisions(PYTHIA_STEPS[:n])
    for k in range(1, n + 2):
        got = select(revs, f"every:{k}")
        want = [revs[i] for i in range(0, n, k)]
        assert got == want
        assert got[0] == revs[0]
        assert (got[-1] == revs[-1]) == ((n - 1) % k == 0)  # the last only when it falls on the stride


def log_oracle(steps: list[int], k: int) -> list[int]:
    """log:K by its definition: step 0 first if present; K (or K - 1) targets np.geomspace over the positive steps;
    each the step nearest in log (the lower on a tie); repeats once."""
    if len(steps) <= k:
        return list(steps)
    zero = [0] if steps[0] == 0 else []
    positive = np.array([s for s in steps if s > 0], dtype=float)
    m = k - len(zero)
    targets = np.geomspace(positive[0], positive[-1], m) if m > 1 else positive[-1:]
    picked = []
    for t in targets:
        s = int(positive[np.argmin(np.abs(np.log(positive) - np.log(t)))])
        if s not in picked:
            picked.append(s)
    return zero + picked


@pytest.mark.parametrize("steps", [PYTHIA_STEPS, list(range(500, 10001, 500)), [3, 4, 50, 51, 52, 9000],
                                   [0, 7, 700, 70000]])
def test_log_k_against_geomspace(steps):
    revs = revisions(steps)
    for k in range(2, len(steps) + 3):
        got = [r.step for r in select(revs, f"log:{k}")]
        assert got == log_oracle(steps, k), k
        assert got[0] == steps[0] and got[-1] == steps[-1]  # first and last included
        assert got == sorted(set(got)) and len(got) <= max(k, 1)


def test_log_10_of_pythia():
    """The 10 revisions a study of Pythia would take: step 0, then 9 log-spaced from step 1 to 143000."""
    got = [r.step for r in select(revisions(PYTHIA_STEPS), "log:10")]
    assert got == [0, 1, 4, 16, 64, 512, 2000, 7000, 32000, 143000]


@pytest.mark.parametrize("spec, message", [
    ("", "empty revision spec; give all, NAME[,NAME...], every:K or log:K."),
    ("   ", "empty revision spec; give all, NAME[,NAME...], every:K or log:K."),
    ("every:0", "revision spec 'every:0': K must be a whole number >= 1."),
    ("every:-2", "revision spec 'every:-2': K must be a whole number >= 1."),
    ("every:x", "revision spec 'every:x': K must be a whole number >= 1."),
    ("every:", "revision spec 'every:': K must be a whole number >= 1."),
    ("every:2.5", "revision spec 'every:2.5': K must be a whole number >= 1."),
    ("log:1", "revision spec 'log:1': K must be a whole number >= 2 (the first and the last are both included)."),
    ("log:0", "revision spec 'log:0': K must be a whole number >= 2 (the first and the last are both included)."),
    ("log:ten", "revision spec 'log:ten': K must be a whole number >= 2 (the first and the last are both included)."),
    ("lin:5", "revision spec 'lin:5': unknown form 'lin:'; give all, NAME[,NAME...], every:K or log:K."),
    ("Every:5", "revision spec 'Every:5': unknown form 'Every:'; give all, NAME[,NAME...], every:K or log:K."),
    ("step7", "unknown revision 'step7': the run has 5 (step0, step1, step2, ..., step1000)."),
    ("step0,step8,step9", "unknown revision 'step8': the run has 5 (step0, step1, step2, ..., step1000)."),
    ("step0,,step1", "revision spec 'step0,,step1' has an empty name; separate names by single commas."),
    ("step0,", "revision spec 'step0,' has an empty name; separate names by single commas."),
])
def test_bad_specs_are_refused_in_one_line(spec, message):
    with pytest.raises(RevisionError) as err:
        select(revisions([0, 1, 2, 10, 1000]), spec)
    assert one_line(str(err.value)) == message
