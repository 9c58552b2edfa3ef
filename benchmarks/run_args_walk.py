"""How many files a reader crosses following `dlperf run`'s arguments from the command line to the RunSpec (issue 40).

    python benchmarks/run_args_walk.py            # the count, and the files with their functions
    python benchmarks/run_args_walk.py --json     # the same as JSON

The walk: `cli.main.main(argv)` for a `dlperf run` command line (the default case's flags, --dry-run), from the
parser's construction through parsing to the `RunSpec` the run command hands to `run_one` (which is stopped at its
call: launching is not part of the walk). Every function of dlperf's sources that runs in between is recorded by
a profiler hook; the modules are imported before the walk starts, so what an import runs is not counted, only what
these arguments make happen.

- files: the distinct source files under src/dlperf with a function that ran: what a reader opens to follow
  the arguments.
- hops: the distinct (caller file, callee file) pairs among those calls, where the caller is the nearest dlperf
  frame above the callee (argparse calling a flag's type function counts as the parser's file calling it): how
  often following the arguments means leaving one file for another.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections import defaultdict
from pathlib import Path
from types import FrameType
from typing import Any

ARGV = ["run", "--model", "resnet50", "--device", "cpu", "--batch-size", "8", "--iters", "4", "--dry-run"]


class Reached(Exception):
    """Raised where the run command hands the spec on: the walk ends there."""


def walk(argv: list[str], to_commands: bool) -> tuple[dict[str, set[str]], set[tuple[str, str]]]:
    """The functions run per file, and the file-crossing call pairs, while `argv` becomes a RunSpec (and with
    `to_commands`, until --dry-run has printed the commands the run would start)."""
    import dlperf

    root = Path(dlperf.__file__).parent
    main = importlib.import_module("dlperf.cli.main")
    run_cmd = importlib.import_module("dlperf.cli.run_cmd")

    def stop(*args: Any, **kwargs: Any) -> None:
        raise Reached

    handed_on = run_cmd.run_one
    if not to_commands:
        run_cmd.run_one = stop
    functions: dict[str, set[str]] = defaultdict(set)
    hops: set[tuple[str, str]] = set()

    def ours(frame: FrameType | None) -> str | None:
        path = Path(frame.f_code.co_filename) if frame is not None else None
        return str(path.relative_to(root)) if path is not None and path.is_relative_to(root) else None

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or (here := ours(frame)) is None or frame.f_code.co_name == "<module>":
            return
        functions[here].add(frame.f_code.co_qualname)
        caller = frame.f_back
        while caller is not None and ours(caller) is None:
            caller = caller.f_back
        if caller is not None and (there := ours(caller)) != here and there is not None:
            hops.add((there, here))

    sys.setprofile(profile)
    try:
        parsed = main.build_parser(argv).parse_args(argv)  # what cli.main.main does, without its error handling
        parsed.func(parsed)
    except Reached:
        pass
    finally:
        sys.setprofile(None)
        run_cmd.run_one = handed_on
    return dict(functions), hops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--to-commands", action="store_true", help="follow on through run_one until --dry-run printed the commands"
    )
    args = parser.parse_args()
    functions, hops = walk(ARGV, args.to_commands)
    if args.json:
        print(json.dumps({"files": len(functions), "hops": len(hops), "functions": {
            path: sorted(names) for path, names in sorted(functions.items())}}, indent=2))  # fmt: skip
        return
    print(f"dlperf {' '.join(ARGV)}: {len(functions)} files, {len(hops)} hops")
    for path, names in sorted(functions.items()):
        print(f"  {path}: {', '.join(sorted(names))}")


if __name__ == "__main__":
    main()
