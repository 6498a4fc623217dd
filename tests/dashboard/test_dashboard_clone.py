"""Copies of rendered layouts (dashboard.clone) and the per-process cache of rendered pages (dashboard.rendered).

A copy must be the same page: Bokeh's own serializer gives the same document for the copy as for the
original, once ids are renamed in order of appearance. It must also be independent: its own models,
containers and document.
"""

from __future__ import annotations

import base64

import numpy as np
import pytest
from bokeh.core.property.wrappers import PropertyValueContainer
from bokeh.core.validation import check_integrity
from bokeh.document import Document
from bokeh.model import Model

from dashboard import data, rendered
from dashboard.clone import copy_layout, copy_plan
from dashboard.profiles.page import profiles_view
from pipeline import store as st
from tests.browser.conftest import ABSOLUTE_MODEL, ROPE_MODEL, write_synthetic_store
from tests.shared import SYNTHETIC_PAGES

pytestmark = SYNTHETIC_PAGES


def serialised(root: Model):
    """The document holding ``root`` as Bokeh serialises it, with ids renamed 0, 1, ... in order of appearance
    and binary buffers replaced by their bytes (base64)."""
    doc = Document()
    doc.add_root(root)
    ids: dict[str, int] = {}

    def walk(x):
        if isinstance(x, dict):
            return {k: (ids.setdefault(v, len(ids)) if k == "id" else walk(v)) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [walk(v) for v in x]
        return x

    out = walk(doc.to_json(deferred=False)["roots"])
    doc.remove_root(root)
    return out


def _page(store, name: str = ROPE_MODEL):
    return profiles_view(data.model_data(store, name), data.profiles(store).sel(model=name))


@pytest.fixture
def pages(synthetic, static_page) -> dict:
    """The profiles page of each synthetic model, rendered once for the tests that only copy and read it (a test
    that puts a page into a document of its own renders its own)."""
    return {name: static_page(synthetic, name) for name in (ROPE_MODEL, ABSOLUTE_MODEL)}


def test_a_copy_serialises_as_the_original(pages):
    for layout in pages.values():
        copy = copy_layout(layout)
        assert serialised(copy.root) == serialised(layout)


def test_copies_from_one_plan_serialise_as_the_original_and_share_no_container(pages):
    """The served pages copy from a plan made once per page (rendered.prepare): every copy from it is the page,
    and no two copies share a model or a container."""
    layout = pages[ROPE_MODEL]
    plan = copy_plan(layout)
    a, b = copy_layout(layout, plan=plan), copy_layout(layout, plan=plan)
    assert serialised(a.root) == serialised(layout) == serialised(b.root)

    def containers(root):
        return {id(v) for m in root.references() for store in ("_property_values", "_unstable_default_values")
                for v in getattr(m, store).values() if isinstance(v, PropertyValueContainer)}

    assert containers(a.root) and not containers(a.root) & containers(b.root)
    assert not {id(m) for m in a.root.references()} & {id(m) for m in b.root.references()}


@pytest.mark.slow
def test_a_copy_shares_no_model_and_no_container(synthetic):
    layout = _page(synthetic)
    copy = copy_layout(layout)
    originals = {id(m) for m in layout.references()}
    copies = list(copy.root.references())
    assert len(copies) == len(originals) and not originals & {id(m) for m in copies}
    assert not {m.id for m in layout.references()} & {m.id for m in copies}

    def containers(models):
        return {id(v) for m in models for store in ("_property_values", "_unstable_default_values")
                for v in getattr(m, store).values() if isinstance(v, PropertyValueContainer)}

    assert containers(copies) and not containers(layout.references()) & containers(copies)
    # a change to the copy leaves the original as it was
    heads = copy.one("heads")
    before = np.array(layout.select_one({"name": "heads"}).data["x"])
    heads.data["x"] = np.zeros(len(before))
    heads.selected.indices = [1, 2]
    copy.one("d_slider").value = 7
    original = layout.select_one({"name": "heads"})
    np.testing.assert_array_equal(original.data["x"], before)
    assert original.selected.indices == [] and layout.select_one({"name": "d_slider"}).value == 0
    # and both can be in documents at once
    doc_a, doc_b = Document(), Document()
    doc_a.add_root(layout)
    doc_b.add_root(copy.root)
    assert heads.document is doc_b and original.document is doc_a


def test_named_models_of_a_copy(pages):
    layout = pages[ROPE_MODEL]
    copy = copy_layout(layout)
    for name in ("heads", "d_slider", "profile_cube", "tetrahedron"):
        assert copy.one(name) is not None and type(copy.one(name)) is type(layout.select_one({"name": name}))
        assert copy.one(name) in copy.root.references()
    cube = copy.one("profile_cube").data["q"]
    expected = layout.select_one({"name": "profile_cube"}).data["q"]
    assert base64.b64encode(np.asarray(cube).tobytes()) == base64.b64encode(np.asarray(expected).tobytes())
    assert copy.one("no such model") is None


def test_a_dropped_copy_is_freed(pages):
    """Nothing of the original keeps a copy alive (a served session's page must go with its session)."""
    import gc
    import weakref

    layout = pages[ROPE_MODEL]
    copy = copy_layout(layout)
    doc = Document()
    doc.add_root(copy.root)
    gone = [weakref.ref(m) for m in copy.root.references()]
    del copy, doc
    gc.collect()
    assert sum(r() is not None for r in gone) == 0


def test_rendered_pages_pass_bokeh_validation(synthetic):
    """The served app validates a page once, when rendered, instead of every session's copy: the pages must be
    clean, but for the fixed sizing mode of the profiles page's root, which the app's pane sets on it in every
    session (Bokeh warns on it without a width and height; rendered.prepare sets it after validating)."""
    pages = (rendered.profiles(synthetic, ROPE_MODEL), rendered.profiles(synthetic, ABSOLUTE_MODEL),
             rendered.orbits(synthetic))
    for page in pages:
        issues = check_integrity(list(page.root.references()))
        fixed = [w for w in issues.warning if w.name == "FIXED_SIZING_MODE" and w.extra == str(page.root)]
        assert len(fixed) == (page.root.sizing_mode == "fixed")
        assert issues.error == [] and [w for w in issues.warning if w not in fixed] == [], issues
    assert [p.root.sizing_mode for p in pages] == ["fixed", "fixed", None]


def test_rendered_pages_are_fresh_copies_and_follow_the_store(synthetic, tmp_path):
    a, b = rendered.profiles(synthetic, ROPE_MODEL), rendered.profiles(synthetic, ROPE_MODEL)
    assert a.root is not b.root and serialised(a.root) == serialised(b.root)
    with pytest.raises(KeyError):
        rendered.profiles(synthetic, "no-such-model")
    o1, o2 = rendered.orbits(synthetic), rendered.orbits(synthetic)
    assert o1.root is not o2.root and o1.one("orbits_frame") is not None
    # a store whose orbits group changes is rendered anew
    other = write_synthetic_store(tmp_path / "store.zarr", with_orbits=False)
    assert rendered.orbits(other).one("orbits_frame") is None  # the message: no orbits group
    from tests.browser.conftest import synthetic_orbits_dataset

    st.Store.open(other).replace_group(st.ORBITS, synthetic_orbits_dataset(n_frames=5))
    page = rendered.orbits(other)
    assert page.one("orbits_frame") is not None and page.one("orbits_frame").end == 4

