"""Per family: which tensors hold W_Q and W_K of layer l, how heads are grouped, which positional kind.

A checkpoint's ``config.json`` (a plain dict) gives a :class:`Layout` through its family's entry in the family table
(``table``, one entry per ``model_type``); :func:`layer_qk` / :func:`layer_weights` read one layer's W_Q, W_K
through the same entry, and :func:`rotations` gives each layer's R(d).

Weights come out in torch Linear layout, ``q = W_Q x``: :func:`layer_weights` gives W_Q, W_K of shape
(H, n, N) per *query* head, float64; grouped-query and multi-query models give query head h the key head
h // (H / kv_heads). :func:`layer_qk` gives the same without copies: key heads once, with ``kv_of_head``,
in the compact dtype of the stored one (float16 for fp16, float32 for bf16 / fp32 checkpoints:
``pipeline.sources.base.compact_dtype``), for the memory-bounded profile task.

Conventions every entry follows (docs/architecture.md, "Families", has the table and the reasons):

- **Positional kind per layer.** Rotary layers give L(d) = W_K^T R(d) W_Q (``pipeline.families.rotary``); a layer
  without rotary in a rotary model (SmolLM3's every fourth layer, EXAONE 4's global layers) has one form for every
  d; Gemma 3, ModernBERT and OLMo 3 rotate their sliding and global layers with their own bases.
- **QK-norm** (Qwen3, Gemma 3, OLMo 2, OLMoE, OLMo 3, EXAONE 4, Apertus, StableLM and Cohere optionally, Phi
  optionally): applied before the rotation, so q_i = R(i) G_q C W_Q x_i / r_q(i), with G the norm's gain (per head,
  or the head's slice of a gain over the whole projection), C the centring projection of a LayerNorm (the identity
  for RMS) and r_q(i) > 0 the norm's divisor. The score is then x_j^T L(d) x_i / (r_q(i) r_k(j)) with
  L(d) = W_K^T C G_k R(d) G_q C W_Q: the profile is that of the weights G C W, folded in when a layer is read.
- **Layer-norm folding** (``fold_ln=True``, L -> diag(g) L diag(g)) uses the gain g of the norm whose output
  is the attention input x: the pre-attention norm of pre-norm families, the previous layer's output norm of
  post-norm ones (BERT-style encoders, OPT with ``do_layer_norm_before = false``, DistilBERT), the embeddings'
  norm for their layer 0, and none where the attention reads no norm's output (OLMo 2, OLMo 3, EXAONE 4; post-norm
  OPT's and a projected ELECTRA's layer 0). Gemma's norms and Nemotron's LayerNorm1P multiply by 1 + weight, and so
  does the folded gain.
- **Keys a config leaves out** take the value the family's transformers config class gives them (``Family.defaults``,
  per entry: Qwen3's heads of 128, GPT-NeoX's rotary on a quarter of each head, Mixtral's base 1e6, Apertus's
  Llama 3 scaling, ...), as ``from_pretrained`` reads such a config.json; the readers' own fallbacks (hidden / heads,
  every head its own key head, base 10000, the whole head rotary, no scaling) are those of the other families.
- **Towers held.** A checkpoint saved from a class of some towers alone (T5EncoderModel, by config.json's
  ``architectures``: ``Family.towers_of_class``) is a model of those towers, each stored as a two-tower checkpoint's.
- **Scale** (``Layout.scale``): 1/sqrt(head_dim), or what the family's config says (``query_pre_attn_scalar``,
  ``attention_multiplier``, GPT-2's ``scale_attn_weights``); a positive factor, it changes no profile.

- **Hybrid models** (``spec.Hybrid``: Jamba, LFM2, Qwen3-Next, MiniMax): their softmax-attention layers are
  profiled; the others (Mamba, short convolutions, linear attention) are of positional kind ``no form``, read by no
  tensor reader and stored with NaN values. Falcon-H1 has attention beside Mamba in every layer: no layer without one.
- **Forms by convention** (docs/architecture.md): DeepSeek's latent attention is read as the form at unit-RMS
  latents (``latent``); Hunyuan's QK-norm gains after the rotation as the form of the key at position 0; T5's
  relative position bias and gpt-oss's sinks, added to the scores, are left out.

The modules: ``spec`` (the entry type and a layer's ``Positional``), ``table`` (one entry per family), ``layout``
(a config -> :class:`~pipeline.families.layout.Layout`), ``positions`` (the positional kind of each layer),
``tensors`` (one layer's W_Q, W_K, QK-norm folded in), ``latent`` (multi-head latent attention's W_Q, W_K),
``rotary`` (R(d) and scaled inverse frequencies), ``rotations`` (a layout's R(d) per layer), ``errors``. This
package's names are their public face.
"""

from pipeline.families.errors import ADDING_A_FAMILY, ArchitectureError
from pipeline.families.layout import Layout, layout_from_config, supported, towers
from pipeline.families.rotations import inverse_frequencies, rotations
from pipeline.families.table import FAMILIES
from pipeline.families.tensors import (
    LayerQK,
    check_layer,
    fold_qk_norm,
    fused_rows,
    layer_qk,
    layer_weights,
    ln_gain_suffix,
    qk_tensor_names,
)

__all__ = ["ADDING_A_FAMILY", "FAMILIES", "ArchitectureError", "LayerQK", "Layout", "check_layer", "fold_qk_norm",
           "fused_rows", "inverse_frequencies", "layer_qk", "layer_weights", "layout_from_config", "ln_gain_suffix",
           "qk_tensor_names", "rotations", "supported", "towers"]
