"""Heads as training starts them: the library-initialisation baseline, one attention module at a time.

**Library initialisation** (``"init"``): the heads a model of a config has when training starts, drawn by the
transformers model class's own ``_init_weights`` for that config. The model is built on the meta device (no memory,
no values), so a 24B config costs nothing; for each layer only its attention module is materialised: a copy of the
meta module is given real (uninitialised) memory in the dtype ``AutoModel.from_config`` would use (the config's
``dtype``, else torch's default), and the class's ``_init_weights`` is applied to it and to its submodules in the
order transformers' own initialisation walks them (children first, then the module: ``torch.nn.Module.apply``), with
the ``_init_weights`` of the innermost transformers model holding the module, as that walk does. The layer's W_Q, W_K
are then read from the module by :func:`pipeline.families.layer_qk`, the reader of trained checkpoints, under the
names ``save_pretrained`` would give its tensors: so every layout the family table reads (separate, fused, latent,
QK-norm) is read the one way, and a model whose modules transformers renames from its checkpoints' (ViT, DINOv2:
``layers.0.attention.q_proj`` for ``encoder.layer.0.attention.attention.query``) is read by the checkpoints' names.

**Which module.** The attention module of layer l is the innermost module that holds every tensor the family table
reads for the layer's Q/K (:func:`pipeline.families.qk_tensor_names`) in modules of its own: the parent of q_proj
and k_proj, of a fused qkv, or of latent attention's q_a_proj, q_b_proj, kv_a_proj_with_mqa, kv_b_proj and their
norms. A hybrid model's
layer without a form (Mamba, a convolution, linear attention) has none: it is no baseline layer, as it is no
profile (``layer`` refuses it; its values are NaN where a baseline is profiled). A model of several towers (CLIP,
T5, Whisper, an image-text model's text tower) is built whole and read by ``tower``, as its checkpoint is.

**The seeding rule.** A whole model's initialisation draws every module from one random stream, so layer l's heads
depend on every parameter drawn before them, embeddings included; reproducing that for one layer would mean drawing
the whole model. Here the stream is restarted at each attention module instead: layer l of seed s is initialised
right after ``torch.manual_seed(layer_seed(s, l))`` (:func:`layer_seed`). So a layer can be made alone, in any order,
and the values are those of ``AutoModel.from_config(config)`` whose initialisation reseeds the same way as it enters
each attention module (``tests/pipeline/analyses/test_init_heads.py`` builds that model through transformers' own
``from_config`` and compares every parameter of every attention module). The global torch generator is left as it
was (``torch.random.fork_rng``).

``_init_weights``, ``core_model_loading.revert_weight_conversion`` (the renaming ``save_pretrained`` applies) and
``PreTrainedConfig._decode_special_floats`` (a config.json transformers wrote with ``{"__float__": "Infinity"}``, as
Falcon-H1's ``time_step_limit``) are private to transformers: this module is their one user, and it refuses
transformers releases other than the tested major version (``TESTED_MAJOR``).
"""

from __future__ import annotations

import copy
import os

import numpy as np

from pipeline.families import LayerQK, layer_qk, layout_from_config, qk_tensor_names
from pipeline.sources.iid_heads import check_seed

TESTED_MAJOR = 5  # transformers 5.x: the releases whose from_config initialisation this module reproduces


class InitBaselineError(ValueError):
    """The library-initialisation baseline cannot be made for this config or environment; the message says why."""


def layer_seed(seed: int, layer: int) -> int:
    """The torch seed of layer ``layer`` of baseline seed ``seed``: a 64-bit integer from numpy's SeedSequence."""
    return int(np.random.SeedSequence([int(seed), int(layer)]).generate_state(1, np.uint64)[0])


def _transformers():
    import transformers

    major = int(transformers.__version__.split(".")[0])
    if major != TESTED_MAJOR:
        raise InitBaselineError(f"the library-initialisation baseline reproduces transformers {TESTED_MAJOR}.x's "
                                f"initialisation; transformers {transformers.__version__} is installed: "
                                f"pip install 'transformers>={TESTED_MAJOR},<{TESTED_MAJOR + 1}'")
    return transformers


class _ModuleTensors:
    """A module's parameters under their names in the model, read like a checkpoint's tensors (for ``layer_qk``)."""

    def __init__(self, prefix: str, module, saved: dict[str, str]):
        """``saved``: a parameter's name in the model -> its name in a checkpoint (``InitHeads``)."""
        self._tensors = {saved.get(f"{prefix}.{name}", f"{prefix}.{name}"): p for name, p in module.named_parameters()}

    def tensor_names(self) -> list[str]:
        return list(self._tensors)

    def read(self, name: str) -> np.ndarray:
        import torch

        return self._tensors[name].detach().to(torch.float64).numpy()

    def read_compact(self, name: str) -> np.ndarray:
        """float32 when that is exact (float32, bfloat16, float16 parameters), else float64."""
        import torch

        t = self._tensors[name].detach()
        exact = t.dtype in (torch.float32, torch.bfloat16, torch.float16)
        return t.to(torch.float32 if exact else torch.float64).numpy()


class InitHeads:
    """The library-initialisation baseline of one config and seed (module docstring).

    ``config`` is a Hugging Face config dict (``config.json``) of a supported family, ``tower`` the tower of a model
    of several (as ``layout_from_config`` takes it). ``layout`` is its :class:`pipeline.families.Layout`;
    :meth:`layer` gives a layer's heads, :meth:`attention` the initialised attention module itself.
    """

    def __init__(self, config: dict, seed: int, tower: str | None = None):
        try:
            self.seed = check_seed(seed)
        except ValueError as exc:
            raise InitBaselineError(str(exc)) from None
        self.layout = layout_from_config(config, tower)
        transformers = _transformers()
        import torch
        from transformers.configuration_utils import PreTrainedConfig
        from transformers.core_model_loading import revert_weight_conversion

        config = PreTrainedConfig._decode_special_floats(config)  # as from_pretrained reads a config.json
        kwargs = {k: v for k, v in config.items() if k != "model_type"}
        try:
            hf_config = transformers.AutoConfig.for_model(config["model_type"], **kwargs)
            with torch.device("meta"):
                self._model = transformers.AutoModel.from_config(hf_config)
        except (ValueError, TypeError, KeyError) as exc:
            raise InitBaselineError(f"transformers cannot build a {config.get('model_type')!r} model from this "
                                    f"config: {exc}") from None
        # each parameter's name in the model -> its name in a checkpoint save_pretrained writes (the same tensor
        # under the reverted name; tensors a converter makes anew, such as fused MoE experts, are no Q/K and keep
        # their own name)
        state = self._model.state_dict()
        live = {id(t): name for name, t in state.items()}
        self._saved = {name: name for name in state}
        self._saved |= {live[id(t)]: saved for saved, t in revert_weight_conversion(self._model, dict(state)).items()
                        if id(t) in live}
        self._live = {saved: name for name, saved in self._saved.items()}

    def attention_path(self, layer: int) -> str:
        """The name of layer ``layer``'s attention module in the model: the innermost module that holds every
        tensor the family table reads for the layer's Q/K (module docstring)."""
        names = qk_tensor_names(self.layout, list(self._live), layer)
        if not names:
            raise InitBaselineError(f"layer {layer} of this {self.layout.family} model is not softmax attention (no "
                                    "form): it has no heads to initialise")
        # the parents of the modules holding the tensors (a fused projection's parent, not the projection itself,
        # so that the seed restarts where it does for separate ones), and the innermost module above them all
        paths = [self._live[name].split(".")[:-2] for name in names.values()]
        return ".".join(os.path.commonprefix(paths))  # element by element: the lists' longest common head

    def attention(self, layer: int):
        """Layer ``layer``'s attention module, initialised by the model class's ``_init_weights`` under the layer's
        seed (a CPU torch module of its own)."""
        import torch

        path = self.attention_path(layer)
        owner = self._owner(path)
        module = copy.deepcopy(self._model.get_submodule(path)).to_empty(device="cpu")
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            for p in module.parameters():
                if p.is_floating_point():
                    p.fill_(float("nan"))  # what _init_weights leaves unwritten shows as NaN
            torch.manual_seed(layer_seed(self.seed, layer))
            module.apply(owner._init_weights)
        return module

    def _owner(self, path: str):
        """The innermost transformers model that holds the module at ``path``: transformers initialises each
        module with the ``_init_weights`` of that model (a decoder inside a model may be a model of its own)."""
        PreTrainedModel = _transformers().PreTrainedModel
        owner, parts = self._model, path.split(".")
        for i in range(1, len(parts)):
            sub = self._model.get_submodule(".".join(parts[:i]))
            if isinstance(sub, PreTrainedModel):
                owner = sub
        return owner

    def layer(self, layer: int) -> LayerQK:
        """Layer ``layer``'s heads as :func:`pipeline.families.layer_qk` reads them (W_Q, W_K in float32 for
        float32 / bfloat16 / float16 parameters)."""
        if not 0 <= int(layer) < self.layout.n_layers:
            raise InitBaselineError(f"layer {layer} out of range: the config has {self.layout.n_layers} layers")
        path = self.attention_path(int(layer))
        qk = layer_qk(_ModuleTensors(path, self.attention(layer), self._saved), self.layout, int(layer))
        for name, w in (("W_Q", qk.W_Q), ("W_K", qk.W_K)):
            # a latent layer's heads formed one at a time (pipeline.families.latent.LatentHeads): its whole stack in
            # float64 would be 2.8 GB for a DeepSeek-V3 layer
            heads = (w[h] for h in range(len(w))) if getattr(w, "heads_on_demand", False) else (w,)
            if not all(np.isfinite(x).all() for x in heads):
                raise InitBaselineError(f"{type(self._model).__name__}._init_weights left part of layer {layer}'s "
                                        f"{name} unwritten; this family's initialisation is not reproduced here")
        return qk
