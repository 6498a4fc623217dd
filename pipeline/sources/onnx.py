"""An ONNX file of a BERT-style encoder as a :class:`~pipeline.sources.base.Checkpoint`, found from the graph.

Initializer names in ONNX exports are often anonymised (``onnx::MatMul_470``), so nothing here relies on
names. The reader finds every attention-score product and walks back from it:

- a *score MatMul* multiplies two activations (no weight operand) and its output reaches a ``Softmax``
  through at most a few elementwise nodes (scale ``Mul`` / ``Div``, mask ``Add``, ``Where``, ``Cast``);
- each operand is followed upstream through ``Transpose``, scale ``Mul`` / ``Div`` by a constant,
  ``Identity`` / ``Cast``, to a ``Reshape`` into heads ``(batch, tokens, heads, head_dim)``, then an optional
  bias ``Add`` and the projection ``MatMul(x, W)`` (or ``Gemm``) with a weight initializer;
- the left operand must end as ``(batch, heads, tokens, head_dim)`` (the query) and the right one as
  ``(batch, heads, head_dim, tokens)`` (the transposed key); both projections must read the same ``x``.

Layers are numbered in graph order. ``W`` (``x @ W``, shape (N, H n)) is the transpose of torch's Linear
weight, so the query and key weights are exposed as ``encoder.layer.L.attention.self.{query,key}.weight``
(``W.T``) with a ``bert`` config (hidden size, heads, layers from the shapes), and where the attention input
comes from a ``LayerNormalization`` (or a decomposed norm ending in ``Mul`` by a gain and ``Add``), its gain
under the name BERT folding expects (``embeddings.LayerNorm.weight`` for layer 0, else
``encoder.layer.(L-1).output.LayerNorm.weight``).
"""

from __future__ import annotations

import numpy as np

from pipeline.schema import Provenance
from pipeline.sources.base import Checkpoint, CheckpointError, format_reader
from pipeline.sources.gguf import owning_package, sha256_of

LOOKED_FOR = ("a MatMul of two activations feeding Softmax, whose operands are reshaped into heads and "
              "transposed to (batch, heads, tokens, head_dim) and (batch, heads, head_dim, tokens), each from a "
              "MatMul (+ bias Add) with a weight initializer applied to the same input")
_PASS = ("Identity", "Cast")
_TO_SOFTMAX = ("Mul", "Div", "Add", "Sub", "Where", "Cast", "Identity")


class _NotAttention(Exception):
    """This MatMul is not an attention score product (the reason is the message)."""


class _Graph:
    def __init__(self, graph):
        from onnx import numpy_helper

        self.nodes = list(graph.node)
        self.producer = {o: n for n in self.nodes for o in n.output}
        self.consumers: dict[str, list] = {}
        for n in self.nodes:
            for i in n.input:
                self.consumers.setdefault(i, []).append(n)
        self.inits = {t.name: t for t in graph.initializer}
        self._to_array = numpy_helper.to_array

    def const(self, name: str) -> np.ndarray | None:
        """The value of an initializer or Constant node output, else None."""
        if name in self.inits:
            return self._to_array(self.inits[name])
        n = self.producer.get(name)
        if n is not None and n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    return self._to_array(a.t)
        return None

    def shape_tail(self, name: str) -> list[int | None]:
        """The Reshape target's entries where they are constant (None where computed at run time)."""
        c = self.const(name)
        if c is not None:
            return [int(v) for v in c.reshape(-1)]
        n = self.producer.get(name)
        if n is None or n.op_type != "Concat":
            return [None]
        out: list[int | None] = []
        for i in n.input:
            c = self.const(i)
            out += [None] if c is None else [int(v) for v in c.reshape(-1)]
        return out

    def feeds_softmax(self, node, hops: int = 4) -> bool:
        frontier = [node]
        for _ in range(hops):
            nxt = []
            for n in frontier:
                for c in self.consumers.get(n.output[0], []):
                    if c.op_type == "Softmax":
                        return True
                    if c.op_type in _TO_SOFTMAX:
                        nxt.append(c)
            frontier = nxt
        return False

    def projection(self, name: str) -> dict:
        """Walk from a score operand back to its projection (see the module docstring)."""
        perms, tail = [], None
        for _ in range(32):
            n = self.producer.get(name)
            if n is None:
                raise _NotAttention(f"{name!r} is a graph input, not a projection")
            op = n.op_type
            if op == "Transpose":
                perms.append(next(list(a.ints) for a in n.attribute if a.name == "perm"))
                name = n.input[0]
            elif op in ("Mul", "Div") and any(self.const(i) is not None for i in n.input):
                name = next(i for i in n.input if self.const(i) is None)
            elif op in _PASS:
                name = n.input[0]
            elif op == "Reshape":
                tail = self.shape_tail(n.input[1])
                name = n.input[0]
                break
            else:
                raise _NotAttention(f"reached {op} before a Reshape into heads")
        if tail is None:
            raise _NotAttention("no Reshape into heads")
        axes = [0, 1, 2, 3]  # (batch, tokens, heads, head_dim) after the Reshape
        for p in reversed(perms):
            if len(p) != 4:
                raise _NotAttention(f"a Transpose of rank {len(p)}")
            axes = [axes[i] for i in p]
        n = self.producer.get(name)
        bias = None
        if n is not None and n.op_type == "Add" and any(i in self.inits for i in n.input):
            bias = next(i for i in n.input if i in self.inits)
            name = next(i for i in n.input if i != bias)
            n = self.producer.get(name)
        if n is None or n.op_type not in ("MatMul", "Gemm") or n.input[1] not in self.inits:
            raise _NotAttention("the heads do not come from a MatMul with a weight initializer")
        dims = tuple(int(d) for d in self.inits[n.input[1]].dims)
        if len(dims) != 2:
            raise _NotAttention(f"a projection weight of rank {len(dims)}")
        trans_b = n.op_type == "Gemm" and any(a.name == "transB" and a.i for a in n.attribute)
        return dict(x=n.input[0], weight=n.input[1], torch_layout=trans_b, shape=dims[::-1] if trans_b else dims,
                    axes=axes, tail=tail[-2:] if len(tail) >= 2 else [None, None])

    def gain_of(self, x: str) -> str | None:
        """The initializer holding the gain of the norm that produces ``x``, if there is one."""
        n = self.producer.get(x)
        if n is None:
            return None
        if n.op_type == "LayerNormalization" and len(n.input) > 1 and n.input[1] in self.inits:
            return n.input[1]
        if n.op_type == "Add":  # decomposed norm: (normalised * gain) + bias
            for i in n.input:
                m = self.producer.get(i)
                if m is not None and m.op_type == "Mul":
                    g = [j for j in m.input if j in self.inits]
                    if g:
                        return g[0]
        return None


def _heads(q: dict, k: dict) -> tuple[int, int]:
    """(heads, head_dim) from the Reshape targets and the projection width."""
    width = q["shape"][1]
    for h, n in (q["tail"], k["tail"]):
        if h is not None and h > 0 and width % h == 0:
            return h, width // h
        if n is not None and n > 0 and width % n == 0:
            return width // n, n
    raise _NotAttention("the number of heads is not a constant of the Reshape")


class ONNXFile:
    """A tensor source over one ONNX file's query / key weights and norm gains, under BERT's HF names."""

    format = "onnx"

    def __init__(self, graph: _Graph, names: dict[str, tuple[str, bool]], fingerprint: bytes):
        self._graph = graph
        self._names = names  # HF name -> (initializer, transpose to torch layout)
        self._fingerprint = fingerprint

    def keys(self) -> list[str]:
        return list(self._names)

    def read_compact(self, name: str) -> np.ndarray:
        init, transpose = self._names[name]
        w = self._graph._to_array(self._graph.inits[init])
        w = w.T if transpose else w
        return np.ascontiguousarray(w, dtype=w.dtype if w.dtype in (np.float16, np.float32) else np.float64)

    def read(self, name: str) -> np.ndarray:
        return self.read_compact(name).astype(np.float64)

    def fingerprint(self) -> bytes:
        return self._fingerprint


def open_onnx(path) -> Checkpoint:
    """Open a ``.onnx`` file of a BERT-style encoder (see the module docstring). CheckpointError, one line."""
    onnx, path = format_reader("onnx", path, "ONNX")
    try:
        model = onnx.load(str(path))
    except Exception as exc:  # noqa: BLE001 - protobuf raises DecodeError and friends on bad bytes
        raise CheckpointError(f"cannot read {path} as ONNX: the file is truncated or damaged "
                              f"({type(exc).__name__}: {(str(exc).splitlines() or [''])[0]})") from exc
    g = _Graph(model.graph)
    layers, reasons = [], {}
    for node in g.nodes:
        if node.op_type != "MatMul" or any(g.const(i) is not None for i in node.input) or not g.feeds_softmax(node):
            continue
        try:
            q, k = g.projection(node.input[0]), g.projection(node.input[1])
            if q["axes"][2:] != [1, 3] or k["axes"][2:] != [3, 1]:
                raise _NotAttention("the operands are not (tokens, head_dim) x (head_dim, tokens) per head")
            if q["x"] != k["x"]:
                raise _NotAttention("the query and key projections read different inputs")
            if q["shape"] != k["shape"]:
                raise _NotAttention(f"query weight {q['shape']} and key weight {k['shape']} differ in shape")
            layers.append((q, k, _heads(q, k)))
        except _NotAttention as exc:
            reasons[str(exc)] = reasons.get(str(exc), 0) + 1
    if not layers:
        why = "; ".join(f"{r} ({c}x)" for r, c in reasons.items()) or "no MatMul of two activations feeds a Softmax"
        raise CheckpointError(f"no attention found in {path}: looked for {LOOKED_FOR}; {why}")
    shapes = {(q["shape"], hd) for q, _, hd in layers}
    if len(shapes) > 1:
        raise CheckpointError(f"the attention layers of {path} differ in shape ({sorted(shapes)}); only uniform "
                              "encoders are supported")
    (N, width), (H, n) = next(iter(shapes))
    names: dict[str, tuple[str, bool]] = {}
    for layer, (q, k, _) in enumerate(layers):
        for role, side in (("query", q), ("key", k)):
            names[f"encoder.layer.{layer}.attention.self.{role}.weight"] = (side["weight"], not side["torch_layout"])
        gain = g.gain_of(q["x"])
        if gain is not None:
            ln = "embeddings.LayerNorm.weight" if layer == 0 else f"encoder.layer.{layer - 1}.output.LayerNorm.weight"
            names[ln] = (gain, False)
    sha = sha256_of(path)
    src = ONNXFile(g, names, bytes.fromhex(sha))
    if H * n != N:
        raise CheckpointError(f"the attention of {path} has {H} heads of size {n} on a hidden size of {N}; only "
                              "BERT-style encoders with heads x head size = hidden size are supported")
    config = {"model_type": "bert", "hidden_size": int(N), "num_attention_heads": int(H),
              "num_hidden_layers": len(layers), "position_embedding_type": "absolute"}
    provenance = Provenance(format="onnx", file=path.name, sha256=sha, package=owning_package(path))
    return Checkpoint(config=config, source=str(path), revision=f"local-{sha[:12]}",
                      sources={name: src for name in names}, provenance=provenance, own_name=path.stem)
