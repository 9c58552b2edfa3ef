"""What a newcomer tripped on (issue 28), each a check that failed before its fix: estimates, refusals that come
at once, hints that name flags the command has, and numbers printed as a person reads them."""

from __future__ import annotations

from conftest import run_cli

from dlperf.cli.estimate import single_run_estimate
from dlperf.workloads import check_spec, spec_from_mapping


def test_a_command_run_gets_no_resnet50_estimate():
    """A `--command` run's model is only its case label: dlperf's ResNet-50 rate says nothing of the script's
    work (it printed `about 1h02m per run`)."""
    spec = spec_from_mapping({"device": "cpu", "command": "python train.py"})
    assert single_run_estimate(spec, check_spec(spec), {"cpu_cores": 2, "gpus": []}) is None


def test_tensorboard_without_the_package_is_refused_before_the_report(tmp_path, capsys, monkeypatch):
    """Refused after the whole report was written, the rerun was then refused as existing: now nothing is
    written, and the same command runs once the package is there."""
    import importlib.util

    from report_records import record

    from dlperf.records.store import write_json_atomic

    write_json_atomic(tmp_path / "in" / "resnet50" / "1n1g" / "resnet50_b128_fp32_1.json", record("1n1g", 1, 9.0))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorboard" else real(name))
    args = ["report", str(tmp_path / "in"), "--out", str(tmp_path / "out"), "--tensorboard", str(tmp_path / "tb")]
    code, _, err = run_cli(args, capsys)
    assert code == 2 and "needs the tensorboard package" in err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_resume_with_a_flag_the_sweep_never_had_says_so():
    """`--resume --repeats 5` on a sweep whose file set the repeats said `differs from this sweep's stored None`."""
    import pytest

    from dlperf.errors import ConfigError
    from dlperf.orchestration.sweep_state import merge_options

    with pytest.raises(ConfigError) as caught:
        merge_options({"repeats": None}, {"repeats": 5}, {"repeats": None})
    assert "None" not in str(caught.value)
    assert "--repeats 5 was not given when this sweep started (its sweep file decided)" in str(caught.value)
    with pytest.raises(ConfigError, match=r"--repeats 5 differs from this sweep's stored 3 \(sweep_options.json\)"):
        merge_options({"repeats": 3}, {"repeats": 5}, {"repeats": None})


REFUSED_WITHOUT_TORCH = """
import sys
from dlperf.cli.main import main
code = main(sys.argv[1:])
assert "torch" not in sys.modules, "torch was imported before the refusal"
sys.exit(code)
"""


def test_refusals_come_before_the_framework_is_imported(tmp_path):
    """A file as --out said `File exists` after 30 s, and every refusal waited for `import torch` (22 s under
    load): the checks that need no framework come first, and say what is wrong."""
    import subprocess
    import sys

    afile = tmp_path / "afile"
    afile.write_text("")
    run = ["run", "--model", "resnet50", "--device", "cpu", "--image-size", "32", "--iters", "2", "--print-every", "1"]
    existing = tmp_path / "out" / "resnet50" / "1n1g" / "resnet50_b128_fp32_1.json"
    existing.parent.mkdir(parents=True)
    existing.write_text("{}")
    for args, expected in (
        ([*run, "--out", str(afile)], f"--out {afile} is a file, not a results folder"),
        ([*run, "--out", str(tmp_path / "out")], f"{existing} already exists: pass --overwrite"),
    ):
        done = subprocess.run([sys.executable, "-c", REFUSED_WITHOUT_TORCH, *args], capture_output=True, text=True)
        assert done.returncode == 2 and expected in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_a_resumed_sweep_does_not_announce_an_interrupted_runs_old_log(tmp_path):
    """Resume printed `now #2`, `#1 ... skipped`, `now #2`: the interrupted #2's old log looked like a run going
    now. Only a log written since this sweep started is the run going now."""
    import os
    import time

    from dlperf.cli.sweep_cmd import running_log
    from dlperf.launch import LaunchOptions, launcher_for
    from dlperf.orchestration.sweep_plan import plan_sweep

    plan = plan_sweep(
        {"model": "resnet50", "device": "cpu", "image_size": 32, "repeats": 2}, launcher_for(LaunchOptions())
    )
    first, second = plan.jobs(tmp_path)
    for path in (first.paths.log, first.paths.record, second.paths.log):  # #1 done, #2 interrupted mid-run
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
        os.utime(path, (time.time() - 60, time.time() - 60))
    started = time.time()
    assert running_log([first, second], started) is None
    second.paths.log.write_text("[dlperf] config {}\n")  # the resumed sweep starts #2 again
    assert running_log([first, second], started) == (second.paths.log, "now resnet50 1n1g b128_fp32 #2:")


def test_report_and_compare_on_raw_logs_point_to_extract(tmp_path, capsys):
    """Another framework's logs given to report or compare said only `run dlperf run or dlperf sweep first`."""
    from pathlib import Path

    logs = Path(__file__).parents[1] / "fixtures" / "peer-logs" / "tf2-keras-resnet50"
    for args in (["report", str(logs), "--out", str(tmp_path / "r")], ["compare", str(logs), str(logs)]):
        code, _, err = run_cli(args, capsys)
        assert code == 2 and "but 15 log files" in err and f"dlperf extract {logs} --out RECORDS" in err, err


def test_csv_floats_keep_six_significant_digits_in_plain_notation():
    """runs.csv held 45.49100032029272 and 0.022603457605034266: the noise is in the second digit."""
    from dlperf.reporting.export import cell

    assert cell(45.49100032029272) == "45.491" and cell(0.022603457605034266) == "0.0226035"
    assert cell(1234567.8) == "1234568" and cell(2.0) == "2" and cell(1e-9) == "0.000000001"
    assert cell(None) == "" and cell(3) == 3 and cell("noisy") == "noisy" and cell(0.0) == 0.0


def test_a_mistyped_flag_gets_the_closest_flag(capsys):
    code, _, err = run_cli(["run", "--batchsize", "8", "--warmupiters", "2", "--out", "x"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "--batchsize: did you mean --batch-size?; --warmupiters: did you mean --warmup-iters?" in err
    code, _, err = run_cli(["sweep", "configs/quick.yaml", "--ouput", "x"], capsys)
    assert code == 2 and "--ouput: did you mean --out?" in err


def _tour() -> list[list[str]]:
    """The README tour's commands, continuation lines joined, comments dropped, split on `&&`."""
    import shlex
    from pathlib import Path

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    tour = readme.split("## A tour", 1)[1].split("\n## ", 1)[0]
    text = "\n".join(line.split("#", 1)[0] for line in tour.splitlines() if line.startswith("    ")).replace(
        "\\\n", " "
    )
    return [shlex.split(part) for line in text.splitlines() if line.strip() for part in line.split("&&")]


def test_the_readme_tour_parses_and_reads_only_folders_it_made():
    """The tour's `sweep --out results/quick` was refused after the set-up command wrote there, and its `compare
    results/base results/new` named folders it never made: every command parses, every folder a command reads
    was written before (results/quick by the set-up command), and none writes a folder written before."""
    from dlperf.cli.main import build_parser

    written = {"results/quick"}
    commands = [c for c in _tour() if c[:3] != ["pip", "install", "-e"]]  # an extra's install (the JAX engine)
    assert len(commands) >= 10 and all(c[0] == "dlperf" for c in commands)
    for command in commands:
        args = build_parser(command[1:]).parse_args(command[1:])
        name = command[1]
        reads = {"report": getattr(args, "dir", []), "compare": [getattr(args, "base", ""), getattr(args, "new", "")]}
        reads = reads.get(name, [command[3]] if command[1:3] == ["history", "add"] else [])
        assert reads == [] or all(folder in written for folder in reads), (command, written)
        out = getattr(args, "out", None)
        if out and name in ("run", "sweep", "extract"):
            assert name == "run" or out not in written, f"{command} writes into {out}, written before"
            written.add(out)


def test_the_command_list_imports_no_command():
    """`dlperf --help` lists the commands from their summaries (cli/subcommands.py), importing none of their modules:
    it took 10x `--version` when it imported the run machinery; each command's own parser uses the same words."""
    import subprocess
    import sys

    from dlperf.cli.main import build_parser
    from dlperf.cli.parser import subcommands
    from dlperf.cli.subcommands import SUBCOMMANDS, SUMMARIES

    code = (
        "import sys, contextlib\nfrom dlperf.cli.main import main\nwith contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "print(sorted(m for m in sys.modules if m.endswith('_cmd') or m == 'dlperf.orchestration'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
    assert all(f"    {name}" in done.stdout for name in SUBCOMMANDS)
    registered = build_parser()._subparsers._group_actions[0]._choices_actions
    assert {action.dest: action.help for action in registered} == SUMMARIES and set(subcommands(build_parser())) == set(
        SUBCOMMANDS
    )
