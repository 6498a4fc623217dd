"""A served session's document sends its page in the form serialised once per process (dashboard.serialized):
the same document Bokeh's own serialisation gives, under the session's ids, until the page changes."""

from __future__ import annotations

import base64
import gzip

from bokeh.core.serialization import Buffer
from bokeh.document import Document

from dashboard import app, serialized
from tests.browser.conftest import ROPE_MODEL, write_synthetic_store
from tests.shared import SYNTHETIC_PAGES

pytestmark = SYNTHETIC_PAGES


def session(store, args=None) -> tuple[Document, app.AppState]:
    """A session's document of the app, built as the app script builds it."""
    state = app.AppState()
    doc = Document()
    app.build(store, state, args=args or {}).server_doc(doc, location=False)
    return doc, state


def pulled(doc: Document, monkeypatch) -> tuple[object, int]:
    """What a browser's pull of ``doc`` receives: the document's representation with the data of every bytes
    value as its bytes, whether sent as a binary buffer or written inline (gzip, base64); and how many values
    of a page form were renamed for it (0: Bokeh encoded every model). Every buffer the representation refers
    to is one the message sends."""
    calls = []
    renamed = serialized.renamed
    monkeypatch.setattr(serialized, "renamed", lambda value, ids: calls.append(1) or renamed(value, ids))
    out = doc.to_json()
    monkeypatch.undo()
    sent, referred = {id(b) for b in out.buffers}, []

    def plain(x):
        if isinstance(x, dict):
            if x.get("type") == "bytes" and isinstance(x.get("data"), str):
                return {**x, "data": ("bytes", gzip.decompress(base64.b64decode(x["data"])))}
            return {k: plain(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [plain(v) for v in x]
        if isinstance(x, Buffer):
            referred.append(id(x))
            return ("bytes", bytes(x.data))  # a buffer's id names it in this message only
        return x

    content = plain(out.content)
    assert set(referred) <= sent
    return content, len(calls)


def ids_in(rep) -> set[str]:
    found = set()

    def walk(x):
        if isinstance(x, dict):
            if x.get("type") == "object" and "id" in x:
                found.add(x["id"])
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(rep)
    return found


def page_of(doc: Document):
    return next(m for m in doc.models if m.name == "profiles_page")


def test_a_session_sends_the_document_bokeh_would_send(synthetic, monkeypatch):
    doc, state = session(synthetic)
    assert state.model == ROPE_MODEL
    fast, renamed = pulled(doc, monkeypatch)
    assert renamed > 0
    # the same document, every model encoded by Bokeh: a change and its undoing make the page encode anew
    note = next(m for m in doc.models if m.name == "url_note")
    note.visible = not note.visible
    note.visible = not note.visible
    slow, renamed = pulled(doc, monkeypatch)
    assert renamed == 0
    assert fast == slow
    # every model of the session's document is sent under its own id
    assert ids_in(fast["roots"]) == {m.id for m in doc.models}


def test_only_the_pages_large_arrays_are_sent_as_binary_buffers(tmp_path):
    """Bokeh's own encoding sends every array as a buffer (two websocket messages each); the page's form sends
    only those of INLINE_BELOW bytes or more so. 128 heads: the profiles over every offset are one array of
    more than INLINE_BELOW bytes."""
    def sizes(doc):
        return [memoryview(b.data).nbytes for b in doc.to_json().buffers]

    doc, _ = session(write_synthetic_store(tmp_path / "store.zarr", rope_shape=(8, 16), with_orbits=False))
    page_form = sizes(doc)
    note = next(m for m in doc.models if m.name == "url_note")
    note.visible = not note.visible
    bokehs = sizes(doc)
    assert page_form and all(n >= serialized.INLINE_BELOW for n in page_form)
    assert sorted(page_form) == sorted(n for n in bokehs if n >= serialized.INLINE_BELOW)
    assert sum(n < serialized.INLINE_BELOW for n in bokehs) > 20


def test_two_sessions_send_their_own_ids_and_the_same_page(synthetic, monkeypatch):
    (a, _), (b, _) = session(synthetic), session(synthetic)
    rep_a, rep_b = pulled(a, monkeypatch)[0], pulled(b, monkeypatch)[0]
    assert ids_in(rep_a["roots"]) == {m.id for m in a.models}
    assert ids_in(rep_b["roots"]) == {m.id for m in b.models}
    assert not ids_in(rep_a["roots"]) & ids_in(rep_b["roots"])
    names = {m.id: m.name for m in a.models}, {m.id: m.name for m in b.models}
    heads = [next(i for i, n in ns.items() if n == "heads") for ns in names]
    data = [next(x for x in _objects(r) if x["id"] == h)["attributes"]["data"] for r, h in zip((rep_a, rep_b), heads,
                                                                                                   strict=True)]
    assert _without_ids(data[0]) == _without_ids(data[1])


def test_a_change_before_the_pull_is_sent(synthetic, monkeypatch):
    """A link's note is written into the copied page before the browser pulls it: the page is encoded anew."""
    doc, _ = session(synthetic, args={"model": "no-such-model"})
    sent, renamed = pulled(doc, monkeypatch)
    assert renamed == 0
    note = next(m for m in doc.models if m.name == "url_note")
    rep = next(x for x in _objects(sent) if x["id"] == note.id)
    assert rep["attributes"]["visible"] is True and "no-such-model" in rep["attributes"]["text"]
    # a change once the page is in the document counts too
    doc2, _ = session(synthetic)
    heads = next(m for m in doc2.models if m.name == "heads")
    heads.selected.indices = [1, 2]
    sent, renamed = pulled(doc2, monkeypatch)
    assert renamed == 0
    selection = next(x for x in _objects(sent) if x["id"] == heads.selected.id)
    assert selection["attributes"]["indices"] == [1, 2]
    assert page_of(doc2) is not None


def test_an_inline_encoding_is_bokehs_own(synthetic, monkeypatch):
    doc, _ = session(synthetic)
    calls = []
    renamed = serialized.renamed
    monkeypatch.setattr(serialized, "renamed", lambda value, ids: calls.append(1) or renamed(value, ids))
    inline = doc.to_json(deferred=False)  # arrays inline (base64): a buffer of the page's form has no place
    assert calls == [] and "Buffer" not in repr(inline)


def _objects(rep):
    if isinstance(rep, dict):
        if rep.get("type") == "object" and "id" in rep:
            yield rep
        for v in rep.values():
            yield from _objects(v)
    elif isinstance(rep, list):
        for v in rep:
            yield from _objects(v)


def _without_ids(rep):
    if isinstance(rep, dict):
        return {k: (None if k == "id" else _without_ids(v)) for k, v in rep.items()}
    if isinstance(rep, list):
        return [_without_ids(v) for v in rep]
    return rep
