"""One test per way the old readers went wrong on real logs (issue 9), each on a real file that shows it."""

from __future__ import annotations

import json
import re
import shutil
import statistics
from pathlib import Path

import pytest
from conftest import run_cli

from dlperf.framework_logs.extract import Options, read_run
from dlperf.framework_logs.published_names import parse_log_path
from dlperf.framework_logs.textlines import strip_prefixes
from dlperf.reporting.aggregate import summarise

REAL = Path(__file__).parents[1] / "fixtures" / "peer-logs" / "real"


def run(name: str, **options) -> dict:
    return read_run(parse_log_path(REAL / name), Options(**options))


def test_warmup_counts_iterations_not_lines():
    """Printed every 20 iterations: the 20-iteration warm-up is one line, not 20 (the log was refused before)."""
    record = run("oneflow-bert/1n1g/bert-base-ofbench-report_b32_fp32_1.log")
    assert record["kept_steps"] == [39, 199] and record["kept_lines"] == 9
    # mxnet, every 50 batches: the 100-iteration window from batch 100 holds two lines
    record = run("mxnet/1n4g/resnet18-tornadomeet-issue5_b128_fp32_1.log")
    assert record["kept_steps"] == [150, 200]


def test_a_log_shorter_than_the_rule_is_used_and_says_so():
    record = run("dllogger-pytorch/4n8g/rn50-dlperfreadme_b128_fp32_1.log")
    assert record["status"] == "ok" and "all inside the 25-iteration warm-up" in record["window_note"]
    assert "window_note" in run("paddle/1n1g/resnet-pr4882_b128_fp32_1.log") and run(
        "paddle/1n1g/resnet-pr4882_b128_fp32_1.log"
    )["window_note"].startswith("the log ends")


def test_per_device_figures_are_scaled_to_global():
    """MLPerf SSD logs its per-process throughput (it declares local_batch_size): 8 GPUs do 8 times that."""
    record = run("mlperf/1n8g/ssd-dell_b32_mixed_1.log")
    assert record["throughput"] == pytest.approx(2286.25, rel=1e-4)  # about 2,260 samples/s, as the issue says
    assert record["throughput_per_device"] == pytest.approx(record["throughput"] / 8)
    titan = run("torchtitan/1n8g/qwen3-14b-run214_b160_bf16_1.log")
    assert (titan["own_reading"]["figure"], titan["unit"], titan["printed_figure"]) == (
        10530 * 8,
        "tokens/s",
        "per device",
    )
    assert titan["throughput_per_device"] == pytest.approx(titan["throughput"] / 8)


def test_mlperf_timestamp_rule_reads_each_progress_key():
    """BERT's `epoch_num` is a cumulative sample count, stable diffusion's `step_num` an iteration count. BERT's
    second block ran 7 % slow (the lines settle after it): its stamps are the window's start."""
    events = [
        json.loads(line[line.index("{") :])
        for line in (REAL / "mlperf/1n8g/bert-dell_b96_mixed_1.log").read_text().splitlines()
        if '"tracked_stats"' in line and '"epoch_num"' in line and '"step": [' not in line
    ]

    def between(first: dict, last: dict) -> float:
        return (last["metadata"]["epoch_num"] - first["metadata"]["epoch_num"]) / (
            (last["time_ms"] - first["time_ms"]) / 1000
        )

    bert = run("mlperf/1n8g/bert-dell_b96_mixed_1.log", rule="timestamp")
    assert bert["throughput"] == pytest.approx(between(events[1], events[-1])) and bert["kept_steps"][0] == 3
    assert between(events[0], events[-1]) == pytest.approx(7531.15, rel=0.005)  # the framework's whole-run figure
    sd = run("mlperf/1n8g/stable-diffusion-dell_b64_mixed_1.log", rule="timestamp")["throughput"]
    assert sd == pytest.approx(run("mlperf/1n8g/stable-diffusion-dell_b64_mixed_1.log")["throughput"], rel=0.01)
    with pytest.raises(Exception, match="no iteration or sample counts"):  # `step` counts epochs there
        run("mlperf/1n2g/resnet-fujitsu_b408_mixed_1.log", rule="timestamp")


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("mlperf/1n8g/dlrm-dcnv2-dell_b6912_mixed_1.log", "mlperf"),  # HugeCTR lines, but MLLOG events: MLPerf
        ("mlperf/1n8g/bert-intel_b56_mixed_1.log", "mlperf"),  # Habana: timed blocks, no tracked_stats
        ("mlperf/1344n8g/gpt3-azure_b1_mixed_1.log", "mlperf"),  # train_step_timing
        ("dllogger-tf/1n1g/issue881-rn50-tf_b256_amp_1.log", "dllogger-tf"),  # `(0, 120) total_ips`
        ("dllogger-pytorch-bert/1n1g/issue1107-squad-turn1-tqdm_b1_fp16_1.log", "dllogger-pytorch-bert"),  # tqdm
        ("paddle/1n1g/resnet-pr4882_b128_fp32_1.log", "paddle"),  # batch_cost ... ips
        ("oneflow-resnet/1n4g/rn50-ofmodels-pr195_b1_fp32_1.log", "oneflow-models"),  # [0] [train], ...
    ],
)
def test_formats_once_mistaken_or_unknown(name, fmt):
    record = run(name)
    assert (record["status"], record["format"]) == ("ok", fmt)


def test_launcher_prefixes_are_stripped_by_one_rule():
    assert strip_prefixes("55:  [2026-06-26 14:26:18.413968] iteration 1/ 300 |").startswith("[2026-06-26")
    assert strip_prefixes("0: [default0]: [2026-03-26 14:43:37.001748] iteration").startswith("[2026-03-26")
    assert strip_prefixes("[rank0]:[rank0]: Traceback (most recent call last):") == "Traceback (most recent call last):"
    assert strip_prefixes("> 2019-08-21 12:24:33,668 INFO Epoch[0]").startswith("2019-08-21")
    for name in ("megatron/14n4g/gdn-bench-4passes_b6_bf16_1.log", "megatron/1n1g/correctness-j1728401_b80_bf16_1.log"):
        assert run(name, rule="timestamp")["status"] == "ok"  # the time stamps are found under the prefixes


def test_crashed_runs_are_failed_records():
    oom = run("torchtitan/1n8g/qwen3-14b-run355_b144_bf16_1.log")  # OOM after step 4, then SIGABRT
    assert (oom["status"], oom["throughput"]) == ("failed", None) and oom["error"].startswith("out of memory")
    crash = run("torchtitan/1n8g/qwen3-14b-run031_b5_bf16_1.log")  # a traceback before any step
    assert crash["status"] == "failed" and crash["error"].startswith("error: ValueError")


def test_a_signal_after_the_last_step_fails_the_run(tmp_path):
    real = (REAL / "torchtitan/1n8g/qwen3-14b-run214_b160_bf16_1.log").read_text()
    log = tmp_path / "1n8g" / "qwen3_b160_bf16_1.log"
    log.parent.mkdir()
    log.write_text(real + "  traceback : Signal 9 (SIGKILL) received by PID 1005501\n")
    assert read_run(parse_log_path(log), Options())["error"].startswith("killed by a signal")


def test_a_nan_loss_fails_the_run(tmp_path):
    real = (REAL / "torchtitan/1n8g/qwen3-14b-run214_b160_bf16_1.log").read_text()
    log = tmp_path / "1n8g" / "qwen3_b160_bf16_1.log"
    log.parent.mkdir()
    log.write_text(re.sub(r"loss:  6\.73165", "loss:  nan", real))
    record = read_run(parse_log_path(log), Options())
    assert record["status"] == "failed" and record["error"].startswith("NaN loss")


def test_allocator_oom_warnings_between_steps_do_not_fail_a_run(tmp_path):
    """torch's `memory mapping failed with OOM` warning is followed by more steps in run355: only the tail counts."""
    lines = (REAL / "torchtitan/1n8g/qwen3-14b-run355_b144_bf16_1.log").read_text().splitlines(keepends=True)
    last_step = max(i for i, line in enumerate(lines) if "step:" in line and "tps:" in line)
    log = tmp_path / "1n8g" / "qwen3_b144_bf16_1.log"
    log.parent.mkdir()
    log.write_text("".join(lines[: last_step + 1]))
    assert read_run(parse_log_path(log), Options())["status"] == "ok"


def test_restarted_runs_are_split_and_the_last_is_measured():
    record = run("megatron/8n4g/llama3-1b-j3108079_b9_bf16_1.log")  # a 2-iteration run, then the real one
    assert "2 runs in one file" in record["warning"] and record["kept_steps"] == [21, 416]
    gdn = run("megatron/14n4g/gdn-bench-4passes_b6_bf16_1.log")  # 4 passes: the last (upstream) is published
    assert "4 runs" in gdn["warning"]
    assert gdn["latency_ms"]["mean"] == pytest.approx(1308, rel=0.005)
    assert gdn["peer_metrics"]["tflops_per_device"] == pytest.approx(297.0, rel=0.005)


def test_every_rank_printing_is_one_iteration():
    """7 ranks print step 4, one prints step 5: two iterations, not eight steps."""
    record = run("torchtitan/1n8g/issue-pr2389-multirank_b1_bf16_1.log")
    assert record["kept_lines"] == 2 and record["kept_steps"] == [4, 5]
    assert record["own_reading"]["figure"] == 10007 * 8
    ranks = run("oneflow-resnet/1n4g/rn50-ofmodels-pr195_b1_fp32_1.log")
    assert ranks["kept_lines"] == 1
    assert ranks["throughput_per_device"] == pytest.approx(statistics.median([161.66, 159.71, 159.48, 159.49]))


def test_window_follows_the_published_rule():
    """torchtitan's published figure, the step-10 tps, is its own reading beside the window's (steps 2-10);
    Megatron's window starts past its 20-iteration count where the lines settle (iteration 23 ran 7 % slow)."""
    titan = run("torchtitan/1n8g/qwen3-14b-run273_b160_bf16_1.log")
    assert titan["own_reading"]["figure"] == 10532 * 8 and titan["kept_steps"] == [2, 10]
    gdn = run("megatron/14n4g/gdn-bench-4passes_b6_bf16_1.log")
    assert gdn["kept_steps"] == [24, 300] and gdn["warmup_iterations"] == 23


def test_units_and_memory_are_read():
    titan = run("torchtitan/1n1g/issue-pr3393_b1_bf16_1.log")
    assert titan["unit"] == "tokens/s" and titan["peak_memory_mib"] == {"reserved": pytest.approx(9.46 * 1024)}
    assert run("hugectr/1n1g/issue186-dlrm-v2.3_b65536_fp32_1.log")["unit"] == "records/s"
    assert run("megatron/2n8g/issue756-mixtral8x7b_b8_bf16_1.log")["unit"] == "sequences/s"


def test_speedup_uses_the_medians_as_published():
    """DLPerf divides the printed (2-place) medians: 9415.85 / 321.74 = 29.265 -> 29.27, not 29.26."""
    common = {"model": "rn50", "group": "b128_fp32", "batch_size": 128, "precision": "fp32", "status": "ok"}
    records = [
        {**common, "case": "1n1g", "nodes": 1, "devices_per_node": 1, "throughput": 321.7449},
        {**common, "case": "4n8g", "nodes": 4, "devices_per_node": 8, "throughput": 9415.8451},
    ]
    cases = summarise(records)[("rn50", "b128_fp32")]
    assert [c.speedup for c in cases] == [1.0, 29.27]


def test_no_plots_writes_tables_only(tmp_path, capsys):
    logs = tmp_path / "logs"
    shutil.copytree(REAL / "torchtitan", logs)
    code, _, err = run_cli(["extract", str(logs), "--no-plots", "--out", str(tmp_path / "out")], capsys)
    assert code == 0 and "failed run" in err
    assert not (tmp_path / "out" / "plots").exists() and (tmp_path / "out" / "report.md").is_file()
    report = (tmp_path / "out" / "report.md").read_text()
    assert "| tokens/s |" in report and "out of memory" in report


def test_a_nan_loss_in_dlperfs_own_log_fails_the_run(tmp_path):
    log = tmp_path / "1n1g" / "resnet50_b8_fp32_1.log"
    log.parent.mkdir()
    windows = [
        f"[dlperf] iter {i}/6 loss {loss} samples/s 100.0 ms/iter 80.000 time {1763830000 + i}.000000"
        for i, loss in ((2, "2.302585"), (4, "nan"), (6, "nan"))
    ]
    log.write_text("\n".join(windows) + "\n")
    record = read_run(parse_log_path(log), Options(format="dlperf"))
    assert record["status"] == "failed" and record["error"].startswith("NaN loss: [dlperf] iter 4/6"), record
