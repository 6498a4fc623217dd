"""The revisions of a training run: which checkpoints MODEL holds, the training step of each, and a SPEC's choice.

:func:`list_revisions` finds them; :func:`select` picks some with a SPEC (:data:`SPEC_HELP`). Each
:class:`Revision`'s ``ref`` opens through :func:`pipeline.registry.checkpoints.open_checkpoint`.

MODEL is one of:

- a local folder whose subfolders are checkpoints: ``checkpoint-N`` (as transformers' Trainer writes them),
  ``stepN``, or any subfolder holding a ``trainer_state.json``. A subfolder that is none of these and holds no
  ``config.json`` (``runs/``, ``logs/``) is not a checkpoint and is passed over; one that holds a ``config.json``
  but no step is refused, with its name. Hidden subfolders are passed over. The folder's own top level (where the
  Trainer leaves the final model) is not a revision: its checkpoints are. ``ref`` is the subfolder's absolute path,
  so that workers with another working directory open the same folder.
- a Hub id (or a registry name read from the Hub), whose revisions are the repository's branches, listed with
  ``HfApi.list_repo_refs`` at HF_ENDPOINT with HF_TOKEN (``pipeline.sources.hub_env``). The listing is given up
  after ``HEADGEOMETRY_HUB_TIMEOUT`` seconds (one request; huggingface_hub's client itself waits without limit), a
  trainer_state.json download after the download deadline (``pipeline.sources.hub_errors.stall_budget``).
  With ``HF_HUB_OFFLINE=1`` the branches are those the local Hugging Face cache holds (its ``refs/``: those read
  before), and steps come from the cache alone. Tags and pull requests are not revisions. ``ref`` is
  ``HUB_ID@BRANCH``.

The step of a revision: from its name, ``stepN``, ``checkpoint-N`` or OLMo's ``stepN-tokensT`` (e.g.
``step1000-tokens4B``); else ``global_step`` of its ``trainer_state.json`` (on the Hub, that small file alone is
fetched, never a weight file). When the name gives the step, trainer_state.json is not read (the Trainer writes
both from one counter). Names like OLMo 2's ``stage2-...-step1000-...`` are not read as steps: their step counter
starts again in each stage, so the number would misplace the revision. A revision whose step cannot be found is
refused, with its name: a run's frames are ordered by step.

The default branch ``main`` is a revision only when its trainer_state.json gives a step, and no other branch has
that step: it is the model as published (Pythia's ``main`` is ``step143000`` again), not a checkpoint of the run.
Two other revisions of one step are refused, with both names, since a run holds one frame per step.
"""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.registry.checkpoints import CheckpointError, resolve

__all__ = ["SPEC_HELP", "Revision", "RevisionError", "list_revisions", "select"]

TRAINER_STATE = "trainer_state.json"
DEFAULT_BRANCH = "main"
_STEP_NAME = re.compile(r"^(?:step(\d+)(?:-tokens\d+[A-Za-z]*)?|checkpoint-(\d+))$")
_FORMS = "give all, NAME[,NAME...], every:K or log:K"

SPEC_HELP = (
    "Which revisions of the run to profile. 'all': every one. 'NAME[,NAME...]': those named (stepN, "
    "checkpoint-N, a Hub branch), in step order whatever order they are given in. 'every:K': every K-th in "
    "step order, the first included; the last only when it falls on the stride. 'log:K' (K >= 2): K revisions "
    "log-spaced in step, the first and last included, each target step taking the revision nearest it in log "
    "step; a run that starts at step 0 keeps step 0 first and log-spaces the other K-1 over its positive steps; "
    "targets that land on one revision count once, so sparse early steps can give fewer than K; a run of K "
    "revisions or fewer gives them all. Steps come from the names (stepN, checkpoint-N) or trainer_state.json."
)


@dataclass(frozen=True)
class Revision:
    """One checkpoint of a run: its name, its training step, and what ``open_checkpoint`` opens."""

    name: str  # "step1000", "checkpoint-500", a Hub branch name
    step: int  # from the name (stepN, checkpoint-N) or trainer_state.json's global_step
    ref: str  # a local folder's absolute path, or "HUB_ID@BRANCH"


class RevisionError(ValueError):
    """The revisions of a run cannot be listed or chosen as asked; the message is one line saying why."""


def name_step(name: str) -> int | None:
    """The step a revision's name gives (``stepN``, ``stepN-tokensT``, ``checkpoint-N``), else None."""
    m = _STEP_NAME.match(name)
    return None if m is None else int(m.group(1) or m.group(2))


def state_step(text: str, where: str) -> int:
    """``global_step`` of a trainer_state.json's text; RevisionError naming ``where`` if it has none."""
    try:
        state = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RevisionError(f"{where}: its {TRAINER_STATE} is not valid JSON ({exc.msg}).") from None
    step = state.get("global_step") if isinstance(state, dict) else None
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise RevisionError(f"{where}: its {TRAINER_STATE} has no global_step (a whole number >= 0), "
                            f"but {step!r}.")
    return step


def _no_step(where: str, fix: str) -> RevisionError:
    return RevisionError(f"{where}: no step in its name (stepN, checkpoint-N) and no {TRAINER_STATE} with a "
                         f"global_step; {fix}.")


# ------------------------------------------------------------------------------------------------ listing
def list_revisions(model: str) -> list[Revision]:
    """The revisions of ``model`` (a folder of checkpoints or a Hub id; see the module docstring), ordered by
    step as numbers. RevisionError, one line, when there are none or one has no step."""
    text = str(model)
    try:
        ref = resolve(text)
    except CheckpointError as exc:
        raise RevisionError(str(exc)) from None
    if ref.kind == "folder":
        found = _folder(Path(text).expanduser())
    elif ref.kind == "hub":
        if ref.revision is not None:
            raise RevisionError(f"{text!r} names one revision; pass the Hub id alone ({ref.hub_id}): its branches "
                                "are the run's revisions, and the revision spec picks among them.")
        found = _hub(ref.hub_id)
    else:
        raise RevisionError(f"{text!r} is one checkpoint (a {ref.kind}), not a run; pass a folder of checkpoints "
                            "(checkpoint-N, stepN) or a Hub id whose branches are the revisions.")
    return _ordered(found, text)


def _ordered(found: list[Revision], where: str) -> list[Revision]:
    """By step, as numbers; two revisions of one step refused."""
    kept = sorted(found, key=lambda r: (r.step, r.name))
    for a, b in zip(kept, kept[1:], strict=False):
        if a.step == b.step:
            raise RevisionError(f"revisions {a.name!r} and {b.name!r} of {where} are both step {a.step}; a run "
                                "holds one revision per step, so keep one of them.")
    return kept


def _folder(folder: Path) -> list[Revision]:
    found = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        step = name_step(sub.name)
        state = sub / TRAINER_STATE
        where = f"revision {sub.name!r} of {folder}"
        if step is None and state.is_file():
            step = state_step(state.read_bytes().decode("utf-8", "replace"), where)
        elif step is None and (sub / "config.json").is_file():
            raise _no_step(where, "name it stepN or checkpoint-N, or move it out of the folder")
        if step is not None:
            found.append(Revision(sub.name, step, os.path.abspath(sub)))
    if not found:
        one = " (it is one checkpoint: profile it without a revision spec)" if (folder / "config.json").is_file() \
            else ""
        raise RevisionError(f"no checkpoints in {folder}{one}: no subfolder named checkpoint-N or stepN, nor one "
                            f"holding {TRAINER_STATE}.")
    return found


def _hub(repo_id: str) -> list[Revision]:
    from pipeline.sources.hub_env import hub_cache, hub_endpoint, hub_offline

    offline = hub_offline()
    branches = _cached_branches(repo_id) if offline else _listed_branches(repo_id)
    found = []
    for branch in branches:
        step = name_step(branch)
        if step is None:
            step = _hub_state_step(repo_id, branch, required=branch != DEFAULT_BRANCH)
        if step is None and branch != DEFAULT_BRANCH:
            raise _no_step(f"revision {branch!r} of {repo_id}", "a run's revisions are ordered by step, so it "
                           "cannot be placed")
        if step is not None:
            found.append(Revision(branch, step, f"{repo_id}@{branch}"))
    steps = {r.step for r in found if r.name != DEFAULT_BRANCH}
    found = [r for r in found if r.name != DEFAULT_BRANCH or r.step not in steps]  # main: a published copy
    if not found:
        where = f"in the Hugging Face cache ({hub_cache()})" if offline else f"at {hub_endpoint()}"
        raise RevisionError(f"{repo_id} has no revision branches {where} (its branches: "
                            f"{', '.join(sorted(branches)) or 'none'}); revisions are branches named stepN or "
                            f"checkpoint-N, or holding {TRAINER_STATE}.")
    return found


def _listed_branches(repo_id: str) -> list[str]:
    """The branch names, from the Hub, given up after HEADGEOMETRY_HUB_TIMEOUT seconds."""
    from huggingface_hub import HfApi

    from pipeline.sources.hub_env import hub_endpoint, hub_token
    from pipeline.sources.hub_errors import TIMEOUT_VAR, HubError, explain, read_timeout

    endpoint = hub_endpoint()
    try:
        seconds = read_timeout()
        refs = _within(seconds, lambda: HfApi(endpoint=endpoint, token=hub_token()).list_repo_refs(repo_id))
    except HubError as exc:
        raise RevisionError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - network, auth, missing repo: explained in one line
        raise RevisionError(str(explain(exc, repo_id, None, "the branch list"))) from None
    if refs is None:
        raise RevisionError(f"the Hub at {endpoint} did not list the branches of {repo_id} within {seconds:g} s "
                            f"({TIMEOUT_VAR}); try again later, or raise {TIMEOUT_VAR}.")
    return [b.name for b in refs.branches]


def _within(seconds: float, call):
    """``call()``'s value, or None if it has not returned after ``seconds`` (it runs on in a daemon thread, which
    ends with the client's own timeouts or the process)."""
    done = {}

    def run():
        try:
            done["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            done["error"] = exc

    worker = threading.Thread(target=run, name="hub-revisions", daemon=True)
    worker.start()
    worker.join(seconds)
    if "error" in done:
        raise done["error"]
    return done.get("value")


def _cached_branches(repo_id: str) -> list[str]:
    """Offline: the branches the Hugging Face cache knows (its refs/ folder: every branch read before)."""
    from pipeline.sources.hub_env import hub_cache

    refs = Path(hub_cache()) / ("models--" + repo_id.replace("/", "--")) / "refs"
    names = sorted(p.relative_to(refs).as_posix() for p in refs.rglob("*") if p.is_file()) if refs.is_dir() else []
    names = [n for n in names if not n.startswith("refs/pr/")]  # pull requests are not branches
    if not names:
        raise RevisionError(f"HF_HUB_OFFLINE is set and the Hugging Face cache ({hub_cache()}) holds no branch of "
                            f"{repo_id}; unset HF_HUB_OFFLINE to list its branches on the Hub.")
    return names


def _hub_state_step(repo_id: str, branch: str, required: bool) -> int | None:
    """``global_step`` of the branch's trainer_state.json, fetched alone into the Hub cache; None when the branch has
    none, or (not ``required``, offline) when the cache does not say. Online, given up after the stall budget of a
    download (``pipeline.sources.hub_errors.stall_budget``)."""
    from huggingface_hub import hf_hub_download, try_to_load_from_cache
    from huggingface_hub.errors import EntryNotFoundError

    from pipeline.sources.hub_env import hub_cache, hub_endpoint, hub_offline, hub_token
    from pipeline.sources.hub_errors import (
        CONNECT_TIMEOUT,
        RETRIES_VAR,
        TIMEOUT_VAR,
        HubError,
        explain,
        stall_budget,
    )

    where = f"revision {branch!r} of {repo_id}"
    if hub_offline():
        path = try_to_load_from_cache(repo_id, TRAINER_STATE, cache_dir=hub_cache(), revision=branch)
        if path is None and not required:
            return None
        if path is None:
            raise RevisionError(f"HF_HUB_OFFLINE is set and the Hugging Face cache ({hub_cache()}) does not say "
                                f"whether {where} has a {TRAINER_STATE}; unset HF_HUB_OFFLINE to fetch it.")
        if not isinstance(path, str):  # the cache's mark of a file the branch does not have
            return None
    else:
        endpoint = hub_endpoint()
        try:
            seconds = stall_budget()
            path = _within(seconds, lambda: hf_hub_download(
                repo_id, TRAINER_STATE, revision=branch, endpoint=endpoint, token=hub_token(), cache_dir=hub_cache(),
                etag_timeout=CONNECT_TIMEOUT))
        except EntryNotFoundError:
            return None
        except HubError as exc:
            raise RevisionError(str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - network, auth: explained in one line
            raise RevisionError(str(explain(exc, repo_id, branch, TRAINER_STATE))) from None
        if path is None:
            raise RevisionError(f"the Hub at {endpoint} sent no {TRAINER_STATE} of {where} within {seconds:g} s "
                                f"(the download deadline: {RETRIES_VAR} + 1 times {TIMEOUT_VAR}, plus pauses); try "
                                f"again later, or raise {TIMEOUT_VAR}.")
    return state_step(Path(path).read_bytes().decode("utf-8", "replace"), where)


# ------------------------------------------------------------------------------------------------ choosing
def select(revisions: list[Revision], spec: str) -> list[Revision]:
    """The revisions ``spec`` picks (:data:`SPEC_HELP`), in step order; ``revisions`` in step order, as
    :func:`list_revisions` gives them. RevisionError, one line, for a SPEC that is not one of the forms."""
    text = str(spec).strip()
    if not text:
        raise RevisionError(f"empty revision spec; {_FORMS}.")
    if text == "all":
        return list(revisions)
    form, colon, arg = text.partition(":")
    if colon:
        if form not in ("every", "log"):
            raise RevisionError(f"revision spec {text!r}: unknown form {form + ':'!r}; {_FORMS}.")
        least = 2 if form == "log" else 1
        if not re.fullmatch(r"\d+", arg.strip()) or int(arg) < least:
            why = " (the first and the last are both included)" if form == "log" else ""
            raise RevisionError(f"revision spec {text!r}: K must be a whole number >= {least}{why}.")
        k = int(arg)
        return revisions[::k] if form == "every" else log_spaced(revisions, k)
    return _named(revisions, text)


def _named(revisions: list[Revision], text: str) -> list[Revision]:
    names = [n.strip() for n in text.split(",")]
    if "" in names:
        raise RevisionError(f"revision spec {text!r} has an empty name; separate names by single commas.")
    by_name = {r.name: r for r in revisions}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        some = ", ".join(r.name for r in revisions[:3]) + (f", ..., {revisions[-1].name}" if len(revisions) > 3 else "")
        raise RevisionError(f"unknown revision {unknown[0]!r}: the run has {len(revisions)} ({some or 'none'}).")
    wanted = set(names)
    return [r for r in revisions if r.name in wanted]


def log_spaced(revisions: list[Revision], k: int) -> list[Revision]:
    """``k`` revisions log-spaced in step, first and last included (see :data:`SPEC_HELP`)."""
    if len(revisions) <= k:
        return list(revisions)
    head = revisions[:1] if revisions[0].step == 0 else []
    rest = revisions[len(head):]
    m = k - len(head)
    logs = np.log([r.step for r in rest])
    targets = np.log(np.geomspace(rest[0].step, rest[-1].step, m)) if m > 1 else logs[-1:]
    picked = []
    for t in targets:
        i = int(np.searchsorted(logs, t))  # the nearest of logs[i - 1] and logs[i]; the lower step on a tie
        if i == len(logs) or (i > 0 and t - logs[i - 1] <= logs[i] - t):
            i -= 1
        if not picked or picked[-1] != i:
            picked.append(i)
    return head + [rest[i] for i in picked]
