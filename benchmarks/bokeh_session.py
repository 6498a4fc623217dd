"""Open sessions of a served Panel/Bokeh app the way a browser does, without a browser: the server-side cost.

A browser's page load is a GET (the server runs the app script: every model of the session is built) and
then a websocket on which it asks for the document (PULL-DOC-REQ; the server serialises every model and
sends the reply with its binary buffers). ``open_session`` does both with tornado's clients and the
Bokeh protocol and returns the seconds from the GET to the last byte of the reply. The reply is parsed
into a message (its JSON decoded) but no Bokeh model is built from it, so the client's own work is small.
``sessions_at_once`` opens N of them concurrently: the time until every one has its document.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
import time
from urllib.parse import urlsplit

from bokeh.protocol import Protocol
from bokeh.protocol.receiver import Receiver
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.websocket import websocket_connect

TOKEN = re.compile(r'"token":\s*"([^"]+)"')


async def open_session(url: str, timeout: float = 300.0) -> float:
    """GET ``url`` (http://HOST:PORT/app), pull the session's document over its websocket; seconds taken."""
    t0 = time.perf_counter()
    await _get_and_pull(url, timeout)
    return time.perf_counter() - t0


def pull_document(url: str, timeout: float = 120.0) -> tuple[str, dict]:
    """The page that a GET of ``url`` answers and the content of the PULL-DOC-REPLY (``{"doc": ...}``) of that
    session, asked for as soon as the page has come (sooner than any browser asks)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        page, reply = pool.submit(asyncio.run, _get_and_pull(url, timeout)).result()
    return page, reply.content


def scripts_then_pull(url: str, timeout: float = 120.0) -> tuple[float, float]:
    """One session of ``url`` as a browser opens it: the GET, then at once every script the page names (all
    together), then the pull of the document. Seconds from the GET's reply to the last script's, and to the
    document's."""
    async def run():
        times = {}

        async def scripts(page: str) -> None:
            t0 = time.perf_counter()
            base = url.rsplit("/", 1)[0] + "/"
            client = AsyncHTTPClient()
            await asyncio.gather(*(client.fetch(base + src, request_timeout=timeout)
                                   for src in re.findall(r'<script[^>]+src="([^"]+)"', page)))
            times["scripts"], times["start"] = time.perf_counter() - t0, t0

        await _get_and_pull(url, timeout, after_get=scripts)
        return times["scripts"], time.perf_counter() - times["start"]

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, run()).result()


async def _get_and_pull(url: str, timeout: float, after_get=None):
    """GET ``url`` and pull the session's document: (the page's text, the PULL-DOC-REPLY message).
    ``after_get``: a coroutine function awaited with the page's text between the two."""
    page = await AsyncHTTPClient().fetch(url, request_timeout=timeout)
    if after_get is not None:
        await after_get(page.body.decode("utf-8", "replace"))
    found = TOKEN.search(page.body.decode("utf-8", "replace"))
    if not found:
        raise RuntimeError(f"no session token in the page of {url}")
    parts = urlsplit(url)
    ws_url = f"ws://{parts.netloc}{parts.path.rstrip('/')}/ws"
    request = HTTPRequest(ws_url, headers={"Origin": f"http://{parts.netloc}"}, request_timeout=timeout)
    ws = await websocket_connect(request, subprotocols=["bokeh", found.group(1)], max_message_size=2**31)
    protocol = Protocol()
    receiver = Receiver(protocol)
    try:
        async def next_message():
            while True:
                fragment = await ws.read_message()
                if fragment is None:
                    raise RuntimeError(f"{ws_url} closed before the document came")
                message = await receiver.consume(fragment)
                if message is not None:
                    return message

        ack = await next_message()
        if ack.msgtype != "ACK":
            raise RuntimeError(f"expected ACK from {ws_url}, got {ack.msgtype}")
        request_doc = protocol.create("PULL-DOC-REQ")
        for part in (request_doc.header_json, request_doc.metadata_json, request_doc.content_json):
            await ws.write_message(part)
        while (reply := await next_message()).msgtype != "PULL-DOC-REPLY":
            pass
        return page.body.decode("utf-8", "replace"), reply
    finally:
        ws.close()


def sessions(url: str, n: int, at_once: bool) -> list[float]:
    """``n`` sessions of ``url``: one after another, or all at once; the seconds each took."""
    async def run():
        if at_once:
            return list(await asyncio.gather(*(open_session(url) for _ in range(n))))
        return [await open_session(url) for _ in range(n)]

    # a thread of its own: the caller may already run an event loop (playwright's sync API does)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, run()).result()


def sessions_at_once(url: str, n: int) -> float:
    """Seconds until ``n`` sessions opened together all have their documents."""
    t0 = time.perf_counter()
    sessions(url, n, at_once=True)
    return time.perf_counter() - t0
