"""The HTTP side of Hub reads: byte ranges of one remote file with timeouts and retries, and what a failure means.

:class:`RangeFile` reads ``Range: bytes=a-b`` of one file through huggingface_hub's HTTP session (HF_ENDPOINT,
HF_TOKEN, proxies as it has them). The body is streamed into a buffer of exactly the asked length: a server that
answers without honouring the range (status 200) is refused before its body is read, and one that sends more than
asked is refused as soon as the extra bytes arrive. Connections and reads time out (connect 10 s; a read attempt
that receives no data for ``HEADGEOMETRY_HUB_TIMEOUT`` seconds, default 10, is abandoned) and a failed read is
retried ``HEADGEOMETRY_HUB_RETRIES`` times (default 3) after pauses of 0.5, 1, 2 s, then 4 s each (:func:`backoff`).
:class:`LocalFile` reads a cached file the same way (offline). :func:`explain` turns a huggingface_hub or network
error into a :class:`HubError` that says what to do. ``pipeline.sources.hub`` builds Hub checkpoints on these.
"""

from __future__ import annotations

import os
import threading
import time

from pipeline.hub_env import hub_cache, hub_endpoint, hub_offline
from pipeline.sources.base import CheckpointError

CONNECT_TIMEOUT = 10.0
RETRY_STATUS = (429, 500, 502, 503, 504)
DEFAULT_TIMEOUT = 10.0  # seconds without data before a read attempt is abandoned (huggingface_hub's own default)
DEFAULT_RETRIES = 3
TIMEOUT_VAR, RETRIES_VAR = "HEADGEOMETRY_HUB_TIMEOUT", "HEADGEOMETRY_HUB_RETRIES"


class HubError(CheckpointError):
    """A Hub checkpoint could not be read; the message says what was wrong and what to do."""


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


class RangeFile:
    """One remote file read by byte ranges: ``read(start, length)`` returns exactly those bytes.

    ``bytes_fetched`` counts the body bytes received (refused extra bytes included), ``requests`` the
    requests made.
    """

    def __init__(self, url: str, name: str, token: str | None = None, retries: int | None = None):
        self.url, self.name, self.token = url, name, token
        self.retries = read_retries() if retries is None else retries
        self.bytes_fetched = 0
        self.requests = 0
        self._lock = threading.Lock()

    def _count(self, n: int) -> None:
        with self._lock:
            self.bytes_fetched += n

    def _once(self, start: int, length: int) -> bytes:
        import httpx2
        from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

        headers = build_hf_headers(token=self.token)
        headers["Range"] = f"bytes={start}-{start + length - 1}"
        headers["Accept-Encoding"] = "identity"
        timeout = httpx2.Timeout(read_timeout(), connect=CONNECT_TIMEOUT)
        with self._lock:
            self.requests += 1
        with get_session().stream("GET", self.url, headers=headers, follow_redirects=True,
                                  timeout=timeout) as response:
            if response.status_code >= 400:
                response.read()
                hf_raise_for_status(response)
            if response.status_code != 206:
                raise HubError(f"the server ignored the byte range {start}..{start + length} of {self.url} "
                               f"(status {response.status_code}); refused before reading its body. Range reads "
                               "need a Hub (or mirror) that supports HTTP Range requests.")
            buf, got = bytearray(length), 0
            for part in response.iter_bytes():
                self._count(len(part))
                if got + len(part) > length:
                    raise HubError(f"the server sent more than the {length} bytes asked for at {start} of "
                                   f"{self.url}; refused after {got + len(part)} bytes. Range reads need a Hub "
                                   "(or mirror) that honours HTTP Range requests.")
                buf[got:got + len(part)] = part
                got += len(part)
        if got != length:
            raise HubError(f"the server sent {got} of the {length} bytes asked for at {start} of {self.url}; "
                           "try again later.")
        return bytes(buf)

    def read(self, start: int, length: int) -> bytes:
        import httpx2
        from huggingface_hub.errors import HfHubHTTPError

        if length <= 0:
            return b""
        t0, stalls = time.monotonic(), 0
        for attempt in range(self.retries + 1):
            try:
                return self._once(start, length)
            except (httpx2.TransportError, HfHubHTTPError) as exc:
                stalls = stalls + 1 if isinstance(exc, httpx2.ReadTimeout) else 0
                status = getattr(getattr(exc, "response", None), "status_code", None)
                if attempt == self.retries or (isinstance(exc, HfHubHTTPError) and status not in RETRY_STATUS):
                    if stalls:  # the last attempt (and those right before it) received nothing in time
                        seconds = time.monotonic() - t0
                        raise HubStalled(self.url, f"within {read_timeout():g} s on {stalls} of {attempt + 1} "
                                                   f"attempt(s), {seconds:.0f} s in all", seconds) from exc
                    raise
                time.sleep(backoff(attempt))
        raise AssertionError("unreachable")


class LocalFile:
    """A cached file read by byte ranges (offline mode): same interface as RangeFile."""

    def __init__(self, path: str | os.PathLike, name: str):
        self.path, self.name = str(path), name
        self.bytes_fetched = 0
        self.requests = 0

    def read(self, start: int, length: int) -> bytes:
        with open(self.path, "rb") as fh:
            fh.seek(start)
            body = fh.read(length)
        if len(body) != length:
            raise HubError(f"{self.path} is truncated (wanted bytes {start}..{start + length}); delete it from the "
                           "Hub cache and fetch it again.")
        self.bytes_fetched += length
        self.requests += 1
        return body
