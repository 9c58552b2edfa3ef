"""Faults reported, not hidden: a diverged run, a failed run's cause, a timeout's running ranks."""

from __future__ import annotations

import json
import math
import re

import pytest
from conftest import TINY, run_dlperf

from dlperf.engines.torch.own_work import SLOW_LOADER_ENV
from dlperf.harness.loop import Measurement
from dlperf.harness.results import RankFacts, RunMeasurement
from dlperf.launch.messages import RunResult
from dlperf.launch.one_process import first_meaningful_line
from dlperf.orchestration.kinds import build_record
from dlperf.orchestration.run import plan_jobs
from dlperf.records.load import as_record
from dlperf.records.validate import record_problem
from dlperf.records.written import record_json
from dlperf.reporting.aggregate import summarise
from dlperf.workloads import check_spec, spec_from_mapping


def measured_record(loss_last: float, tmp_path) -> dict:
    spec = spec_from_mapping({"model": "resnet50", "device": "cpu", "batch_size": 4, "image_size": 32})
    job = plan_jobs(spec, check_spec(spec), [1], tmp_path)[0]
    measurement = Measurement(
        iters=10, global_batch=4, elapsed_s=2.0, first_step_s=0.5, window_throughputs=[20.0, float("inf")],
        step_ms=[200.0] * 10, loss_first=2.3, loss_last=loss_last,
    )  # fmt: skip
    ranks = [RankFacts(rank=0, host="h", device="cpu", peak_memory_mib={"allocated": float("nan")})]
    result = RunResult(measured=RunMeasurement(measurement, ranks, "cpu"))
    return record_json(build_record(job, result, {"python": "3.11"}, 1.0, 3.0))  # the JSON the codec writes


@pytest.mark.parametrize("loss", [float("nan"), float("inf"), -float("inf")])
def test_diverged_run_is_strict_json_and_never_a_speed(tmp_path, loss):
    record = measured_record(loss, tmp_path)
    assert record["status"] == "diverged" and "loss diverged" in record["error"]
    text = json.dumps(record, allow_nan=False)  # raises on any NaN or infinity left
    assert '"loss_last": null' in text and record["window_throughputs"] == [20.0, None]
    assert record_problem(record) is None  # a valid record, reported as not ok
    ok = measured_record(1.9, tmp_path)
    assert ok["status"] == "ok" and math.isclose(ok["throughput"], 20.0)
    (case,) = summarise([ok, record])[("resnet50", ok["group"])]
    assert case.speeds == [ok["throughput"]] and case.failed == [as_record(record)]


@pytest.mark.parametrize(
    "message,expected",
    [
        (
            'RuntimeError: DefaultCPUAllocator: not enough memory: you tried to allocate 6442450944 bytes.\n"',
            "RuntimeError: DefaultCPUAllocator: not enough memory: you tried to allocate 6442450944 bytes.",
        ),
        ('"\nValueError: batch 100000 does not fit\n  File "x.py", line 3\n', "ValueError: batch 100000 does not fit"),
        (
            "RuntimeError:\n  CUDA out of memory. Tried to allocate 2.00 GiB\n",
            "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
        ),
        ("", ""),
        ("x" * 2000, "x" * 500 + "..."),
    ],
)
def test_failure_keeps_the_first_meaningful_line(message, expected):
    assert first_meaningful_line(message) == expected


@pytest.mark.slow
def test_timeout_names_every_rank_and_its_state(tmp_path):
    """Past a 30 s --timeout every rank is named, running or not yet started: on a loaded 2-core machine torch's
    import alone can take the ranks past 30 s, so which state each is in depends on the machine, but that each is
    named does not. Each batch comes 1 s late (the slow-loader hook), so started ranks wait asleep."""
    args = ["run", *TINY, "--devices-per-node", "2", "--iters", "100000", "--print-every", "1000", "--timeout", "30"]
    done = run_dlperf([*args, "--out", str(tmp_path)], timeout=300, env={SLOW_LOADER_ENV: "1000"})
    record = json.loads(next(tmp_path.rglob("*.json")).read_text())
    assert done.returncode == 1 and record["status"] == "failed"
    said = re.fullmatch(r"timed out after 30 s with (.+): raise --timeout or lower --iters", record["error"])
    assert said, record["error"]
    states = re.findall(r"ranks? ([\d, ]+) (still running|not yet started)", said[1])
    named = [int(rank) for ranks, _ in states for rank in ranks.split(", ")]
    assert sorted(named) == [0, 1], record["error"]


def test_a_commands_password_is_never_written_into_its_record(tmp_path):
    """A --command that names a store with its password (a script's own --db): the record's `command` and its
    config's carry it masked, and nothing else in the record holds it."""
    command = "python train.py --db postgresql://trainer:Sekr3t-pw@127.0.0.1:5432/runs"
    spec = spec_from_mapping({"model": "resnet50", "device": "cpu", "command": command})
    job = plan_jobs(spec, check_spec(spec), [1], tmp_path)[0]
    record = record_json(build_record(job, RunResult.failed("the command exited with code 1"), {}, 1.0, 3.0))
    assert "Sekr3t" not in json.dumps(record)
    assert record["command"] == record["config"]["command"] == command.replace("Sekr3t-pw", "***")
