"""Argument types and the parser every command uses: a usage error is one line."""

from __future__ import annotations

import argparse
import difflib
import math
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from dlperf.secrets import mask


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line that points at --help, and an unknown flag names the closest ones.
    `every_command` builds the parser of every command, for naming the command an unknown flag belongs to."""

    def __init__(self, *args: Any, every_command: Callable[[], argparse.ArgumentParser] | None = None, **kw: Any):
        super().__init__(*args, **kw)
        self.every_command = every_command

    def error(self, message: str) -> NoReturn:
        hint = self._did_you_mean(message) if message.startswith("unrecognized arguments:") else ""
        sys.stderr.write(f"{self.prog}: error: {mask(message)}{hint} (see {self.prog} --help)\n")  # it quotes argv
        raise SystemExit(2)

    def _did_you_mean(self, message: str) -> str:
        """`; --batchsize: did you mean --batch-size?` for each unknown `--flag`, from the flags of this parser and its
        command (argparse reports a command's unknown flags from the top parser); where none is close, the other
        commands that take the flag (`--resume` is sweep's, not run's), and for a sweep a key of its file."""
        commands = subcommands(self)
        known = set(self._option_string_actions).union(*(sub._option_string_actions for sub in commands.values()))
        guesses = []
        for word in message.removeprefix("unrecognized arguments:").split():
            name = word.split("=", 1)[0]
            if not name.startswith("--"):
                continue
            close = difflib.get_close_matches(name, known, n=1, cutoff=CLOSE)
            if close:
                guesses.append(f"{name}: did you mean {close[0]}?")
            elif self.every_command and (hint := _elsewhere(name, list(commands), self.every_command())):
                guesses.append(f"{name}: {hint}")
        return "".join(f"; {guess}" for guess in guesses)


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The commands registered on `parser` (only the one named, where the arguments name one), by name."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {name: sub for action in subs for name, sub in action.choices.items()}


CLOSE = 0.75  # difflib's ratio for a misspelling (--batchsize: 0.87); --resume and --repeat (0.62) are not one


def _elsewhere(name: str, named: list[str], everyone: argparse.ArgumentParser) -> str | None:
    """Where an unknown flag of the named command belongs: other commands' flag; for a sweep, a run flag is a key
    of its file (every run setting is one)."""
    others = {command: sub for command, sub in subcommands(everyone).items() if command not in named}
    owners = [command for command, sub in others.items() if name in sub._option_string_actions]
    if not owners:
        return None
    if named == ["sweep"] and "run" in owners:
        key = name.removeprefix("--").replace("-", "_")
        return f"not a flag of dlperf sweep: set `{key}:` in the sweep file (or pass {name} to dlperf run)"
    here = f"dlperf {named[0]}" if len(named) == 1 else "this command"
    return f"a flag of {' and '.join(f'dlperf {c}' for c in owners)}, not of {here}"


def non_empty(text: str) -> str:
    """A path or a name: an empty one (`--out ''`) would mean the current folder or no name at all."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0 or str(value) != text.strip().lstrip("+"):
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    if text.strip().isdigit():
        return int(text)
    raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}")


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < math.inf:  # inf: a timeout never ends, a cap or bucket of inf bytes is no size
        raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text!r}")
    return value


def positive_int_or_auto(text: str) -> int | str:
    """A positive count, or `auto` (the flag's own rule decides: warm up until steady, the CPU's share...)."""
    if text.strip() == "auto":
        return "auto"
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        near = " (did you mean auto?)" if difflib.get_close_matches(text.strip(), ["auto"], cutoff=0.5) else ""
        raise argparse.ArgumentTypeError(f"must be a positive integer or auto, got {text!r}{near}") from None


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative number, got {text!r}")
    return value
