"""Every run record carries its evidence (steady state, noise, stragglers, energy, counted FLOPs), checked on real
tiny CPU runs, and the report flags what a reader should doubt."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from conftest import run_cli, run_dlperf

from dlperf.records.schema import SCHEMA
from dlperf.records.store import write_json_atomic

SLOW_MS = 1000
SCRIPTS = Path(__file__).parents[1] / "fixtures" / "scripts"


@pytest.fixture(scope="module")
def straggler_run(tmp_path_factory):
    """A real 2-rank gloo ResNet-50 run, rank 1 slowed by SLOW_MS at the start of every forward (the own-work
    clock's test hook), warming up with `--warmup-iters auto` bounded at 6 iterations."""
    out = tmp_path_factory.mktemp("run")
    args = [
        "run", "--model", "resnet50", "--image-size", "32", "--num-classes", "10", "--batch-size", "2",
        "--devices-per-node", "2", "--device", "cpu", "--warmup-iters", "auto", "--max-warmup-iters", "6",
        "--iters", "4", "--print-every", "2", "--out", str(out),
    ]  # fmt: skip
    env = {**os.environ, "DLPERF_TEST_SLOW_RANK": f"1:{SLOW_MS}"}
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "dlperf", *args], capture_output=True, text=True, timeout=600, env=env
    )
    assert result.returncode == 0, result.stderr
    record = json.loads((out / "resnet50" / "1n2g" / "resnet50_b2_fp32_1.json").read_text())
    return record, result.stdout


@pytest.mark.slow
def test_slowed_rank_is_flagged_as_straggler_from_its_own_work(straggler_run):
    record, stdout = straggler_run
    stragglers = record["stragglers"]
    assert stragglers["flagged"] and stragglers["stragglers"] == [1] and stragglers["slowest_rank"] == 1
    assert stragglers["measure"].startswith("own work")
    fast, slow = stragglers["rank_median_ms"]
    assert slow >= SLOW_MS  # its sleep is its own work
    # rank 0's whole step waits for rank 1 in the all-reduce; its own work does not hold that wait
    assert record["latency_ms"]["p50"] > fast + SLOW_MS / 2
    assert "STRAGGLER: rank(s) [1]" in stdout


@pytest.mark.slow
def test_auto_warmup_terminates_within_its_bound(straggler_run):
    record, _ = straggler_run
    warmup = record["warmup"]
    assert warmup["mode"] == "auto" and warmup["max_iters"] == 6
    assert 1 + 2 * 3 > warmup["iters"] - 1 >= 2 * len(warmup["window_throughputs"]) - 2  # first step + windows
    assert warmup["iters"] <= 1 + 6
    steady = record["steady_state"]
    if warmup["stable"]:
        assert steady["stable"] and record["throughput_steady"] > 0
    else:
        assert "max-warmup-iters 6" in warmup["reason"]
    if not steady["stable"]:
        assert record["throughput_steady"] is None and steady["reason"].startswith("never stable")
    assert record["steady_state_iter"] == steady["iteration"]


@pytest.mark.slow
def test_cpu_energy_is_null_with_the_reason_and_noise_is_judged(straggler_run):
    record, _ = straggler_run
    energy = record["energy"]
    assert energy["joules"] is None and energy["joules_per_sample"] is None and energy["reason"]
    assert ("RAPL" in energy["reason"]) or ("powercap" in energy["reason"])
    assert len(record["machine_load"]) == 1 and record["machine_load"][0]["cpu_count"] >= 1
    assert record["noisy"] == bool(record["noise_reasons"])
    assert record["window_cv"] is not None


@pytest.mark.slow
def test_resnet50_counted_flops_land_in_the_record(straggler_run):
    """Per image, a training step is 3 forward passes less the first conv's input gradient (no one needs the
    image's gradient): 3 x 166,862,848 - 2 x 64 x (3 x 7 x 7) x 16 x 16 = 495,771,648 at 32x32 (the forward
    counted here on its own, the conv term by hand); times 2 images per rank and 2 ranks."""
    import torch
    from torchvision.models import resnet50

    from dlperf.engines.torch import flop_count

    record, _ = straggler_run
    with torch.device("meta"):
        model = resnet50(weights=None, num_classes=10).eval()
    forward = flop_count.forward_flops(model, (torch.empty(1, 3, 32, 32, device="meta"),))
    conv1_input_grad = 2 * 64 * (3 * 7 * 7) * 16 * 16
    assert record["flops_per_iteration"] == 4 * (3 * forward - conv1_input_grad)
    assert record["flops_source"].startswith("counted")
    seconds = record["global_batch_size"] / record["throughput"]
    assert record["tflops_per_device"] == pytest.approx(record["flops_per_iteration"] / seconds / 2 / 1e12)
    assert record["mfu"] is None and record["mfu_peak_tflops"] is None  # a CPU has no datasheet peak: no fallback
    assert "no datasheet peak for device 'cpu'" in record["mfu_note"]
    assert record["flops_convention"].startswith("dense")


@pytest.mark.slow
def test_sweep_repeats_auto_stops_with_a_reason(tmp_path):
    """The sweep decides after each repeat, whatever runs: a script printing dlperf's window lines (no framework to
    start, a second a repeat)."""
    sweep = tmp_path / "tiny.yaml"
    command = f"{sys.executable} {SCRIPTS / 'loud_windows.py'} --windows 3 --iters-per-window 2 --batch 2"
    sweep.write_text(
        f"model: resnet50\nbatch_size: 2\ntopology: 1n1g\ncommand: {json.dumps(command)}\nlog_format: dlperf\n"
    )
    out = tmp_path / "out"
    result = run_dlperf(
        ["sweep", str(sweep), "--out", str(out), "--repeats", "auto", "--max-repeats", "3"], timeout=900
    )
    assert result.returncode == 0, result.stderr
    records = sorted((out / "resnet50" / "1n1g").glob("*.json"), key=lambda p: p.name)
    assert [p.name for p in records] == [f"resnet50_b2_fp32_external_{i}.json" for i in (1, 2, 3)]
    stops = [json.loads(p.read_text())["repeats_stop"] for p in records]
    assert [s["stop"] for s in stops] == [False, False, True]
    assert "--max-repeats 3 reached" in stops[-1]["reason"]  # 3 repeats give no distribution-free 95 % interval
    # the console wraps lines (at spaces or hyphens): compare without whitespace
    assert "repeatsstopped:--max-repeats3reached" in "".join(result.stdout.split())
    summary = json.loads((out / "summary.json").read_text())["resnet50"]["b2_fp32_external"]["1n1g"]
    assert summary["repeats_stop"]["stop"] and summary["repeats"] == 3


def _record(case: str, repeat: int, throughput: float, **extra) -> dict:
    nodes, devices = (int(x) for x in case.rstrip("g").split("n"))
    return {
        "schema": SCHEMA, "model": "resnet50", "case": case, "group": "b8_fp32", "repeat": repeat, "nodes": nodes,
        "devices_per_node": devices, "world_size": nodes * devices, "batch_size": 8, "precision": "fp32",
        "status": "ok", "error": None, "throughput": throughput,
        "latency_ms": {"mean": 1.0, "p50": 1.0, "p90": 1.0}, "peak_memory_mib": {"rss": 900.0}, **extra,
    }  # fmt: skip


def test_report_flags_the_issue_example(tmp_path, capsys):
    """The issue's quick sweep: 1n2g at speedup 10.36 (efficiency 518 %) with CV 39.8 % across repeats, noisy,
    never stable, one straggler; a 1n1g baseline of 5 repeats, one an outlier; a 1n4g case with 2 repeats."""
    noisy = {"noisy": True, "noise_reasons": ["node 0: other processes kept 1.46 of 2 cores busy (limit 0.50)"]}
    unstable = {"steady_state": {"stable": False, "reason": "never stable"}}
    straggler = {
        "stragglers": {"flagged": True, "stragglers": [1], "slowest_rank": 1, "slowest_host": "vm",
                       "rank_median_ms": [100.0, 150.0], "median_rank_ms": 125.0, "straggler_pct": 0.05}
    }  # fmt: skip
    d = 41.2328  # 103.6 +- d: mean 103.6, sample stdev d, CV d / 103.6 = 39.8 %
    speeds_1n2g = [103.6 - d, 103.6, 103.6 + d]
    energy = {"energy": {"joules_per_sample": 0.5}, "mfu": 0.25}
    for i, speed in enumerate([10.0, 10.0, 10.0, 10.0, 20.0], 1):
        write_json_atomic(tmp_path / "resnet50" / "1n1g" / f"r_{i}.json", _record("1n1g", i, speed, **energy))
    for i, speed in enumerate(speeds_1n2g, 1):
        extra = {**noisy, **unstable, **straggler} if i == 1 else {}
        write_json_atomic(tmp_path / "resnet50" / "1n2g" / f"r_{i}.json", _record("1n2g", i, speed, **extra))
    for i, speed in enumerate([30.0, 30.5], 1):
        write_json_atomic(tmp_path / "resnet50" / "1n4g" / f"r_{i}.json", _record("1n4g", i, speed))
    code, _, err = run_cli(["report", str(tmp_path)], capsys)
    assert code == 0, err
    summary = json.loads((tmp_path / "summary.json").read_text())["resnet50"]["b8_fp32"]
    two = summary["1n2g"]
    assert two["speedup"] == 10.36 and two["scaling_efficiency"] == 5.18 and two["cv"] == 0.398
    assert two["flags"] == ["eff>100%", "CV", "noisy", "unstable", "straggler"]
    assert two["noisy_repeats"] == [1]
    assert summary["1n1g"]["outlier_repeats"] == [5] and "outlier" in summary["1n1g"]["flags"]
    assert summary["1n1g"]["samples_per_joule"] == 2.0 and summary["1n1g"]["mfu"] == 0.25
    assert summary["1n4g"]["flags"] == ["n=2"]
    text = (tmp_path / "report.md").read_text()
    assert "| peak memory (MiB) | MFU % | samples/J | flags |" in text
    assert "| 1 | 1 | 10.00 | 1.00 |" in text and "| 25.0 | 2 | CV, outlier |" in text
    assert "eff>100%, CV, noisy, unstable, straggler |" in text
    assert "- 1n2g [eff>100%]: scaling efficiency 518% is above 100 %" in text and "quiet machine" in text
    assert "- 1n2g [CV]: repeats vary by CV 39.8%, above the 5% limit" in text
    assert "- 1n2g [straggler]: 1 of 3 repeats had a straggler (rank(s) [1]; rank 1 on vm 20% slower" in text
    # how to get more repeats, with flags each command has (`dlperf run` has no --repeats)
    assert (
        "- 1n4g [n=2]: median of 2 good repeats, fewer than 3: run more repeats (`dlperf sweep --repeats auto`, "
        "or `dlperf run --repeat 2`, `--repeat 3`... into the same --out)." in text
    )
    assert "- 1n1g [outlier]: repeat(s) #5 more than 3 MADs from the median" in text


def test_bad_adaptive_options_are_one_line(tmp_path, capsys):
    from conftest import TINY

    code, _, err = run_cli(["run", *TINY, "--warmup-iters", "auto", "--max-warmup-iters", "3", "--dry-run"], capsys)
    assert code != 0 and "raise --max-warmup-iters (now 3) to at least 6" in err and "Traceback" not in err
    code, _, err = run_cli(["run", *TINY, "--warmup-iters", "often"], capsys)
    assert code == 2 and "must be a positive integer or auto, got 'often'" in err
    sweep = tmp_path / "s.yaml"
    sweep.write_text("model: resnet50\nimage_size: 32\nbatch_size: 2\ndevice: cpu\n")
    code, _, err = run_cli(["sweep", str(sweep), "--target-ci", "2", "--dry-run"], capsys)
    assert code != 0 and "apply to --repeats auto only" in err
    code, _, err = run_cli(["sweep", str(sweep), "--repeats", "auto", "--max-repeats", "2", "--dry-run"], capsys)
    assert code != 0 and "--max-repeats must be an integer of at least 3, got 2" in err
    sweep.write_text("model: resnet50\nrepeats: auto\ntarget_ci: 150\n")
    code, _, err = run_cli(["sweep", str(sweep), "--dry-run"], capsys)
    assert code != 0 and "--target-ci must be a percentage between 0 and 100, got 150" in err


def test_own_work_clock_spans_forward_start_to_first_layer_gradient(monkeypatch):
    """One process, a two-layer model: the span holds the forward and backward (and the test hook's sleep inside
    the forward), and not what the step does after the first layer's gradient (standing in for the all-reduce
    wait)."""
    import time

    import torch

    from dlperf.engines.torch.own_work import SLOW_RANK_ENV, OwnWorkClock

    monkeypatch.setenv(SLOW_RANK_ENV, "0:30")
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 1))
    clock = OwnWorkClock(model, model[0].weight, torch.device("cpu"), rank=0)
    other = OwnWorkClock(torch.nn.Sequential(torch.nn.Linear(1, 1)), model[0].bias, torch.device("cpu"), rank=1)
    clock.start()
    other.start()
    steps = []
    for _ in range(2):
        begin = time.perf_counter()
        time.sleep(0.05)  # before the forward: not own work
        model(torch.ones(4, 8)).sum().backward()
        time.sleep(0.05)  # after the last gradient: the wait for other ranks
        clock.mark()
        other.mark()
        steps.append((time.perf_counter() - begin) * 1000)
    spans = clock.collect()
    assert len(spans) == 2 and all(ms >= 30 for ms in spans)  # the hook's sleep is inside
    assert all(step - ms >= 100 for step, ms in zip(steps, spans))  # both 50 ms sleeps are outside
    assert clock.collect() == []  # collected once
    # its module never ran forward: from the step's start (the first sleep included) to its gradient
    assert all(ms >= 50 for ms in other.collect())
