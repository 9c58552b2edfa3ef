"""One codec for every record and every message between processes: pydantic's TypeAdapter over dlperf's own
stdlib dataclasses, which gives validation, the JSON dump and the JSON Schema from the one declaration.

Validation is strict and goes through JSON text, as every record and message crosses a file or a pipe: an integer
field refuses `true`, `"3"` and `3.0`, a number refuses NaN and the infinities, and a mapping becomes its declared
dataclass at every depth (strict mode's Python input would ask for the instances themselves). Keys a dataclass
does not declare are left out, never an error: a newer dlperf's record stays readable.
"""

from __future__ import annotations

import functools
import json
from typing import Any, TypeVar

import pydantic

from dlperf.errors import ResultsError

T = TypeVar("T")


@functools.cache
def adapter(kind: Any) -> pydantic.TypeAdapter[Any]:
    return pydantic.TypeAdapter(kind)


class DecodeError(ResultsError):
    """A record's or a message's value that is not of its declared type: one line naming the field
    (`energy.joules 'x' is not a finite number`)."""


def decode(kind: type[T], data: Any, strict: bool = True) -> T:
    """`data` (a JSON value: parsed, or as a writer built it) as `kind`, checked; DecodeError says what is wrong."""
    return decode_json(kind, json.dumps(data), strict)


def decode_json(kind: type[T], text: str | bytes, strict: bool = False) -> T:
    """JSON text as `kind`, checked. A message between dlperf's own processes is read laxly (an integral float
    where an integer is declared passes, as `json` would have kept it); a record, which a user may edit, strictly."""
    try:
        return adapter(kind).validate_json(text, strict=strict)
    except pydantic.ValidationError as error:
        raise DecodeError(problem_line(error)) from None


def dump(value: Any) -> Any:
    """A dataclass (or a list or mapping of them) as plain values for `json`, every field kept (a NaN stays NaN: a
    diverged loss must cross a process as one)."""
    return adapter(type(value)).dump_python(value)


def dump_json(value: Any) -> str:
    return json.dumps(dump(value))


# pydantic's error types, in the words dlperf's messages use
_WORDS = {
    "bool_type": "is not true or false",
    "int_type": "is not an integer",
    "int_from_float": "is not an integer",
    "float_type": "is not a finite number",
    "finite_number": "is not a finite number",
    "string_type": "is not text",
    "list_type": "is not a list",
    "dict_type": "is not a mapping",
    "dataclass_type": "is not a mapping",
    "none_required": "is not null",
}


def problem_line(error: pydantic.ValidationError) -> str:
    """The first problem as one line: the field's path, its value, what is wrong."""
    first = error.errors()[0]
    path = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in first["loc"] if not _is_union_tag(p))
    path = path.replace(".[", "[")
    kind = first["type"]
    words = _WORDS.get(kind) or (
        f"is not one of {first['ctx']['expected']}" if kind == "literal_error" else str(first["msg"]).lower()
    )
    return f"{path} {short(first.get('input'))} {words}"


def _is_union_tag(part: Any) -> bool:
    """A union member's tag in an error's path (`float`, `list[str]`): not a field."""
    return isinstance(part, str) and (part in ("int", "float", "str", "bool", "none") or "[" in part)


def short(value: Any) -> str:
    text = repr(value) if not isinstance(value, (dict, list)) else type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."
