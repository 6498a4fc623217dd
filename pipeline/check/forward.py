"""One layer of a checkpoint run through transformers' own attention, in float64 and eager mode, its scores captured.

The model of the checkpoint's config is built by ``transformers.AutoModel.from_config`` with its weights on the meta
device (no memory: :class:`_WeightsOnMeta` sends the large tensor factories there, and buffers such as the rotary
frequencies are computed as the class computes them). For one layer:

- the parameters of that layer's attention module (the parent of its Q/K projections, QK-norms and gpt-oss's
  sinks included) get the checkpoint's values in float64; every bias in it is zero (a bias adds terms linear in x,
  which are no part of the form the profile describes), and so is a parameter the checkpoint lacks (a GGUF or ONNX
  file read for its Q/K alone has no V and O; ``LayerRunner.missing`` names them: a missing tensor that enters the
  scores makes the layer fail); every other parameter of the model is a zero of its shape
  that holds no memory (``torch.zeros(()).expand``), so peak memory is about one layer's attention;
- the other layers of the model's layer list are stand-ins that pass a zero hidden state on; the layer's own
  input is a zero (1, T, N) tensor, and the input of its Q/K projections is replaced by x, T random vectors
  N(0, 1) of full rank (min(T, N));
- the tower's forward runs on inputs of T tokens (ids, pixels or audio features, as its ``forward`` takes), so
  that the model computes its own positions, rotary tables and masks; the first 4-dimensional
  ``torch.nn.functional.softmax`` of the layer's attention is its pre-softmax scores, captured, and the forward
  stops there (nothing after the attention needs real weights).

The QK-norm modules inside the attention (class names holding "Norm") have their inputs captured, the queries' and
the keys' told apart by the module's name (``q*`` / ``k*``) or, for one module normalising both, by call order.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import numpy as np

from pipeline.check.names import parameter_sources
from pipeline.families import qk_tensor_names

TOKENS = 72  # sequence length: the largest offset checked (64) and 8 pairs at it
_LARGE = 1 << 20  # tensor factories of at least this many elements make meta tensors while the model is built
# roles of ``pipeline.families.qk_tensor_names``: the projections that read the attention input x (their input is
# replaced by x), and latent attention's up-projections, which read a latent (pipeline.families.latent)
_READS_X = ("q", "k", "qkv", "q_a", "kv_a")
_READS_LATENT = ("q_b", "kv_b")
_POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_target_positions")


class CheckError(ValueError):
    """The check cannot run on this checkpoint; the message says why."""


class _Stop(Exception):
    """Raised once the layer's scores are captured: the rest of the forward pass is not needed."""


def _torch():
    import torch
    import transformers

    return torch, transformers


def _weights_on_meta():
    """A torch function mode under which ``torch.empty`` (parameters' storage) and large tensor factories make
    meta tensors; small tensors (rotary frequencies, position ids, causal-mask buffers) stay real."""
    torch, _ = _torch()
    from torch.overrides import TorchFunctionMode

    factories = {torch.zeros, torch.ones, torch.full, torch.randn, torch.rand}

    def numel(args) -> int:
        size = args[0] if args and isinstance(args[0], (tuple, list, torch.Size)) else args
        n = 1
        for s in size:
            n *= int(s) if isinstance(s, int) else 1
        return n

    class _WeightsOnMeta(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if kwargs.get("device") is None and (func is torch.empty or (func in factories and numel(
                    args[:1] if func is torch.full else args) >= _LARGE)):
                kwargs = kwargs | {"device": "meta"}
            return func(*args, **kwargs)

    return _WeightsOnMeta()


def special_floats(value):
    """``value`` (a config.json's parsed JSON) with the floats JSON has no literal for, which transformers 5 writes as
    ``{"__float__": "Infinity"}`` (Falcon-H1's ``time_step_limit``), made floats again, as ``from_pretrained`` reads
    them."""
    if isinstance(value, dict):
        if set(value) == {"__float__"}:
            return float(value["__float__"])
        return {k: special_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [special_floats(v) for v in value]
    return value


def hf_config(config: dict):
    """transformers' config object of a ``config.json`` dict, every (sub-)config set to eager attention."""
    from huggingface_hub.errors import StrictDataclassError

    torch, transformers = _torch()
    kwargs = {k: special_floats(v) for k, v in config.items() if k != "model_type"}
    try:
        cfg = transformers.AutoConfig.for_model(config.get("model_type"), **kwargs)
    except (ValueError, KeyError, TypeError, StrictDataclassError) as exc:
        raise CheckError(f"transformers {transformers.__version__} cannot read this config (model_type "
                         f"{config.get('model_type')!r}): {exc}") from None
    for c in _configs(cfg):
        c._attn_implementation = "eager"
        c._experts_implementation = "eager"
    return cfg


def _configs(cfg):
    out, todo = [], [cfg]
    PretrainedConfig = _torch()[1].PretrainedConfig
    while todo:
        c = todo.pop()
        out.append(c)
        todo += [v for v in vars(c).values() if isinstance(v, PretrainedConfig) and v not in out]
    return out


def meta_model(config: dict):
    """``AutoModel.from_config`` of the checkpoint's config, float64, its weights on the meta device."""
    torch, transformers = _torch()
    cfg = hf_config(config)
    try:
        with _weights_on_meta():
            return transformers.AutoModel.from_config(cfg, dtype=torch.float64)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CheckError(f"transformers {transformers.__version__} cannot build a model of this config (model_type "
                         f"{config.get('model_type')!r}): {exc}") from None


@dataclass
class Capture:
    """What one forward pass of one layer captured: ``x`` (T, N) entering its Q/K projections, ``scores`` (H, T, T)
    handed to softmax ((H, T, T + 1) with gpt-oss's ``sinks``), and per QK-norm side ('q', 'k') its input with the
    module's epsilon."""

    x: np.ndarray
    scores: np.ndarray
    norms: dict[str, tuple[np.ndarray, float]] = field(default_factory=dict)
    sinks: np.ndarray | None = None


@dataclass
class _Paths:
    attention: str  # the attention module (parent of the Q/K projections)
    layer: str  # the layer (an element of the layer list)
    layers: str  # the layer list
    tower: str  # the module whose forward runs
    projections: list[str]  # the Q/K projection modules
    qk_names: dict[str, str]  # role -> parameter name of the Q/K weights (q, k or qkv)


class LayerRunner:
    """Runs layers of one checkpoint (``ckpt``: ``pipeline.sources.base.Checkpoint``; ``layout``: its
    :class:`~pipeline.families.Layout`) through transformers' attention, one at a time (module docstring)."""

    def __init__(self, ckpt, layout, seed: int = 0):
        torch, _ = _torch()
        self.ckpt, self.layout, self.seed = ckpt, layout, seed
        self.model = meta_model(ckpt.config).eval()
        # every name of a parameter, tied ones included (T5's and BART's embeddings): each module's own is replaced
        self._params = dict(self.model.named_parameters(remove_duplicate=False))
        self._zero = torch.zeros((), dtype=torch.float64)
        for name, p in self._params.items():  # every weight a zero of its shape until a layer needs it
            self._set(name, self._zero.expand(p.shape))
        self._sources, self._converted = parameter_sources(self.model, ckpt.tensor_names())
        self._param_of = {stored: name for name, stored in self._sources.items()}
        self.missing: set[str] = set()  # attention parameters the checkpoint lacks (set to zero), by relative name

    def _set(self, name: str, value) -> None:
        torch, _ = _torch()
        owner, _, attr = name.rpartition(".")
        module = self.model.get_submodule(owner) if owner else self.model
        module._parameters[attr] = torch.nn.Parameter(value, requires_grad=False)

    def paths(self, layer: int) -> _Paths:
        """Where layer ``layer``'s attention, its layer and the tower that runs it are in the model: the parameters
        that load the checkpoint's Q/K tensors of the layer (as the family table names them), their common parent
        module, the element ``layer`` of the outermost ``ModuleList`` that holds it (T5's blocks, not their sublayers),
        and for a multi-tower model the tower's module."""
        torch, _ = _torch()
        stored = qk_tensor_names(self.layout, self.ckpt.tensor_names(), layer)
        stored = {role: n for role, n in stored.items() if role in _READS_X + _READS_LATENT}
        unloaded = [n for n in stored.values() if n not in self._param_of]
        if unloaded:
            raise CheckError(f"transformers' {type(self.model).__name__} has no parameter that loads the checkpoint's "
                             f"{', '.join(unloaded)} (the family table's Q/K tensors of layer {layer})")
        names = {role: self._param_of[n] for role, n in stored.items()}
        parts = [n.split(".")[:-2] for n in names.values()]  # the projections' parents
        common = []
        for level in zip(*parts, strict=False):
            if len(set(level)) > 1:
                break
            common.append(level[0])
        attention = ".".join(common)
        layer_path = next((".".join(common[:k]) for k in range(1, len(common) + 1)  # the outermost list's element
                           if common[k - 1] == str(layer)
                           and isinstance(self.model.get_submodule(".".join(common[:k - 1])), torch.nn.ModuleList)),
                          None)
        if layer_path is None:
            raise CheckError(f"layer {layer}'s attention ({attention}) is in no list of layers of "
                             f"{type(self.model).__name__}; the check runs a model's layers one at a time")
        tower = layer_path.split(".")[0] if self.layout.tower else ""
        return _Paths(attention, layer_path, layer_path.rsplit(".", 1)[0], tower,
                      sorted({n.rsplit(".", 1)[0] for role, n in names.items() if role in _READS_X}), names)

    def tower_config(self, layer: int):
        """The transformers config of the module that runs layer ``layer`` (a multi-tower model's tower's)."""
        tower = self.paths(layer).tower
        return (self.model.get_submodule(tower) if tower else self.model).config

    def _load_attention(self, paths: _Paths, layer: int) -> None:
        """The attention module's parameters from the checkpoint, float64; its biases zero."""
        torch, _ = _torch()
        for name, p in self._params.items():
            if not name.startswith(paths.attention + "."):
                continue
            if name.rsplit(".", 1)[-1] == "bias":
                self._set(name, torch.zeros(p.shape, dtype=torch.float64))
                continue
            stored = self._sources.get(name)
            if stored is None:  # a file that holds Q/K alone (GGUF, ONNX as read here): V and O enter no score
                self.missing.add(name[len(paths.attention) + 1:])
                self._set(name, torch.zeros(p.shape, dtype=torch.float64))
                continue
            if name in self._converted:
                raise CheckError(f"transformers builds {name} from several checkpoint tensors as it loads them "
                                 f"({stored}, ...); the check reads tensors as stored")
            value = torch.from_numpy(np.ascontiguousarray(self.ckpt.read(stored), dtype=np.float64))
            if tuple(value.shape) != tuple(p.shape):
                raise CheckError(f"tensor {stored!r} has shape {tuple(value.shape)}; transformers' attention of "
                                 f"this config wants {tuple(p.shape)} for {name}")
            self._set(name, value)

    def _unload(self, paths: _Paths) -> None:
        for name, p in self._params.items():
            if name.startswith(paths.attention + "."):
                self._set(name, self._zero.expand(p.shape))

    def _inputs(self, tower, tokens: int) -> dict:
        torch, _ = _torch()
        g = torch.Generator().manual_seed(self.seed)
        config = tower.config
        accepted = inspect.signature(tower.forward).parameters
        if "input_values" in accepted and getattr(config, "conv_kernel", None):  # raw audio (wav2vec2, HuBERT)
            samples = tokens
            for kernel, stride in reversed(list(zip(config.conv_kernel, config.conv_stride, strict=True))):
                samples = (samples - 1) * int(stride) + int(kernel)  # the feature encoder's convolutions, inverted
            return {"input_values": torch.randn(1, samples, generator=g, dtype=torch.float64)}
        if "input_features" in accepted:
            frames = 2 * int(config.max_source_positions)
            return {"input_features": torch.randn(1, config.num_mel_bins, frames, generator=g, dtype=torch.float64)}
        if "pixel_values" in accepted and "input_ids" not in accepted:
            size = int(config.image_size)
            channels = int(getattr(config, "num_channels", 3))
            return {"pixel_values": torch.randn(1, channels, size, size, generator=g, dtype=torch.float64)}
        vocab = int(getattr(config, "vocab_size", 0) or 0)
        if vocab < 8:
            raise CheckError(f"{type(tower).__name__} takes neither token ids of a vocabulary, pixels nor audio "
                             "features: the check does not know its inputs")
        out = {"input_ids": torch.randint(5, vocab, (1, tokens), generator=g)}
        if self.layout.tower == "decoder" and "encoder_hidden_states" in accepted:
            width = int(getattr(config, "d_model", 0) or config.hidden_size)
            out["encoder_hidden_states"] = torch.randn(1, tokens, width, generator=g, dtype=torch.float64)
        return out

    def lengths(self, tower) -> list[int]:
        """The sequence lengths to try, in order: TOKENS, then the model's position limit where it is shorter (a
        learned position table, GPT-J's rotary table; two kept for RoBERTa's offset). Learned absolute positions
        start at the limit."""
        config = tower.config
        limit = next((int(getattr(config, k)) for k in _POSITION_KEYS if getattr(config, k, None)), None)
        if limit is None or limit >= TOKENS + 2:
            return [TOKENS]
        short = max(2, limit - 2)
        return [short] if self.layout.positional_of(0).kind == "learned absolute" else [TOKENS, short]

    def run(self, layer: int, zero_qk: bool = False) -> Capture:
        """Layer ``layer``'s scores on random x (``zero_qk``: with its Q/K weights zero, which leaves any additive
        position bias alone)."""
        torch, _ = _torch()
        paths = self.paths(layer)
        self._load_attention(paths, layer)
        try:
            if zero_qk:
                for name in paths.qk_names.values():
                    self._set(name, torch.zeros(self._params[name].shape, dtype=torch.float64))
            return self._forward(paths, layer)
        finally:
            self._unload(paths)

    def _forward(self, paths: _Paths, layer: int) -> Capture:
        torch, _ = _torch()
        model = self.model
        tower = model.get_submodule(paths.tower) if paths.tower else model
        layer_list = model.get_submodule(paths.layers)
        width = self.layout.d_model
        state: dict = {"armed": False, "shape": None}
        got: dict = {"norms": {}, "calls": []}
        g = torch.Generator().manual_seed(self.seed + 1)

        def hidden(args, kwargs):
            h = kwargs.get("hidden_states", args[0] if args else None)
            return h if isinstance(h, torch.Tensor) and h.ndim == 3 and h.shape[-1] == width else None

        class StandIn(torch.nn.Module):
            """A layer that passes on what the first layer gave on zero weights (its output's structure: a tensor, or
            T5's tuple with its position biases), with the real layer's attributes (ModernBERT's model reads each
            layer's attention_type)."""

            def __init__(self, real):
                super().__init__()
                self.__dict__["_real"] = real

            def __getattr__(self, name):
                try:
                    return super().__getattr__(name)
                except AttributeError:
                    return getattr(self.__dict__["_real"], name)

            def forward(self, *args, **kwargs):
                return state["passed_on"]

        def layer_input(_m, args, kwargs):
            h = hidden(args, kwargs)
            if h is not None:
                state["shape"] = tuple(h.shape)
            if state["shape"] is None:
                raise CheckError(f"layer {layer} of {type(tower).__name__} does not take a (1, T, {width}) hidden "
                                 "state as its first argument; the check cannot feed it")
            T = state["shape"][1]
            state["x"] = torch.randn(1, T, width, generator=g, dtype=torch.float64)
            zero = torch.zeros(state["shape"], dtype=torch.float64)
            state["armed"] = True
            if "hidden_states" in kwargs:
                return args, kwargs | {"hidden_states": zero}
            return (zero, *args[1:]), kwargs

        def projection_input(_m, args, kwargs):
            if args:
                return (state["x"], *args[1:]), kwargs
            key = next(iter(kwargs))
            return args, kwargs | {key: state["x"]}

        def norm_output(name):
            def hook(m, args, _output):
                if state["armed"]:
                    eps = next((float(getattr(h, a)) for h in (m, *getattr(m, "norms", [])[:1])
                                for a in ("variance_epsilon", "eps") if getattr(h, a, None) is not None), 0.0)
                    got["calls"].append((name, args[0][0].detach().numpy().copy(), eps))
            return hook

        real_softmax = torch.nn.functional.softmax

        def recording_softmax(x, *args, **kwargs):
            if state["armed"] and x.ndim == 4:
                got["scores"] = x.detach().to(torch.float64).numpy()[0].copy()
                raise _Stop
            return real_softmax(x, *args, **kwargs)

        attention = model.get_submodule(paths.attention)
        top_norms = []
        for name, m in attention.named_modules():
            if name and "Norm" in type(m).__name__ and not any(name.startswith(t + ".") for t in top_norms):
                top_norms.append(name)
        handles = [model.get_submodule(paths.layer).register_forward_pre_hook(layer_input, with_kwargs=True)]
        handles += [model.get_submodule(p).register_forward_pre_hook(projection_input, with_kwargs=True)
                    for p in paths.projections]
        handles += [attention.get_submodule(n).register_forward_hook(norm_output(n)) for n in top_norms]
        originals = {i: layer_list[i] for i in range(len(layer_list)) if i != layer}
        torch.nn.functional.softmax = recording_softmax
        try:
            lengths = self.lengths(tower)
            for n, tokens in enumerate(lengths):
                state["shape"] = None
                inputs = self._inputs(tower, tokens)
                try:
                    with torch.no_grad():
                        state["passed_on"] = _first_output(tower, layer_list, inputs) if layer else None
                        for i in originals:
                            layer_list[i] = StandIn(originals[i])
                        try:
                            tower(**inputs)
                        finally:
                            for i, m in originals.items():
                                layer_list[i] = m
                except _Stop:
                    break
                except CheckError:
                    raise
                except (IndexError, RuntimeError, ValueError, TypeError) as exc:
                    if n + 1 == len(lengths):
                        raise CheckError(f"transformers' forward pass of layer {layer} failed on {tokens} tokens: "
                                         f"{type(exc).__name__}: {exc}") from None
        finally:
            torch.nn.functional.softmax = real_softmax
            for h in handles:
                h.remove()
        if "scores" not in got:
            raise CheckError(f"layer {layer}'s attention ({type(attention).__name__}) ran no softmax of 4-dimensional "
                             "scores: the check reads transformers' eager attention, which this model does not use")
        sinks = getattr(attention, "sinks", None)
        return Capture(x=state["x"][0].numpy(), scores=got["scores"], norms=_sides(got["calls"]),
                       sinks=None if sinks is None else sinks.detach().numpy().copy())


def _first_output(tower, layer_list, inputs):
    """What the first layer of ``layer_list`` returns when ``tower`` runs on ``inputs`` (its weights zero), the
    forward pass stopped right after it."""
    out = {}

    def hook(_m, _args, output):
        out["value"] = output
        raise _Stop

    handle = layer_list[0].register_forward_hook(hook)
    try:
        tower(**inputs)
    except _Stop:
        pass
    finally:
        handle.remove()
    if "value" not in out:
        raise CheckError(f"the first layer of {type(tower).__name__} did not run")
    return out["value"]


def _sides(calls: list[tuple[str, np.ndarray, float]]) -> dict[str, tuple[np.ndarray, float]]:
    """The QK-norm inputs by side: a module named q* or k* is that side's; one module called twice normalises the
    queries, then the keys."""
    out = {}
    for name, value, eps in calls:
        last = name.rsplit(".", 1)[-1].lower()
        side = "q" if last.startswith("q") and not last.startswith("qk") else \
            "k" if last.startswith("k") else ("q" if "q" not in out else "k")
        out.setdefault(side, (value, eps))
    return out
