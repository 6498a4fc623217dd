"""A fresh copy of a Bokeh layout: the same models with the same property values, under new ids.

A Bokeh model belongs to one document, so every session of the served app needs models of its own.
Rendering the HoloViews views again for each session costs about 0.7 s for a 1280-head model; copying
the models of a layout rendered once (``dashboard.rendered``) costs far less. The copy is
made below Bokeh's constructors, the way Bokeh's own deserializer builds models (through
``dashboard.bokeh_internals``, the one home of private Bokeh names): each model is created
uninitialised, its set values and its instantiated defaults are copied with every reference to a model
of the layout replaced by that model's copy, and containers are rebuilt so that no list, dict or set is
shared with the original (a shared container would hold its every owner, and so every session's copy,
alive for as long as the original). Nothing is validated again: the values were valid on the original.
What each value needs (shared as it is, a new list, its models replaced) is decided once per layout
(``copy_plan``; ``dashboard.rendered`` makes it with the page), so a copy runs only that: about 14 ms for
a 1280-head profiles page, against about 30 ms when every value is examined again.
``tests/dashboard/test_dashboard_clone.py`` checks that a copy serialises exactly as the original does, ids aside.

Arrays (numpy) are shared between original and copy: Bokeh never mutates them in place (a data
change replaces the column), and neither does this package.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from bokeh.model import Model

from dashboard.bokeh_internals import adopt, blank, value_stores


@dataclass(frozen=True)
class Copy:
    """A copied layout: ``root``, its models by name (``named["heads"]``: the models named so) and by the
    id of the model each copies (``by_original``)."""

    root: Model
    named: dict[str, list[Model]]
    by_original: dict[str, Model] = dataclasses.field(default_factory=dict)

    def one(self, name: str) -> Model | None:
        """The model of that name, or None when there is none or more than one."""
        found = self.named.get(name, [])
        return found[0] if len(found) == 1 else None


def _plain(value) -> bool:
    return not isinstance(value, (Model, dict, list, tuple, set, frozenset)) and not (
        dataclasses.is_dataclass(value) and not isinstance(value, type))


def _copier(v):
    """How to copy the value ``v`` of a layout: None when ``v`` itself goes into the copy (a plain value, an
    array, a tuple of plain values), else a function of the copies by original id that returns a new value:
    a model's copy, a new container with every model in it replaced by its copy, a field spec (Field, Value,
    Expr) made again. Decided once per value, so that a copy only runs what each value needs."""
    if isinstance(v, Model):
        i = v.id
        return lambda new: new[i]
    if isinstance(v, dict):
        items = [(k, x, _copier(x)) for k, x in v.items()]
        return lambda new: {k: (x if f is None else f(new)) for k, x, f in items}
    if isinstance(v, (set, frozenset)):  # e.g. subscribed_events
        items = [(x, _copier(x)) for x in v]
        return lambda new: {(x if f is None else f(new)) for x, f in items}
    if isinstance(v, (list, tuple)):
        if all(_plain(x) for x in v):  # a column of plain values
            return (lambda new: list(v)) if isinstance(v, list) else None
        items = [(x, _copier(x)) for x in v]
        if isinstance(v, list):
            return lambda new: [(x if f is None else f(new)) for x, f in items]
        return lambda new: tuple((x if f is None else f(new)) for x, f in items)
    if dataclasses.is_dataclass(v) and not isinstance(v, type):  # field specs: Field, Value, Expr
        fields = [(f.name, getattr(v, f.name), _copier(getattr(v, f.name))) for f in dataclasses.fields(v)]
        return lambda new: dataclasses.replace(v, **{n: (x if f is None else f(new)) for n, x, f in fields})
    return None


@dataclass(frozen=True)
class Plan:
    """How to copy one layout (``copy_plan``): per model, its class and original id, and per value held, where it
    goes (which of ``value_stores``, its key, its property's descriptor), the value and its ``_copier``, and
    whether the property's ``wrap`` must run on each copy (containers: each copy's own, registered with its
    owner) or gives the value itself (scalars: stored as they are)."""

    root_id: str
    models: list[tuple[type, str, list[tuple[int, str, object, object, object, bool]]]]


def copy_plan(root: Model, models: list[Model] | None = None) -> Plan:
    """The plan of copying ``root``; ``models``: ``list(root.references())`` if known. The layout must not change
    afterwards (the rendered pages never do: ``dashboard.rendered``)."""
    models = list(root.references()) if models is None else models
    steps = []
    for m in models:
        values = []
        for index, store in enumerate(value_stores(m)):
            for key, value in store.items():
                descriptor = m.lookup(key)
                f = _copier(value)
                rewrap = f is not None or descriptor.property.wrap(value) is not value
                values.append((index, key, descriptor, value, f, rewrap))
        steps.append((type(m), m.id, values))
    return Plan(root.id, steps)


def copy_layout(root: Model, models: list[Model] | None = None, plan: Plan | None = None) -> Copy:
    """A copy of ``root`` and every model it references; ``models``: ``list(root.references())`` if known;
    ``plan``: ``copy_plan(root, models)`` if made before."""
    plan = copy_plan(root, models) if plan is None else plan
    new = {i: blank(cls) for cls, i, _ in plan.models}
    named: dict[str, list[Model]] = {}
    for _, i, values in plan.models:
        c = new[i]
        stores = value_stores(c)
        for index, key, descriptor, value, f, rewrap in values:
            if rewrap:
                value = adopt(descriptor.property.wrap(value if f is None else f(new)), c, descriptor)
            stores[index][key] = value
        if c.name:
            named.setdefault(c.name, []).append(c)
    return Copy(new[plan.root_id], named, new)
