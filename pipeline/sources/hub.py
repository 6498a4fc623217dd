"""Hub checkpoints: config and index through huggingface_hub, Q/K tensors by HTTP range reads, pinned to a commit.

For a Hub id the whole checkpoint is never downloaded. :func:`resolve_snapshot` resolves the revision
(default ``main``) to its commit once; from then on every URL names that commit, never the branch.
``config.json`` and the index (``model.safetensors.index.json``, or the single ``model.safetensors``) are
downloaded with huggingface_hub into its cache (so offline reruns find them). The index's file names
are validated (``pipeline.sources.names``) online and offline before any of them is used.

:class:`HubSnapshot` reads each needed shard's header (8 bytes, then the JSON header, capped at 100 MB as
the safetensors library caps it) and each requested tensor's bytes with one ``Range: bytes=a-b`` request
each (a fused QKV tensor: its q and k rows alone, :meth:`HubSnapshot.read_rows`), through
``pipeline.sources.hub_http.RangeFile``: exactly the asked bytes, timeouts and retries, so a server that sends
headers and then stalls ends the run with a message after at most :func:`stall_budget` seconds (default
4 x 10 + 3.5 = 43.5 s), and raising either variable raises it. huggingface_hub's ``HfFileSystem`` reads the
same ranges but buffers whole responses (``response.content``), so a Range-ignoring server makes it read the
whole file; ``benchmarks/scale_bench.py`` measures both.

Environment, read at call time: HF_ENDPOINT, HF_TOKEN, HF_HOME / HF_HUB_CACHE, HF_HUB_OFFLINE (offline:
the files must already be in the cache; reads then come from the cached files),
HEADGEOMETRY_HUB_TIMEOUT and HEADGEOMETRY_HUB_RETRIES (checked before anything is fetched).

Nothing here writes to the store: an interrupted read raises ``HubError``; resuming is the run's
business (finished layers are not read again).
"""

from __future__ import annotations

import json
import os
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pipeline.schema import Provenance
from pipeline.sources.base import Checkpoint, CheckpointError, compact_dtype
from pipeline.sources.hub_env import hub_cache, hub_endpoint, hub_offline, hub_token
from pipeline.sources.hub_errors import (  # noqa: F401 - HubError, HubStalled: raised to this module's callers
    CONNECT_TIMEOUT,
    RETRIES_VAR,
    TIMEOUT_VAR,
    HubError,
    HubStalled,
    NoSafetensorsError,
    explain,
    read_retries,
    read_timeout,
    stall_budget,
)
from pipeline.sources.hub_http import LocalFile, RangeFile
from pipeline.sources.names import repo_relative
from pipeline.sources.names import weight_map as validated_weight_map

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
MAX_HEADER_BYTES = 100_000_000  # the safetensors library's cap
DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "bf16"}
ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2}
CHUNK = 1 << 22  # elements converted at a time (bounds the temporary memory of a decode)
# ------------------------------------------------------------------------------------ files


@dataclass
class TensorEntry:
    """Where one tensor lives: absolute byte offsets in its file."""

    dtype: str
    shape: tuple[int, ...]
    start: int
    end: int


def read_header(source) -> dict[str, TensorEntry]:
    """A remote safetensors header in two range reads: 8 bytes of length n (capped as the safetensors
    library caps it), then n bytes of JSON; every entry's dtype, shape and byte span are checked."""
    (n,) = struct.unpack("<Q", source.read(0, 8))
    if not 2 <= n <= MAX_HEADER_BYTES:
        raise HubError(f"{source.name} is not a safetensors file (header length {n}; at most "
                       f"{MAX_HEADER_BYTES} is accepted).")
    try:
        header = json.loads(source.read(8, n))
        base, out = 8 + n, {}
        for name, e in header.items():
            if name == "__metadata__":
                continue
            shape = tuple(int(x) for x in e["shape"])
            a, b = (int(x) for x in e["data_offsets"])
            if e["dtype"] in ITEMSIZE and (b - a != int(np.prod(shape)) * ITEMSIZE[e["dtype"]] or a < 0):
                raise ValueError(f"tensor {name!r} spans {b - a} bytes for shape {shape} and dtype {e['dtype']}")
            out[name] = TensorEntry(e["dtype"], shape, base + a, base + b)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise HubError(f"{source.name} has a corrupt safetensors header ({exc}).") from exc
    return out


def decode(buf: bytes, dtype: str, shape: tuple[int, ...], compact: bool = False) -> np.ndarray:
    """Raw little-endian tensor bytes -> float64 array of ``shape`` (BF16 by bit shift), in bounded chunks.

    ``compact``: the stored dtype's compact dtype (``pipeline.sources.base.compact_dtype``: exact), else float64."""
    if dtype not in DTYPES:
        raise HubError(f"tensor dtype {dtype} is not supported (supported: {', '.join(DTYPES)}).")
    count = int(np.prod(shape))
    if len(buf) != count * ITEMSIZE[dtype]:
        raise HubError(f"tensor of shape {shape} and dtype {dtype} needs {count * ITEMSIZE[dtype]} bytes, "
                       f"got {len(buf)}.")
    out = np.empty(count, dtype=compact_dtype(dtype) if compact else np.float64)
    raw = np.frombuffer(buf, dtype="<u2" if dtype == "BF16" else DTYPES[dtype])
    for i in range(0, count, CHUNK):
        part = raw[i:i + CHUNK]
        out[i:i + CHUNK] = (part.astype(np.uint32) << 16).view(np.float32) if dtype == "BF16" else part
    return out.reshape(shape)


# ------------------------------------------------------------------------------------ snapshots


@dataclass
class HubSnapshot:
    """A Hub checkpoint pinned to one commit: its config and where each tensor lives."""

    repo_id: str
    commit: str
    endpoint: str
    config: dict
    weight_map: dict[str, str]  # tensor name -> file name; empty until headers are read for single-file repos
    files: list[str]
    token: str | None = None
    local_dir: str | None = None  # offline: the cached snapshot folder
    _sources: dict = field(default_factory=dict, repr=False)
    _headers: dict = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def source(self, filename: str):
        """The range-readable source of one file (cached per snapshot)."""
        repo_relative(filename, f"the index of {self.repo_id}")
        with self._lock:
            if filename not in self._sources:
                if self.local_dir is not None:
                    self._sources[filename] = LocalFile(os.path.join(self.local_dir, filename), filename)
                else:
                    from huggingface_hub import hf_hub_url

                    url = hf_hub_url(self.repo_id, filename, revision=self.commit, endpoint=self.endpoint)
                    self._sources[filename] = RangeFile(url, filename, self.token)
            return self._sources[filename]

    def header(self, filename: str) -> dict[str, TensorEntry]:
        if filename not in self._headers:
            try:
                self._headers[filename] = read_header(self.source(filename))
            except Exception as exc:  # noqa: BLE001 - turned into a message saying what to do
                raise explain(exc, self.repo_id, self.commit, f"the header of {filename}") from exc
        return self._headers[filename]

    def tensor_names(self) -> list[str]:
        if not self.weight_map:
            for f in self.files:
                self.weight_map.update(dict.fromkeys(self.header(f), f))
        return sorted(self.weight_map)

    def entry(self, name: str) -> TensorEntry:
        self.tensor_names()
        if name not in self.weight_map:
            raise HubError(f"{self.repo_id}@{self.commit[:12]} has no tensor {name!r}.")
        filename = self.weight_map[name]
        entry = self.header(filename).get(name)
        if entry is None:
            raise HubError(f"the index of {self.repo_id} puts {name!r} in {filename}, whose header lacks it.")
        return entry

    def read(self, name: str, compact: bool = False) -> np.ndarray:
        """One tensor as float64 (its compact dtype if ``compact``), fetching only its bytes (plus its
        shard's header, once)."""
        entry = self.entry(name)
        filename = self.weight_map[name]
        try:
            buf = self.source(filename).read(entry.start, entry.end - entry.start)
        except Exception as exc:  # noqa: BLE001
            raise explain(exc, self.repo_id, self.commit, f"tensor {name} in {filename}") from exc
        return decode(buf, entry.dtype, entry.shape, compact)

    def read_rows(self, name: str, ranges: list[tuple[int, int]], compact: bool = False) -> np.ndarray:
        """Rows [a, b) of a tensor for each (a, b) of ``ranges``, stacked in that order, fetching those rows'
        bytes alone (a fused QKV tensor's q and k rows, not its v rows). Ranges adjacent in the file are fetched
        together; requests hold at most ``ROW_REQUEST_BYTES`` and ``ROW_REQUESTS_AT_ONCE`` run at once, so memory
        holds the result and at most that many requests' bytes."""
        entry = self.entry(name)
        filename = self.weight_map[name]
        if entry.dtype not in DTYPES:
            raise HubError(f"tensor dtype {entry.dtype} is not supported (supported: {', '.join(DTYPES)}).")
        tail = entry.shape[1:]
        row_bytes = int(np.prod(tail)) * ITEMSIZE[entry.dtype]
        out = np.empty((sum(b - a for a, b in ranges), *tail),
                       dtype=compact_dtype(entry.dtype) if compact else np.float64)
        requests = _row_requests(ranges, max(1, ROW_REQUEST_BYTES // max(1, row_bytes)))
        source = self.source(filename)

        def fetch(request):
            first, count, places = request
            try:
                buf = source.read(entry.start + first * row_bytes, count * row_bytes)
            except Exception as exc:  # noqa: BLE001
                raise explain(exc, self.repo_id, self.commit, f"tensor {name} in {filename}") from exc
            rows = decode(buf, entry.dtype, (count, *tail), compact)
            for src, n, dst in places:
                out[dst:dst + n] = rows[src - first:src - first + n]

        if len(requests) == 1:
            fetch(requests[0])
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(min(ROW_REQUESTS_AT_ONCE, len(requests)), thread_name_prefix="hub-rows") as pool:
                for done in [pool.submit(fetch, r) for r in requests]:
                    done.result()
        return out

    @property
    def bytes_fetched(self) -> int:
        return sum(s.bytes_fetched for s in self._sources.values())


ROW_REQUEST_BYTES = 8 << 20  # at most this many bytes per row request (whole rows; at least one row)
ROW_REQUESTS_AT_ONCE = 4


def _row_requests(ranges: list[tuple[int, int]], max_rows: int) -> list[tuple[int, int, list]]:
    """Requests (first row, row count, [(file row, rows, output row), ...]) covering ``ranges``: ranges adjacent
    in the file merged, then cut into requests of at most ``max_rows`` rows."""
    at, pieces = 0, []
    for a, b in ranges:
        pieces.append((a, b - a, at))
        at += b - a
    spans: list[list] = []  # [first, end, pieces]
    for a, n, dst in sorted(pieces):
        if spans and spans[-1][1] == a:
            spans[-1][1] += n
            spans[-1][2].append((a, n, dst))
        else:
            spans.append([a, a + n, [(a, n, dst)]])
    out = []
    for first, end, parts in spans:
        for lo in range(first, end, max_rows):
            hi = min(end, lo + max_rows)
            cut = [(max(a, lo), min(a + n, hi) - max(a, lo), dst + max(a, lo) - a) for a, n, dst in parts
                   if a < hi and a + n > lo]
            out.append((lo, hi - lo, cut))
    return out


def _download(repo_id: str, filename: str, revision: str, endpoint: str, token, offline: bool) -> str:
    """hf_hub_download into the Hub cache, given up after :func:`stall_budget` seconds.

    huggingface_hub retries a stalled download on its own (up to 6 tries of its 10 s timeout, and a
    second metadata request of up to 60 s), logging each retry; here the download runs in a daemon
    thread with those warnings silenced, and a download still running at the deadline is a HubStalled
    (the thread ends with huggingface_hub's own timeouts)."""
    import logging

    from huggingface_hub import hf_hub_download

    def fetch():
        return hf_hub_download(repo_id, filename, revision=revision, endpoint=endpoint, token=token,
                               cache_dir=hub_cache(), local_files_only=offline, etag_timeout=CONNECT_TIMEOUT)

    if offline:
        return fetch()
    budget, done = stall_budget(), {}

    def run():
        try:
            done["path"] = fetch()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            done["error"] = exc

    logger = logging.getLogger("huggingface_hub.file_download")
    level = logger.level
    logger.setLevel(logging.ERROR)  # its "Trying to resume download..." lines would break the one-line error
    try:
        worker = threading.Thread(target=run, name=f"hub-download {filename}", daemon=True)
        worker.start()
        worker.join(budget)
    finally:
        logger.setLevel(level)
    if worker.is_alive():
        raise HubStalled(f"{endpoint}/{repo_id} ({filename})",
                         f"within {budget:.0f} s (the download deadline: {RETRIES_VAR} + 1 times "
                         f"{TIMEOUT_VAR}, plus pauses)", budget)
    if "error" in done:
        raise done["error"]
    return done["path"]


def _json(path: str, what: str) -> object:
    try:
        with open(path) as fh:
            return json.load(fh)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HubError(f"{what} is not valid JSON ({exc}); the repository is damaged.") from None


def resolve_snapshot(repo_id: str, revision: str | None = None) -> HubSnapshot:
    """Pin ``repo_id`` at ``revision`` (default main) to a commit and read its config and index.

    Online: one HEAD (no retries, so a dead endpoint fails fast) resolves the commit; config.json and
    the index are then downloaded into the Hub cache. Offline (HF_HUB_OFFLINE): everything comes from
    the cache, or a HubError says it is not there.
    """
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import EntryNotFoundError

    endpoint, token, offline = hub_endpoint(), hub_token(), hub_offline()
    read_timeout(), read_retries()  # a bad setting fails before anything is fetched
    rev = revision or "main"
    try:
        if not offline:
            get_hf_file_metadata(hf_hub_url(repo_id, "config.json", revision=rev, endpoint=endpoint),
                                 token=token, endpoint=endpoint, timeout=CONNECT_TIMEOUT)
        # by the branch name, so the cache maps it to its commit for offline reruns
        config_path = _download(repo_id, "config.json", rev, endpoint, token, offline)
        commit = Path(config_path).parent.name
    except Exception as exc:  # noqa: BLE001
        raise explain(exc, repo_id, revision, "config.json") from exc
    config = _json(config_path, f"config.json of {repo_id}@{commit[:12]}")
    if not isinstance(config, dict):
        raise HubError(f"config.json of {repo_id}@{commit[:12]} is not a JSON object; the repository is damaged.")
    try:
        index_path = _download(repo_id, INDEX_FILE, commit, endpoint, token, offline)
        weight_map = validated_weight_map(_json(index_path, f"{INDEX_FILE} of {repo_id}"),
                                          f"{INDEX_FILE} of {repo_id}@{commit[:12]}")
        files = sorted(set(weight_map.values()))
    except EntryNotFoundError:
        weight_map, files = {}, [SINGLE_FILE]
    except CheckpointError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise explain(exc, repo_id, commit, INDEX_FILE) from exc
    local_dir = None
    if offline:
        local_dir = str(Path(config_path).parent)
        missing = [f for f in files if not os.path.isfile(os.path.join(local_dir, f))]
        if missing:
            raise HubError(f"HF_HUB_OFFLINE is set and {', '.join(missing)} of {repo_id}@{commit[:12]} are not in "
                           f"the Hub cache ({hub_cache()}). Unset HF_HUB_OFFLINE to range-read them from the Hub.")
    elif files == [SINGLE_FILE]:
        try:  # make sure the single-file checkpoint exists before promising it
            get_hf_file_metadata(hf_hub_url(repo_id, SINGLE_FILE, revision=commit, endpoint=endpoint),
                                 token=token, endpoint=endpoint, timeout=CONNECT_TIMEOUT)
        except EntryNotFoundError as exc:
            raise NoSafetensorsError(f"{repo_id}@{commit[:12]} has no safetensors weights (neither {INDEX_FILE} "
                                     f"nor {SINGLE_FILE}), so its Q/K tensors cannot be range-read.", commit) from exc
        except Exception as exc:  # noqa: BLE001
            raise explain(exc, repo_id, commit, SINGLE_FILE) from exc
    return HubSnapshot(repo_id, commit, endpoint, config, weight_map, files, token, local_dir)


class HubShardSource:
    """The tensor source of one remote shard, read by byte ranges."""

    format = "hub"

    def __init__(self, snapshot: HubSnapshot, filename: str, names: list[str]):
        self.snapshot, self.filename, self.names = snapshot, filename, names

    def keys(self) -> list[str]:
        return self.names

    def shape(self, name: str) -> tuple[int, ...]:
        return self.snapshot.entry(name).shape

    def read(self, name: str) -> np.ndarray:
        return self.snapshot.read(name)

    def read_compact(self, name: str) -> np.ndarray:
        return self.snapshot.read(name, compact=True)

    def read_rows(self, name: str, ranges: list[tuple[int, int]]) -> np.ndarray:
        return self.snapshot.read_rows(name, ranges, compact=True)

    def fingerprint(self) -> bytes:
        return f"{self.snapshot.repo_id}@{self.snapshot.commit}/{self.filename}".encode()


def hub_checkpoint(repo_id: str, revision: str | None = None) -> Checkpoint:
    """A Checkpoint whose tensors are range-read from the Hub at the pinned commit.

    Fetches config.json and the index now (and, for a single-file repo, its header); tensors when read.
    ``ck.hub_snapshot`` gives the snapshot (bytes fetched, headers). Raises NoSafetensorsError for repos
    without safetensors weights, HubError for everything else.
    """
    snap = resolve_snapshot(repo_id, revision)
    by_file: dict[str, list[str]] = {}
    for name in snap.tensor_names():
        by_file.setdefault(snap.weight_map[name], []).append(name)
    sources = {}
    for filename, names in by_file.items():
        src = HubShardSource(snap, filename, names)
        sources.update(dict.fromkeys(names, src))
    file = INDEX_FILE if snap.files != [SINGLE_FILE] else SINGLE_FILE
    ck = Checkpoint(config=snap.config, source=repo_id, revision=snap.commit, sources=sources,
                    provenance=Provenance(format="hub", file=file))
    ck.hub_snapshot = snap
    return ck
