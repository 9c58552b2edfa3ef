"""The report's statistics against records with known numbers."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli
from report_records import record

from dlperf.metrics.stats import percentile, spread, t95
from dlperf.records.load import as_record
from dlperf.records.store import write_json_atomic


@pytest.fixture
def results(tmp_path):
    speeds = {
        "1n1g": [321.8, 330.0, 300.0, 321.9, 325.5],  # median 321.9, mean 319.84
        "1n4g": [1143.46, 1150.0, 1100.0],  # median 1143.46
        "2n8g": [4849.68, 4800.0, 4900.0, None],  # one failed repeat
    }
    for case, values in speeds.items():
        for i, value in enumerate(values, 1):
            write_json_atomic(tmp_path / "resnet50" / case / f"resnet50_b128_fp32_{i}.json", record(case, i, value))
    # a group with no 1n1g: speedup must stay empty, with the reason
    for i, value in enumerate([700.0, 720.0], 1):
        rec = record("1n2g", i, value, group="b256_amp-fp16")
        write_json_atomic(tmp_path / "resnet50" / "1n2g" / f"resnet50_b256_amp-fp16_{i}.json", rec)
    (tmp_path / "resnet50" / "1n1g" / "partial.json").write_text('{"schema": "dlperf.run/1", "mod')
    return tmp_path


def test_summary_numbers(results, capsys):
    code, out, err = run_cli(["report", str(results)], capsys)
    assert code == 0, err
    summary = json.loads((results / "summary.json").read_text())
    fp32 = summary["resnet50"]["b128_fp32"]
    assert fp32["1n1g"]["median_speed"] == 321.9
    assert fp32["1n1g"]["average_speed"] == 319.84
    assert fp32["1n1g"]["speedup"] == 1.0
    assert fp32["1n1g"]["batch_size_per_device"] == 128
    assert fp32["1n4g"]["median_speed"] == 1143.46
    assert fp32["1n4g"]["speedup"] == round(1143.46 / 321.9, 2) == 3.55
    assert fp32["1n4g"]["scaling_efficiency"] == round(3.55 / 4, 3)
    assert fp32["2n8g"]["repeats"] == 3 and fp32["2n8g"]["failed_repeats"] == 1
    assert fp32["2n8g"]["median_speed"] == 4849.68
    assert fp32["2n8g"]["speedup"] == 15.07
    assert fp32["1n1g"]["min_speed"] == 300.0 and fp32["1n1g"]["max_speed"] == 330.0
    assert fp32["1n1g"]["latency_ms"]["p50"] == 27.0  # median of 9, 18, 27, 36, 45
    assert fp32["1n1g"]["peak_memory_mib"]["allocated"] == 1005.0  # the largest over repeats
    amp = summary["resnet50"]["b256_amp-fp16"]["1n2g"]
    assert amp["speedup"] is None
    assert "no successful 1n1g" in amp["speedup_note"]
    assert amp["median_speed"] == 710.0


def test_markdown_tables(results, capsys):
    code, _, _ = run_cli(["report", str(results), "--format", "md"], capsys)
    assert code == 0
    text = (results / "report.md").read_text()
    assert not (results / "summary.json").exists()
    # the published shape first (gpu_num is the total, as DLPerf prints it), then per device and per node
    assert "| node_num | gpu_num | samples/s | speedup | samples/s per device | devices per node |" in text
    assert "| 1 | 1 | 321.90 | 1.00 | 321.90 | 1 |" in text
    assert "| 1 | 4 | 1143.46 | 3.55 | 285.87 | 4 |" in text  # 1143.46 / 4 = 285.865
    assert "| 2 | 16 | 4849.68 | 15.07 | 303.11 | 8 |" in text  # 4849.68 / 16 = 303.105
    assert "| 1 | 2 | 710.00 |  | 355.00 | 2 |" in text  # no made-up 1.0 without a 1n1g
    assert "speedup left empty: no successful 1n1g run" in text
    assert "killed by SIGKILL" in text  # the failed repeat is listed with its reason


def test_plots_written(results, capsys):
    code, out, _ = run_cli(["report", str(results), "--format", "png", "--out", str(results / "r")], capsys)
    assert code == 0
    pngs = sorted(p.name for p in (results / "r" / "plots").glob("*.png"))
    assert pngs == ["resnet50_b128_fp32.png", "resnet50_b256_amp-fp16.png"]
    assert (results / "r" / "plots" / pngs[0]).read_bytes()[:4] == b"\x89PNG"


def test_spread_and_percentiles():
    stats = spread([10.0, 12.0, 14.0])
    assert stats["median"] == 12.0 and stats["mean"] == 12.0
    assert stats["stdev"] == pytest.approx(2.0)
    assert stats["cv"] == pytest.approx(2.0 / 12.0)
    assert stats["ci95"] == pytest.approx(4.303 * 2.0 / 3**0.5, rel=1e-4)  # t(2 dof) = 4.303 in the printed tables
    assert [round(t95(dof), 3) for dof in (1, 5, 30, 10_000)] == [12.706, 2.571, 2.042, 1.960]
    assert spread([5.0])["ci95"] is None
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 90) == pytest.approx(9.1)


def test_compile_payoff(tmp_path, capsys):
    """Eager: first step 1 s, 70 ms/step; compiled: first step 41 s, 50 ms/step -> 40 s / 20 ms = 2000 steps."""
    for group, first, mean in (("b128_fp32", 1.0, 70.0), ("b128_fp32_compile", 41.0, 50.0)):
        rec = record(
            "1n1g", 1, 100.0, group=group, first_step_s=first, latency_ms={"mean": mean, "p50": mean, "p90": mean}
        )
        write_json_atomic(tmp_path / "resnet50" / "1n1g" / f"resnet50_{group}_1.json", rec)
    code, _, err = run_cli(["report", str(tmp_path)], capsys)
    assert code == 0, err
    payoff = json.loads((tmp_path / "summary.json").read_text())["resnet50"]["b128_fp32_compile"]["1n1g"]
    assert payoff["compile_payoff"] == {"extra_first_step_s": 40.0, "saved_ms_per_step": 20.0, "payoff_steps": 2000}
    assert "| resnet50 | b128_fp32_compile | 1n1g | 40.00 | 20.00 | 2000 |" in (tmp_path / "report.md").read_text()


def test_history_tracks_a_case_across_labels(tmp_path, capsys):
    from dlperf.reporting.history import history

    db = str(tmp_path / "h.sqlite")
    for label, speeds, t0 in (("v1", [100.0, 104.0, 102.0], 1000.0), ("v2", [90.0, 92.0], 2000.0)):
        folder = tmp_path / label
        for i, speed in enumerate(speeds, 1):
            write_json_atomic(folder / "resnet50" / "1n1g" / f"r_{i}.json", record("1n1g", i, speed, started_at=t0 + i))
        code, out, err = run_cli(["history", "add", str(folder), "--label", label, "--db", db], capsys)
        assert code == 0, err
        assert f"{len(speeds)} new records" in out
    code, out, _ = run_cli(["history", "add", str(tmp_path / "v1"), "--label", "v1", "--db", db], capsys)
    assert "0 new records" in out  # the same records are stored once
    points = history(db, model="resnet50", case="1n1g")
    assert [(p.label, p.median, p.runs) for p in points] == [("v1", 102.0, 3), ("v2", 91.0, 2)]
    assert points[0].change is None  # the ratio of the labels' geometric means, the verdict's ratio
    assert points[1].change == pytest.approx((90.0 * 92.0) ** 0.5 / (100.0 * 104.0 * 102.0) ** (1 / 3))
    code, out, _ = run_cli(["history", "show", "--db", db], capsys)
    assert code == 0 and "-10.8%" in out
    code, _, err = run_cli(["history", "add", "--db", db], capsys)
    assert code == 2 and "needs a results folder" in err


def test_report_flags_nodes_that_differ(tmp_path, capsys):
    env = {
        "nodes": [
            {"node": "a", "torch": "2.5.1", "gpus": [{"name": "H100", "driver": "580"}]},
            {"node": "b", "torch": "2.4.0", "gpus": [{"name": "H100", "driver": "580"}]},
        ]
    }
    write_json_atomic(tmp_path / "resnet50" / "2n1g" / "r_1.json", record("2n1g", 1, 50.0, env=env))
    code, _, err = run_cli(["report", str(tmp_path)], capsys)
    assert code == 0, err
    case = json.loads((tmp_path / "summary.json").read_text())["resnet50"]["b128_fp32"]["2n1g"]
    assert case["node_differences"] == ["torch: 2.5.1 on a; 2.4.0 on b"]
    assert "2n1g: WARNING, nodes differ: torch: 2.5.1 on a; 2.4.0 on b" in (tmp_path / "report.md").read_text()


def test_gpt_records_get_the_gpt_table_not_a_scaling_table(tmp_path, capsys):
    gpt = {"group": "DP_2x1x1_4_64x2_fp32", "model": "gpt", "table": "layouts", "report_group": "DP"}
    rec = {**record("1n2g", 1, 6.0), **gpt}
    write_json_atomic(tmp_path / "gpt" / "1n2g" / "g_1.json", rec)
    write_json_atomic(tmp_path / "resnet50" / "1n1g" / "r_1.json", record("1n1g", 1, 100.0))
    code, _, err = run_cli(["report", str(tmp_path)], capsys)
    assert code == 0, err
    text = (tmp_path / "report.md").read_text()
    assert "## GPT" in text and "| DP | DP_2x1x1_4_64x2_fp32 |" in text
    assert "## gpt" not in text  # no one-row scaling table with a 'no 1n1g' note
    # GPT plots per layout group (DP here), beside ResNet's scaling plot
    assert sorted(p.name for p in (tmp_path / "plots").glob("*.png")) == [
        "gpt_DP_layouts.png",
        "resnet50_b128_fp32.png",
    ]


def cpu_ranks(threads: int, devices: int) -> dict:
    return {"device_type": "cpu", "ranks": [{"rank": r, "cpu_threads": threads} for r in range(devices)]}


def test_cpu_devices_of_unlike_size_get_no_speedup():
    """1n1g with 2 threads against 1n2g ranks of 1 each measures threads, not scaling: the speedup is left empty and
    the table says why; the same share in both (one sweep) gives the speedup and the threads in the title."""
    from dlperf.reporting.aggregate import summarise
    from dlperf.reporting.report import group_table

    unlike = summarise([record("1n1g", 1, 10.0, **cpu_ranks(2, 1)), record("1n2g", 1, 30.0, **cpu_ranks(1, 2))])
    (cases,) = unlike.values()
    assert cases[1].speedup is None and "1 CPU thread per rank, 1n1g 2 CPU threads per rank" in cases[1].speedup_note
    assert "CPU threads per rank differ (1, 2)" in group_table("resnet50", "b128_fp32", cases)[0]
    like = summarise([record("1n1g", 1, 10.0, **cpu_ranks(1, 1)), record("1n2g", 1, 18.0, **cpu_ranks(1, 2))])
    (cases,) = like.values()
    assert cases[1].speedup == 1.8 and cases[1].efficiency == 0.9
    assert group_table("resnet50", "b128_fp32", cases)[0].endswith(", 1 CPU thread per rank")


def test_the_report_says_where_the_time_went():
    """Two runs from 1,000 s to 1,100 s: 40 s of timed windows, 10 s of first steps (records without the warm-up's
    time), a sync ablation of 4 + 4 steps of 1 s and 1.5 s (10 s), 50 s inside the first run and 40 s inside the
    second, so 10 s between runs; records that time their warm-up and ablation count all of both."""
    from dlperf.reporting.time_spent import time_lines

    first = record("1n1g", 1, 100.0, started_at=1000.0, finished_at=1050.0, elapsed_s=20.0, first_step_s=5.0)
    ablation = {"iters": 4, "step_ms": 1000.0, "synced_step_ms": 1500.0}
    second = record("1n2g", 1, 180.0, started_at=1060.0, finished_at=1100.0, elapsed_s=20.0, first_step_s=5.0,
                    ablation=ablation)  # fmt: skip
    lines = time_lines([as_record(first), as_record(second)])
    assert lines[0] == "## Where the time went"
    assert lines[2] == (
        "2 runs took 1.7 min from the first start to the last end: timed windows 40.0 s (40%); warm-ups (their first"
        " steps' start-up and compiling included) 10.0 s (10%); sync ablation 10.0 s (10%); the rest of each run"
        " (processes, imports, rendezvous, the model's build, the record) 30.0 s (30%); between runs (machine facts,"
        " reports, gaps) 10.0 s (10%). Outside the steps they ran (timed, warm-up, compiling, ablation): 40.0 s (40%)."
    )
    first["warmup"] = {"mode": "fixed", "iters": 3, "elapsed_s": 8.0}
    second["warmup"] = {"mode": "fixed", "iters": 3, "elapsed_s": 9.0}
    second["ablation"] = {**ablation, "elapsed_s": 14.0}  # each window's settling step too
    timed = time_lines([as_record(first), as_record(second)])[2]
    assert "warm-ups (their first steps' start-up and compiling included) 17.0 s (17%)" in timed
    assert "sync ablation 14.0 s (14%)" in timed and timed.endswith("ablation): 29.0 s (29%).")
    # XLA compiles ahead of the warm-up (its compiled_ahead_s, outside its elapsed_s): its own part, out of the rest;
    # torch's compile_s is its first step, inside the warm-up, so not counted twice
    first.update(engine="jax", compile_s=6.0, warmup={**first["warmup"], "compiled_ahead_s": 6.0})
    second.update(engine="torch", compile_s=9.0)
    compiled = time_lines([as_record(first), as_record(second)])[2]
    assert "XLA's compiling ahead of the warm-ups 6.0 s (6%)" in compiled and "the record) 13.0 s (13%)" in compiled
    assert compiled.endswith("ablation): 23.0 s (23%).")
    assert time_lines([as_record(record("1n1g", 1, 100.0))]) == []  # no stamps: nothing claimed
