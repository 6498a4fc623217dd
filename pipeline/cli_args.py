"""Both CLIs' dataclass -> argparse generator and their one way of writing a command back.

``python -m pipeline profiles`` is generated from :class:`pipeline.run.options.RunOptions` and
``python -m pipeline orbits [search]`` from :class:`pipeline.orbits.config.Config`: one flag per field,
``--field-name``, its help (and ``metavar``, ``choices``, ``positional``) from the field's metadata.
:func:`command` writes the command that sets given values (the one spelling of ``models.compute_command`` and
``orbits.config.command_for``), and :func:`flags` the flags alone.
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Callable
from dataclasses import MISSING, Field, fields


def flag_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_dataclass_arguments(parser: argparse.ArgumentParser, cls, given_only: bool = False,
                            include: Callable[[Field], bool] | None = None,
                            section: Callable[[Field], str] | None = None) -> None:
    """One argparse argument per field of the dataclass ``cls`` (``include(field)`` false: left out).

    bool -> a flag; ``X | None`` -> an option of type X; ``list[X]`` / ``tuple[X, ...]`` -> several values of type
    X (positional arguments with ``positional`` metadata). Help, ``metavar`` and ``choices`` come from the field's
    metadata. ``given_only``: an option not given is absent from the parsed namespace (so another source of
    values, such as a recipe, applies), bools are ``--x`` / ``--no-x`` and the help shows the field's default;
    otherwise an option not given takes the field's default and a bool is ``--x`` alone. ``section(field)``
    names the argument group a field's option is listed under."""
    hints = typing.get_type_hints(cls)
    groups: dict[str, argparse._ArgumentGroup] = {}
    for f in fields(cls):
        if include is not None and not include(f):
            continue
        meta, hint = dict(f.metadata), hints[f.name]
        default = f.default if f.default is not MISSING else (
            f.default_factory() if f.default_factory is not MISSING else None)
        optional = typing.get_origin(hint) in (typing.Union, types.UnionType)
        kind = next(a for a in typing.get_args(hint) if a is not type(None)) if optional else hint
        many = typing.get_origin(kind) in (list, tuple)
        element = next((a for a in typing.get_args(kind) if a is not Ellipsis), str) if many else kind
        helptext = meta.get("help")
        if given_only and helptext is not None and default is not None:
            shown = " ".join(map(str, default)) if many else default
            helptext = f"{helptext} (default {shown})"
        kw = {"help": helptext.replace("%", "%%") if given_only and helptext else helptext}
        for k in ("metavar", "choices"):
            if meta.get(k):
                kw[k] = meta[k]
        target = parser
        if section is not None:
            name = section(f)
            if name not in groups:
                groups[name] = parser.add_argument_group(name)
            target = groups[name]
        if meta.get("positional"):
            target.add_argument(f.name, nargs="*", type=element, **kw)
            continue
        if given_only:
            kw |= {"default": argparse.SUPPRESS, "dest": f.name}
        elif kind is not bool:
            kw["default"] = default
        if kind is bool:
            kw["action"] = argparse.BooleanOptionalAction if given_only else "store_true"
        elif many:
            kw |= {"nargs": "+", "type": element}
        else:
            kw["type"] = kind
        target.add_argument(flag_name(f.name), **kw)


def flags(values: dict) -> list[str]:
    """The flags that set these fields to these values: ``--name value`` (floats as ``%g``, lists space-separated),
    ``--name`` / ``--no-name`` for booleans; None left out."""
    parts = []
    for k, v in values.items():
        flag = flag_name(k)
        if isinstance(v, bool):
            parts.append(flag if v else "--no-" + flag[2:])
        elif isinstance(v, (list, tuple)):
            parts.append(f"{flag} " + " ".join(f"{x:g}" if isinstance(x, float) else str(x) for x in v))
        elif v is not None:
            parts.append(f"{flag} {v:g}" if isinstance(v, float) else f"{flag} {v}")
    return parts


def command(program: str, positional: list[str] | tuple[str, ...] = (), values: dict | None = None) -> str:
    """``program`` (e.g. ``python -m pipeline profiles``), its positional arguments, then :func:`flags`."""
    return " ".join([program, *map(str, positional), *flags(values or {})])
