"""Today's LLM stacks' own logs (tests/fixtures/peer-logs/stacks/, copied unchanged from the sources in its
SOURCES.md): DeepSpeed, nanotron, torchtune and MaxText's older line, each read against a hand reading written here
apart from the readers (a regex over the file and the framework's own definition of its figure), within 2 %."""

from __future__ import annotations

import re
import shutil
import statistics
from datetime import datetime
from pathlib import Path

import pytest

from dlperf.errors import DataError
from dlperf.framework_logs.base import RunShape
from dlperf.framework_logs.extract import Options, read_run
from dlperf.framework_logs.formats.tqdm_bar import bar_time
from dlperf.framework_logs.published_names import parse_log_path
from dlperf.framework_logs.registry import FORMATS, detect, get_format
from dlperf.framework_logs.textlines import strip_prefixes
from dlperf.reporting.doubts import case_flags

PEER_LOGS = Path(__file__).parents[1] / "fixtures" / "peer-logs"
STACKS = PEER_LOGS / "stacks"
HELLO = "deepspeed/1n1g/hellodeepspeed-bert_b16_fp16_1.log"
CSCS = "deepspeed/8n1g/userlabday-bert-squad_b64_fp32_1.log"
DSCHAT = "deepspeed/1n1g/npu-dschat-step2-opt350m_b64_fp16_1.log"
NANOTRON_8 = "nanotron/1n8g/pr23-topology-agnostic_b2_bf16_1.log"
NANOTRON_2 = "nanotron/1n2g/issue390-log-error_b32_bf16_1.log"
TORCHTUNE = "torchtune/1n1g/pr1358-codellama-7b_b2_bf16_1.log"
TORCHTUNE_4 = "torchtune/1n4g/pr2605-xpu-llama2-7b_b2_bf16_1.log"
MAXTEXT_OLD = "maxtext/1n8g/pgo-llama2-7b-a3-old_b12_bf16_1.log"
LITGPT = "litgpt/1n1g/0-to-litgpt-phi2-lora_b4_bf16_1.log"
LITGPT_OLD = "litgpt/1n1g/issue689-redpajama-pythia70m_b4_fp16_1.log"
LITGPT_SUMMARY = "litgpt/1n1g/pr1805-pretrain-summary_b1_bf16_1.log"
LIGHTNING_SLOW = "tqdm/1n1g/issue4225-lightning-sit_b1_fp32_1.log"
TF21 = "keras/1n1g/tf21-mnist-blog_b32_fp32_1.log"
TF2_VERBOSE2 = "keras/1n1g/guildai-r-fashion-verbose2_b32_fp32_1.log"
MEGATRON_DS = "megatron/8n4g/jubench-13b-bloom-ds_b32_fp16_1.log"
NEW = ("deepspeed", "nanotron", "torchtune", "litgpt")


def text(log: str) -> str:
    return (STACKS / log).read_text(encoding="utf-8")


def read(log: str, **options) -> dict:
    return read_run(parse_log_path(STACKS / log), Options(**options))


def test_every_stacks_log_is_a_case():
    cases = {HELLO, CSCS, DSCHAT, NANOTRON_8, NANOTRON_2, TORCHTUNE, TORCHTUNE_4, MAXTEXT_OLD, LITGPT, LITGPT_OLD,
             LITGPT_SUMMARY, LIGHTNING_SLOW, TF21, TF2_VERBOSE2, MEGATRON_DS}  # fmt: skip
    assert {str(p.relative_to(STACKS)) for p in STACKS.rglob("*.log")} == cases


def running_averages(log: str) -> dict[int, float]:
    """DeepSpeed's printed RunningAvgSamplesPerSec by global step (the newer and the 2022 line)."""
    found = re.findall(r"(?:global_step=|\] 0/)(\d+), RunningAvgSamplesPerSec=([\d.]+)", text(log))
    return {int(step): float(average) for step, average in found}


def deepspeed_window(log: str, first: int, last: int) -> float:
    """DeepSpeed's ThroughputTimer holds batch x (step - 2) / RunningAvg seconds at a printed step (timer.py
    avg_samples_per_sec, start_step 2): the samples between two printed steps over the timer's time between them."""
    average = running_averages(log)
    return (last - first) / ((last - 2) / average[last] - (first - 2) / average[first])


def test_deepspeed_hellodeepspeed_run_is_the_timers_samples_over_its_time_once_settled():
    """A whole HelloDeepSpeed BERT run (DeepSpeed 0.10, 1 GPU, train_batch_size 16, 90 steps printed every 10, a
    checkpoint saved after each print), by the timer's own clock. Its intervals after the 10-step count ran 160, 118,
    116, 133, 128, then 116, 115, 119 samples/s: steps 11-20 skipped 7 optimizer steps (fp16's loss scale settling:
    `skipped=17` at step 20) and steps 41-60 ran 11-15 % fast, so the lines settle only from step 61: steps 60-90,
    116.24 samples/s (steps 10-90 gave 124.07). The stamps hold the nine checkpoint saves, which the timer leaves out:
    no interval without a save, so no second reading. DeepSpeed's own RunningAvgSamplesPerSec at step 90 (steps
    3-90, the start included) is kept beside it."""
    record = read(HELLO)
    assert (record["status"], record["format"], record["unit"]) == ("ok", "deepspeed", "samples/s")
    assert record["kept_steps"] == [70, 90] and record["warmup_iterations"] == 60
    assert record["throughput"] == pytest.approx(deepspeed_window(HELLO, 60, 90), rel=1e-9)
    assert record["throughput"] == pytest.approx(116.24, abs=0.01)
    assert record["own_reading"]["figure"] == pytest.approx(128.46620267622004)
    assert record["cross_check"]["agree"] is None
    assert len(re.findall(r"Checkpoint global_step\d+ is about to be saved", text(HELLO))) == 9
    # the step's time, batch x the timer's seconds per step, is the mean latency
    assert record["latency_ms"]["mean"] == pytest.approx(16 / record["throughput"] * 1000)


def test_deepspeed_2022_lines_agree_with_their_time_stamps_at_the_batch_the_stamps_imply():
    """The CSCS user-lab log (DeepSpeed 2022 `0/S, RunningAvgSamplesPerSec=` lines, 8 nodes x 1 GPU, no saves):
    steps 20-40 by the timer, 227.48 samples/s, and the stamps give the same at 512 samples a step (8 x 64), the
    batch no file of the source states: the timer's figure needs none."""
    record = read(CSCS)
    assert record["status"] == "ok" and record["kept_steps"] == [30, 40]
    assert record["throughput"] == pytest.approx(deepspeed_window(CSCS, 20, 40), rel=1e-9)
    stamps = re.findall(r"^\[([\d-]+ [\d:]+),(\d+)\] \[INFO\] \[timer", text(CSCS), re.M)
    seconds = [datetime.fromisoformat(day).timestamp() + int(ms) / 1000 for day, ms in stamps]
    by_stamps = 20 * 512 / (seconds[2] - seconds[0])
    assert record["cross_check"]["agree"] and record["cross_check"]["second"] == pytest.approx(by_stamps)
    assert record["throughput"] / by_stamps == pytest.approx(1.0, abs=0.001)


def test_deepspeed_counts_optimizer_steps_under_gradient_accumulation():
    """DeepSpeed-Chat's step 2 on one Ascend NPU (gradient accumulation 4: `micro_step=1880/global_step=470`; the
    post elides steps 20-440 as `...`): the timer's clock counts global steps, so steps 10-470 by it are
    460 / (468 / R470 - 8 / R10) = 25.734 samples/s, and the stamps at 64 samples a step (16 x 4) agree."""
    average = running_averages(DSCHAT)
    assert sorted(average) == [10, 450, 460, 470] and "micro_step=1880/global_step=470" in text(DSCHAT)
    record = read(DSCHAT)
    assert (record["status"], record["kept_steps"]) == ("ok", [450, 470])
    assert record["throughput"] == pytest.approx(deepspeed_window(DSCHAT, 10, 470), rel=1e-9)
    stamps = re.findall(r"^\[([\d-]+ [\d:]+),(\d+)\] \[INFO\] \[timer", text(DSCHAT), re.M)
    first, last = (datetime.fromisoformat(day).timestamp() + int(ms) / 1000 for day, ms in (stamps[0], stamps[-1]))
    assert record["cross_check"]["agree"] and record["cross_check"]["second"] == pytest.approx(
        460 * 64 / (last - first)
    )


def test_deepspeed_step_lines_alone_are_read_by_their_time_stamps(tmp_path):
    """DeepSpeed-Chat and HF Trainer + DeepSpeed print the `[Rank 0] step=` lines without the timer's: their stamps
    x steps x the global batch, after step 10 (the HelloDeepSpeed run with its timer lines taken out)."""
    path = tmp_path / "deepspeed" / "1n1g" / "steps-only_b16_fp16_1.log"
    path.parent.mkdir(parents=True)
    kept = [line for line in text(HELLO).splitlines(keepends=True) if "SamplesPerSec=" not in line]
    path.write_text("".join(kept))
    record = read_run(parse_log_path(path), Options())
    stamps = {
        int(step): datetime.fromisoformat(day).timestamp() + int(ms) / 1000
        for day, ms, step in re.findall(r"^\[([\d-]+ [\d:]+),(\d+)\] .*\[Rank 0\] step=(\d+),", text(HELLO), re.M)
    }
    assert record["status"] == "ok" and record["format"] == "deepspeed"
    assert record["throughput"] == pytest.approx(80 * 16 / (stamps[90] - stamps[10]), rel=1e-9)  # 91.66
    assert "read by its time stamps" in record["window_note"]


def human(value: str) -> float:
    return float(value[:-1]) * 1000 if value.endswith("K") else float(value)


def test_nanotron_tokens_over_the_iterations_time():
    """nanotron prints each logged iteration's time and tokens_per_sec (global, 3 significant digits): the tokens
    of the iterations over their summed time. PR 23's 8-GPU excerpt (iterations 991-993, past the warm-up) and issue
    390's 2-GPU lines (64 x 4096 tokens an iteration in 11.5 s: 22.8K tokens/s)."""
    for log, devices in ((NANOTRON_8, 8), (NANOTRON_2, 2)):
        rows = re.findall(r"elapsed_time_per_iteration_ms: (\S+) \| tokens_per_sec: (\S+) \|", text(log))
        seconds = [human(ms) / 1000 for ms, _ in rows]
        tokens = [human(rate) * s for (_, rate), s in zip(rows, seconds)]
        record = read(log)
        assert (record["status"], record["format"], record["unit"]) == ("ok", "nanotron", "tokens/s")
        assert record["throughput"] == pytest.approx(sum(tokens) / sum(seconds), rel=1e-9)
        assert record["throughput_per_device"] == pytest.approx(record["throughput"] / devices)
    assert read(NANOTRON_8)["throughput"] == pytest.approx(15253.8, abs=0.1)
    assert pytest.approx(read(NANOTRON_2)["throughput"], rel=0.005) == 64 * 4096 / 11.5  # the issue's own shape


def test_nanotron_log_read_with_another_device_count_is_refused(tmp_path):
    """Its tokens_per_sec over tokens_per_sec_per_gpu is the job's device count (2 in issue 390)."""
    path = tmp_path / "nanotron" / "1n8g" / "issue390_b8_bf16_1.log"
    path.parent.mkdir(parents=True)
    shutil.copy(STACKS / NANOTRON_2, path)
    with pytest.raises(DataError, match=r"say 2 devices, not the 8 given"):
        read_run(parse_log_path(path), Options())


def test_torchtune_per_gpu_rates_are_combined_as_tokens_over_time():
    """torchtune prints only each step's tokens_per_second_per_gpu (tokens since the last log / the time since it):
    steps 6-12 after the 5-step warm-up, each step's time at its rate (the harmonic mean), x 1 device; the
    arithmetic mean of the same rates is kept beside it, and the record says the figure assumes equal tokens."""
    rates = {
        int(s): float(r)
        for s, r in re.findall(r"^Step (\d+) \|.*tokens_per_second_per_gpu:(\S+)", text(TORCHTUNE), re.M)
    }
    kept = [rates[step] for step in range(6, 13)]
    record = read(TORCHTUNE)
    assert (record["status"], record["format"], record["unit"]) == ("ok", "torchtune", "tokens/s")
    assert record["kept_steps"] == [6, 12]
    assert record["throughput"] == pytest.approx(statistics.harmonic_mean(kept), rel=1e-9)  # 491.86
    assert record["peer_metrics"]["mean_of_printed_rates"] == pytest.approx(statistics.fmean(kept))  # 548.35
    assert any("the same tokens" in note for note in record["reading_notes"])


def test_torchtune_per_gpu_rate_is_scaled_by_the_devices():
    """torchtune's distributed recipe on 4 Intel XPUs (PR 2605's `--nproc_per_node 4` run; its last line cut in the
    post after peak_memory_reserved, the rate intact): step 6 past the 5-step warm-up, 187.37 per device x 4."""
    record = read(TORCHTUNE_4)
    assert (record["status"], record["kept_steps"], record["world_size"]) == ("ok", [6, 6], 4)
    assert record["throughput"] == pytest.approx(187.36773681640625 * 4, rel=1e-12)
    assert record["throughput_per_device"] == pytest.approx(187.36773681640625)


def test_maxtext_older_line_takes_its_tokens_from_the_config_lines():
    """A March 2024 MaxText log on 8 H100s (llama2-7b; no Tokens/s/device on its lines; `Config param
    per_device_batch_size: 12.0` and `max_target_length: 2048`), the file ending without a line end: steps 2-29
    (steps 5-8 under an nsys capture), 12 x 2048 tokens per device a step over their summed seconds, x 8; step 2 ran
    17 % faster than steps 3-5, which agree: the lines settle after it, so steps 3-29. MaxText's own practice, the
    last step, is 1.15x faster than the run's window."""
    seconds = {int(s): float(t) for s, t in re.findall(r"completed step: (\d+), seconds: ([\d.]+)", text(MAXTEXT_OLD))}
    assert sorted(seconds) == list(range(30)) and not text(MAXTEXT_OLD).endswith("\n")
    kept = [seconds[step] for step in range(3, 30)]
    record = read(MAXTEXT_OLD)
    assert (record["status"], record["format"], record["kept_steps"]) == ("ok", "maxtext", [3, 29])
    assert record["throughput"] == pytest.approx(len(kept) * 12 * 2048 / sum(kept) * 8, rel=1e-9)  # 39,686.1
    assert record["own_reading"]["figure"] == pytest.approx(12 * 2048 / seconds[29] * 8)  # 45,712.2
    assert any("ends without a line end" in note for note in record["reading_notes"])


def test_litgpt_iterations_are_micro_batches_over_their_iter_time(tmp_path):
    """LitGPT's tutorial run (phi-2 LoRA on 1 GPU, its printed TrainArgs: micro_batch_size=4, global 8): iterations
    6-10 after the 5-iteration warm-up, 4 samples each over their summed iter time, 7.63 samples/s; the path's batch
    is not needed. lit-gpt's 2023 redpajama excerpt (pythia-70m, micro batch 4 per the issue's hyperparameters, the
    path's b4): iterations 76-98, 19.39 samples/s."""
    times = [float(t) for t in re.findall(r"iter time: ([\d.]+) ms", text(LITGPT))]
    record = read(LITGPT)
    assert (record["status"], record["format"], record["kept_steps"]) == ("ok", "litgpt", [6, 10])
    assert record["throughput"] == pytest.approx(5 * 4 / (sum(times[5:]) / 1000), rel=1e-9)
    assert "printed micro_batch_size" in record["reading_notes"][0]
    path = tmp_path / "litgpt" / "1n1g" / "tutorial_b16_bf16_1.log"  # a wrong batch in the path changes nothing
    path.parent.mkdir(parents=True)
    shutil.copy(STACKS / LITGPT, path)
    assert read_run(parse_log_path(path), Options())["throughput"] == pytest.approx(record["throughput"])
    old = [float(t) for t in re.findall(r"iter time: ([\d.]+)ms", text(LITGPT_OLD))]
    record = read(LITGPT_OLD)
    assert record["kept_steps"] == [76, 98] and len(old) == 23
    assert record["throughput"] == pytest.approx(23 * 4 / (sum(old) / 1000), rel=1e-9)


def test_litgpt_pretrain_summary_is_its_tokens_over_its_training_time():
    """LitGPT's pretraining summary alone (#1805's own example): 999,424 tokens over its 48.30 s Training Time,
    20,692 tokens/s for the whole run, said so; its printed `Tok/sec: 60.93` divides by a clock reading
    (`time.perf_counter()` at the start), not the elapsed time, and is not read."""
    record = read(LITGPT_SUMMARY)
    assert (record["status"], record["format"], record["unit"]) == ("ok", "litgpt", "tokens/s")
    assert record["throughput"] == pytest.approx(999424 / 48.30, rel=1e-12)
    assert "whole-run figure" in record["window_note"] and "not read" in record["reading_notes"][0]


def test_a_slow_lightning_bar_is_timed_by_count_times_its_s_per_it():
    """Lightning's TQDM bar (smoothing 0: `4.14s/it` is elapsed / n to 2 decimals) slower than a step a second: the
    bar's time is n x s/it (5 x 4.14 = 20.70 s, inside its clock's [20, 21) s), known to 0.1 %, not the clock's
    whole second; iterations 3-5 of the issue's bar: 3 / (20.70 - 11.64) s. A long bar's n x s/it (1000 x 1.23,
    +-5 s) is coarser than its clock: the clock's second is used where both agree."""
    record = read(LIGHTNING_SLOW, warmup=2)
    assert (record["status"], record["format"], record["kept_steps"]) == ("ok", "tqdm", [3, 5])
    assert record["throughput"] == pytest.approx(3 / (5 * 4.14 - 2 * 5.82), rel=1e-9)
    assert bar_time(5, 20, "4.14", "s/it") == pytest.approx((20.70, 0.025))
    assert bar_time(1000, 1234, "1.23", "s/it") == pytest.approx((1234.5, 0.5))
    assert bar_time(100, 7, "10.00", "it/s") == pytest.approx((7.5, 0.5))  # a smoothed rate off the clock: the clock


def test_tf_keras_2_per_sample_bars_give_samples_over_time():
    """TensorFlow 2.0/2.1 given arrays counts samples (`Train on 60000 samples`, `60000/60000 [====] - 6s
    99us/sample`): epochs 2-10, each sample at its printed time (after the epoch's first update; validation
    included, as Keras prints it after validation): 9 / sum(us) x 1e6 = 10,285.7 samples/s, no batch needed."""
    times = [int(t) for t in re.findall(r"- 6s (\d+)us/sample", text(TF21))]
    record = read(TF21)
    assert (record["status"], record["format"], len(times)) == ("ok", "keras", 10)
    assert record["throughput"] == pytest.approx(9 / (sum(times[1:]) * 1e-6), rel=1e-9)
    assert "includes the validation" in record["reading_notes"][0]


def test_tf_keras_2_verbose2_epochs_of_a_few_seconds_are_refused_as_too_coarse():
    """tf.keras 2.9+ verbose=2 from R (knitr's `#> ` before each line): 1,500-step epochs of 2-3 s printed as
    `2s - ... - 2s/epoch - 1ms/step`: the finest clock is +-25 %: refused in one line, never read."""
    with pytest.raises(DataError, match=r"printed too coarsely .* \+-25\.0%") as refusal:
        read(TF2_VERBOSE2)
    assert "\n" not in str(refusal.value)


def test_megatron_deepspeed_printed_rate_is_the_second_reading_of_its_step_time(tmp_path):
    """JUPITER's Megatron-DeepSpeed excerpt (13B on 8 x 4 A100, `elapsed time per iteration (s)`, its last line cut
    in the source after `lm loss: 8.`): iterations 30-50 past the 20-iteration warm-up, 1024 / the mean time =
    29.107 sequences/s; the lines' own `samples per second` (29.365, 28.980; the cut line has none) agree. With the
    batch misprinted (256 on every line) the printed rate contradicts the step time: refused, both figures named."""
    times = [float(t) for t in re.findall(r"elapsed time per iteration \(s\): ([\d.]+)", text(MEGATRON_DS))]
    record = read(MEGATRON_DS)
    assert (record["status"], record["format"], record["kept_steps"]) == ("ok", "megatron", [30, 50])
    assert record["throughput"] == pytest.approx(1024 / statistics.fmean(times[2:]), rel=1e-9)
    assert record["cross_check"]["agree"] and record["cross_check"]["second"] == pytest.approx((29.365 + 28.980) / 2)
    bad = tmp_path / "megatron" / "8n4g" / "misprinted_b32_fp16_1.log"
    bad.parent.mkdir(parents=True)
    bad.write_text(text(MEGATRON_DS).replace("global batch size:  1024", "global batch size:   256"))
    with pytest.raises(DataError, match=r"contradicts itself: .* printed samples per second .*\(0\.249x"):
        read_run(parse_log_path(bad), Options())


def test_ranks_of_one_run_printing_figures_apart_are_flagged(tmp_path):
    """Two ranks of one HF Trainer run printing 154.2 and 70.5 samples/s (the real 2-process log's metrics line, and
    a second rank's beside it with its own figures): the median is kept, and the record and the report's row say the
    log contradicts itself. The 8 ranks of a real torchtitan log, within 0.01 % of each other, are no contradiction."""
    real = PEER_LOGS / "trainers" / "hf-trainer" / "1n2g" / "bert-tiny-hf5-torchrun_b4_fp32_1.log"
    lines = real.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if "train_samples_per_second" in line)
    first = re.sub(r"'train_samples_per_second': '[\d.]+'", "'train_samples_per_second': '154.2'", lines[at])
    second = re.sub(r"'train_samples_per_second': '[\d.]+'", "'train_samples_per_second': '70.5'", lines[at])
    path = tmp_path / "hf-trainer" / "1n2g" / "two-ranks_b4_fp32_1.log"
    path.parent.mkdir(parents=True)
    path.write_text("".join([*lines[:at], first, second, *lines[at + 1 :]]))
    record = read_run(parse_log_path(path), Options())
    assert record["status"] == "ok" and record["throughput"] == pytest.approx((154.2 + 70.5) / 2)
    assert record["contradictions"] == [
        "2 ranks printing iteration 1 disagree on its throughput: 154.2 and 70.5 (2.19x, beyond the 10% ranks of one "
        "run differ by); the median is kept"
    ]
    flags = case_flags([record])
    assert [f.label for f in flags if f.label == "contradicts"] == ["contradicts"]
    titan = read_run(
        parse_log_path(PEER_LOGS / "real" / "torchtitan/1n8g/issue-pr2389-multirank_b1_bf16_1.log"), Options()
    )
    assert "contradictions" not in titan


def test_detection_names_each_stack():
    for log, name in ((HELLO, "deepspeed"), (CSCS, "deepspeed"), (NANOTRON_8, "nanotron"), (TORCHTUNE, "torchtune"),
                      (MAXTEXT_OLD, "maxtext"), (LITGPT, "litgpt"), (LITGPT_OLD, "litgpt")):  # fmt: skip
        first = next(line for line in text(log).splitlines() if detect(line) is not None)
        assert detect(first).name == name, log


def _small_logs() -> list[Path]:
    return sorted(p for p in PEER_LOGS.rglob("*.log") if p.stat().st_size < 60_000 and "handwritten" not in p.parts)


@pytest.mark.parametrize("name", NEW)
def test_a_new_reader_gives_no_figure_from_another_trainers_log(name):
    """Each new reader forced onto every other real log of the fixtures refuses it in one line: none reads another
    trainer's lines as its own."""
    for path in _small_logs():
        if path.is_relative_to(STACKS / name) or (name == "deepspeed" and "megatron-deepspeed" in path.parts):
            continue  # Megatron-DeepSpeed logs hold DeepSpeed's own engine lines
        try:
            record = read_run(parse_log_path(path), Options(format=name))
        except DataError as refusal:
            assert "\n" not in str(refusal)
            continue
        assert record["status"] == "failed", f"{name} read {path.relative_to(PEER_LOGS)}"


def test_every_format_on_a_stacks_log_is_refused_or_its_own():
    """Every other format forced onto the new logs gives no figure."""
    for path in STACKS.rglob("*.log"):
        first = next(line for line in path.read_text(encoding="utf-8").splitlines() if detect(strip_prefixes(line)))
        own = detect(strip_prefixes(first)).name
        for fmt in FORMATS:
            if fmt.name == own:
                continue
            try:
                record = read_run(parse_log_path(path), Options(format=fmt.name))
            except DataError:
                continue
            assert record["status"] == "failed", f"{fmt.name} read {path.relative_to(STACKS)}"


def test_text_as_terminals_and_posts_leave_it_reads_the_same(tmp_path):
    """The same real logs, as a terminal wrapped them at 80 columns (nanotron's 400-character lines in five
    parts), or as a post printed their carriage returns (`^M`, Lightning's tqdm bar redrawn), read as the originals."""
    wrapped = tmp_path / "nanotron" / "1n8g" / "wrapped_b2_bf16_1.log"
    wrapped.parent.mkdir(parents=True)
    parts = [line[i : i + 80] for line in text(NANOTRON_8).splitlines() for i in range(0, len(line), 80)]
    wrapped.write_text("\n".join(parts) + "\n")
    assert max(len(p) for p in parts) == 80 and len(parts) > 3 * 3
    assert read_run(parse_log_path(wrapped), Options())["throughput"] == pytest.approx(read(NANOTRON_8)["throughput"])
    bar = PEER_LOGS / "trainers" / "tqdm" / "1n1g" / "mlp-lightning_b32_fp32_1.log"
    caret = tmp_path / "tqdm" / "1n1g" / "caret_b32_fp32_1.log"
    caret.parent.mkdir(parents=True)
    raw = bar.read_bytes()
    assert b"\r" in raw
    caret.write_bytes(raw.replace(b"\r", b"^M"))
    original = read_run(parse_log_path(bar), Options())
    assert read_run(parse_log_path(caret), Options())["throughput"] == pytest.approx(original["throughput"])


@pytest.mark.parametrize(
    ("start", "batch", "counted"),
    [
        ("global_batch_size: 20 | sequence_length: 32", "20", True),  # samples x the stated sequence: 640
        ("global_batch_size: 20 | sequence_length: 64", "20", False),  # 1280 is not what the rate x time says
        (None, "640", True),  # later nanotron prints global_batch_size in tokens
    ],
)
def test_nanotron_tokens_come_from_its_counts_only_where_its_rate_confirms_them(start, batch, counted):
    """PR 23's lines (640 tokens an iteration: 14.2K x 45 ms = 639) with a `[Start training]` line before them,
    or with the batch printed in tokens: the counts give each iteration's tokens, and the printed rate becomes the
    line's second reading, only where the rate x time confirms them (within 2 %); else rate x time alone."""
    lines = text(NANOTRON_8).splitlines()
    if start:
        lines.insert(0, f"01/17/2024 13:47:00 [INFO|DP=0|PP=0|TP=0]: [Start training] datetime: x | mbs: 1 | {start}")
    lines = [line.replace("global_batch_size: 20 |", f"global_batch_size: {batch} |") for line in lines]
    points = list(get_format("nanotron").read(iter(lines), RunShape(global_batch=16, world_size=8)))
    assert len(points) == 3
    assert all((p.check is not None) == counted for p in points)
    expected = [640.0] * 3 if counted else [14.2e3 * 0.045, 15.5e3 * 0.0412, 16.2e3 * 0.0394]
    assert [p.batch for p in points] == pytest.approx(expected)
