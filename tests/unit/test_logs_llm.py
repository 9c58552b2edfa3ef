"""The MaxText and NeMo 2 readers on real logs (tests/fixtures/peer-logs/llm/, copied unchanged from the sources in
its SOURCES.md): dlperf's global figure against the one the source publishes, or against a plain reading of the log
under the format's published rule, written apart from the readers; a wrong device count is a contradiction."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import run_cli

from dlperf.errors import DataError
from dlperf.framework_logs.base import RunShape
from dlperf.framework_logs.extract import Options, read_run
from dlperf.framework_logs.published_names import parse_log_path
from dlperf.framework_logs.registry import detect, get_format

LLM = Path(__file__).parents[1] / "fixtures" / "peer-logs" / "llm"
MAXTEXT = "maxtext/1n4g/guide-v5p8-deepseek2-16b_b24_bf16_1.log"
MAXTEXT_C4 = "maxtext/1n4g/guide-v5p8-c4-deepseek2-16b_b24_bf16_1.log"
MAXTEST = "maxtext/8n4g/maxtest-v6e32_b12_bf16_1.log"
NEMO = "nemo/1n8g/aws-perf-readme_b16_bf16_1.log"
NEMO_LLAMA = "nemo/1n8g/deeplink-llama3-8b_b16_bf16_1.log"
NEMO_QWEN = "nemo/1n8g/deeplink-qwen3-30b-a3b_b4_bf16_1.log"
NEMO_TOY = "nemo/1n1g/playground-toy-llama3_b64_bf16_1.log"
BRIDGE = "megatron-bridge/1n8g/byoc-mbridge-llama32-1b_b64_bf16_1.log"


def test_every_llm_log_is_a_case():
    cases = {MAXTEXT, MAXTEXT_C4, MAXTEST, NEMO, NEMO_LLAMA, NEMO_QWEN, NEMO_TOY, BRIDGE}
    assert {str(p.relative_to(LLM)) for p in LLM.rglob("*.log")} == cases


def numbers(log: str, field: str) -> list[float]:
    """Every `field: number` of the log's step lines, read apart from the readers."""
    return [float(m[1]) for m in re.finditer(rf"{re.escape(field)}: ([-+.\de]+)", (LLM / log).read_text())]


def read(log: str, tmp_path: Path | None = None, shape: str | None = None) -> dict:
    """dlperf's record for a fixture, or for a copy of it under another `<N>n<G>g` folder."""
    path = LLM / log
    if shape:
        path = tmp_path / "maxtext" / shape / Path(log).name
        path.parent.mkdir(parents=True)
        shutil.copy(LLM / log, path)
    return read_run(parse_log_path(path), Options())


def test_maxtext_guide_log_is_read_over_its_window_and_keeps_the_published_last_step_beside_it():
    """Steps 2-9 of the guide's run (steps 0 and 1 compile and dispatch): 24 x 2048 tokens per device per step over
    their summed seconds, x 4 devices. MaxText's guide reads step 9 (Tokens/s/device 8672.758): the record's
    own_reading, 0.6 % below the window's (step 3 took 5.402 s, the others 5.66-5.67)."""
    record = read_run(parse_log_path(LLM / MAXTEXT), Options())
    assert (record["status"], record["format"], record["unit"]) == ("ok", "maxtext", "tokens/s")
    seconds = numbers(MAXTEXT, "seconds")
    assert len(seconds) == 10 and record["kept_steps"] == [2, 9]
    window = 8 * 24 * 2048 / sum(seconds[2:]) * 4
    assert record["throughput"] == pytest.approx(window, rel=2e-4)  # the printed Tokens/s/device are unrounded
    assert record["own_reading"]["figure"] == pytest.approx(8672.758 * 4, rel=1e-9)
    assert record["own_reading"]["ratio"] == pytest.approx(1.006, abs=0.001)
    # the second reading, total_weights / seconds (196608 per step), agrees without knowing the device count
    assert record["cross_check"]["agree"]
    assert record["cross_check"]["second"] == pytest.approx(sum(196608 / t for t in seconds[2:]) / 8)


def test_maxtext_log_read_with_a_wrong_device_count_contradicts_itself(tmp_path):
    """Read as one device, the printed per-device figure gives a quarter of what its own token counts say."""
    wrong = tmp_path / "maxtext" / "1n1g" / "guide_b24_bf16_1.log"
    wrong.parent.mkdir(parents=True)
    shutil.copy(LLM / MAXTEXT, wrong)
    with pytest.raises(DataError, match="the log contradicts itself: the printed rule gives 8724.69 tokens/s"):
        read_run(parse_log_path(wrong), Options())


def test_maxtext_real_data_counts_fewer_weighted_tokens_than_the_figure():
    """The guide's C4 run (same v5p-8, 24 x 2048 tokens per device): total_weights counts real tokens only, 155,934
    of the step's 196,608, so the second reading is lower by that ratio; the printed figure stands, flagged."""
    record = read(MAXTEXT_C4)
    assert record["status"] == "ok" and record["kept_steps"] == [8, 9]
    assert record["throughput"] == pytest.approx(2 * 24 * 2048 / (5.670 + 5.669) * 4, rel=2e-4)
    second = (163259 / 5.670 + 155934 / 5.669) / 2
    assert record["cross_check"]["second"] == pytest.approx(second)
    assert record["cross_check"]["ratio"] == pytest.approx(record["throughput"] / second)  # 1.23
    assert not record["cross_check"]["agree"] and 155934 < 163259 < 24 * 2048 * 4
    assert record["own_reading"]["figure"] == pytest.approx(8670.184 * 4, rel=1e-9)


def test_maxtest_log_leaves_out_its_dispatched_step_and_its_weights_settle_the_device_count(tmp_path):
    """maxtest's log (8 workers; per_device_batch_size 12 and max_target_length 4096 on its own tuning line): step 2's
    0.002 s (19.9M tokens/s/device, 917,443 TFLOP/s per device: a step timed while dispatched) is no step time and is
    left out, counted; steps 3 and 4 are the window. Its
    total_weights, 1,572,864 = 12 x 4096 x 32, are 32 devices' tokens: 8 workers x 4 chips (the v6e-32 its kubeconfig
    line names). Read as 64 devices (the v5p-128 the command's comment names) the log contradicts itself."""
    record = read(MAXTEST)
    assert record["status"] == "ok" and record["kept_steps"] == [3, 4]
    tokens_per_device = 12 * 4096
    assert record["throughput"] == pytest.approx(2 * tokens_per_device / (11.715 + 11.645) * 32, rel=2e-4)
    assert record["rejected_lines"] == 1 and "iteration 2: 917443 TFLOP/s per device" in record["rejected_reason"]
    assert tokens_per_device / 11.645 == pytest.approx(4221.032, rel=1e-3)  # the printed per-device figure, by hand
    assert record["own_reading"]["figure"] == pytest.approx(4221.032 * 32, rel=1e-9)
    assert numbers(MAXTEST, "total_weights")[-1] == tokens_per_device * 32
    assert record["cross_check"]["agree"]
    assert record["cross_check"]["second"] == pytest.approx((1572864 / 11.715 + 1572864 / 11.645) / 2)
    with pytest.raises(DataError, match="the log contradicts itself"):
        read(MAXTEST, tmp_path, "16n4g")


@pytest.mark.parametrize(("log", "batch", "seq_length"), [(NEMO_LLAMA, 128, 8192), (NEMO_QWEN, 32, 4096)])
def test_nemo_sequences_over_summed_step_times_agree_with_its_printed_tokens_per_gpu(log, batch, seq_length):
    """DeepLink's NeMo 25.09 runs on 8 GPUs (llama3_8b: global batch 128, seq_length 8192; qwen3_30b_a3b: 32, 4096,
    their README's table): dlperf's sequences/s is the lines' sequences over their summed train_step_timing; with the
    table's seq_length each line's printed tokens_per_sec_per_gpu (4 figures) is NeMo's own batch x seq_length / time
    / GPUs, so the figure reads NeMo's units right. The mean of the printed rates is not the figure."""
    record = read(log)
    times = numbers(log, "train_step_timing in s")
    printed = numbers(log, "tokens_per_sec_per_gpu")
    assert record["status"] == "ok" and len(times) == len(printed) == 3
    assert record["throughput"] == pytest.approx(batch * len(times) / sum(times), rel=1e-9)
    for seconds, per_gpu in zip(times, printed):
        assert batch * seq_length / seconds / 8 == pytest.approx(per_gpu, rel=1e-3)
    assert record["peer_metrics"]["tokens_per_s_per_device"] == pytest.approx(sum(printed) / 3)
    assert record["throughput"] * seq_length / 8 == pytest.approx(sum(printed) / 3, rel=0.005)


def test_nemo_log_gives_sequences_over_step_time():
    """A short log (iterations 74-76, the rule's window is 11-44 of a run): its kept iterations, 3 x 128 sequences
    over their summed train_step_timing."""
    record = read_run(parse_log_path(LLM / NEMO), Options())
    assert (record["status"], record["format"], record["unit"]) == ("ok", "nemo", "sequences/s")
    times = [
        float(m[1]) for line in (LLM / NEMO).read_text().splitlines() if (m := re.search(r"timing in s: (\S+)", line))
    ]
    assert record["throughput"] == pytest.approx(128 * len(times) / sum(times), rel=0.005)
    assert record["peer_metrics"]["tflops_per_device"] == pytest.approx(867.0, abs=1.0)


def test_nemo_whole_raw_log_is_read_in_the_rules_window_and_its_negative_step_time_is_counted():
    """A whole NeMo 24.09 log (start-up lines, iterations 0-19 of a 1-GPU toy llama3_8b, global_batch_size 64): the
    rule's window starts past iteration 11, so iterations 12-19 are kept, their 8 x 64 sequences over their summed
    train_step_timing. Iteration 8's 13.75 s and iteration 9's -12.71 s (together about two 0.5 s steps) lie in the
    warm-up; the negative one is no time: refused and counted, not dropped unseen."""
    record = read(NEMO_TOY)
    text = (LLM / NEMO_TOY).read_text()
    times = {int(m[1]): float(m[2]) for m in re.finditer(r"iteration (\d+)/19 .*train_step_timing in s: (\S+)", text)}
    assert sorted(times) == list(range(20)) and times[9] == -12.71
    assert (record["status"], record["format"], record["kept_steps"]) == ("ok", "nemo", [12, 19])
    kept = [times[i] for i in range(12, 20)]
    assert record["throughput"] == pytest.approx(64 * 8 / sum(kept), rel=1e-9)  # 143.28 sequences/s
    assert record["throughput"] == pytest.approx(143.281, rel=1e-5)
    assert record["rejected_lines"] == 1 and "iteration 9: time per iteration -12.71 s" in record["rejected_reason"]
    assert record["window_note"] == "the log ends 9 iterations into the 34-iteration window"


def test_megatron_bridge_log_of_one_line_is_refused_inside_the_warmup_and_read_without_one():
    """A whole Megatron-Bridge 0.2.0rc7 log (llama32_1b on 8 H100s, TP 1: global batch 512, 10 iterations, one
    line at iteration 10, log_interval 10): Megatron's own line, which the megatron reader reads. Its one line is
    the mean of the run's first ten iterations, start-up included, so under the 20-iteration warm-up it is refused
    in one line; with no warm-up it gives 512 / 4.6478 s. Bridge's rank-0 `Step Time : 4.65s` is the same time to
    its 10 ms; its `59892.5TFLOP/s/GPU` (6e16 FLOP/s on one H100) is no device's, and is not read."""
    with pytest.raises(DataError, match="only 1 megatron progress line"):
        read(BRIDGE)
    record = read_run(parse_log_path(LLM / BRIDGE), Options(warmup=0))
    assert (record["status"], record["format"], record["kept_steps"]) == ("ok", "megatron", [10, 10])
    assert numbers(BRIDGE, "elapsed time per iteration (ms)") == [4647.8]
    consumed = re.findall(r"consumed samples: +(\d+)", (LLM / BRIDGE).read_text())
    assert consumed == [str(512 * 10)]  # a fresh run: ten iterations of 512
    assert record["throughput"] == pytest.approx(512 / 4.6478, rel=1e-9)  # 110.16 sequences/s
    step_time = re.search(r"Step Time : (\S+)s GPU utilization: (\S+)TFLOP", (LLM / BRIDGE).read_text())
    assert float(step_time[1]) == pytest.approx(4.6478, abs=0.005) and float(step_time[2]) * 1e12 > 1e16
    assert not record.get("peer_metrics") and record["cross_check"]["agree"] is None  # one stamp: no second reading


def test_megatron_bridge_resets_its_interval_timer_after_iteration_one():
    """Megatron-LM logs iteration 1 without resetting its interval timer, so its next line averages from the run's
    start; Megatron-Bridge resets at every line (no first-iteration exception in its training_log). Lines in
    Bridge's print format (its train_utils.py), log_interval 1: where its `Step Time` line shows, iteration 2's
    interval is iteration 2 alone."""
    megatron = get_format("megatron")
    shape = RunShape(global_batch=8, world_size=8)
    line = (
        " [2026-01-01 00:00:0{0}] iteration        {0}/      10 | consumed samples:           {1} | elapsed time per "
        "iteration (ms): {2} | learning rate: 1.000000E-04 | global batch size:     8 | lm loss: 1.0E+01 |"
    )
    lines = [line.format(1, 8, 3000.0), line.format(2, 16, 500.0), line.format(3, 24, 500.0)]
    bridge = [lines[0], "Step Time : 0.50s GPU utilization: 100.0MODEL_TFLOP/s/GPU", lines[1], lines[2]]
    assert [p.start for p in megatron.read(iter(lines), shape)] == [None, 0, None]
    assert [p.start for p in megatron.read(iter(bridge), shape)] == [None, None, None]


def test_detection_tells_the_formats_apart():
    maxtext = (LLM / MAXTEXT).read_text().splitlines()[5]
    nemo = (LLM / NEMO).read_text().splitlines()[1]
    assert detect(maxtext).name == "maxtext" and detect(nemo).name == "nemo"
    old = "completed step: 3, seconds: 0.006, TFLOP/s/device: 21.951, loss: 10.602"  # MaxText before July 2024
    assert detect(old).name == "maxtext"
    with pytest.raises(DataError, match="print no Tokens/s/device .* its tokens are unknown"):
        list(get_format("maxtext").read(iter([old]), RunShape(global_batch=8, world_size=1)))


def test_extract_reads_every_llm_log_to_a_record(tmp_path, capsys):
    """`dlperf extract` on the folder: one ok record per log, each its reader's figure, and a report."""
    code, _, err = run_cli(["extract", str(LLM), "--no-plots", "--out", str(tmp_path)], capsys)
    assert code == 3 and "extracted 7 logs, skipped 1" in err  # the one-line Bridge run, inside the warm-up
    assert f"skipped {LLM / BRIDGE}: only 1 megatron progress line(s)" in err
    written = {p.name: json.loads(p.read_text()) for p in (tmp_path / "records").rglob("*.json")}
    assert {name: (r["status"], r["format"]) for name, r in written.items()} == {
        Path(log).with_suffix(".json").name: ("ok", log.split("/")[0])
        for log in (MAXTEXT, MAXTEXT_C4, MAXTEST, NEMO, NEMO_LLAMA, NEMO_QWEN, NEMO_TOY)
    }
    maxtest = written[Path(MAXTEST).with_suffix(".json").name]
    assert maxtest["own_reading"]["figure"] == pytest.approx(4221.032 * 32)
    assert (tmp_path / "report.md").is_file()
