"""The served page names its store and why, and says when it shows the demo (``dashboard.store_note``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboard import data, store_note
from pipeline.store import location
from tests.browser.conftest import write_synthetic_store
from tests.shared import SYNTHETIC_PAGES

pytestmark = SYNTHETIC_PAGES


@pytest.fixture
def outside(tmp_path, monkeypatch) -> Path:
    """A current folder outside the clone, no $HEADGEOMETRY_STORE, the user data folder under tmp_path."""
    monkeypatch.delenv(location.ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    store_note._described.cache_clear()
    yield tmp_path
    store_note._described.cache_clear()


def test_the_demo_in_place_of_a_missing_user_store_is_said_under_the_title(outside):
    shown = data.store_path([])  # what python -m dashboard hands the app
    assert shown == location.demo_store()
    note = store_note.demo_note_html(shown)
    user = location.default_store().location
    assert note.startswith("<div class='warn' id='demo_note'>Showing the demo store (this checkout&#x27;s committed "
                           f"store): the default store {user} (user store) does not exist yet. Compute a model with "
                           "`headgeometry profiles gpt2`")
    assert "(the demo, read-only)</p>" in store_note.store_line_html(shown)


def test_a_store_of_its_own_has_no_note_and_its_reason(outside):
    user = Path(location.default_store().location)
    write_synthetic_store(user, rope_shape=(1, 2), absolute_shape=(1, 2), empty_shape=(1, 2), with_orbits=False)
    assert data.store_path([]) == user
    assert store_note.demo_note_html(user) == ""
    assert store_note.store_line_html(user) == f"<p class='meta'>Store: <code>{user.relative_to(outside)}</code> " \
                                               "(user store)</p>"
    other = write_synthetic_store(outside / "other.zarr", rope_shape=(1, 2), absolute_shape=(1, 2),
                                  empty_shape=(1, 2), with_orbits=False)
    assert store_note.store_line_html(other).endswith("<code>other.zarr</code> (from --store)</p>")


def test_the_page_carries_the_line_under_its_tabs(outside):
    from dashboard.app import build

    store = write_synthetic_store(outside / "s.zarr", rope_shape=(1, 2), absolute_shape=(1, 2), empty_shape=(1, 2),
                                  with_orbits=False)
    page = build(store, args={})
    title, line = page.objects[0].object, page.objects[-1].object
    assert title == "<div class='title'>Attention-head geometry</div>"  # no note: the store is not the demo
    assert line == store_note.store_line_html(store) and "(from --store)" in line


def test_the_exported_index_says_it_shows_the_demo(outside):
    from dashboard.export import index_html

    demo = data.store_path([])  # what python -m dashboard.export reads with no --store: the demo, no user store
    index = index_html(demo, data.rows(demo), None)
    assert store_note.demo_note_html(demo) in index and "id='demo_note'" in index
    user = Path(location.default_store().location)
    write_synthetic_store(user, rope_shape=(1, 2), absolute_shape=(1, 2), empty_shape=(1, 2), with_orbits=False)
    store_note._described.cache_clear()
    assert data.store_path([]) == user
    assert "demo_note" not in index_html(user, data.rows(user), None)  # a store of the user's own: no note
