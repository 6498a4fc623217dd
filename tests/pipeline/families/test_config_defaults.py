"""A key config.json leaves out is read as the family's transformers config class fills it.

transformers reads a config.json through the family's config class, which gives its own default for every key the
file leaves out (GPTNeoXConfig rotates 0.25 of each head, Qwen3Config's heads are of 128, MixtralConfig's rotary base
is 1e6, ...). The family table holds those defaults per entry (``spec.Family.defaults``, each entry naming its class);
here every case's config (``cases.py``, and the first families' of ``tests/tiny_models.py``), written whole by its
config class, has the keys of each kind the table reads taken out, and the table's reading of what is left must be
its reading of the config the class fills back in (the same layout, or the same refusal).

The kinds: the head size, the key/value heads, the rotary base, the rotary fraction or dimension, the rope
parameters and their type, T5's d_kv, and the factors of the softmax scale. The keys the table refuses a config
without (the sizes, DeepSeek's latent ranks) are not among them: such a config fails with a line naming the key.

``cases.py``'s ``gpt_neox-default_rotary_pct`` and ``qwen3_next-default_partial_rotary_factor`` are saved without
their rotary fraction: ``test_forward.py`` proves their forms against the forward pass, ``test_cli.py`` their profiles
and ``tests/pipeline/test_check.py`` ``check`` on them.
"""

from __future__ import annotations

import copy
import json
import logging

import pytest

from pipeline.families import ArchitectureError, layout_from_config
from pipeline.registry.checkpoints import open_checkpoint
from tests.pipeline.families.cases import CASES, VOCAB
from tests.tiny_models import KINDS, transformers

# the keys of one kind, left out together wherever they are (the top of the config, its sub-configs, its rope
# parameters and their per-layer-type dicts)
KEY_KINDS = [("head_dim",), ("num_key_value_heads", "num_kv_heads", "n_head_kv"), ("rope_theta", "rotary_emb_base"),
             ("partial_rotary_factor", "rotary_pct"), ("rotary_dim",), ("rope_parameters", "rope_scaling"),
             ("rope_type", "type"), ("d_kv",), ("query_pre_attn_scalar",), ("attention_multiplier",),
             ("key_multiplier",)]

CONFIGS = {f"case:{name}": (case.config, case.kw, case.tower) for name, case in CASES.items()} | {
    f"kind:{name}": (cls, kw | dict(vocab_size=VOCAB), None) for name, (_, cls, kw, _, _) in KINDS.items()}


def _without(config: dict, keys) -> tuple[dict, bool]:
    """``config`` without ``keys`` anywhere in it, and whether any was there."""
    out, found = copy.deepcopy(config), False

    def strip(d):
        nonlocal found
        if isinstance(d, dict):
            for key in keys:
                if key in d:
                    del d[key]
                    found = True
            for v in d.values():
                strip(v)
    strip(out)
    return out, found


def _reading(config: dict, tower):
    try:
        return layout_from_config(config, tower)
    except ArchitectureError as exc:
        return f"refused: {exc}"


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_key_config_json_leaves_out_is_read_as_the_config_class_fills_it(name):
    cls_name, kw, tower = CONFIGS[name]
    cls = getattr(transformers, cls_name)
    whole = json.loads(json.dumps(cls(**kw).to_dict()))  # as save_pretrained writes it
    logging.disable(logging.WARNING)  # transformers' notes on the rope parameters of these configs
    try:
        for keys in KEY_KINDS:
            left, found = _without(whole, keys)
            if not found:
                continue
            filled = cls.from_dict(left).to_dict()  # what from_pretrained makes of that config.json
            assert _reading(left, tower) == _reading(filled, tower), f"{name} without {keys}"
    finally:
        logging.disable(logging.NOTSET)


@pytest.mark.parametrize("name, head, rotary", [("gpt_neox-default_rotary_pct", 8, 2),
                                                ("qwen3_next-default_partial_rotary_factor", 8, 2)])
def test_the_cases_without_their_rotary_fraction(family_model, name, head, rotary):
    """The two cases' config.json has no rotary fraction (nor GPT-NeoX's rotary_pct), and transformers' model of
    it rotates a quarter of each head; so does the table's layout."""
    model, folder, _ = family_model(name)
    saved = json.loads(open(f"{folder}/config.json").read())
    for holder in (saved, saved.get("rope_parameters") or {}):
        assert not {"partial_rotary_factor", "rotary_pct"} & set(holder), holder
    config = transformers.AutoConfig.from_pretrained(folder)
    assert config.rope_parameters["partial_rotary_factor"] == 0.25  # transformers' default, filled in
    layout = layout_from_config(open_checkpoint(folder).config)
    first = next(p for p in layout.layers or [layout.positional_of(0)] if p.kind == "rope")
    assert (layout.d_head, first.rotary_dim) == (head, rotary)


@pytest.mark.parametrize("name", ["apertus", "gpt_oss", "ministral3"])
def test_rope_parameters_given_the_older_way_are_read_as_the_config_class_reads_them(name):
    """A class with its own default rope parameters (Apertus's Llama 3 scaling, gpt-oss's and Ministral 3's YaRN) takes
    a config's ``rope_scaling`` in their stead, and its default where ``rope_parameters`` is null; a flat
    ``rope_theta`` beside them is read as the class reads it. The table reads each such config.json alike."""
    case = CASES[name]
    cls = getattr(transformers, case.config)
    whole = json.loads(json.dumps(cls(**case.kw).to_dict()))
    rope = whole.pop("rope_parameters")
    older = [whole | {"rope_scaling": {k: v for k, v in rope.items() if k != "rope_theta"}, "rope_theta": 500.0},
             whole | {"rope_parameters": None, "rope_theta": 500.0}, whole | {"rope_theta": 500.0}]
    logging.disable(logging.WARNING)
    try:
        for config in older:
            assert _reading(config, None) == _reading(cls.from_dict(config).to_dict(), None), config
    finally:
        logging.disable(logging.NOTSET)
