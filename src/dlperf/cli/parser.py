"""Argument types and the parser every subcommand uses: a usage error is one line."""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from dlperf.secrets import mask
from dlperf.spec import AUTO, AUTO_BOUND, value_problem


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line that points at --help, and an unknown flag names the closest ones.
    `every_subcommand` builds the parser of every subcommand, for naming the one an unknown flag belongs to."""

    def __init__(self, *args: Any, every_subcommand: Callable[[], argparse.ArgumentParser] | None = None, **kw: Any):
        super().__init__(*args, **kw)
        self.every_subcommand = every_subcommand

    def error(self, message: str) -> NoReturn:
        hint = self._did_you_mean(message) if message.startswith("unrecognized arguments:") else ""
        sys.stderr.write(f"{self.prog}: error: {mask(message)}{hint} (see {self.prog} --help)\n")  # it quotes argv
        raise SystemExit(2)

    def _did_you_mean(self, message: str) -> str:
        """`; --batchsize: did you mean --batch-size?` for each unknown `--flag`, from the flags of this parser and its
        subcommand (argparse reports a subcommand's unknown flags from the top parser); where none is close, the other
        subcommands that take the flag (`--resume` is sweep's, not run's), and for a sweep a key of its file."""
        named = subcommands(self)
        known = set(self._option_string_actions).union(*(sub._option_string_actions for sub in named.values()))
        guesses = []
        for word in message.removeprefix("unrecognized arguments:").split():
            name = word.split("=", 1)[0]
            if not name.startswith("--"):
                continue
            close = difflib.get_close_matches(name, known, n=1, cutoff=CLOSE)
            if close:
                guesses.append(f"{name}: did you mean {close[0]}?")
            elif self.every_subcommand and (hint := _elsewhere(name, list(named), self.every_subcommand())):
                guesses.append(f"{name}: {hint}")
        return "".join(f"; {guess}" for guess in guesses)


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands registered on `parser` (only the one named, where the arguments name one), by name."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {name: sub for action in subs for name, sub in action.choices.items()}


CLOSE = 0.75  # difflib's ratio for a misspelling (--batchsize: 0.87); --resume and --repeat (0.62) are not one


def _elsewhere(name: str, named: list[str], everyone: argparse.ArgumentParser) -> str | None:
    """Where an unknown flag of the named subcommand belongs: other subcommands' flag; for a sweep, a run flag is a
    key of its file (every run setting is one)."""
    others = {other: sub for other, sub in subcommands(everyone).items() if other not in named}
    owners = [other for other, sub in others.items() if name in sub._option_string_actions]
    if not owners:
        return None
    if named == ["sweep"] and "run" in owners:
        key = name.removeprefix("--").replace("-", "_")
        return f"not a flag of dlperf sweep: set `{key}:` in the sweep file (or pass {name} to dlperf run)"
    here = f"dlperf {named[0]}" if len(named) == 1 else "this command"
    return f"a flag of {' and '.join(f'dlperf {c}' for c in owners)}, not of {here}"


class Declared:
    """argparse's type for a declared field: the text read as the field's kind (int, float or str), then spec's
    one check of its bound or choices, so a flag is refused in the words a sweep file's key or a spec's JSON is."""

    def __init__(self, kind: type, bound: str | None = None, choices: tuple = ()):
        self.kind, self.bound, self.choices = kind, bound, tuple(choices)

    def __call__(self, text: str) -> Any:
        value = self._read(text)
        problem = value_problem(value, self.bound, self.kind is int, self.choices)
        if problem is None:
            return value
        if self.bound == AUTO_BOUND and difflib.get_close_matches(text.strip(), [AUTO], cutoff=0.5):
            problem += " (did you mean auto?)"
        raise argparse.ArgumentTypeError(problem)

    def _read(self, text: str) -> Any:
        """The value the text spells, or the text itself where it spells none (the check then names it)."""
        if self.bound == AUTO_BOUND and text.strip() == AUTO:
            return AUTO
        if self.kind is int:
            return int(text) if INTEGER.fullmatch(text) else text
        if self.kind is float:
            try:
                return float(text)
            except ValueError:
                return text
        return text


INTEGER = re.compile(r"\s*[+-]?\d{1,40}\s*")  # a longer one is no count, and int() would refuse past 4300 digits
