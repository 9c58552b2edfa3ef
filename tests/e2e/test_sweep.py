"""Sweeps: the matrix, and an interrupted sweep finished by --resume without losing what was measured."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import run_dlperf
from tiny import tiny_sweep

from dlperf.errors import ConfigError
from dlperf.launch import LaunchOptions, launcher_for
from dlperf.orchestration.sweep_plan import plan_sweep

LOCAL = launcher_for(LaunchOptions())

SWEEP = tiny_sweep(repeats=3)


def test_matrix_expansion():
    plan = plan_sweep(
        {
            "model": "resnet50",
            "topology": ["1n1g", "1n2g"],
            "device": "cpu",
            "matrix": [
                {"precision": "fp32", "batch_size": [128, 160]},
                {"precision": "amp-bf16", "batch_size": 256},
            ],
            "repeats": 2,
        },
        LOCAL,
    )
    assert plan.repeats == 2
    # topology varies fastest, so each published table fills up before the next one starts
    cases = [(c.topology, c.precision, c.workload.batch_size) for c, _ in plan.cases]
    assert cases == [
        ("1n1g", "fp32", 128), ("1n2g", "fp32", 128), ("1n1g", "fp32", 160), ("1n2g", "fp32", 160),
        ("1n1g", "amp-bf16", 256), ("1n2g", "amp-bf16", 256),
    ]  # fmt: skip
    jobs = plan.jobs("out")
    assert len(jobs) == 12
    # table by table; within one, the repeats take turns (1n1g #1, 1n2g #1, 1n1g #2...), so a load that drifts
    # during the table slows every case alike instead of entering the speedup
    order = [(j.spec.topology, j.plan.group, j.repeat) for j in jobs]
    assert order[:6] == [
        ("1n1g", "b128_fp32", 1), ("1n2g", "b128_fp32", 1), ("1n1g", "b128_fp32", 2), ("1n2g", "b128_fp32", 2),
        ("1n1g", "b160_fp32", 1), ("1n2g", "b160_fp32", 1),
    ]  # fmt: skip
    # a CPU device is the same share of the machine in every topology: the cores over the most devices per node
    share = max(1, len(os.sched_getaffinity(0)) // 2)
    assert {c.cpu_threads for c, _ in plan.cases} == {share}
    given = plan_sweep({"model": "resnet50", "topology": ["1n1g", "1n2g"], "device": "cpu", "cpu_threads": 3}, LOCAL)
    assert {c.cpu_threads for c, _ in given.cases} == {3}


def test_matrix_refuses_duplicates_and_mixed_topology_keys():
    with pytest.raises(ConfigError, match="same files"):
        plan_sweep({"model": "resnet50", "device": "cpu", "batch_size": [8, 8]}, LOCAL)
    with pytest.raises(ConfigError, match="not both"):
        plan_sweep({"model": "resnet50", "topology": "1n1g", "nodes": 1}, LOCAL)


def records(out):
    return sorted((out / "resnet50" / "1n1g").glob("*.json"))


@pytest.mark.slow
def test_interrupted_sweep_resumes(tmp_path):
    config = tmp_path / "sweep.yaml"
    config.write_text(SWEEP.replace("repeats: 3\n", ""))  # the file's default would be 5 repeats
    out = tmp_path / "out"
    # Ctrl-C as at a terminal: a job started in the background by a script (CI's runner, say) inherits SIGINT
    # ignored, and Python keeps ignoring an inherited SIG_IGN, so the sweep gets the default disposition back
    proc = subprocess.Popen(
        [sys.executable, "-m", "dlperf", "sweep", str(config), "--out", str(out), "--repeats", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    deadline = time.time() + 180
    while time.time() < deadline and not records(out):
        time.sleep(0.2)
    seen = [p.name for p in records(out)]
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, f"records seen before SIGINT: {seen}\n{stdout[-3000:]}\n{stderr}"
    assert "--resume" in stdout
    done_before = {p.name: p.read_text() for p in records(out)}
    assert len(done_before) == 1  # interrupted in the second

    again = run_dlperf(["sweep", str(config), "--out", str(out)])
    assert again.returncode == 2 and f"dlperf sweep --resume --out {out}" in again.stderr

    # the folder keeps the sweep file and its options: --resume alone finishes it
    resumed = run_dlperf(["sweep", "--resume", "--out", str(out)])
    assert resumed.returncode == 0, resumed.stderr
    assert "skipped" in resumed.stdout
    after = {p.name: p.read_text() for p in records(out)}
    assert sorted(after) == [f"resnet50_b2_fp32_{i}.json" for i in (1, 2)]
    for name, text in done_before.items():
        assert after[name] == text, "a finished run was measured again"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resnet50"]["b2_fp32"]["1n1g"]["repeats"] == 2
    assert (out / "report.md").exists() and (out / "plots" / "resnet50_b2_fp32.png").exists()


class FailingLauncher(type(LOCAL)):
    """Runs nothing: every job 'fails' at once, so a record is written without a process."""

    def describe(self, job):
        return []

    def run(self, job, workdir):
        from dlperf.launch.messages import RunResult

        return RunResult.failed("worker rank 0 on h exited with code 1")


def test_repeats_decision_is_written_with_its_record(tmp_path, monkeypatch):
    """A SIGINT right after a record's write must not leave its `repeats_stop` null: one write holds both."""
    import dlperf.orchestration.run as run_module
    from dlperf.orchestration.sweep_plan import SweepOptions, run_sweep
    from dlperf.records.written import write_record

    def write_then_interrupt(path, data):
        write_record(path, data)
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "write_record", write_then_interrupt)
    launcher = FailingLauncher(LaunchOptions())
    options = SweepOptions(out=str(tmp_path), repeats="auto", max_repeats=3)
    plan = plan_sweep({"model": "resnet50", "device": "cpu", "iters": 2}, launcher, options)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(plan, options, {}, launcher, on_skip=lambda job: None, on_record=lambda job, record: None)
    (path,) = tmp_path.rglob("*.json")
    assert json.loads(path.read_text())["repeats_stop"]["stop"] is False
