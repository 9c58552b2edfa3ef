"""`dlperf`: the command line. Each subcommand lives in its own module, imported only when it is the command named
(all of them for `dlperf --help`), so a reading command never loads a running one: its `DESCRIPTION`, its flags
(`OPTIONS`: the dataclasses whose fields are flags and the functions that add flags several commands share;
`register(parser)` for the rest) and its `run`."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import signal
import sys
import traceback
from collections.abc import Sequence

from dlperf import __version__
from dlperf.cli.declared_flags import add_declared
from dlperf.cli.parser import Parser
from dlperf.cli.subcommands import SUBCOMMANDS, SUMMARIES
from dlperf.errors import DlperfError, clip
from dlperf.secrets import learn, mask


def named_subcommand(argv: Sequence[str]) -> str | None:
    """The subcommand the arguments name (the first that is not an option; the top level's options take no
    value), or None where none is named or the name is unknown: then every one registers, for help and errors."""
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    return first if first in SUBCOMMANDS else None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for `argv`'s subcommand only (every subcommand without `argv`)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks on errors")
    parser = Parser(
        prog="dlperf",
        description="Benchmark deep-learning training speed and scaling, and report it like the published tables.",
        parents=[common],
        every_subcommand=build_parser,
    )
    parser.add_argument("--version", action="version", version=f"dlperf {__version__}")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for name in _registered(argv, sub):
        register(sub, common, name)
    return parser


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser, name: str) -> None:
    """The subcommand's parser, from what its module declares."""
    module = importlib.import_module(SUBCOMMANDS[name])
    parser = sub.add_parser(name, parents=[common], help=SUMMARIES[name], description=module.DESCRIPTION)
    for options in getattr(module, "OPTIONS", ()):  # options dataclasses, and functions that add shared flags
        if dataclasses.is_dataclass(options):
            add_declared(parser, options)
        else:
            options(parser)
    if hasattr(module, "register"):
        module.register(parser)
    parser.set_defaults(func=module.run)


def _registered(argv: Sequence[str] | None, sub: argparse._SubParsersAction) -> list[str]:
    """The subcommands whose parsers `argv` needs: the one it names; none for `--version`; for `--help` alone none
    either, their list made from their summaries (no subcommand's module imported); else every subcommand, for
    help and errors."""
    named = named_subcommand(argv) if argv is not None else None
    if named or argv is None:
        return [named] if named else list(SUBCOMMANDS)
    if "--version" in argv:
        return []  # answered before any subcommand is looked at
    if list(argv) in (["-h"], ["--help"]):
        for name in SUBCOMMANDS:
            sub.add_parser(name, help=SUMMARIES[name])
        return []
    return list(SUBCOMMANDS)


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C but remembered, so the exit status is the shell's 128 + 15 = 143."""

    exit_code = 128 + signal.SIGTERM


def _interrupt_on_sigterm() -> None:
    """Treat SIGTERM like Ctrl-C, so a stopped sweep still stops its workers and keeps what it measured."""

    def handler(signum, frame):
        raise Terminated

    signal.signal(signal.SIGTERM, handler)


def main(argv: list[str] | None = None) -> int:
    _interrupt_on_sigterm()
    argv = sys.argv[1:] if argv is None else argv
    learn(argv)  # a password given on the command line is masked in every message, in whatever shape it is quoted
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    debug = getattr(args, "debug", False)
    try:
        return int(args.func(args) or 0)
    except DlperfError as error:
        if debug:
            _print_traceback()
        print(f"dlperf: error: {clip(mask(error))}", file=sys.stderr)
        return error.exit_code
    except Terminated:
        print("dlperf: terminated (SIGTERM)", file=sys.stderr)
        return Terminated.exit_code
    except KeyboardInterrupt:
        print("dlperf: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like: not an error
        sys.stderr.close()
        return 0
    except Exception as error:  # a bug, not bad input: say so in one line unless asked for the traceback
        if debug:
            _print_traceback()
            return 1
        print(
            f"dlperf: internal error: {type(error).__name__}: {clip(mask(error))} "
            "(rerun with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1


def _print_traceback() -> None:
    """The traceback `--debug` asks for, masked like every message: a library's error in it may quote a password."""
    print(mask(traceback.format_exc()), file=sys.stderr, end="")


if __name__ == "__main__":
    sys.exit(main())
