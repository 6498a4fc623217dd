"""Read only the tensors you ask for from a Hub checkpoint, by HTTP range requests.

For a Hub id the whole checkpoint is never downloaded. ``resolve_snapshot`` fetches ``config.json`` and
the safetensors index (``model.safetensors.index.json``, or the single ``model.safetensors``) with
huggingface_hub (cached under HF_HOME like any hub download) and pins the commit they resolved to.
``RangeFile`` then reads each needed shard's header (8 bytes, then the JSON header) and each requested
tensor's bytes with ``Range: bytes=a-b`` requests made through huggingface_hub's own HTTP session
(``http_backoff``, ``build_hf_headers``, ``hf_raise_for_status``), so HF_ENDPOINT, HF_TOKEN, proxies and
retries behave as they do for huggingface_hub. Bytes fetched = config + index + per used shard
(8 + header) + the requested tensors, nothing else.

Environment, read at call time: HF_ENDPOINT, HF_TOKEN, HF_HOME / HF_HUB_CACHE, HF_HUB_OFFLINE
(offline: the files must already be in the cache; reads then come from the cached files),
HEADGEOMETRY_HUB_RETRIES (retries of a failed range read, default 3; tests set 0).

Nothing here writes to the store: an interrupted read raises ``HubError`` and leaves the store as it
was; resuming is the store's business (finished layers are ``layer_done`` and are not read again).
"""

from __future__ import annotations

import json
import os
import re
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pipeline.checkpoints import Checkpoint, CheckpointError
from pipeline.hub_env import hub_cache, hub_endpoint, hub_offline, hub_token

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
MAX_HEADER_BYTES = 100_000_000
DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "bf16"}
ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2}
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
CHUNK = 1 << 22  # elements converted at a time (bounds the temporary memory of a decode)


class HubError(CheckpointError):
    """A Hub checkpoint could not be read; the message says what was wrong and what to do."""


class NoSafetensorsError(HubError):
    """The repo has no safetensors weights, so nothing can be range-read (the caller may download .bin)."""


# ------------------------------------------------------------------------------------ environment


def looks_like_hub_id(source: str) -> bool:
    """True for 'org/name' or 'name' that is not an existing local path."""
    return bool(HUB_ID.match(str(source))) and not os.path.exists(str(source))


def _network_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [ConnectionError, TimeoutError]
    try:
        import httpx2

        errors.append(httpx2.TransportError)
    except ImportError:  # older huggingface_hub (requests based)
        import requests

        errors.append(requests.exceptions.ConnectionError)
    return tuple(errors)


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
    elif isinstance(exc, _network_errors()):
        msg = (f"could not reach the Hub at {hub_endpoint()} to read {what} of {repo_id} ({exc}). Check the "
               f"network and HF_ENDPOINT, or set HF_HUB_OFFLINE=1 to use files already in {hub_cache()}.")
    else:
        return exc if isinstance(exc, HubError) else HubError(f"reading {what} of {where} failed: {exc}")
    return HubError(msg)


# ------------------------------------------------------------------------------------ files


class RangeFile:
    """One remote file read by byte ranges (the per-file tensor source for Hub checkpoints).

    ``read(start, length)`` returns exactly those bytes, fetched with one ``Range`` request.
    ``bytes_fetched`` and ``requests`` count what this object transferred.
    """

    def __init__(self, url: str, name: str, token: str | None = None, retries: int | None = None):
        self.url, self.name, self.token = url, name, token
        self.retries = int(os.environ.get("HEADGEOMETRY_HUB_RETRIES", "3")) if retries is None else retries
        self.bytes_fetched = 0
        self.requests = 0
        self._lock = threading.Lock()

    def read(self, start: int, length: int) -> bytes:
        from huggingface_hub.utils import build_hf_headers, hf_raise_for_status, http_backoff

        if length <= 0:
            return b""
        headers = build_hf_headers(token=self.token)
        headers["Range"] = f"bytes={start}-{start + length - 1}"
        headers["Accept-Encoding"] = "identity"
        response = http_backoff("GET", self.url, headers=headers, follow_redirects=True, max_retries=self.retries,
                                base_wait_time=0.5, max_wait_time=4)
        hf_raise_for_status(response)
        body = response.content
        with self._lock:
            self.bytes_fetched += len(body)
            self.requests += 1
        if response.status_code != 206 or len(body) != length:
            raise HubError(f"the server did not honour the byte range {start}..{start + length} of {self.url} "
                           f"(status {response.status_code}, {len(body)} bytes). Range reads need a Hub (or "
                           "mirror) that supports HTTP Range requests.")
        return body


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
        return body


@dataclass
class TensorEntry:
    """Where one tensor lives: absolute byte offsets in its file."""

    dtype: str
    shape: tuple[int, ...]
    start: int
    end: int


def read_header(source) -> dict[str, TensorEntry]:
    """Parse a safetensors header with two range reads: 8 bytes of length N, then N bytes of JSON."""
    (n,) = struct.unpack("<Q", source.read(0, 8))
    if not 2 <= n <= MAX_HEADER_BYTES:
        raise HubError(f"{source.name} is not a safetensors file (header length {n}).")
    try:
        header = json.loads(source.read(8, n))
    except ValueError as exc:
        raise HubError(f"{source.name} has a corrupt safetensors header ({exc}).") from exc
    base = 8 + n
    return {name: TensorEntry(e["dtype"], tuple(e["shape"]), base + e["data_offsets"][0], base + e["data_offsets"][1])
            for name, e in header.items() if name != "__metadata__"}


def decode(buf: bytes, dtype: str, shape: tuple[int, ...], compact: bool = False) -> np.ndarray:
    """Raw little-endian tensor bytes -> float64 array of ``shape`` (BF16 by bit shift), in bounded chunks.

    ``compact``: float32 for BF16/F16/F32 (exact: each is a subset of float32), float64 for F64; the
    profile converts one head at a time to float64, so a layer never sits in memory as float64."""
    if dtype not in DTYPES:
        raise HubError(f"tensor dtype {dtype} is not supported (supported: {', '.join(DTYPES)}).")
    count = int(np.prod(shape))
    if len(buf) != count * ITEMSIZE[dtype]:
        raise HubError(f"tensor of shape {shape} and dtype {dtype} needs {count * ITEMSIZE[dtype]} bytes, "
                       f"got {len(buf)}.")
    out = np.empty(count, dtype=np.float32 if compact and dtype != "F64" else np.float64)
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

    def read(self, name: str, compact: bool = False) -> np.ndarray:
        """One tensor as float64 (float32 where exact if ``compact``), fetching only its bytes (plus its
        shard's header, once)."""
        self.tensor_names()
        if name not in self.weight_map:
            raise HubError(f"{self.repo_id}@{self.commit[:12]} has no tensor {name!r}.")
        filename = self.weight_map[name]
        entry = self.header(filename).get(name)
        if entry is None:
            raise HubError(f"the index of {self.repo_id} puts {name!r} in {filename}, whose header lacks it.")
        try:
            buf = self.source(filename).read(entry.start, entry.end - entry.start)
        except Exception as exc:  # noqa: BLE001
            raise explain(exc, self.repo_id, self.commit, f"tensor {name} in {filename}") from exc
        return decode(buf, entry.dtype, entry.shape, compact)

    @property
    def bytes_fetched(self) -> int:
        return sum(s.bytes_fetched for s in self._sources.values())


def _download(repo_id: str, filename: str, revision: str, endpoint: str, token, offline: bool) -> str:
    from huggingface_hub import hf_hub_download

    return hf_hub_download(repo_id, filename, revision=revision, endpoint=endpoint, token=token,
                           cache_dir=hub_cache(), local_files_only=offline)


def resolve_snapshot(repo_id: str, revision: str | None = None) -> HubSnapshot:
    """Pin ``repo_id`` at ``revision`` (default main) to a commit and read its config and index.

    Online: one HEAD (no retries, so a dead endpoint fails fast with a clear message) resolves the commit;
    config.json and the index are then downloaded at that commit into the Hub cache (a rerun reads them
    from there). Offline (HF_HUB_OFFLINE): everything comes from the cache, or a HubError says it is not there.
    """
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import EntryNotFoundError

    endpoint, token, offline = hub_endpoint(), hub_token(), hub_offline()
    rev = revision or "main"
    try:
        if offline:
            config_path = _download(repo_id, "config.json", rev, endpoint, token, True)
            commit = Path(config_path).parent.name
        else:
            # fail fast (no retries) on a dead endpoint, a missing repo or a bad revision ...
            get_hf_file_metadata(hf_hub_url(repo_id, "config.json", revision=rev, endpoint=endpoint),
                                 token=token, endpoint=endpoint)
            # ... then download by the branch name, so the cache maps it to its commit for offline reruns
            config_path = _download(repo_id, "config.json", rev, endpoint, token, False)
            commit = Path(config_path).parent.name
    except Exception as exc:  # noqa: BLE001
        raise explain(exc, repo_id, revision, "config.json") from exc
    with open(config_path) as fh:
        config = json.load(fh)
    try:
        index_path = _download(repo_id, INDEX_FILE, commit, endpoint, token, offline)
        with open(index_path) as fh:
            weight_map = dict(json.load(fh)["weight_map"])
        files = sorted(set(weight_map.values()))
    except EntryNotFoundError:
        weight_map, files = {}, [SINGLE_FILE]
    except Exception as exc:  # noqa: BLE001
        raise explain(exc, repo_id, commit, INDEX_FILE) from exc
    local_dir = None
    if offline:
        local_dir = str(Path(config_path).parent)
        missing = [f for f in files if not os.path.exists(os.path.join(local_dir, f))]
        if missing:
            raise HubError(f"HF_HUB_OFFLINE is set and {', '.join(missing)} of {repo_id}@{commit[:12]} are not in "
                           f"the Hub cache ({hub_cache()}). Unset HF_HUB_OFFLINE to range-read them from the Hub.")
    elif files == [SINGLE_FILE]:
        try:  # make sure the single-file checkpoint exists before promising it
            get_hf_file_metadata(hf_hub_url(repo_id, SINGLE_FILE, revision=commit, endpoint=endpoint),
                                 token=token, endpoint=endpoint)
        except EntryNotFoundError as exc:
            raise NoSafetensorsError(f"{repo_id}@{commit[:12]} has no safetensors weights (neither {INDEX_FILE} "
                                     f"nor {SINGLE_FILE}), so its Q/K tensors cannot be range-read.") from exc
        except Exception as exc:  # noqa: BLE001
            raise explain(exc, repo_id, commit, SINGLE_FILE) from exc
    return HubSnapshot(repo_id, commit, endpoint, config, weight_map, files, token, local_dir)


class HubCheckpoint:
    """The Checkpoint API over a Hub repo: ``.config``, ``.source``, ``.revision``, ``.tensor_names()``,
    ``.read(name) -> float64``; only the bytes of the tensors read are fetched."""

    def __init__(self, repo_id: str, revision: str | None = None):
        self.snapshot = resolve_snapshot(repo_id, revision)
        self.config = self.snapshot.config
        self.source = repo_id
        self.revision = self.snapshot.commit

    def tensor_names(self) -> list[str]:
        return self.snapshot.tensor_names()

    def read(self, name: str) -> np.ndarray:
        return self.snapshot.read(name)

    @property
    def bytes_fetched(self) -> int:
        return self.snapshot.bytes_fetched


class HubShardSource:
    """The tensor source (``pipeline.checkpoints.TensorSource``) of one remote shard, read by byte ranges."""

    def __init__(self, snapshot: HubSnapshot, filename: str, names: list[str]):
        self.snapshot, self.filename, self.names = snapshot, filename, names

    def keys(self) -> list[str]:
        return self.names

    def read(self, name: str) -> np.ndarray:
        return self.snapshot.read(name)

    def read_compact(self, name: str) -> np.ndarray:
        return self.snapshot.read(name, compact=True)

    def fingerprint(self) -> bytes:
        return f"{self.snapshot.repo_id}@{self.snapshot.commit}/{self.filename}".encode()


def hub_checkpoint(repo_id: str, revision: str | None = None) -> Checkpoint:
    """A :class:`pipeline.checkpoints.Checkpoint` whose tensors are range-read from the Hub at the pinned commit.

    Fetches config.json and the index now (and, for a single-file repo, its header); tensors when read.
    Raises NoSafetensorsError for repos without safetensors weights, HubError for everything else.
    """
    snap = resolve_snapshot(repo_id, revision)
    by_file: dict[str, list[str]] = {}
    for name in snap.tensor_names():
        by_file.setdefault(snap.weight_map[name], []).append(name)
    sources = {}
    for filename, names in by_file.items():
        src = HubShardSource(snap, filename, names)
        sources.update(dict.fromkeys(names, src))
    ck = Checkpoint(config=snap.config, source=repo_id, revision=snap.commit, sources=sources)
    ck.hub_snapshot = snap  # bytes_fetched and the per-file sources, for benchmarks and tests
    return ck
