"""Reading a sweep file as untrusted input: bounded in size, depth, node count and expanded runs, one line per fault.

A hostile or mistaken file (an alias bomb, `repeats: 1000000000`, a 50 MB list, deep nesting, duplicate keys,
bytes that are not UTF-8) must end in a ConfigError (exit 2) within a small memory and time bound, never in an
internal error or an hour of expanding.
"""

from __future__ import annotations

import contextlib
import math
import reprlib
from pathlib import Path
from typing import Any

import yaml

from dlperf.errors import ConfigError
from dlperf.user_files import read_user_text

MAX_FILE_BYTES = 1 << 20  # a real sweep file is a few hundred bytes
MAX_NODES = 100_000  # scalars, lists and mappings, counting every alias as a copy
MAX_DEPTH = 32
MAX_RUNS = 100_000  # cases x repeats of a whole sweep
MAX_QUOTED = 80  # characters of a value quoted in a message

BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser where installed: faster, same result


class StrictLoader(BaseLoader):
    """The safe loader, refusing a key given twice (YAML keeps the last one silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, "a mapping key must be a plain value, not a list or mapping", key_node.start_mark
                ) from None
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {quote(key)} is given twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, StrictLoader.construct_mapping)


def quote(value: Any, limit: int = MAX_QUOTED) -> str:
    """repr(value) cut to `limit` characters, without first building the whole text of a huge or self-sharing
    value: a message must stay one readable line whatever the input."""
    short = reprlib.Repr()
    short.maxstring = short.maxother = limit
    short.maxlist = short.maxdict = short.maxtuple = short.maxset = 8
    short.maxlevel = 3
    text = short.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_shape(data: Any, path: str) -> None:
    """Walk the loaded value counting every node (aliases count each time, which is how they would expand)."""
    budget = MAX_NODES
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        budget -= 1
        if budget < 0:
            raise ConfigError(f"sweep file {path} expands to more than {MAX_NODES} values (aliases counted as copies)")
        if depth > MAX_DEPTH:
            raise ConfigError(f"sweep file {path} nests deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)


def check_depth(text: str, path: Path) -> None:
    """Refuse nesting deeper than MAX_DEPTH from the pure-Python parser's event stream, which has no depth limit
    of its own: a file that libyaml refused for its nesting gets dlperf's line, whatever libyaml's limit and wording.
    """
    depth = 0
    with contextlib.suppress(yaml.YAMLError):  # a fault other than depth: the caller names libyaml's problem
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    line = event.start_mark.line + 1 if event.start_mark else 0
                    raise ConfigError(f"sweep file {path} nests deeper than {MAX_DEPTH} levels (at line {line})")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1


def load_sweep_file(path: str | Path) -> dict[str, Any]:
    """The sweep file's mapping, or a ConfigError naming what is wrong with it."""
    path = Path(path)
    text = read_user_text(path, "sweep file", MAX_FILE_BYTES)  # a FIFO or device is refused, not waited on
    try:
        data = yaml.load(text, Loader=StrictLoader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as error:
        check_depth(text, path)
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        problem = getattr(error, "problem", None) or "invalid YAML"
        raise ConfigError(f"sweep file {path} does not parse{where}: {problem[:200]}") from None
    except RecursionError:
        raise ConfigError(f"sweep file {path} nests deeper than {MAX_DEPTH} levels") from None
    if not isinstance(data, dict):
        raise ConfigError(f"sweep file {path} must be a mapping of keys to values or lists")
    check_shape(data, str(path))
    return data


def _cases(spec: dict[str, Any], variant: dict[str, Any]) -> int:
    """How many cases one sub-matrix expands to: the product of its lists' lengths."""
    merged = {k: v for k, v in {**spec, **variant}.items() if k != "matrix"}
    return math.prod(len(v) for v in merged.values() if isinstance(v, list))


def check_run_count(spec: dict[str, Any], repeats: Any) -> None:
    """Refuse, before expanding anything, a matrix whose cases x repeats exceed MAX_RUNS."""
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats <= 0:
        raise ConfigError(f"repeats must be a positive integer, got {quote(repeats)}")
    variants = spec.get("matrix", [{}])
    if not isinstance(variants, list) or not all(isinstance(v, dict) for v in variants):
        return  # plan_sweep names this fault
    cases = sum(_cases(spec, variant) for variant in variants)
    if cases * repeats > MAX_RUNS:
        raise ConfigError(
            f"the sweep expands to {cases} cases x {repeats} repeats = {cases * repeats} runs, more than "
            f"{MAX_RUNS}: split it into several sweep files or lower `repeats`"
        )
