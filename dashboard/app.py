"""The served dashboard: ``panel serve dashboard/app.py [--args --store PATH]`` (or ``python -m dashboard``).

A thin Panel shell. One ``AppState`` (model, d, layer, selection, frame) per session. The store's
contents are read once per process (``dashboard.data``) and its pages are rendered once per process
(``dashboard.rendered``, from the pages of ``dashboard.profiles``, ``dashboard.compare`` and ``dashboard.orbits``),
both keyed on the store's path and modification state; a session takes its own copy of those Bokeh
models. Choosing another model replaces the profiles view's data in place. Every interaction inside a
view runs in the browser and is mirrored into the state.

The store is chosen only at start-up: ``--store PATH`` after ``--args``, else the default store
(``pipeline.store.location``), or the demo in the place of an unnamed one with no computed model; no URL
parameter can choose it. The page names the store and why at its foot, and the demo in a note under the title
(``dashboard.store_note``). Bind to localhost (``python -m dashboard`` does; with ``panel serve`` pass
``--address 127.0.0.1``).

Deep links: ``?model=NAME&tab=profiles&d=17&color=type&heads=3.5,3.7``, for a run's Training tab
``?model=NAME&tab=training&step=S&head=L.H``, and for the Compare tab ``?tab=compare&models=A,B&quantity=rho``.
The server reads ``model`` and ``tab`` from the session's request (``url_args``); the pages' own JavaScript applies
the rest once the document is ready and writes the state back into the URL as it changes
(``dashboard/profiles/js/url_state.js``, ``dashboard/training/js/training_url.js``,
``dashboard/compare/js/compare_url.js``), as in the exported pages.
What a link asks for and the page cannot show is left at its default and named in a note at the top of the
page. Without a ``model`` the first load shows the first computed model with rotary positions (a d slider),
else the first computed model.
"""

from __future__ import annotations

import asyncio
import html
import logging
import sys
import time

import panel as pn
import param
from bokeh.layouts import column
from bokeh.model import Model
from bokeh.settings import settings

from dashboard import data, rendered
from dashboard.bokeh_internals import PagePane, run_as_curdoc
from dashboard.clone import Copy
from dashboard.collector import collect_less_often
from dashboard.common import jscode
from dashboard.common.page_style import page_css
from dashboard.common.page_widgets import header, message, restore_on_ready
from dashboard.common.render import use_bokeh
from dashboard.profiles.page_analyses import PAGE_TABS
from dashboard.profiles.page_texts import selector_groups, todo_html
from dashboard.rendered import replace_in_place, same_structure
from dashboard.store_note import demo_note_html, store_line_html
from dashboard.training import runs
from dashboard.versions import check_versions

TITLE = "Attention-head geometry"
TABS = ("profiles", "compare", "orbits")  # the tabs' names in a deep link, in order
SCRIPTS_FIRST_S = 0.15  # a session's build waits this long after its GET, for the page's scripts (``serve``)

PAGE_CSS = page_css("text", "served", document=True)  # Panel's raw_css (dashboard/common/page.css)

# Scripts of Panel's page that no served page uses, by a fragment of their tag: BokehJS's WebGL bundle
# (every figure draws on a canvas: ``views.render``) and es-module-shims with its options (Panel's ESM
# components, of which the app has none).
UNUSED_SCRIPTS = ("/bokeh-gl.", "es-module-shims", '"esms-options"')

# The served page: Panel's page template (a string template extends it) with its script tags, one a line,
# less those of UNUSED_SCRIPTS, and the loading line (LOADING_HTML) before the page's root. Set on each session's
# document (``page_template``).
SERVED_TEMPLATE = ("{% block js_resources %}"
                   "{% for line in bokeh_js.splitlines() if not unused_scripts | select('in', line) | list %}"
                   "{{ line }}\n"
                   "{% endfor %}"
                   "{% endblock js_resources %}"
                   "{% block contents %}{{ loading_html }}{{ super() }}{% endblock contents %}")

# The line a served page shows from its HTML until its document has come (the session's build: its pages copied,
# or first built), with the seconds so far; removed by its own script once BokehJS holds the document.
LOADING_HTML = ('<div id="loading" class="building">Loading the page … <span>0</span> s</div>'
                f"<script>{jscode.code('loading_line')}</script>")


def serve_settings() -> None:
    """The process-wide settings of a server of this app, applied by the app script (``panel serve
    dashboard/app.py``, ``python -m dashboard``) before its first session, never on import: the page's CSS
    and Panel's extension without its BrowserInfo model (nothing here reads ``pn.state.browser_info``; with it,
    every page sends seven changes of it back to the server after loading), and Bokeh's per-session document
    validation switched off. Every session's
    document is a copy of pages validated once when rendered (``dashboard.rendered``); checking each copy
    again would cost about 50 ms per session for the same result. Python's cyclic garbage collector runs less
    often (``dashboard.collector``): each session allocates tens of thousands of objects (its copies of the pages,
    Panel's and Bokeh's bookkeeping), and at the default thresholds that set off full collections, each a walk over the
    whole heap, which grows with every open session; with 20 sessions opening at once they took a large part of
    the server's time (benchmarks/dashboard_bench.py prints the server's CPU per load and for 20 loads at once).
    The app's own log (the ``dashboard`` logger: each page built and how long it took, what failed) takes the
    level ``panel serve --log-level`` gives Bokeh's (``info`` unless told).
    First of all, the installed Bokeh and Panel must be the tested releases (``dashboard.versions``)."""
    check_versions()
    use_bokeh()
    pn.extension(raw_css=[PAGE_CSS], notifications=False, browser_info=False)
    settings.perform_document_validation.set_value(False)
    collect_less_often()
    logging.getLogger("dashboard").setLevel(logging.getLogger("bokeh").getEffectiveLevel())


class AppState(param.Parameterized):
    """What one session shows. ``model`` is chosen on the server; the rest follow the browser."""

    model = param.String(default="", doc="the model on the profiles page")
    d = param.Integer(default=0, bounds=(0, None), doc="the offset d = query position - key position shown")
    layer = param.Integer(default=None, allow_None=True, doc="the layer the selected heads lie in, if only one")
    selection = param.List(default=[], item_type=int, doc="selected heads (layer-major indices)")
    frame = param.Integer(default=-1, doc="the orbits movie's frame (-1: the last)")


def _error_view(title: str, text: str):
    return column(header(title), message(html.escape(text), "error", name="store_error"))


def _follow(page: Copy, state: AppState) -> None:
    """Mirror the browser's d slider and selection into ``state`` (server-side callbacks)."""
    slider = page.one("d_slider")
    if slider is not None:
        slider.on_change("value", lambda attr, old, new: state.param.update(d=int(new)))
    heads = page.one("heads")
    if heads is not None:
        def selected(attr, old, new):
            indices = [int(i) for i in new]
            layers = {int(heads.data["layer"][i]) for i in indices}
            state.param.update(selection=indices, layer=layers.pop() if len(layers) == 1 else None)
        heads.selected.on_change("indices", selected)


def url_args() -> dict[str, str]:
    """The query parameters of the session's request (the first value of each), or {} outside a session."""
    try:
        args = pn.state.session_args or {}
    except Exception:  # noqa: BLE001 - no session (a notebook, a test)
        return {}
    return {str(k): (v[0].decode("utf-8", "replace") if isinstance(v[0], bytes) else str(v[0]))
            for k, v in args.items() if v}


def first_model(rows: list[data.ModelRow], names: list[str]) -> str:
    """The model a first load shows: the first drawable one with rotary positions (its page opens on the d
    slider), else the first drawable one."""
    rotary = [r.name for r in rows if r.rotary and r.name in names]
    return rotary[0] if rotary else names[0]


def _link_note(page: Copy, notes: list[str]) -> None:
    """Show ``notes`` (HTML) at the top of the page: what the link asked for that cannot be shown."""
    note = page.one("url_note")
    if note is not None and notes:
        note.text = ('<div class="warn"><b>This link asked for something the page cannot show</b>; the rest is as '
                     "it asked:<ul>" + "".join(f"<li>{n}</li>" for n in notes) + "</ul></div>")
        note.visible = True


def building_view(title: str, what: str) -> Model:
    """What a tab shows while its page is being built: the page's title and a line that says so, with the seconds
    it has taken so far (``_count_seconds``)."""
    return column(header(title), message(f"Building {html.escape(what)} … 0 s", "building", name="building"))


def _count_seconds(doc, note: Model, what: str):
    """Count the seconds on the progress line ``note`` every second; returns the callback to remove."""
    t0 = time.monotonic()

    def tick() -> None:
        note.text = (f'<div class="building">Building {html.escape(what)} … {time.monotonic() - t0:.0f} s'
                     "</div>")

    return doc.add_periodic_callback(tick, 1000)


def when_ready(pages: rendered.Pages, key: tuple, pane: PagePane, title: str, what: str, show) -> None:
    """Call ``show(page)`` with a session's own page of ``key`` (``show`` puts it into ``pane``): now if the page is
    prepared, or outside a served session (waiting for it); else show ``building_view`` in ``pane`` and call
    ``show`` on the session's document once the page is prepared. The event loop never waits for a rendering. What
    the page builder or ``show`` raises is shown in the pane as ``guarded`` shows it, or raised outside a session."""
    future = pages.build(key)
    doc = pn.state.curdoc
    if doc is None or doc.session_context is None:
        show(pages.copy(key, future.result()))
        return

    def swap() -> None:
        try:
            show(pages.copy(key, future.result()))
        except Exception as exc:  # noqa: BLE001 - shown on the page (unexpected ones logged in full)
            if isinstance(exc, data.StoreError):  # a store the user can fix: the message says how
                pane.object = _error_view(title, str(exc))
            elif isinstance(exc, KeyError) and key[0] == "profiles":  # the model has left the store since
                pane.object = _error_view(title, f"{key[3]} is no longer in the store {key[1]}.")
            else:
                pane.object = _failed_view(title, key[1], exc).object

    if future.done():
        swap()
        return
    waiting = building_view(title, what)
    pane.object = waiting
    ticks = _count_seconds(doc, waiting.children[1], what)

    def arrived() -> None:
        doc.remove_periodic_callback(ticks)
        swap()

    def queue_arrived() -> None:  # on the event loop: a session closed meanwhile has a destroyed document
        if doc.session_context is None:
            logging.getLogger("dashboard").info("%s arrived after its session closed", what)
        else:
            doc.add_next_tick_callback(arrived)

    # The page's future completes on the pages' thread, and the session may have closed by then (Bokeh destroys its
    # document on the event loop): the callback is handed to the event loop, which alone destroys documents, so the
    # check and the queueing cannot be split by a destruction.
    loop = asyncio.get_running_loop()
    future.add_done_callback(lambda _: loop.call_soon_threadsafe(queue_arrived))


def shown_model(rows: list[data.ModelRow], asked: str | None, runs: list[str] = ()) -> str | None:
    """The model the profiles tab shows: ``asked`` (the link's) if it is drawable (a model, or one of the training
    ``runs``), else ``first_model``; None when nothing is drawable."""
    names = [n for v in selector_groups(rows, runs).values() for n in v]
    if not names:
        return None
    return asked if asked in names else first_model(rows, names)


def profiles_panel(store, state: AppState, args: dict[str, str] | None = None,
                   notes: list[str] | None = None, pages: rendered.Pages = rendered.PAGES) -> pn.viewable.Viewable:
    """The model selector, the profiles view of ``state.model`` and the list of models to compute or repair.

    ``args``: the deep link's parameters (``model`` is read here); ``notes``: what the link asked for that
    cannot be shown, said at the top of the page."""
    args = args or {}
    notes = list(notes or [])
    try:
        rows = rendered.drawable_rows(store)
        trained = runs.run_names(store)
    except data.StoreError as exc:
        return pn.pane.Bokeh(_error_view("Profiles of attention heads", str(exc)))
    groups = selector_groups(rows, trained)
    todo = pn.pane.HTML(todo_html(rows), name="todo", stylesheets=[page_css("text")], width=1100,
                        visible=bool(todo_html(rows)))
    if not groups:
        body = "The store holds no computed model yet. See below for the commands that compute them."
        return pn.Column(pn.pane.Bokeh(column(header("Profiles of attention heads"),
                                              message(body, name="no_models"))), todo)
    asked = args.get("model")
    if asked is not None and shown_model(rows, asked, trained) != asked:
        notes.insert(0, f"model = <code>{html.escape(asked[:80])}</code> is not a computed model of this store; "
                        f"showing {html.escape(shown_model(rows, None, trained))}")
    elif asked is not None:
        state.model = asked
    state.model = shown_model(rows, state.model or None, trained)
    select = pn.widgets.Select(label="Model", groups=groups, value=state.model, width=340)
    select.link(state, value="model")
    pane = PagePane(sizing_mode="fixed")
    shown: list[Copy] = []  # the profiles page in the pane, once there is one
    session_doc = pn.state.curdoc  # the served session's document (None outside one); ``show`` may run later
    first = [True]  # the first page shown: the deep link's restore runs on it when the document is ready

    def show(name: str, page: Copy) -> None:
        if name != state.model:  # the selector has moved on while this page was being built
            return
        state.param.update(d=0, selection=[], layer=None)
        if not shown:
            _follow(page, state)
            _link_note(page, notes)
            doc = pn.state.curdoc
            if first and doc is not None and doc.session_context is not None:
                restore_on_ready(doc, page.root)
            first.clear()
            shown.append(page)
            pane.object = page.root
            return
        shown[0].one("heads").selected.indices = []
        if same_structure(shown[0], page):
            # the same models with the new model's data: the document stays flat. Held, so that the browser gets
            # every change in one patch and never draws a page that is half one model and half the other.
            with pn.io.hold(session_doc):
                replace_in_place(shown[0], page)
            if pane.object is not shown[0].root:  # a progress line took the pane meanwhile: the page comes back
                pane.object = shown[0].root
            return
        _follow(page, state)  # a page of other named models: it replaces the shown one
        shown[0] = page
        pane.object = page.root

    def switch(name: str) -> None:
        select.value = name
        key = rendered.profiles_key(store, name)
        # a page not built yet: its progress line takes the pane, and the page shown comes back with the new
        # model's data (``show``), never a second page beside it (the document's ready callback, the deep link's
        # restore, holds the first page's models for as long as the session lasts)
        try:
            when_ready(pages, key, pane, "Profiles of attention heads", f"the page of {name}",
                       lambda page: show(name, page))
        except KeyError:  # outside a session: the model is no longer in the store
            shown.clear()
            pane.object = _error_view("Profiles of attention heads", f"{name} is no longer in the store {store}.")

    state.param.watch(lambda ev: switch(ev.new), "model")
    switch(state.model)
    return pn.Column(select, pane, todo, name="Profiles")


def compare_panel(store, state: AppState, pages: rendered.Pages = rendered.PAGES) -> pn.viewable.Viewable:
    """Every computed model side by side (``compare.page``); its choosers as the deep link asks
    (``?tab=compare&models=A,B&quantity=rho``, applied in the browser once the document is ready)."""
    pane = PagePane()

    def show(page: Copy) -> None:
        doc = pn.state.curdoc
        if doc is not None and doc.session_context is not None:
            restore_on_ready(doc, page.root)
        pane.object = page.root

    try:
        when_ready(pages, rendered.compare_key(store), pane, "Compare models", "the compare page", show)
    except data.StoreError as exc:  # outside a session
        return pn.pane.Bokeh(_error_view("Compare models", str(exc)))
    return pane


def orbits_panel(store, state: AppState, pages: rendered.Pages = rendered.PAGES) -> pn.viewable.Viewable:
    pane = PagePane()

    def show(page: Copy) -> None:
        slider = page.one("orbits_frame")
        if slider is not None:
            slider.on_change("value", lambda attr, old, new: state.param.update(frame=int(new)))
        pane.object = page.root

    when_ready(pages, rendered.orbits_key(store), pane, "Orbits of C24", "the orbits page", show)
    return pane


def _failed_view(title: str, store, exc: Exception) -> pn.pane.Bokeh:
    """The message of a tab whose drawing failed unexpectedly; the traceback goes to the server's log."""
    logging.getLogger("dashboard").error("drawing %s failed", title, exc_info=exc)
    return pn.pane.Bokeh(_error_view(title, f"this view could not be drawn from {store}: "
                                            f"{type(exc).__name__}: {exc}. The full traceback is in the "
                                            "server's log; please report it with the store."))


def guarded(make, title: str, store, state: AppState) -> pn.viewable.Viewable:
    """One tab, or a message if drawing it fails: a bug in one view never blanks the whole app.

    Store problems the user can fix come as StoreError messages from the views themselves; anything else
    is unexpected, so its traceback goes to the server's log and the page says where to find it.
    """
    try:
        return make(store, state)
    except Exception as exc:  # noqa: BLE001 - shown on the page, logged in full
        return _failed_view(title, store, exc)


def build(store, state: AppState | None = None, args: dict[str, str] | None = None,
          pages: rendered.Pages = rendered.PAGES) -> pn.Column:
    """The whole served page over ``store`` for one session: Profiles, Compare and Orbits tabs (the last two
    built when shown), their pages copied from ``pages``.

    ``args``: the deep link's parameters (default: the session's request, ``url_args``)."""
    state = state or AppState()
    args = url_args() if args is None else args
    notes = []
    tab = args.get("tab", TABS[0])
    tab = TABS[0] if tab in PAGE_TABS else tab  # the profiles page's own tabs (profiles, analyses)
    if tab not in TABS:
        notes.append(f"tab = <code>{html.escape(tab[:80])}</code> is not a tab ({', '.join(TABS)}); showing the "
                     "profiles")
        tab = TABS[0]
    orbits = pn.param.ParamFunction(lambda: guarded(lambda s, st: orbits_panel(s, st, pages), "Orbits of C24",
                                                    store, state), lazy=True)
    profiles = guarded(lambda s, st: profiles_panel(s, st, args, notes, pages), "Profiles of attention heads", store,
                       state)
    compare = pn.param.ParamFunction(lambda: guarded(lambda s, st: compare_panel(s, st, pages), "Compare models",
                                                     store, state), lazy=True)
    tabs = pn.Tabs(("Profiles", profiles), ("Compare", compare), ("Orbits", orbits), dynamic=True, name="tabs",
                   active=TABS.index(tab))
    tabs.jscallback(args={"names": list(TABS)}, active=jscode.code("url_tab"))
    store_line = pn.pane.HTML(store_line_html(store), name="store_path")
    title = pn.pane.HTML(f"<div class='title'>{TITLE}</div>{demo_note_html(store)}", name="title")
    return pn.Column(title, tabs, store_line)


def page_template(doc) -> None:
    """Give the session's document ``doc`` the served page's template (``SERVED_TEMPLATE``)."""
    doc.template = SERVED_TEMPLATE
    doc.template_variables["unused_scripts"] = list(UNUSED_SCRIPTS)
    doc.template_variables["loading_html"] = LOADING_HTML


def session_keys(store, args: dict[str, str]) -> list[tuple]:
    """The pages a session of the link ``args`` shows at once: the profiles page of its model and the page of its
    tab (``rendered.*_key``); none when the store cannot be read (the page says why)."""
    try:
        model = shown_model(rendered.drawable_rows(store), args.get("model"), runs.run_names(store))
    except data.StoreError:
        return []
    keys = [rendered.profiles_key(store, model)] if model is not None else []
    tab = args.get("tab")
    if tab == "compare":
        keys.append(rendered.compare_key(store))
    elif tab == "orbits":
        keys.append(rendered.orbits_key(store))
    return keys


def warm(store, pages: rendered.Pages = rendered.PAGES) -> None:
    """Build, on the pages' thread after the pages sessions wait for, every page a first visit can show: the
    profiles page a plain link opens, the compare and the orbits page. Run by the app script for each session
    (pages built once are not built again) and, with ``panel serve --warm`` (``python -m dashboard``), once
    when the server starts."""
    pages.warm(lambda: [*session_keys(store, {}), rendered.compare_key(store), rendered.orbits_key(store)])


def serve(store, pages: rendered.Pages = rendered.PAGES) -> pn.Column:
    """Serve the page over ``store`` to the current session (``pn.state.curdoc``) in two steps: an empty root now,
    so the GET that runs the app script answers at once, and the page (``build``) put in it by a next-tick
    callback of the session's document, while the browser loads BokehJS. The server builds the session (copying
    the rendered pages, Panel's and Bokeh's walks over their ~500 models) in time the browser spends anyway,
    instead of before the page's HTML is sent.

    The build waits SCRIPTS_FIRST_S first, in the same callback (``hold_then_fill``, a coroutine: Bokeh holds the
    document's lock across its awaits), so that the browser's requests for the BokehJS and Panel scripts, sent
    some tens of ms after the HTML, find the event loop free: the build's ~100-200 ms of Python would otherwise
    hold them back, and the browser cannot start the page before they arrive. One callback, not a wait and a
    build in two: Bokeh keeps a document's pending callbacks in a set, so two of them start in either order, and
    about every other session built first and then waited with the lock held, its scripts and its pull both
    held back (benchmarks/dashboard_bench.py; tests/browser/test_app.py times the scripts after a GET).

    The build cannot come after the browser's pull of the document: the callback is queued before the reply
    that gives the browser the session's id, and the pull waits for the document's lock, which the callback
    holds from its start to the page's end. ``fill`` renders the page's parts at once (``get_root``) into the
    root's Bokeh model: setting ``page.objects`` would leave Panel's update of that model to another callback
    until the browser's websocket connects, and a pull already waiting for the lock (a first session's build
    takes seconds) would come before it. So the first pull sends the whole page, and the deep-link restore it
    registers (``restore_on_ready``) runs when that document is ready, as it did when the page was built in the
    GET.

    The pages the session shows at once (``session_keys``) are built on the pages' thread (``rendered.Pages``)
    unless they are already; the callback awaits them, so the event loop serves other sessions meanwhile, while
    the browser shows the template's progress line. Returns the Panel root (its Bokeh model holds the page)."""
    page = pn.Column(name="page")
    # no Location root: nothing here reads pn.state.location (the pages keep the URL themselves)
    page.servable(title=TITLE, location=False)
    doc = pn.state.curdoc
    page_template(doc)
    root = next(r for r in doc.roots if r.name == page.name)  # the page's Bokeh model
    args = url_args()  # read now: the request is the GET's

    def fill() -> None:
        root.children = [build(store, args=args, pages=pages).get_root(doc)]

    async def hold_then_fill() -> None:
        await asyncio.sleep(SCRIPTS_FIRST_S)
        waiting = [asyncio.wrap_future(pages.build(key)) for key in session_keys(store, args)]
        await asyncio.gather(*waiting, return_exceptions=True)  # a failed page is shown as its tab says
        run_as_curdoc(doc, fill)  # past its await, a coroutine callback runs without the session's curdoc

    doc.add_next_tick_callback(hold_then_fill)
    return page


if __name__.startswith("bokeh"):  # run by `panel serve`: the store comes from argv after --args, never the URL
    # The functions of the imported module, not this run's own: Bokeh runs the script as a new module for each
    # session and clears that module's globals when the session ends, while the pages' thread and the session's
    # callbacks call these functions later (the warm-up after a session closed, or after `--warm`'s first run).
    from dashboard import app as served

    served.serve_settings()
    STORE = served.data.store_path(sys.argv[1:])
    served.serve(STORE)
    served.warm(STORE)
