"""Argument types and the parser every command uses: a usage error is one line."""

from __future__ import annotations

import argparse
import difflib
import math
import sys
from typing import NoReturn


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line that points at --help, and an unknown flag names the closest ones."""

    def error(self, message: str) -> NoReturn:
        hint = self._did_you_mean(message) if message.startswith("unrecognized arguments:") else ""
        sys.stderr.write(f"{self.prog}: error: {message}{hint} (see {self.prog} --help)\n")
        raise SystemExit(2)

    def _did_you_mean(self, message: str) -> str:
        """`; --batchsize: did you mean --batch-size?` for each unknown `--flag`, from the flags of this parser and its
        commands (argparse reports a command's unknown flags from the top parser)."""
        known = set(self._option_string_actions)
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    known.update(sub._option_string_actions)
        guesses = []
        for word in message.removeprefix("unrecognized arguments:").split():
            name = word.split("=", 1)[0]
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6) if name.startswith("--") else []
            guesses += [f"{name}: did you mean {close[0]}?"] if close else []
        return "".join(f"; {guess}" for guess in guesses)


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
    return "auto" if text.strip() == "auto" else positive_int(text)


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative number, got {text!r}")
    return value
