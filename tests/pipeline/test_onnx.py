"""The ONNX reader against the safetensors path, on a random BertModel exported with torch.onnx.export.

The reader finds the query and key projections from the graph alone: the test renames every initializer
to an anonymous name and shuffles their order, and the result must still equal the safetensors path.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import random
import warnings

import numpy as np
import pytest

from pipeline.families import layer_qk, layout_from_config
from pipeline.profile import head_profiles
from pipeline.registry.checkpoints import open_checkpoint
from pipeline.schema import Provenance
from pipeline.sources.base import CheckpointError
from tests.tiny_models import build_tiny, save, torch

onnx = pytest.importorskip("onnx", reason="the ONNX reader needs the onnx package (pip install -e .[pipeline])")
from pipeline.sources.onnx import open_onnx  # noqa: E402


class _Encoder(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def export(model, path, dynamo: bool = False) -> str:
    """torch.onnx.export: the TorchScript exporter (dynamo=False) or torch.export's (dynamo=True, needs onnxscript)."""
    ids = torch.randint(0, 50, (1, 7), generator=torch.Generator().manual_seed(0))
    kw = {} if dynamo else dict(dynamic_axes={"input_ids": {0: "b", 1: "t"}, "attention_mask": {0: "b", 1: "t"}})
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(_Encoder(model), (ids, torch.ones_like(ids)), str(path), dynamo=dynamo,
                          input_names=["input_ids", "attention_mask"], **kw)
    return str(path)


def anonymise(src, dst) -> str:
    """The same graph with every initializer renamed to an anonymous name, in shuffled order."""
    m = onnx.load(src)
    inits = list(m.graph.initializer)
    rename = {t.name: f"w{i}" for i, t in enumerate(random.Random(0).sample(inits, len(inits)))}
    for t in inits:
        t.name = rename[t.name]
    for n in m.graph.node:
        n.input[:] = [rename.get(i, i) for i in n.input]
    shuffled = random.Random(1).sample(inits, len(inits))
    del m.graph.initializer[:]
    m.graph.initializer.extend(shuffled)
    onnx.save(m, dst)
    return str(dst)


def profiles(ckpt, fold_ln=False):
    layout = layout_from_config(ckpt.config)
    out = []
    for layer in range(layout.n_layers):
        qk = layer_qk(ckpt, layout, layer, fold_ln)
        out.append(head_profiles(qk.W_Q, qk.W_K, None, kv_of_head=qk.kv_of_head, gain=qk.gain).profile)
    return np.stack(out)


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    folder = tmp_path_factory.mktemp("onnx")
    model = build_tiny("bert", dtype=torch.float32, num_hidden_layers=3).float()
    st = open_checkpoint(save(model, folder / "hf"))
    path = export(model, folder / "bert.onnx")
    return folder, st, path


def test_onnx_equals_the_safetensors_path(bert):
    folder, st, path = bert
    for p in (path, anonymise(path, folder / "anon.onnx")):
        ck = open_onnx(p)
        assert layout_from_config(ck.config) == layout_from_config(st.config)
        for layer in range(3):
            for role in ("query", "key"):
                name = f"encoder.layer.{layer}.attention.self.{role}.weight"
                np.testing.assert_array_equal(ck.read(name), st.read(name))
        for fold in (False, True):
            np.testing.assert_array_equal(profiles(ck, fold), profiles(st, fold))


@pytest.mark.slow
def test_the_torch_export_exporter_graph_too(bert):
    pytest.importorskip("onnxscript", reason="torch.onnx.export(dynamo=True) needs onnxscript")
    folder, st, _ = bert
    model = build_tiny("bert", dtype=torch.float32, num_hidden_layers=3).float()  # the same seed: the same weights
    ck = open_onnx(export(model, folder / "dynamo.onnx", dynamo=True))
    assert layout_from_config(ck.config) == layout_from_config(st.config)
    for fold in (False, True):
        np.testing.assert_array_equal(profiles(ck, fold), profiles(st, fold))


def test_query_and_key_are_not_swapped_or_mixed_up(bert):
    """Q and K of one layer differ, so reading them swapped (or from another layer) would be caught above;
    check that each read tensor is the right one and no other."""
    _, st, path = bert
    ck = open_onnx(path)
    names = [f"encoder.layer.{layer}.attention.self.{r}.weight" for layer in range(3) for r in ("query", "key")]
    for a in names:
        for b in names:
            same = np.array_equal(ck.read(a), st.read(b))
            assert same == (a == b), (a, b)


def test_provenance_and_dispatch(bert):
    _, _, path = bert
    ck = open_checkpoint(path)
    sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
    assert ck.provenance == Provenance(format="onnx", file="bert.onnx", sha256=sha)
    assert ck.own_name == "bert" and ck.revision == f"local-{sha[:12]}"


def test_a_graph_without_attention_names_what_was_looked_for(tmp_path):
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"]),
         helper.make_node("MatMul", ["y", "y"], ["z"]), helper.make_node("Softmax", ["z"], ["p"])],
        "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("p", TensorProto.FLOAT, [4, 4])], initializer=[w])
    path = tmp_path / "mlp.onnx"
    onnx.save(helper.make_model(graph), str(path))
    with pytest.raises(CheckpointError, match="no attention found in .*looked for a MatMul of two activations "
                                              "feeding Softmax.*reached Relu before a Reshape into heads") as e:
        open_onnx(path)
    assert "\n" not in str(e.value)


def test_truncated_and_missing_files(bert, tmp_path):
    _, _, path = bert
    whole = open(path, "rb").read()
    for cut in (len(whole) // 2, 1000):
        short = tmp_path / f"cut{cut}.onnx"
        short.write_bytes(whole[:cut])
        with pytest.raises(CheckpointError, match="truncated or damaged") as e:
            open_onnx(short)
        assert "\n" not in str(e.value)
    with pytest.raises(CheckpointError, match="no such ONNX file"):
        open_onnx(tmp_path / "absent.onnx")


def test_profiles_command_on_bad_onnx_exits_2_and_leaves_the_store(bert, tmp_path, capsys):
    from pipeline.__main__ import main

    _, _, path = bert
    store = tmp_path / "s.zarr"
    assert main(["profiles", path, "--store", str(store), "--quiet"]) == 0
    before = sorted((p.relative_to(store), p.read_bytes()) for p in store.rglob("*") if p.is_file())
    whole = open(path, "rb").read()
    (tmp_path / "cut.onnx").write_bytes(whole[: len(whole) // 2])
    capsys.readouterr()
    assert main(["profiles", str(tmp_path / "cut.onnx"), "--store", str(store), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "truncated or damaged" in err
    assert sorted((p.relative_to(store), p.read_bytes()) for p in store.rglob("*") if p.is_file()) == before
