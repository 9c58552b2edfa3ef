"""`dlperf`: the command line. Each subcommand lives in its own module with `register` and `run`."""

from __future__ import annotations

import argparse
import signal
import sys
import traceback

from dlperf import __version__
from dlperf.cli import (
    commbench_cmd,
    compare_cmd,
    env_cmd,
    extract_cmd,
    history_cmd,
    maxbatch_cmd,
    peak_cmd,
    predict_cmd,
    report_cmd,
    run_cmd,
    sweep_cmd,
)
from dlperf.cli.args import Parser
from dlperf.errors import DlperfError, clip

COMMANDS = (
    run_cmd,
    sweep_cmd,
    report_cmd,
    extract_cmd,
    compare_cmd,
    history_cmd,
    env_cmd,
    peak_cmd,
    commbench_cmd,
    maxbatch_cmd,
    predict_cmd,
)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks on errors")
    parser = Parser(
        prog="dlperf",
        description="Benchmark deep-learning training speed and scaling, and report it like the published tables.",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"dlperf {__version__}")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for command in COMMANDS:
        command.register(sub, common)
    return parser


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
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = getattr(args, "debug", False)
    try:
        return int(args.func(args) or 0)
    except DlperfError as error:
        if debug:
            traceback.print_exc()
        print(f"dlperf: error: {clip(str(error))}", file=sys.stderr)
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
            raise
        print(
            f"dlperf: internal error: {type(error).__name__}: {clip(str(error))} "
            "(rerun with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
