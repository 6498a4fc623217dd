"""A loopback stand-in for the Hugging Face Hub: the part of its HTTP protocol that huggingface_hub uses.

Serves model repositories from memory (bytes) or from disk (paths) on 127.0.0.1 only, and counts the
body bytes it sends per file, so tests can bound what a client fetched. Point huggingface_hub at it with
``HF_ENDPOINT=hub.endpoint``. No mock of huggingface_hub: the real client talks HTTP to this server.

Endpoints (as huggingface_hub 2.x calls them)::

    HEAD/GET /{repo}/resolve/{revision}/{filename}   X-Repo-Commit, ETag, Content-Length, Accept-Ranges;
                                                      "Range: bytes=a-b" -> 206 Partial Content
    GET /api/models/{repo}[/revision/{revision}]     model_info JSON: id, sha, siblings
    GET /api/models/{repo}/tree/{revision}[/{path}]  file listing (HfFileSystem)
    GET /api/models/{repo}/refs                      branches (HfApi.list_repo_refs): main and ``branches``

A repository has the branch ``main`` (``repos[repo]``) and, with ``branches = {repo: {branch: {filename: ...}}}``,
more branches, each its own commit with its own files (as Pythia publishes ``step0`` ... ``step143000``). Every
route takes a branch name or a commit sha as the revision; branch names with ``/`` are not served.

Errors follow the Hub's convention (X-Error-Code: RepoNotFound / RevisionNotFound / EntryNotFound) so
huggingface_hub raises its own typed errors. ``fail_with`` makes every request answer that status
(e.g. 500); ``fail_after_ranges`` answers 500 to every Range request after that many succeeded
(an interrupted transfer); ``token`` makes the repos private (401 without ``Authorization: Bearer``).

Hostile servers, for the fault tests: ``range_mode = "ignore"`` answers a Range request with 200 and the
whole file (as a server without Range support does), ``"overflow"`` with 206 and the range followed by
the rest of the file; ``stall_ranges = seconds`` sends a Range answer's headers, then nothing for that
long (or until ``stop()``), and ``stall_downloads = seconds`` does the same to whole-file answers (the
config and index downloads). Bodies are written in 64 KiB blocks and ``bytes_served`` counts what was
written before the client went away, per (repo, filename) over all its branches.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


class LoopbackHub:
    """Serve ``repos = {repo_id: {filename: bytes | path}}`` like the Hub, at ``self.endpoint``.

    Use as a context manager (or ``start()`` / ``stop()``). Every repo's branch "main" is one commit,
    ``self.sha[repo]``, reachable as "main" or by its sha. ``branches = {repo_id: {branch: {filename: ...}}}`` adds
    more branches to repos of ``repos``, each one commit (``self.refs[repo][branch]``) with its own files.
    """

    def __init__(self, repos: dict[str, dict[str, bytes | str | os.PathLike]], token: str | None = None,
                 branches: dict[str, dict[str, dict[str, bytes | str | os.PathLike]]] | None = None):
        self.repos = {r: dict(files) for r, files in repos.items()}
        self.sha = {r: hashlib.sha1(r.encode()).hexdigest() for r in repos}
        self.refs: dict[str, dict[str, str]] = {r: {"main": sha} for r, sha in self.sha.items()}  # branch -> commit
        self.trees: dict[tuple[str, str], dict] = {(r, self.sha[r]): self.repos[r] for r in repos}  # (repo, commit)
        for repo, named in (branches or {}).items():
            if repo not in self.repos:
                raise ValueError(f"branches of {repo!r}, which is not in repos (its main)")
            for branch, files in named.items():
                if branch == "main" or "/" in branch:
                    raise ValueError(f"branch {branch!r}: main is repos[{repo!r}], and names with / are not served")
                commit = hashlib.sha1(f"{repo}@{branch}".encode()).hexdigest()
                self.refs[repo][branch] = commit
                self.trees[(repo, commit)] = dict(files)
        self.token = token
        self.fail_with: int | None = None
        self.fail_after_ranges: int | None = None
        self.range_mode = "honour"  # "honour", "ignore" (200 + whole file) or "overflow" (206 + too many bytes)
        self.stall_ranges: float = 0.0
        self.stall_downloads: float = 0.0
        self.stopping = threading.Event()
        self.bytes_served: dict[tuple[str, str], int] = defaultdict(int)
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, Range header)
        self.request_times: list[float] = []  # time.perf_counter() as each request of ``requests`` came
        self._ranges_ok = 0
        self._lock = threading.Lock()
        self._answering = 0  # requests being answered (their handler running)
        self._epoch = 0  # how many times the counts were reset: an answer counts only in the epoch of its request
        self._idle = threading.Condition(self._lock)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------------------------- lifecycle
    def start(self) -> LoopbackHub:
        hub = self

        class Handler(_Handler):
            pass

        Handler.hub = hub
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="loopback-hub", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)
            self._server = None

    def __enter__(self) -> LoopbackHub:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # ------------------------------------------------------------------------------------- accounting
    def total_bytes(self, repo: str | None = None) -> int:
        """The body bytes written (to ``repo``'s files, or all), counted once no answer is being written: a
        client can hold a whole body before the server's thread has counted its last block."""
        if not self.wait_idle():
            raise RuntimeError("an answer was still being written after 30 s")
        with self._lock:
            return sum(n for (r, _f), n in self.bytes_served.items() if repo is None or r == repo)

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Wait until no request is being answered: every body sent, or given up on when its client went away
        (a refused body's writes fail once the socket's buffers are full). False if ``timeout`` passes first."""
        with self._idle:
            return self._idle.wait_for(lambda: self._answering == 0, timeout)

    def reset_counts(self) -> None:
        """Forget what was served. An answer to a request made before the reset counts nothing afterwards (its
        last blocks may still be written after the client holds them), and a stalled one need not end first."""
        with self._lock:
            self._epoch += 1
            self.bytes_served.clear()
            self.requests.clear()
            self.request_times.clear()
            self._ranges_ok = 0

    # ------------------------------------------------------------------------------------- content
    def files(self, repo: str, commit: str | None = None) -> dict:
        """The files of ``repo`` at ``commit`` (default: main's)."""
        return self.trees[(repo, commit or self.sha[repo])]

    def size(self, repo: str, filename: str, commit: str | None = None) -> int:
        f = self.files(repo, commit)[filename]
        return len(f) if isinstance(f, bytes | bytearray) else os.path.getsize(f)

    def read(self, repo: str, filename: str, start: int, end: int, commit: str | None = None) -> bytes:
        f = self.files(repo, commit)[filename]
        if isinstance(f, bytes | bytearray):
            return bytes(f[start:end])
        with open(f, "rb") as fh:
            fh.seek(start)
            return fh.read(end - start)

    def etag(self, repo: str, filename: str, commit: str | None = None) -> str:
        key = f"{commit or self.sha[repo]}/{filename}/{self.size(repo, filename, commit)}"
        return '"' + hashlib.sha256(key.encode()).hexdigest() + '"'


class _Handler(BaseHTTPRequestHandler):
    hub: LoopbackHub
    protocol_version = "HTTP/1.1"
    # A body written after its headers leaves at once (TCP_NODELAY), not after the client's delayed
    # acknowledgement of the headers (some 40 ms per answer on Linux).
    disable_nagle_algorithm = True

    def log_message(self, *args) -> None:  # quiet
        pass

    # --------------------------------------------------------------------------------- helpers
    def _send(self, status: int, body: bytes = b"", headers: dict | None = None, head: bool = False) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head and body:
            self.wfile.write(body)

    def _error(self, status: int, code: str | None, message: str, head: bool, extra: dict | None = None) -> None:
        headers = {"Content-Type": "application/json", **(extra or {})}
        if code:
            headers["X-Error-Code"] = code
        headers["X-Error-Message"] = message
        self._send(status, json.dumps({"error": message}).encode(), headers, head)

    def _repo_and_rev(self, repo: str, rev: str | None, head: bool) -> str | None:
        """The commit sha for (repo, rev), or None after answering the error."""
        hub = self.hub
        if hub.fail_with:
            self._error(hub.fail_with, None, f"loopback hub configured to fail with {hub.fail_with}", head)
            return None
        if repo not in hub.repos:
            self._error(404, "RepoNotFound", "Repository not found", head)
            return None
        if hub.token and self.headers.get("Authorization") != f"Bearer {hub.token}":
            self._error(401, "RepoNotFound", "Invalid credentials in Authorization header", head)
            return None
        refs = hub.refs[repo]
        if rev is None or rev in refs:
            return refs[rev or "main"]
        if rev not in refs.values():
            self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
            return None
        return rev

    # --------------------------------------------------------------------------------- routes
    def do_HEAD(self) -> None:
        self._route(head=True)

    def do_GET(self) -> None:
        self._route(head=False)

    def _route(self, head: bool) -> None:
        hub = self.hub
        with hub._lock:
            hub.requests.append((self.command, unquote(urlparse(self.path).path), self.headers.get("Range")))
            hub.request_times.append(time.perf_counter())
            hub._answering += 1
            self.epoch = hub._epoch
        try:
            self._answer(head)
        finally:
            with hub._idle:
                hub._answering -= 1
                hub._idle.notify_all()

    def _answer(self, head: bool) -> None:
        path = unquote(urlparse(self.path).path)
        if path.startswith("/api/models/"):
            return self._api(path[len("/api/models/"):], head)
        m = re.match(r"^/(.+?)/resolve/([^/]+)/(.+)$", path)
        if m:
            return self._resolve(m.group(1), m.group(2), m.group(3), head)
        self._error(404, None, f"no route for {path}", head)

    def _api(self, rest: str, head: bool) -> None:
        m = re.match(r"^([^/]+/[^/]+)/refs$", rest)
        if m:
            return self._refs(m.group(1), head)
        m = re.match(r"^(.+?)/tree/([^/]+)(?:/(.*))?$", rest)
        if m:
            repo, rev, sub = m.group(1), m.group(2), (m.group(3) or "").strip("/")
            sha = self._repo_and_rev(repo, rev, head)
            if sha is None:
                return
            hub = self.hub
            items = [{"type": "file", "path": f, "size": hub.size(repo, f, sha), "oid": hub.etag(repo, f, sha)[1:41]}
                     for f in sorted(hub.files(repo, sha)) if not sub or f.startswith(sub + "/")]
            return self._send(200, json.dumps(items).encode(), {"Content-Type": "application/json"}, head)
        m = re.match(r"^(.+?)(?:/revision/([^/]+))?$", rest)
        repo, rev = m.group(1), m.group(2)
        sha = self._repo_and_rev(repo, rev, head)
        if sha is None:
            return
        info = {"id": repo, "modelId": repo, "sha": sha, "private": bool(self.hub.token),
                "siblings": [{"rfilename": f} for f in sorted(self.hub.files(repo, sha))]}
        self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"}, head)

    def _refs(self, repo: str, head: bool) -> None:
        """The repository's branches, as the Hub lists them (no tags, conversions or pull requests here)."""
        if self._repo_and_rev(repo, None, head) is None:
            return
        branches = [{"name": b, "ref": f"refs/heads/{b}", "targetCommit": sha}
                    for b, sha in self.hub.refs[repo].items()]
        body = {"branches": branches, "converts": [], "tags": [], "pullRequests": []}
        self._send(200, json.dumps(body).encode(), {"Content-Type": "application/json"}, head)

    def _resolve(self, repo: str, rev: str, filename: str, head: bool) -> None:
        hub = self.hub
        sha = self._repo_and_rev(repo, rev, head)
        if sha is None:
            return
        if filename not in hub.files(repo, sha):
            return self._error(404, "EntryNotFound", f"{filename} does not exist on {rev}", head,
                               {"X-Repo-Commit": sha})
        size = hub.size(repo, filename, sha)
        headers = {"X-Repo-Commit": sha, "ETag": hub.etag(repo, filename, sha), "Accept-Ranges": "bytes",
                   "Content-Type": "application/octet-stream"}
        rng = self.headers.get("Range")
        if rng is not None and hub.range_mode == "ignore":
            rng = None
        if rng is None:
            headers["Content-Length"] = str(size)
            self.send_response(200)
            start, end = 0, size
        else:
            m = RANGE.match(rng.strip())
            if not m or int(m.group(1)) >= size:
                return self._error(416, None, f"unsatisfiable range {rng!r} for a file of {size} bytes", head,
                                   {"Content-Range": f"bytes */{size}"})
            with hub._lock:
                if hub.fail_after_ranges is not None and hub._ranges_ok >= hub.fail_after_ranges:
                    fail = True
                else:
                    fail = False
                    hub._ranges_ok += 1
            if fail:
                return self._error(500, None, "loopback hub: simulated interruption", head)
            start = int(m.group(1))
            end = min(int(m.group(2)) + 1, size) if m.group(2) else size
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
            if hub.range_mode == "overflow":
                end = size
            headers["Content-Length"] = str(end - start)
            self.send_response(206)
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if head:
            return
        stall = hub.stall_ranges if rng is not None else hub.stall_downloads
        if stall:
            self.wfile.flush()
            hub.stopping.wait(stall)
            self.close_connection = True
            return
        for pos in range(start, end, 1 << 16):
            block = hub.read(repo, filename, pos, min(end, pos + (1 << 16)), sha)
            try:
                self.wfile.write(block)
            except OSError:  # the client went away (e.g. it refused an unasked-for body)
                self.close_connection = True
                return
            with hub._lock:
                if self.epoch == hub._epoch:
                    hub.bytes_served[(repo, filename)] += len(block)


def serve_folder(folder: str | os.PathLike, repo: str) -> dict[str, dict[str, Path]]:
    """``{repo: {relative filename: path}}`` for every file under ``folder`` (to build a LoopbackHub)."""
    folder = Path(folder)
    return {repo: {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*")) if p.is_file()}}
