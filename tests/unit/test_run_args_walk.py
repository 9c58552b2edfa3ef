"""Following `dlperf run`'s arguments to the RunSpec crosses at most 15 files (issue 40; benchmarks/run_args_walk.py
says how it is counted)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import run_args_walk  # noqa: E402


def test_the_arguments_reach_the_spec_through_at_most_15_files(capsys):
    functions, hops = run_args_walk.walk(run_args_walk.ARGV, to_commands=False)
    assert {"cli/main.py", "cli/run_cmd.py", "orchestration/run.py"} <= set(functions)  # the walk was followed
    assert "run_one" not in functions["orchestration/run.py"]  # and stopped where the spec is handed on
    assert len(functions) <= 15, sorted(functions)
    assert ("cli/run_cmd.py", "orchestration/run.py") in hops
