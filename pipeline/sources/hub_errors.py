"""The Hub's failures: the errors a Hub read raises, its timeouts and retries (``HEADGEOMETRY_HUB_TIMEOUT``,
``HEADGEOMETRY_HUB_RETRIES``, read at call time), and how each failure is explained in one line
(:func:`explain`). :mod:`pipeline.sources.hub` reads through these."""

from __future__ import annotations

import os

from pipeline.sources.base import CheckpointError
from pipeline.sources.hub_env import hub_cache, hub_endpoint, hub_offline

CONNECT_TIMEOUT = 10.0
RETRY_STATUS = (429, 500, 502, 503, 504)


class HubError(CheckpointError):
    """A Hub checkpoint could not be read; the message says what was wrong and what to do."""


class NoSafetensorsError(HubError):
    """The repo has no safetensors weights, so nothing can be range-read (the caller may download .bin)."""

    def __init__(self, message: str, commit: str):
        super().__init__(message)
        self.commit = commit


DEFAULT_TIMEOUT = 10.0  # seconds without data before a read attempt is abandoned (huggingface_hub's own default)
DEFAULT_RETRIES = 3
TIMEOUT_VAR, RETRIES_VAR = "HEADGEOMETRY_HUB_TIMEOUT", "HEADGEOMETRY_HUB_RETRIES"


class HubStalled(HubError):
    """A read received no data in time: every attempt of a range read, or a download past its deadline.

    ``within`` says how long was waited (the explained message puts it after "no data")."""

    def __init__(self, url: str, within: str, seconds: float):
        self.within, self.seconds = within, seconds
        super().__init__(f"no data from {url} {within}")


def _env_number(var: str, default: float, kind: type, minimum: float, what: str):
    raw = os.environ.get(var, "").strip()
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        value = None
    if value is None or not value >= minimum or value == float("inf"):
        raise HubError(f"{var}={raw!r} is not {what}; unset it for the default ({default:g}).")
    return value


def read_timeout() -> float:
    """HEADGEOMETRY_HUB_TIMEOUT: seconds a read attempt may receive nothing before it is abandoned."""
    return _env_number(TIMEOUT_VAR, DEFAULT_TIMEOUT, float, 0.001, "a positive number of seconds")


def read_retries() -> int:
    """HEADGEOMETRY_HUB_RETRIES: how many times a failed range read is tried again."""
    return _env_number(RETRIES_VAR, DEFAULT_RETRIES, int, 0, "a whole number of retries (0 or more)")


def backoff(attempt: int) -> float:
    """The pause before retry number ``attempt + 1``."""
    return min(0.5 * 2**attempt, 4.0)


def stall_budget(timeout: float | None = None, retries: int | None = None) -> float:
    """The longest one range read waits on a server that stalls: every attempt's timeout and the pauses."""
    timeout = read_timeout() if timeout is None else timeout
    retries = read_retries() if retries is None else retries
    return (retries + 1) * timeout + sum(backoff(a) for a in range(retries))


def _timeout_errors() -> tuple[type[BaseException], ...]:
    import httpx2

    return TimeoutError, httpx2.TimeoutException


def _network_errors() -> tuple[type[BaseException], ...]:
    import httpx2

    return ConnectionError, httpx2.TransportError


def explain(exc: BaseException, repo_id: str, revision: str | None, what: str) -> HubError:
    """Turn a huggingface_hub / network error into a HubError saying what to do."""
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    if isinstance(exc, HubError) and not isinstance(exc, HubStalled):
        return exc
    where = f"{repo_id}@{revision or 'main'} at {hub_endpoint()}"
    if isinstance(exc, OfflineModeIsEnabled) or (hub_offline() and isinstance(exc, EntryNotFoundError)):
        msg = (f"HF_HUB_OFFLINE is set and {what} of {repo_id}@{revision or 'main'} is not in the Hub cache "
               f"({hub_cache()}). Unset HF_HUB_OFFLINE to fetch it, or download it first while online.")
    elif isinstance(exc, GatedRepoError):
        msg = f"{where} is gated: accept its terms on the Hub and set HF_TOKEN to a token of that account."
    elif isinstance(exc, RepositoryNotFoundError):
        msg = (f"no model repository {repo_id!r} at {hub_endpoint()} (or it is private: set HF_TOKEN). "
               "Check the spelling of the Hub id, or pass a local folder.")
    elif isinstance(exc, RevisionNotFoundError):
        msg = f"{repo_id!r} has no revision {revision!r} at {hub_endpoint()}; pass an existing branch, tag or commit."
    elif isinstance(exc, EntryNotFoundError):
        msg = f"{where} has no {what}."
    elif isinstance(exc, HfHubHTTPError):
        status = getattr(getattr(exc, "response", None), "status_code", "an error")
        msg = (f"the Hub at {hub_endpoint()} answered {status} while reading {what} of {repo_id}: "
               f"{str(exc).splitlines()[0]}. Try again later; layers already written are kept.")
    elif isinstance(exc, HubStalled):
        msg = (f"the Hub at {hub_endpoint()} stalled while reading {what} of {repo_id}: no data "
               f"{exc.within}. Try again later, or raise {TIMEOUT_VAR} (seconds without data per attempt) or "
               f"{RETRIES_VAR} (retries after the first attempt); layers already written are kept.")
    elif isinstance(exc, _timeout_errors()):
        msg = (f"the Hub at {hub_endpoint()} stalled while reading {what} of {repo_id} (no answer within "
               f"{CONNECT_TIMEOUT:g} s). Try again later; layers already written are kept.")
    elif isinstance(exc, _network_errors()):
        msg = (f"could not reach the Hub at {hub_endpoint()} to read {what} of {repo_id} ({exc}). Check the "
               f"network and HF_ENDPOINT, or set HF_HUB_OFFLINE=1 to use files already in {hub_cache()}.")
    else:
        return HubError(f"reading {what} of {where} failed: {exc}")
    return HubError(msg)
