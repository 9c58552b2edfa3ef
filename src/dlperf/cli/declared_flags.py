"""Flags made from declarations: every field declared with `spec.setting` becomes a flag or an argument, with its
type, bound, choices, default and help, and the parsed flags become the declaring dataclass again. Light: reading
commands (report, extract, compare, history) make their flags here without loading the run machinery."""

from __future__ import annotations

import argparse
from dataclasses import MISSING, Field, fields
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

from dlperf.cli.parser import Declared
from dlperf.spec import declared_choices, flag


def field_help(f: Field) -> str:
    text = f.metadata.get("help", "")
    if text == argparse.SUPPRESS:
        return text
    if not (f.default in (None, ()) or f.default is MISSING or isinstance(f.default, bool) or "(default" in text):
        text = f"{text} (default {f.default:g})" if isinstance(f.default, float) else f"{text} (default {f.default})"
    engines = f.metadata.get("engines")
    return f"{text} [--engine {' or '.join(engines)} only]" if engines else text


def flag_kind(f: Field, hint: Any) -> dict[str, Any]:
    """argparse's type, action or choices for a field's annotation (None allowed: the flag sets a value); a value's
    type checks its declared bound or choices (parser.Declared), as a sweep file's key and a JSON spec are."""
    bound = f.metadata.get("bound")
    base = _without_none(hint)
    choices = declared_choices(f.metadata, base)
    if choices:
        return {"type": Declared(str, choices=choices), "choices": choices}
    if base is bool:  # a switch; one that is on by default can be turned off (--no-overlap)
        return {"action": argparse.BooleanOptionalAction if f.default is True else "store_true"}
    if get_origin(base) is tuple:  # a repeatable flag, each value one item
        item = get_args(base)[0]
        return {"action": "append", "type": Declared(item, bound) if bound else item, "metavar": "VALUE"}
    kinds = {k for k in get_args(base) if k is not type(None)} if get_origin(base) in (Union, UnionType) else {base}
    kind = int if int in kinds else float if float in kinds else str  # `int | str`: a count or `auto`
    return {"type": Declared(kind, bound) if bound else kind}


def _without_none(hint: Any) -> Any:
    """`X | None` -> X; any other annotation as it is."""
    options = [arg for arg in get_args(hint) if arg is not type(None)] if get_origin(hint) in (Union, UnionType) else []
    return options[0] if len(options) == 1 else hint


def add_declared(
    parser: argparse.ArgumentParser,
    cls: type,
    groups: dict[str, Any] | None = None,
    choices: dict[str, list[str]] | None = None,
) -> list[str]:
    """A flag (or positional argument) for each field of `cls` declared with `spec.setting`, in field order, in
    its `--help` group (the field's, else the class's `FLAGS_GROUP`; `groups`: titled groups made before);
    `choices` where a registry, not the declaration, holds them. Returns the dests. The options object comes back
    from the parsed flags with `declared_options`."""
    groups = {} if groups is None else groups
    hints = get_type_hints(cls)
    dests = []
    for f in (f for f in fields(cls) if "help" in f.metadata):
        title = f.metadata["group"] or getattr(cls, "FLAGS_GROUP", None)
        where = parser if title is None else groups.setdefault(title, parser.add_argument_group(title))
        kind = {"choices": choices[f.name]} if choices and f.name in choices else flag_kind(f, hints[f.name])
        dests.append(_add_field(where, f, kind).dest)
    return dests


def _add_field(where: Any, f: Field, kind: dict[str, Any]) -> argparse.Action:
    """One declared field's flag, or its positional argument, in `where` (the parser or one of its groups)."""
    meta = f.metadata
    kind.update({"metavar": meta["metavar"]} if meta["metavar"] else {})
    default = None if f.default is MISSING else [] if isinstance(f.default, tuple) else f.default
    text = field_help(f).replace("%", "%%")
    if meta["positional"]:
        if kind.get("action") == "append":  # several values of one argument (nargs): no flag to repeat
            kind = {"type": kind["type"]}
        nargs = {} if meta["positional"] == "1" else {"nargs": meta["positional"]}
        return where.add_argument(f.name, default=default, help=text, **nargs, **kind)
    names = meta["flag"] or flag(f.name)
    names = (names,) if isinstance(names, str) else names
    return where.add_argument(*names, dest=f.name, default=default, required=meta["required"], help=text, **kind)


def declared_options(cls: type, args: argparse.Namespace, **given: Any) -> Any:
    """`cls` from the parsed flags of its fields (a repeated flag's list as a tuple; a flag left at None for a
    field with a factory: the factory's value), and `given` fields the command decided itself."""
    values = {}
    for f in fields(cls):
        if f.name in given or "help" not in f.metadata or not hasattr(args, f.name):
            continue
        value = getattr(args, f.name)
        if value is None and (f.default is MISSING or isinstance(f.default, tuple)):
            continue  # not given: the factory's or the empty tuple's default
        values[f.name] = tuple(value) if isinstance(value, list) and isinstance(f.default, tuple) else value
    return cls(**values, **given)
