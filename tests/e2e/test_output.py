"""What a person sees and keeps (issue 11): live progress, output that survives pipes, file modes, exit codes,
readable env, and one clear line for each refusal."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import TINY, run_cli
from report_records import record
from tiny import tiny_sweep

from dlperf.cli.display import eta_text, percent
from dlperf.cli.env_cmd import env_lines
from dlperf.cli.live import LogFollower
from dlperf.launch.hosts import Host, slots_per_node
from dlperf.records.runlog import RunLogWriter, WarmupLine, WindowLine
from dlperf.records.store import write_json_atomic, write_text_atomic

SCRIPTS = Path(__file__).parents[1] / "fixtures" / "scripts"


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_atomic_writes_respect_the_umask(tmp_path, umask_022, capsys):
    write_text_atomic(tmp_path / "a.txt", "x")
    write_json_atomic(tmp_path / "r" / "a.json", {"a": 1})
    assert mode(tmp_path / "a.txt") == 0o644 and mode(tmp_path / "r" / "a.json") == 0o644
    # report.md, summary.json and the plots of a results folder
    for i, speed in enumerate([100.0, 101.0], 1):
        write_json_atomic(tmp_path / "res" / "resnet50" / "1n1g" / f"r_{i}.json", record("1n1g", i, speed))
    code, _, err = run_cli(["report", str(tmp_path / "res")], capsys)
    assert code == 0, err
    for name in ("report.md", "summary.json", "plots/resnet50_b128_fp32.png", "resnet50/1n1g/r_1.json"):
        assert mode(tmp_path / "res" / name) == 0o644, name
    os.umask(0o077)  # a private umask is respected too
    write_text_atomic(tmp_path / "p.txt", "x")
    assert mode(tmp_path / "p.txt") == 0o600


def test_history_table_into_a_pipe_keeps_every_cell_whole(tmp_path, capsys):
    """capsys is not a terminal: plain lines, no 80-column wrap, no ellipsis, no 1970 date."""
    label = "a-long-label-" + "x" * 90
    rec = record("1n1g", 1, 123.45, started_at=None, env={"git": {"commit": "c" * 40}})
    write_json_atomic(tmp_path / "res" / "resnet50" / "1n1g" / "r_1.json", rec)
    db = tmp_path / "deep" / ("folder-" * 12) / "h.sqlite"
    assert run_cli(["history", "add", str(tmp_path / "res"), "--db", str(db), "--label", label], capsys)[0] == 0
    code, out, _ = run_cli(["history", "show", "--db", str(db)], capsys)
    assert code == 0
    assert f"history in {db}" in out.splitlines()  # the long path whole, on one line
    row = next(line for line in out.splitlines() if line.startswith("resnet50"))
    assert label in row and "123.45" in row and "not recorded" in row and "…" not in out and "1970" not in out


def test_percent_and_eta():
    assert percent(0.527) == "52.7%" and percent(None) == "n/a" and percent(1e-6) == "<0.1%"
    assert eta_text(360.0, 4) == "4 runs left, ETA 6m00s"
    assert eta_text(None, 2) == "2 runs left, ETA after the first run" and eta_text(5.0, 0) == ""


def test_eta_counts_each_run_at_its_own_cases_pace(tmp_path, monkeypatch):
    """Two 1n1g runs of 60 s done: the 1n2g runs left are counted at 60 s and said to be a lower bound; once a 1n2g
    run took 300 s, the other 1n2g run is counted at 300 s, not at the mean of all."""
    from dlperf.cli.sweep_cmd import SweepClock
    from dlperf.orchestration.run import plan_jobs
    from dlperf.workloads import check_spec, spec_from_mapping

    jobs = []
    for devices in (1, 2):
        spec = spec_from_mapping({"model": "resnet50", "device": "cpu", "batch_size": 4, "devices_per_node": devices})
        jobs += plan_jobs(spec, check_spec(spec), [1, 2], tmp_path)
    now = [0.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    clock = SweepClock(jobs)
    for job, took in zip(jobs[:2], (60.0, 60.0)):
        now[0] += took
        clock.finish(job)
    assert clock.eta() == "2 runs left, ETA 2m00s or more (resnet50 1n2g b4_fp32 not yet timed)"
    now[0] += 300.0
    clock.finish(jobs[2])
    assert clock.eta() == "1 run left, ETA 5m00s"


def test_log_follower_prints_each_event_as_it_lands(tmp_path):
    log = tmp_path / "run.log"
    seen: list[str] = []
    with LogFollower(log, seen.append, extra=lambda speed: f"{speed * 2:.0f} tokens/s", poll_s=0.05):
        time.sleep(0.2)
        writer = RunLogWriter(log)
        writer.config({"world_size": 2, "warmup_iters": 3, "compile": True})
        writer.warmup(WarmupLine(3, 12.5, 14.25, time.time()))
        writer.window(WindowLine(20, 40, 6.5, 100.0, 80.0, time.time()))
        writer.warmup(WarmupLine(3, 0.4, 7.9, time.time(), compile_s=63.04))  # JAX: compiled before the first step
        writer.close()
        time.sleep(0.3)
    assert seen[0] == "ranks up (2): warming up 3 iterations (with torch.compile: the first step compiles)"
    assert seen[1] == "warm-up done in 14.2 s (first step, start-up and compile: 12.5 s); timing"
    assert seen[2] == "iter 20/40  loss 6.5000  100.00 samples/s  80.0 ms/iter  200 tokens/s"
    # the record's compile_s (63 s) is in the line, not hidden behind a 7.9 s warm-up
    assert seen[3] == "warm-up done in 7.9 s after 63.0 s of compiling (first step: 0.4 s); timing"


def test_log_follower_names_what_follows_the_last_timed_window(tmp_path):
    """The sync ablation after a 1n2g run's last window is said, with its length, and so is its silent phase: not
    minutes of an unlabelled '... timing: N s'."""
    log = tmp_path / "run.log"
    seen: list[str] = []
    with LogFollower(log, seen.append, quiet_s=0.2, poll_s=0.05):
        time.sleep(0.1)
        writer = RunLogWriter(log)
        writer.config({"world_size": 2, "warmup_iters": 2, "ablate": "sync"})
        writer.window(WindowLine(6, 6, 6.5, 100.0, 500.0, time.time()))
        time.sleep(0.5)
        writer.close()
    assert (
        "timed window done; sync ablation: 6 steps without and 6 with gradient synchronisation, about 6 s" in (seen[2])
    )
    assert seen[3].startswith("... sync ablation: ")


def test_log_follower_says_how_long_a_silent_phase_lasts(tmp_path):
    seen: list[str] = []
    with LogFollower(tmp_path / "none.log", seen.append, quiet_s=0.1, poll_s=0.05):
        time.sleep(0.35)
    assert seen and seen[0].startswith("... starting the ranks: ")


def test_env_text_is_readable_and_claims_no_cuda_without_a_gpu():
    env = {"host": "vm", "cpu": "Xeon", "cpu_cores": 2, "cpu_threads": 2, "memory_gib": 23.5, "os": "Linux",
           "python": "3.11.7", "gpus": [], "topology": None, "git": {"commit": "abc", "dirty": True},
           "torch": "2.15.0+cu132", "torchvision": "0.29.2", "cuda_available": False, "cuda": None, "cudnn": None,
           "nccl": None, "jax": None}  # fmt: skip
    text = "\n".join(env_lines(env))
    assert "{" not in text and "None" not in text
    assert "CUDA" not in text.replace("no CUDA, cuDNN or NCCL version is claimed", "")
    assert "dlperf commit  abc (uncommitted changes)" in text and "jax" in text and "not installed" in text
    gpu = {**env, "gpus": [{"index": 0, "name": "NVIDIA H100", "memory_mib": 81559, "driver": "550.54"}],
           "cuda_available": True, "cuda": "12.4", "cudnn": 90100, "nccl": "2.21.5"}  # fmt: skip
    text = "\n".join(env_lines(gpu))
    assert "GPU 0          NVIDIA H100, 81559 MiB, driver 550.54" in text
    assert "CUDA           12.4, cuDNN 90100, NCCL 2.21.5" in text


def test_hostfile_slots_set_processes_per_node():
    assert slots_per_node([Host("a", 4), Host("b", 2)]) == 2
    assert slots_per_node([Host("a", 4), Host("b")]) is None and slots_per_node([]) is None


def test_hostfile_slots_in_a_dry_run(tmp_path, capsys):
    hostfile = tmp_path / "hosts.txt"
    hostfile.write_text("node1 slots=2\nnode2 slots=2\n")
    code, out, err = run_cli(["run", *TINY, "--hostfile", str(hostfile), "--dry-run"], capsys)
    assert code == 0, err
    assert "# resnet50 2n2g repeat 1" in out and '"nproc_per_node": 2' in out
    code, out, _ = run_cli(["run", *TINY, "--hostfile", str(hostfile), "--devices-per-node", "1", "--dry-run"], capsys)
    assert code == 0 and "# resnet50 2n1g repeat 1" in out  # the flag wins over slots


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["run", "--model", "resnet50", "--case", "DP_8x1x1_16_1536x16"], ["'case'", "--model gpt"]),
        (["compare", "a", "b", "--threshold", "-1"], ["--threshold", "-1"]),
        (["history", "show", "--db", "/nonexistent-dlperf/h.sqlite"], ["does not exist", "history add"]),
    ],
)
def test_refusals_are_one_line(args, needles, capsys):
    from conftest import assert_one_line_error

    code, _, err = run_cli(args, capsys)
    assert_one_line_error(code, err, *needles)
    assert not Path("/nonexistent-dlperf").exists()


def test_sweep_file_errors_name_the_file_and_the_key(tmp_path, capsys):
    from conftest import assert_one_line_error

    bad = tmp_path / "bad.yaml"
    bad.write_text("model: resnet50\nbatch_size: -4\ndevice: cpu\n")
    code, _, err = run_cli(["sweep", str(bad), "--out", str(tmp_path / "out")], capsys)
    assert_one_line_error(code, err, f"sweep file {bad}: batch_size must be a positive integer")
    assert "--batch-size" not in err


SWEEP = tiny_sweep(repeats=2)


def test_resume_that_keeps_failed_runs_exits_1_and_names_retry_failed(tmp_path, capsys):
    config = tmp_path / "sweep.yaml"
    config.write_text(SWEEP)
    out = tmp_path / "out"
    folder = out / "resnet50" / "1n1g"
    group = "b2_fp32"
    ok = record("1n1g", 1, 100.0, group=group, sweep_id="s1")
    write_json_atomic(folder / f"resnet50_{group}_1.json", ok)
    write_json_atomic(folder / f"resnet50_{group}_2.json", record("1n1g", 2, None, group=group, sweep_id="s1"))
    code, stdout, err = run_cli(["sweep", str(config), "--out", str(out), "--resume"], capsys)
    assert code == 1, err
    assert "failed before, kept" in stdout
    assert f"dlperf sweep --resume --out {out} --retry-failed" in stdout
    assert "sweep s1:" in stdout  # the resumed sweep keeps its id


def test_sweep_api_tells_its_events_in_order_and_returns_its_outcome(tmp_path):
    """orchestration.sweep, the call `dlperf sweep` makes: every event typed and in order, the kept runs skipped
    (one failed before), the report written, the outcome saying so; the folder keeps the options given."""
    from dlperf.launch import LaunchOptions
    from dlperf.orchestration.sweep import Ended, Planned, Skipped, Started, sweep_to_report
    from dlperf.orchestration.sweep_plan import SweepOptions
    from dlperf.orchestration.sweep_state import load_sweep_options

    config = tmp_path / "sweep.yaml"
    config.write_text(SWEEP)
    out, group = tmp_path / "out", "b2_fp32"
    folder = out / "resnet50" / "1n1g"
    write_json_atomic(folder / f"resnet50_{group}_1.json", record("1n1g", 1, 100.0, group=group, sweep_id="s1"))
    write_json_atomic(folder / f"resnet50_{group}_2.json", record("1n1g", 2, None, group=group, sweep_id="s1"))
    events: list = []
    options = SweepOptions(config=str(config), out=str(out), resume=True)
    outcome = sweep_to_report(options, LaunchOptions(), events.append, {"repeats": None})
    assert [type(e) for e in events] == [Planned, Started, Skipped, Skipped, Ended]
    assert events[0].sweep_id == "s1" and [e.failed_before for e in events[2:4]] == [False, True]
    assert outcome is not None and outcome.ran == [] and outcome.skipped == 2 and outcome.failed == []
    assert [job.repeat for job in outcome.failed_before] == [2] and (outcome.report / "report.md").is_file()
    assert outcome.resume == f"dlperf sweep --resume --out {out}"
    assert load_sweep_options(out) == {"config": str(config), "options": {"repeats": None}}


def test_sigterm_exits_143(tmp_path):
    """SIGTERM to `dlperf run` once its log has a window line: exit 143, said on stderr (a script printing dlperf's
    window lines stands in for a framework: the parent's handling is what is tested). The live lines through a
    pipe and the files' modes are test_run.py's, on its one-process run."""
    command = f"{sys.executable} {SCRIPTS / 'loud_windows.py'} --windows 100000 --iters-per-window 1 --gap-s 0.1"
    proc = subprocess.Popen(
        [sys.executable, "-m", "dlperf", "run", "--model", "resnet50", "--batch-size", "32", "--command", command,
         "--log-format", "dlperf", "--out", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.time() + 180
    while time.time() < deadline and not any("iter " in p.read_text() for p in tmp_path.rglob("*.log")):
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    assert "terminated (SIGTERM)" in stderr
