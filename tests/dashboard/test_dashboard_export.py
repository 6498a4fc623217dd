"""Store selection, broken stores, and the exporter's output (files, sizes, messages).

Broken stores are made the ways a user meets them: a path that does not exist, a folder that is not a
Zarr store, a store without the group, a store written by an older schema. Each must give a message
naming the command that fixes it, in the served app's page and from the exporter, never a traceback.
"""

from __future__ import annotations

import base64
import gzip
import re
from pathlib import Path

import numpy as np
import pytest
import zarr

from dashboard import data
from dashboard.export import export, main, profile_page_name, slug
from dashboard.orbits.page import orbits_content
from dashboard.profiles.payload import unpack_profiles
from pipeline import store as st
from tests.browser.conftest import ROPE_MODEL, synthetic_orbits_dataset, write_synthetic_store
from tests.shared import SYNTHETIC_PAGES

pytestmark = SYNTHETIC_PAGES

REPO = Path(__file__).resolve().parents[2]


def broken_stores(tmp: Path) -> dict[str, tuple[Path, str]]:
    """name -> (path, a phrase its message must contain)."""
    (tmp / "plain").mkdir()
    (tmp / "plain" / "notes.txt").write_text("not a store")
    no_group = tmp / "no_group.zarr"
    st.Store.open(no_group).replace_group(st.ORBITS, synthetic_orbits_dataset(n_frames=2))
    old = write_synthetic_store(tmp / "old.zarr", rope_shape=(1, 2), absolute_shape=(1, 2), empty_shape=(1, 2),
                                with_orbits=False)
    zarr.open_group(str(old), path=st.PROFILES, mode="a").attrs["schema_version"] = 0
    zarr.consolidate_metadata(str(old))
    return {
        "missing": (tmp / "nowhere.zarr", "python -m pipeline profiles"),
        "not zarr": (tmp / "plain", "not a Zarr store"),
        "no group": (no_group, "python -m pipeline profiles"),
        "old schema": (old, "schema version 0"),
    }


def test_store_path_precedence(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(data.ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert data.store_path([]) == REPO / "store.zarr"  # no user store yet: the demo, a checkout's committed store
    monkeypatch.setenv(data.ENV_VAR, str(tmp_path / "env.zarr"))
    assert data.store_path([]) == tmp_path / "env.zarr"
    assert data.store_path(["--store", "arg.zarr"]) == tmp_path / "arg.zarr"


def test_broken_stores_give_the_fixing_message_in_app_and_exporter(tmp_path, capsys):
    from dashboard.app import build

    for kind, (path, phrase) in broken_stores(tmp_path).items():
        with pytest.raises(st.StoreError, match=re.escape(phrase)):
            data.rows(path)
        page = build(path)
        divs = [m for m in page.objects[1].objects[0].get_root().select({"name": "store_error"})]
        assert len(divs) == 1 and phrase in divs[0].text, kind
        assert main([str(tmp_path / f"out-{kind}"), "--store", str(path)]) == 2
        assert phrase in capsys.readouterr().err, kind


def test_orbits_page_without_orbits_group_says_how_to_compute_it(tmp_path):
    path = write_synthetic_store(tmp_path / "s.zarr", rope_shape=(1, 2), absolute_shape=(1, 2), empty_shape=(1, 2),
                                 with_orbits=False)
    content = orbits_content(path)
    msg = content.select_one({"name": "orbits_store_error"})
    assert "python -m pipeline orbits" in msg.text


@pytest.fixture(scope="module")
def exported(synthetic, tmp_path_factory):
    """(the output folder, the paths ``export`` returned, a file two symlinks in the folder pointed at, the garbage
    collector's thresholds after the export): one export of ``synthetic`` that the tests below read, made with
    Panel's extension loaded in this process, a umask of 022, the collector at Python's default thresholds, and
    ``index.html`` and the rotary model's page symlinks to another file beforehand."""
    import gc
    import os

    import panel as pn

    tmp = tmp_path_factory.mktemp("exported")
    victim = tmp / "victim.txt"
    victim.write_text("keep me")
    out = tmp / "out"
    out.mkdir()
    (out / "index.html").symlink_to(victim)
    (out / profile_page_name(ROPE_MODEL)).symlink_to(victim)
    pn.extension()  # Panel in the same process must not leak its server-relative bundles into the pages
    old, kept = os.umask(0o022), gc.get_threshold()
    gc.set_threshold(700, 10, 10)  # Python's
    try:
        paths = export(out, synthetic)
        thresholds = gc.get_threshold()
    finally:
        os.umask(old)
        gc.set_threshold(*kept)
    return out, paths, victim, thresholds


def test_export_writes_index_model_pages_compare_and_orbits(exported, synthetic):
    out, paths, _, _ = exported
    for p in paths:
        srcs = re.findall(r'<script[^>]* src="([^"]+)"', p.read_text())
        assert all(s.startswith("https://cdn.bokeh.org/bokeh/release/") for s in srcs), (p.name, srcs)
    names = sorted(p.name for p in paths)
    assert names == sorted(["index.html", "compare.html", "orbits.html", profile_page_name(ROPE_MODEL),
                            profile_page_name("synthetic-absolute")])
    index = (out / "index.html").read_text()
    assert "python -m pipeline profiles synthetic-empty" in index and profile_page_name(ROPE_MODEL) in index
    # the seed page's table: one row per drawable model with its shape, the rotary models marked with a dagger;
    # the model not computed is listed apart, with its command
    rows = [r for r in data.rows(synthetic) if r.computed]
    assert index.count("<tr><td>") == len(rows) == 2
    for r in rows:
        assert f"{r.n_layers}</td><td class='num'>{r.n_heads}</td>" in index, r.name
    assert "rope<sup>†</sup>" in index and '<a href="compare.html">' in index
    assert "To compute or repair" in index and "<b>synthetic-empty</b> (not computed)" in index
    assert slug("EleutherAI/pythia-70m deduped") == "EleutherAI_pythia-70m_deduped"


def test_page_names_are_unique_and_capped():
    """Names that sanitise alike get different files; a 250-character name gets a short one."""
    a, b = profile_page_name("org/model"), profile_page_name("org_model")
    assert slug("org/model") == slug("org_model") and a != b
    long = profile_page_name("x" * 250)
    assert len(long) <= len("profiles--12345678.html") + 60 and long != profile_page_name("x" * 249)


@pytest.mark.slow
def test_export_of_colliding_and_long_names_keeps_every_page(tmp_path):
    path = tmp_path / "s.zarr"
    names = ["org/model", "org_model", "m" * 250]
    for i, name in enumerate(names):
        st.Store.open(path).register(st.ModelRow(name, 1, 2, 8, 4, "none", command=f"python -m pipeline profiles {i}"))
        st.Store.open(path).write_layer(name, 0, np.full((2, 4), 0.25) + np.array([i, -i, 0, 0]) * 0.05, np.ones(2))
        st.Store.open(path).mark_complete(name)
    paths = export(tmp_path / "out", path)
    pages = [p for p in paths if p.name.startswith("profiles-")]
    assert len(pages) == 3 and len({p.name for p in pages}) == 3
    for name in names:  # each page shows its own model
        page = (tmp_path / "out" / profile_page_name(name)).read_text()
        assert f"<title>Profiles of attention heads · {name}</title>" in page


def test_symlink_at_an_output_path_is_replaced_not_followed(exported):
    out, _, victim, _ = exported
    assert victim.read_text() == "keep me"
    assert not (out / "index.html").is_symlink() and "Attention-head geometry" in (out / "index.html").read_text()
    assert not (out / profile_page_name(ROPE_MODEL)).is_symlink()


def test_pages_get_a_new_files_permissions(exported):
    """Not the temporary file's 0600: 0666 less the umask (022 for the export), as any new file (a web server as
    another user reads them)."""
    out, _, _, _ = exported
    modes = {p.name: p.stat().st_mode & 0o777 for p in out.glob("*.html")}
    assert modes and set(modes.values()) == {0o644}, modes


def test_the_exporter_makes_the_collector_run_less_often(exported, tmp_path, capsys):
    """``main`` (the command) builds every page in its process, so it sets the garbage collector's thresholds as
    the served app does, before it reads the store (a missing one here: no page is built); ``export`` (the function
    a notebook calls) changes no process-wide setting."""
    import gc

    from dashboard.collector import GC_THRESHOLDS

    assert exported[3] == (700, 10, 10)
    kept = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)  # Python's
        assert main([str(tmp_path / "out"), "--store", str(tmp_path / "missing.zarr")]) == 2
        assert "missing.zarr" in capsys.readouterr().err
        assert gc.get_threshold() == GC_THRESHOLDS
    finally:
        gc.set_threshold(*kept)


def test_symlinked_or_unwritable_output_folder_is_a_one_line_error(synthetic, tmp_path, capsys):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    assert main([str(tmp_path / "link"), "--store", str(synthetic)]) == 2
    err = capsys.readouterr().err
    assert "symbolic link" in err and err.count("\n") == 1 and list(real.iterdir()) == []
    (tmp_path / "a-file").write_text("")  # a folder that cannot be created, even by root
    assert main([str(tmp_path / "a-file" / "out"), "--store", str(synthetic)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot create the output folder") and err.count("\n") == 1
    assert "Traceback" not in err


def _embedded_cube(html: str) -> np.ndarray:
    """The packed profile array as serialized in the page, decoded by hand (base64, maybe gzip)."""
    m = re.search(r'\["q",\{"type":"ndarray","array":\{"type":"bytes","data":"([A-Za-z0-9+/=]+)"\},'
                  r'"shape":\[(\d+)\],"dtype":"uint8"', html)
    raw = base64.b64decode(m[1])
    if raw[:2] == b"\x1f\x8b":  # bokeh gzips buffers when that helps
        raw = gzip.decompress(raw)
    out = np.frombuffer(raw, dtype=np.uint8)
    assert out.size == int(m[2])
    return out


@pytest.mark.slow
def test_rope_page_is_compact(tmp_path):
    """A 40 x 32 rotary model (1280 heads x 129 offsets) costs under 2.5 MB (its uint16 codes alone: 1.3 MB, packed
    to compress well: ``dashboard/profiles/payload.py``), and the page holds its profiles exactly."""
    path = write_synthetic_store(tmp_path / "big.zarr", rope_shape=(40, 32), absolute_shape=(1, 2),
                                 empty_shape=(1, 2), with_orbits=False)
    export(tmp_path / "out", path)
    page = tmp_path / "out" / profile_page_name(ROPE_MODEL)
    size = page.stat().st_size
    assert size < 2.5e6
    cube = unpack_profiles(_embedded_cube(page.read_text()), 40 * 32)
    from tests.browser.conftest import rope_profiles

    np.testing.assert_allclose(cube.reshape(40, 32, 129, 4) / 65534, rope_profiles(40, 32), atol=0.5 / 65534)


@pytest.mark.slow
def test_dashboard_modules_and_an_export_import_nothing_heavy(synthetic, tmp_path):
    import subprocess
    import sys

    code = ("import sys\nfrom dashboard import app, data, export, views\nfrom dashboard.profiles import page\n"
            f"export.export({str(tmp_path)!r}, {str(synthetic)!r})\n"
            "heavy = ('torch', 'transformers', 'safetensors', 'huggingface_hub')\n"
            "print(','.join(m for m in heavy if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == ""


def test_python_m_dashboard_serves_on_localhost_by_default(monkeypatch, synthetic):
    import dashboard.__main__ as entry

    seen = {}
    monkeypatch.setattr(entry.os, "execv", lambda exe, argv: seen.setdefault("argv", argv))
    entry.main(["--store", str(synthetic)])
    argv = seen["argv"]
    assert argv[argv.index("--address") + 1] == "127.0.0.1"
    assert argv[argv.index("serve") + 1] == str(REPO / "dashboard" / "app.py")
    assert argv[-2:] == ["--store", str(synthetic)]


def test_a_model_registered_while_serving_is_seen(tmp_path):
    path = write_synthetic_store(tmp_path / "s.zarr", rope_shape=(1, 2), absolute_shape=(1, 2), empty_shape=(1, 2),
                                 with_orbits=False)
    before = [m.name for m in data.rows(path)]
    st.Store.open(path).register(st.ModelRow("late-model", 2, 3, 16, 4, "none",
                                             command="python -m pipeline profiles x"))
    after = [m.name for m in data.rows(path)]
    assert after == before + ["late-model"]


@pytest.mark.slow
def test_a_failing_view_shows_a_message_and_leaves_the_other_tab(tmp_path, monkeypatch, caplog):
    """A bug in one view (here: the orbits view raising) must not blank the whole served app."""
    from dashboard import app

    path = write_synthetic_store(tmp_path / "s.zarr", rope_shape=(1, 2), absolute_shape=(1, 2), empty_shape=(1, 2))

    def broken(store, state, pages):
        raise TypeError("cannot cast StringDType")

    monkeypatch.setattr(app, "orbits_panel", broken)
    page = app.build(path)
    tabs = page.objects[1]
    profiles_root, orbits_root = (tabs.objects[i].get_root() for i in (0, 2))
    assert profiles_root.select_one({"name": "heads"}) is not None  # the profiles tab still draws
    msg = orbits_root.select_one({"name": "store_error"})
    assert "TypeError: cannot cast StringDType" in msg.text and "server&#x27;s log" in msg.text
    assert "drawing Orbits of C24 failed" in caplog.text
