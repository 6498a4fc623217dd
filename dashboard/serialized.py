"""A rendered page serialised once per process; each session's copy sends that form under its own ids.

A served session's document is serialised when its browser pulls it: Bokeh reads every property of every
model (about 490 on a profiles page) and encodes the values, 0.2-0.3 s of the server per session on the
page alone. A copy (``dashboard.clone``) has the values of the page it copies, so its form is the
page's form with the page's ids replaced by the copy's (``tests/dashboard/test_dashboard_clone.py``).
``encode(layout)`` makes that form once, when the page is rendered (``dashboard.rendered``); ``attach``
makes a copy give it, renamed, whenever Bokeh's serializer asks the copy's root for its representation.

In that form the page's large arrays are binary buffers, as Bokeh sends a document, and its small ones
(under INLINE_BELOW bytes) are written into the JSON as Bokeh writes arrays inline (gzip, base64). Bokeh
sends each buffer as two websocket messages of its own, and a profiles page has about 110 small arrays
(colours, ticks, markers): as buffers they made about 240 messages of one pull, each a task for the
browser (and an event for any tool that watches the page's traffic), for less than 0.5 MB between them.
Inline, a pull is a handful of messages; the one or two large arrays stay binary, undecoded.

It holds only while the copy is as it was made, and only when the serializer meets the copy's models
first through its root: after any change to a property of a copied model (a set value or a container
changed in place), when the serializer has already met one of the copy's models, or for an inline
(not deferred) encoding, the copy is encoded by Bokeh as any model is. Both give the same document
(``tests/dashboard/test_dashboard_serialized.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from bokeh.core.serialization import Buffer, Serializer
from bokeh.model import Model

from dashboard.bokeh_internals import add_buffers, encode_as, is_deferred, on_any_change

INLINE_BELOW = 64 * 1024  # bytes: a page's array smaller than this is sent inline in the JSON, not as a buffer


@dataclass(frozen=True)
class Encoded:
    """A page's representation as Bokeh's serializer gives it (``rep``, its ``buffers``) and the ids of the
    models it holds in full (``ids``)."""

    rep: dict
    buffers: list
    ids: frozenset[str]


def encode(layout: Model, models: list[Model]) -> Encoded:
    """The representation of ``layout`` (whose models are ``models``) with its arrays of INLINE_BELOW bytes and
    more as deferred buffers, the rest inline."""
    serializer = Serializer(deferred=True)
    rep = inline_small(serializer.encode(layout))
    buffers = [b for b in serializer.buffers if _nbytes(b) >= INLINE_BELOW]
    return Encoded(rep, buffers, frozenset(m.id for m in models if serializer.has_ref(m)))


def inline_small(value):
    """``value`` (a representation) with the data of every bytes value held in a buffer of fewer than
    INLINE_BELOW bytes written inline, as a serializer that does not defer writes it (``Buffer.to_base64``)."""
    kind = type(value)
    if kind is dict:
        data = value.get("data")
        if value.get("type") == "bytes" and isinstance(data, Buffer) and _nbytes(data) < INLINE_BELOW:
            return {**value, "data": data.to_base64()}
        return {k: inline_small(v) for k, v in value.items()}
    if kind is list:
        return [inline_small(v) for v in value]
    if kind is tuple:
        return tuple(inline_small(v) for v in value)
    return value


def renamed(value, ids: dict[str, str]):
    """``value`` (a representation) with every ``"id"`` that ``ids`` names replaced; new dicts, lists and
    tuples, the rest shared."""
    kind = type(value)
    if kind is dict:
        out = {k: renamed(v, ids) for k, v in value.items()}
        ref = out.get("id")
        if type(ref) is str and ref in ids:
            out["id"] = ids[ref]
        return out
    if kind is list:
        return [renamed(v, ids) for v in value]
    if kind is tuple:
        return tuple(renamed(v, ids) for v in value)
    return value


def _nbytes(buffer: Buffer) -> int:
    data = buffer.data
    return data.nbytes if isinstance(data, memoryview) else len(data)


def attach(root: Model, copies: dict[str, Model], encoded: Encoded) -> None:
    """Make the copy ``root`` (``copies``: the copy of each model of the page, by the page model's id)
    serialise as ``encoded`` renamed while none of its models has changed."""
    held = [copies[i] for i in encoded.ids]
    ids = {i: m.id for i, m in copies.items()}
    changed = []

    def mark():
        changed.append(True)

    for m in copies.values():
        on_any_change(m, mark)

    def encode_root(serializer: Serializer):
        if changed or not is_deferred(serializer) or any(serializer.has_ref(m) for m in held):
            return type(root).to_serializable(root, serializer)
        for m in held:
            serializer.add_ref(m, m.ref)
        add_buffers(serializer, encoded.buffers)
        return renamed(encoded.rep, ids)

    encode_as(root, encode_root)
