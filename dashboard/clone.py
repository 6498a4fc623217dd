"""A fresh copy of a Bokeh layout: the same models with the same property values, under new ids.

A Bokeh model belongs to one document, so every session of the served app needs models of its own.
Rendering the HoloViews views again for each session costs about 0.7 s for a 1280-head model; copying
the models of a layout rendered once (``dashboard.rendered``) costs about 15 ms. The copy is
made below Bokeh's constructors, the way Bokeh's own deserializer builds models (through
``dashboard.bokeh_internals``, the one home of private Bokeh names): each model is created
uninitialised, its set values and its instantiated defaults are copied with every reference to a model
of the layout replaced by that model's copy, and containers are rebuilt so that no list, dict or set is
shared with the original (a shared container would hold its every owner, and so every session's copy,
alive for as long as the original). Nothing is validated again: the values were valid on the original.
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


def copy_layout(root: Model, models: list[Model] | None = None) -> Copy:
    """A copy of ``root`` and every model it references; ``models``: ``list(root.references())`` if known."""
    models = list(root.references()) if models is None else models
    new = {m.id: blank(type(m)) for m in models}

    def mapped(v):
        if isinstance(v, Model):
            return new[v.id]
        if isinstance(v, dict):
            return {k: mapped(x) for k, x in v.items()}
        if isinstance(v, (set, frozenset)):  # e.g. subscribed_events
            return {mapped(x) for x in v}
        if isinstance(v, (list, tuple)):
            if all(_plain(x) for x in v):  # a column of plain values
                return list(v) if isinstance(v, list) else v
            out = [mapped(x) for x in v]
            return out if isinstance(v, list) else tuple(out)
        if dataclasses.is_dataclass(v) and not isinstance(v, type):  # field specs: Field, Value, Expr
            return dataclasses.replace(v, **{f.name: mapped(getattr(v, f.name)) for f in dataclasses.fields(v)})
        return v

    named: dict[str, list[Model]] = {}
    for m in models:
        c = new[m.id]
        for target, values in zip(value_stores(c), value_stores(m), strict=True):
            for key, value in values.items():
                descriptor = c.lookup(key)
                target[key] = adopt(descriptor.property.wrap(mapped(value)), c, descriptor)
        if c.name:
            named.setdefault(c.name, []).append(c)
    return Copy(new[root.id], named, new)
