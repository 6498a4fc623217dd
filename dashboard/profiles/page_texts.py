"""The texts of the profiles page and of the pages that list models (the served app, the export's index): what
a model is and where its weights came from, what is missing or damaged and the command that fixes it, the
models to compute, and the definitions under the views."""

from __future__ import annotations

import html

from dashboard.data import ModelData, ModelRow
from pipeline.schema import PROVENANCE_FIELDS

ORBIT_FAMILY = "orbits"
ORBIT_GROUP = "trained in this project: orbit experiment"
PUBLIC_GROUP = "public models"
RUNS_GROUP = "training runs (the last frame; every frame on the Training tab)"

DEFINITIONS = """
<p><b>Profile.</b> A head with query and key weights W<sub>Q</sub>, W<sub>K</sub> scores tokens with the
bilinear form <i>L</i> = W<sub>K</sub><sup>T</sup> W<sub>Q</sub> on the residual stream (rotary models:
<i>L</i>(<i>d</i>) = W<sub>K</sub><sup>T</sup> R(<i>d</i>) W<sub>Q</sub>, <i>d</i> = query position − key
position). Scale <i>L</i> to ‖<i>L</i>‖<sub>F</sub> = 1; let <i>S</i>, <i>T</i> be its symmetric and
antisymmetric parts and λ<sub>+</sub>, λ<sub>−</sub> the positive eigenvalues of <i>S</i> and the absolute
values of its negative ones, decreasing, zero-padded. Then
<i>a</i> = ‖<i>T</i>‖², <i>b</i> = 2⟨λ<sub>+</sub>, λ<sub>−</sub>⟩,
<i>c</i> = ‖(λ<sub>+</sub> − λ<sub>−</sub>)<sub>+</sub>‖², <i>d</i> = ‖(λ<sub>+</sub> − λ<sub>−</sub>)<sub>−</sub>‖²,
all ≥ 0 with <i>a</i> + <i>b</i> + <i>c</i> + <i>d</i> = 1: a point of the 3-simplex.</p>
<p><b>Vertices.</b> <i>a</i> = 1: antisymmetric; <i>b</i> = 1 (H): symmetric with spectrum symmetric about 0;
<i>c</i> = 1: positive semidefinite (a token attends to tokens like itself); <i>d</i> = 1: negative
semidefinite. Drag the tetrahedron to turn it; pick box or lasso in its toolbar (or box in a heat map) to
select heads, which are then highlighted everywhere and compared with all heads in the histograms.</p>
"""


def is_orbit_experiment(r: ModelRow) -> bool:
    """The heads trained by this project's orbit experiment (not a public model)."""
    return r.family == ORBIT_FAMILY


def selector_groups(rows: list[ModelRow], runs: list[str] = ()) -> dict[str, list[str]]:
    """The drawable models for a selector, in groups: public models, the orbit experiment's heads, and the training
    runs (``runs``, those with a complete frame) that no drawable model names (a run of a model's name is that
    model's Training tab: ``dashboard.training.model``)."""
    out = {PUBLIC_GROUP: [], ORBIT_GROUP: [], RUNS_GROUP: []}
    for r in rows:
        if r.computed and not r.damaged and not r.baseline_of:  # a baseline shows on its model's Analyses tab
            out[ORBIT_GROUP if is_orbit_experiment(r) else PUBLIC_GROUP].append(r.name)
    drawn = {n for v in out.values() for n in v}
    out[RUNS_GROUP] = [n for n in runs if n not in drawn]
    return {k: v for k, v in out.items() if v}


def model_line(r: ModelRow) -> str:
    """What the model is (its family, shape, positions and conventions: ``conventions_parts``) and where its weights
    came from: every field of its ``pipeline.schema.Provenance`` that is set (the note on a line of its own)."""
    rev = f" @ {html.escape(r.revision[:12])}" if r.revision else ""
    folded = "layer norm folded" if r.layernorm_folded else "raw weights"
    layers = f"{r.n_layers} layer{'s' if r.n_layers != 1 else ''}"
    kind = f" · <b>{ORBIT_GROUP}</b>" if is_orbit_experiment(r) else (f" · {html.escape(r.family)}" if r.family else "")
    conventions = "".join(f" · {part}" for part in conventions_parts(r))
    out = (f'<p class="meta"><b>{html.escape(r.name)}</b>{kind} · {layers} × {r.n_heads} heads · '
           f"N = {r.d_model}, n = {r.d_head} · {html.escape(r.positional)}{conventions} · {folded} · "
           f"{html.escape(r.source)}{rev}</p>")
    prov = [(k, getattr(r, k)) for k in PROVENANCE_FIELDS if k != "note" and getattr(r, k)]  # the note: below
    if prov:
        out += ('<p class="meta" id="provenance">Provenance: ' + " · ".join(
            f"{k} <code>{html.escape(v[:16] if k == 'sha256' else v)}</code>" for k, v in prov) + "</p>")
    if r.note:
        out += f'<p class="note" id="model_note"><b>Note:</b> {html.escape(r.note)}</p>'
    return out


def conventions_parts(r: ModelRow) -> list[str]:
    """The model's attention conventions a reader needs beside its profiles (``pipeline.schema.conventions``), as
    HTML pieces of its info line: its tower, the QK-norm folded into its forms, a softmax scale other than the usual
    1/sqrt(head_dim), the scores' soft-cap, and the rotary bases where its layers differ (Gemma 3's, ModernBERT's
    sliding and global layers). The usual scale is left out: every model has it, and the line stays short. None for a
    model stored before its conventions were recorded."""
    if not r.conventions_recorded:
        return []
    out = [f"{html.escape(r.tower)} tower"] if r.tower else []
    if r.qk_norm:
        out.append(f"QK-norm: {html.escape(r.qk_norm)}")
    if r.scale_rule != "1/sqrt(head_dim)":
        out.append(f"scale {html.escape(r.scale_rule)} = {r.scale:.4g}")
    if r.softcap:
        out.append(f"soft-cap {r.softcap:g}")
    if r.rotary and r.static_layers:
        out.append(f"no rotary in {layer_list(r.static_layers)}")
    if r.formless_layers:
        out.append(f"no form in {layer_list(r.formless_layers)} (not softmax attention)")
    thetas = {t for t, kind in zip(r.layer_rope_theta, r.layer_kinds, strict=False) if kind == "rope"}
    if len(thetas) > 1:
        out.append("rotary bases " + ", ".join(f"{t:g}" for t in sorted(thetas)) + " by layer")
    return out


def layer_list(layers) -> str:
    """'layer 3', 'layers 3 and 7', 'layers 3, 7 and 11'."""
    names = [str(i) for i in layers]
    if len(names) == 1:
        return f"layer {names[0]}"
    return f"layers {', '.join(names[:-1])} and {names[-1]}"


def static_layers_html(r: ModelRow) -> str:
    """Beside the d slider of a rotary model: the layers the slider does not move (``ModelRow.static_layers``, e.g.
    SmolLM3's layers without rotary), each kind named; '' when every layer rotates."""
    static = r.static_layers if r.rotary else ()
    if not static:
        return ""
    kinds = sorted({r.layer_kinds[i] for i in static})
    without = "without rotary" if kinds == ["none"] else "without rotary (" + ", ".join(map(html.escape, kinds)) + ")"
    verb = "does" if len(static) == 1 else "do"
    return (f'<p class="note"><b>{layer_list(static)}</b> {verb} not move with d: {without}, one form at every '
            "offset.</p>")


def formless_layers_html(r: ModelRow) -> str:
    """Beside the d slider, or the note shown instead of it: a hybrid model's layers without a form
    (``ModelRow.formless_layers``: Mamba, convolutions, linear attention), which no view draws; '' for other
    models."""
    formless = r.formless_layers
    if not formless:
        return ""
    verb = "is" if len(formless) == 1 else "are"
    return (f'<p class="note"><b>{layer_list(formless)}</b> {verb} not softmax attention (a hybrid model\'s Mamba, '
            "convolution or linear-attention layers): no form, no heads in the views; the profiles are of the "
            f"{r.n_layers - len(formless)} softmax layers.</p>")


def status_html(m: ModelData) -> str:
    """Empty for a complete, readable model; else what is missing or damaged and the command that fixes it."""
    r = m.row
    cmd = f"<code>{html.escape(r.fix_command)}</code>"
    if m.error:
        parts = html.escape(m.error).split("`")
        return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))
    if r.damaged:
        return f"<b>{html.escape(r.name)}</b> is damaged: {html.escape(r.damaged)}"
    if not r.computed:
        return (f"No profiles are stored for <b>{html.escape(r.name)}</b> yet: there is nothing to draw. "
                f"Compute them with {cmd}.")
    if not r.complete:
        return (f"<b>{html.escape(r.name)}</b> is incomplete ({r.layers_done} of {r.n_layers} layers written); "
                f"missing layers show no heads. Finish it with {cmd}.")
    return ""


def todo_html(rows: list[ModelRow]) -> str:
    """The models registered but not computed, or damaged: one line that opens (``<details>``) into the
    list, each model with the command that computes or repairs it."""
    todo = [r for r in rows if not r.computed or r.damaged]
    if not todo:
        return ""
    items = []
    for r in todo:
        what = f"damaged: {html.escape(r.damaged)}" if r.damaged else "not computed"
        items.append(f"<li><b>{html.escape(r.name)}</b> ({what}): <code>{html.escape(r.fix_command)}</code></li>")
    count = f"{len(todo)} model{'s' if len(todo) != 1 else ''}"
    return (f"<details id='todo'><summary><b>To compute or repair</b>: {count} registered in the store with nothing "
            "to draw yet (or damaged)</summary><p class='note'>Each line is the command that fixes it.</p>"
            f"<ul>{''.join(items)}</ul></details>")
