"""Each browser file's contract (``// defines:`` and ``// uses:`` at its top, ``jscode.contract``) is what its
code declares and reads, and every callback of every page is given what its files use: the join order of the
files is no longer a hidden contract. The names are read from the code by ``tests/dashboard/jsnames.py``."""

from __future__ import annotations

import pytest
from bokeh.models import CustomJS

from dashboard.common import jscode
from tests.dashboard.jsnames import free_and_top
from tests.shared import SYNTHETIC_PAGES

pytestmark = SYNTHETIC_PAGES

FOR_TESTS = {"record_frames"}  # not a callback: playwright evaluates it (orbits.page.RECORD_FRAMES_JS)


def test_the_reader_finds_declarations_and_free_names():
    code = """// a comment naming ghost
function f(a, b) { const c = a + b, d = g(c); return d.e + `${h}x`.length + /[a-z]\\/q/.test(s); }
const k = (m, n) => ({key: m ? n : w}), p = z => z.y;
for (const r of list) { let t = r; try { t(); } catch (err) { u(err); } }
if (x / 2 > 1) { window.v = Math.max(1, 2); }
"""
    free, top = free_and_top(code)
    assert top == {"f", "k", "p"}
    assert free == {"g", "h", "s", "w", "list", "u", "x", "window", "Math"}


def test_a_files_header_states_what_its_code_declares_and_reads():
    for name in jscode.names():
        if name in FOR_TESTS:
            continue
        free, top = free_and_top(jscode.code(name))
        declared = jscode.contract(name)
        assert declared.uses == free - jscode.GLOBALS, (name, sorted(free - jscode.GLOBALS))
        assert declared.defines <= top, (name, sorted(declared.defines - top))


def test_every_definition_is_used_and_every_use_is_defined_somewhere():
    defined = {d: n for n in jscode.names() for d in jscode.contract(n).defines}
    used = set().union(*(jscode.contract(n).uses for n in jscode.names()))
    assert set(defined) <= used | {"read_url_state", "read_compare_state"}  # those two: read by the node tests
    arguments = {"ctx", "cb_obj", "heads", "a", "b", "curve", "cloud", "button", "interval", "slider", "meta", "names"}
    assert used - set(defined) <= arguments, sorted(used - set(defined) - arguments)


def test_a_callback_is_refused_when_its_files_leave_a_name_undefined():
    assert jscode.callback(dict(ctx={}), "url_note", "url_state", "url_write").code.endswith("write_url(ctx);\n")
    with pytest.raises(ValueError, match="uses write_url"):
        jscode.callback(dict(ctx={}), "url_note", "url_write")
    with pytest.raises(ValueError, match="uses url_escape_html, url_note"):
        jscode.callback(dict(ctx={}), "url_state", "url_write")
    with pytest.raises(ValueError, match="uses ctx"):
        jscode.callback(dict(context={}), "project", "rotate_slider")


def joined_files(code: str) -> list[str]:
    """The browser files whose texts, joined (``jscode.code``), are ``code``."""
    texts = {n: jscode.code(n) for n in jscode.names()}
    out, i = [], 0
    while i < len(code):
        hits = [n for n, text in texts.items() if code.startswith(text, i) and code[i + len(text):i + len(text) + 1]
                in ("", "\n")]
        assert len(hits) == 1, (code[i:i + 80], hits)
        out.append(hits[0])
        i += len(texts[hits[0]]) + 1
    return out


def test_every_callback_of_every_page_is_given_what_its_files_use(pages):
    """The files joined into each CustomJS define or are given every name they use, and declare no top-level
    name twice (the joined code would not run)."""
    seen = 0
    for page in pages:
        for cb in page.select({"type": CustomJS}):
            files = joined_files(cb.code)
            assert jscode.unmet(files, cb.args) == [], (files, sorted(cb.args))
            tops = [t for f in files for t in free_and_top(jscode.code(f))[1]]
            assert len(tops) == len(set(tops)), (files, sorted(t for t in tops if tops.count(t) > 1))
            seen += 1
    assert seen >= 5 * 4
