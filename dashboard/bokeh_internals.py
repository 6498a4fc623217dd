"""Every use of a private Bokeh or Panel name in the dashboard, as small named functions and classes.

The served app copies rendered pages below Bokeh's constructors (``dashboard.clone``), lets a copy give the
form its page was serialised in once (``dashboard.serialized``) and hands a page to Panel without Panel's
per-session walk (``PagePane``); the exporter keeps Panel's bundles out of static pages (``BokehOnly``). Each
of those reaches names that Bokeh and Panel may change in any minor release, so they all live here, and
``tests/dashboard/test_dashboard_layers.py`` fails on a private Bokeh/Panel name anywhere else in the dashboard.

``validation_per_thread`` makes Bokeh's switch of property validation, a class attribute every thread reads, hold in
the thread that flips it only (``dashboard.rendered`` renders its pages on a thread of its own).

Importing this module first checks that the installed Bokeh and Panel are the tested releases
(``dashboard.versions``): outside that range it raises ``VersionError`` naming the range, before any
private name is touched.
"""

from __future__ import annotations

import threading

from dashboard.versions import check_versions

check_versions()

import panel as pn  # noqa: E402 - after the version check, on purpose
from bokeh.core.has_props import HasProps  # noqa: E402
from bokeh.core.property import bases as property_bases  # noqa: E402
from bokeh.core.property.descriptors import PropertyDescriptor  # noqa: E402
from bokeh.core.property.validation import validate  # noqa: E402
from bokeh.core.property.wrappers import PropertyValueContainer  # noqa: E402
from bokeh.core.serialization import Serializer  # noqa: E402
from bokeh.document.callbacks import invoke_with_curdoc  # noqa: E402
from bokeh.model import Model  # noqa: E402
from bokeh.resources import Resources  # noqa: E402

# the per-instance stores of HasProps: set values, instantiated unstable defaults and themed values
_STORES = ("_property_values", "_unstable_default_values", "_unstable_themed_values")


def blank(cls: type[Model]) -> Model:
    """A new model of ``cls`` with a new id and no property initialised, as Bokeh's deserializer makes one."""
    obj = cls.__new__(cls)
    super(HasProps, obj).__init__()  # the document reference and callback managers
    for store in _STORES:
        setattr(obj, store, {})
    obj._initialized = True
    return obj


def value_stores(m: Model) -> tuple[dict, dict, dict]:
    """The dicts that hold ``m``'s set values, its instantiated unstable defaults and its themed values."""
    return tuple(getattr(m, store) for store in _STORES)


def adopt(value, owner: Model, descriptor: PropertyDescriptor):
    """``value`` (a property's wrapped value) registered with ``owner`` if it is a container that tracks its
    owners (a list, dict or set property value); returned."""
    if isinstance(value, PropertyValueContainer):
        value._register_owner(owner, descriptor)
    return value


def encode_as(m: Model, encode) -> None:
    """Make Bokeh's serializer encode ``m`` as ``encode(serializer)`` returns (in place of the class's
    ``to_serializable``; ``type(m).to_serializable(m, serializer)`` is Bokeh's own encoding)."""
    object.__setattr__(m, "to_serializable", encode)


def on_any_change(m: Model, changed) -> None:
    """Call ``changed()`` before every change notification of ``m``: each property set, each container
    value changed in place, each value set from the browser (all of them pass through ``trigger``)."""
    trigger = type(m).trigger

    def watched(attr, old, new, hint=None, setter=None):
        changed()
        trigger(m, attr, old, new, hint=hint, setter=setter)

    object.__setattr__(m, "trigger", watched)


def add_buffers(serializer: Serializer, buffers: list) -> None:
    """Append ``buffers`` (binary buffers a representation refers to) to those ``serializer`` sends."""
    serializer._buffers.extend(buffers)


def run_as_curdoc(doc, f) -> None:
    """Call ``f()`` with ``doc`` as the current document (Bokeh's ``curdoc()`` and Panel's ``state.curdoc``), as
    Bokeh runs a session callback's synchronous part: the part of a coroutine callback after its first await
    runs without it."""
    invoke_with_curdoc(doc, f)


def is_deferred(serializer: Serializer) -> bool:
    """Whether ``serializer`` sends arrays as binary buffers (as a served document is sent)."""
    return serializer._deferred


# Whether Bokeh validates property values in this thread (``validation_per_thread``); unset: it does.
_VALIDATING = threading.local()


def validation_per_thread() -> None:
    """Make Bokeh's switch of property validation (``bokeh.core.properties.validate``) hold in the thread that flips
    it only, for as long as the process lasts (calling it again changes nothing).

    Bokeh keeps the switch in a class attribute (``Property._should_validate``) that every thread reads, and
    HoloViews switches it off around each data source it fills. Without this, while the pages' thread renders
    (``dashboard.rendered``), the event loop runs with validation off whenever it takes over inside such a window,
    and Bokeh's serializer, which tells a data spec's constant from a field by validating it, sends a session's glyph
    with its field as a constant: BokehJS throws ("Error rendering Bokeh items: TypeError: n is not iterable") and
    the page never draws. With this, ``validate(value)`` sets a switch of the thread's own, and Bokeh's check
    (``validation_on``) reads it and the class attribute, which stays the process-wide setting (Panel's
    ``config.disable_validation`` sets it)."""
    if property_bases.validation_on is _validation_on:
        return
    validate.__init__ = _switch_validation
    validate.__exit__ = _restore_validation
    property_bases.validation_on = _validation_on


def _validation_on() -> bool:
    return property_bases.Property._should_validate and getattr(_VALIDATING, "on", True)


def _switch_validation(self: validate, value: bool) -> None:
    self.old = getattr(_VALIDATING, "on", True)
    _VALIDATING.on = bool(value)


def _restore_validation(self: validate, typ, value, traceback) -> None:
    _VALIDATING.on = self.old


class PagePane(pn.pane.Bokeh):
    """The pane of a rendered page (``dashboard.rendered``) in a served session.

    Panel's Bokeh pane rewrites the id of the pane's object to the session root's id in the code of every
    CustomJS of the object, a walk over every model of the page, for every session. The pages' callbacks
    (``dashboard/js/``) never name a model id, so this pane hands its object over as it is; in a notebook
    (a comm) it is Panel's pane unchanged.
    """

    def _get_model(self, doc, root=None, parent=None, comm=None):
        if root is None or comm is not None or self.object is None or self.object.document is not None:
            return super()._get_model(doc, root, parent, comm)
        self._models[root.ref["id"]] = (self.object, parent)
        self._design.apply_bokeh_theme_to_model(self.object, self.theme)
        return self.object


class BokehOnly(Resources):
    """BokehJS, its widgets and its tables (the head inspector's statistics) only.

    Bokeh adds the ``__javascript__`` files of every model class registered in the process; once Panel
    is imported that includes Panel's bundles, with server-relative paths a static page cannot load.
    The pages hold only core Bokeh models, so they need none of them.
    """

    def _collect_external_resources(self, resource_attr) -> list[str]:
        return []
