"""The HTTP side of Hub reads: byte ranges of one remote file, with timeouts and retries.

:class:`RangeFile` reads ``Range: bytes=a-b`` of one file through huggingface_hub's HTTP session (HF_ENDPOINT,
HF_TOKEN, proxies as it has them). The body is streamed into a buffer of exactly the asked length: a server that
answers without honouring the range (status 200) is refused before its body is read, and one that sends more than
asked is refused as soon as the extra bytes arrive. Connections and reads time out (connect 10 s; a read attempt
that receives no data for ``HEADGEOMETRY_HUB_TIMEOUT`` seconds, default 10, is abandoned) and a failed read is
retried ``HEADGEOMETRY_HUB_RETRIES`` times (default 3) after pauses of 0.5, 1, 2 s, then 4 s each
(``hub_errors.backoff``).
:class:`LocalFile` reads a cached file the same way (offline). The errors, timeouts and their explanations are
``pipeline.sources.hub_errors``; ``pipeline.sources.hub`` builds Hub checkpoints on these.
"""

from __future__ import annotations

import os
import threading
import time

from pipeline.sources.hub_errors import (
    CONNECT_TIMEOUT,
    RETRY_STATUS,
    HubError,
    HubStalled,
    backoff,
    read_retries,
    read_timeout,
)


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
