"""Readers for lines a simple rule reads and dlperf did not (issue 53), each quoting its framework's source in its
module docstring; fixtures under tests/fixtures/peer-logs/disagree/ (SOURCES.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dlperf.errors import DataError
from dlperf.framework_logs.extract import Options, read_run
from dlperf.framework_logs.published_names import parse_log_path
from dlperf.framework_logs.registry import detect

PEER_LOGS = Path(__file__).parents[1] / "fixtures" / "peer-logs"
LLMC = PEER_LOGS / "disagree" / "llmc" / "1n8g" / "discussion677-gpt2-1558m_b16_bf16_1.log"
STEP_MS = [2747.19, 2753.25, 2741.47, 2752.07, 2751.01, 2753.03, 2748.91, 2748.73, 2749.40]


def test_llmc_is_the_global_batchs_tokens_over_the_steps_after_the_first():
    """llm.c's GPT-2 1558M on 8 H100s: 1,048,576 tokens a step over steps 2-10's ms = 381,376.48 tokens/s; the
    printed tok/s is an EMA, kept as llm.c's own reading (381,369 at step 10)."""
    record = read_run(parse_log_path(LLMC), Options())
    assert reading(record) == ("ok", "llmc", "tokens/s", [2, 10])
    assert record["throughput"] == pytest.approx(len(STEP_MS) * 1048576 / (sum(STEP_MS) / 1000), rel=1e-9)
    assert record["own_reading"]["figure"] == 381369.0
    assert detect(LLMC.read_text("utf-8").splitlines()[2]).name == "llmc"  # the batch line names it


def test_llmc_without_its_batch_line_is_refused_in_one_line(tmp_path):
    lines = [line for line in LLMC.read_text("utf-8").splitlines() if "total_batch_size" not in line]
    log = tmp_path / "1n8g" / "cut_b16_bf16_1.log"
    log.parent.mkdir()
    log.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match="no `total_batch_size=` line"):
        read_run(parse_log_path(log), Options())


def _small_logs() -> list[Path]:
    return sorted(p for p in PEER_LOGS.rglob("*.log") if p.stat().st_size < 60_000 and "handwritten" not in p.parts)


OWN = {"llmc": "llmc", "gpt-neox": "gpt-neox", "deepspeed-chat": "deepspeed-chat", "aws-fsdp": "aws-fsdp",
       "nanochat": "nanochat", "modded-nanogpt": "modded-nanogpt", "deepspeed-pipe": "megatron-deepspeed",
       "hf-trainer-steps": "hf-trainer-steps"}  # format -> its fixtures' folder  # fmt: skip


@pytest.mark.parametrize("name", sorted(OWN))
def test_a_new_reader_gives_no_figure_from_another_trainers_log(name):
    for path in _small_logs():
        if OWN[name] in path.parts:
            continue
        try:
            record = read_run(parse_log_path(path), Options(format=name))
        except DataError as refusal:
            assert "\n" not in str(refusal)
            continue
        assert record["status"] == "failed", f"{name} read {path.relative_to(PEER_LOGS)}"


DISAGREE = PEER_LOGS / "disagree"
NEOX = PEER_LOGS / "handwritten" / "gpt-neox" / "1n8g" / "neox-placeholder_b1_fp16_1.log"
DSCHAT = DISAGREE / "deepspeed-chat" / "1n16g" / "dschat-step3-opt1.3b-opt350m_b4_fp16_1.log"
FSDP_K8S = DISAGREE / "aws-fsdp" / "4n8g" / "k8s-readme-llama3.1-8b_b1_bf16_1.log"
FSDP_SLURM = DISAGREE / "aws-fsdp" / "4n8g" / "slurm-readme-llama3-8b_b1_bf16_1.log"
NANOCHAT = PEER_LOGS / "handwritten" / "nanochat" / "1n8g" / "d20-speedrun_b32_bf16_1.log"
MODDED = DISAGREE / "modded-nanogpt" / "1n8g"
NANOCHAT_A100 = DISAGREE / "nanochat" / "1n8g" / "pr147-a100-sxm4-d20_b32_bf16_1.log"


def read(path: Path, **options) -> dict:
    return read_run(parse_log_path(path), Options(**options))


def reading(record: dict) -> tuple:
    """What a reader's record says it read: its status, format, unit and kept steps."""
    return record["status"], record["format"], record["unit"], record["kept_steps"]


def copy_to(tmp_path: Path, path: Path, lines: list[str], case: str | None = None, name: str | None = None) -> Path:
    log = tmp_path / (case or path.parent.name) / (name or path.name)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("\n".join(lines) + "\n")
    return log


def test_gpt_neox_reads_its_own_samples_per_sec_not_a_placeholder_batch():
    """GPT-NeoX's `samples/sec` (train_batch_size over the interval timer: everything between two lines) needs no
    batch: the path's b1 (8 samples an iteration where the run trains 32) changes nothing. DeepSpeed's timer lines
    (forward, backward, step only) are the second reading: 8.0, faster than NeoX's 6.74 beyond the tolerance, so
    NeoX's figure, which covers the whole iteration, stands and the timer's is kept as evidence. The lines are
    built from the two print statements (gpt-neox megatron/logging.py, deepspeed/utils/timer.py): no real GPT-NeoX
    log with both was found."""
    record = read(NEOX)
    check = record["cross_check"]
    assert (record["status"], record["format"], record["kept_steps"]) == ("ok", "gpt-neox", [20, 30])
    assert record["throughput"] == pytest.approx(20 / (10 / 6.5 + 10 / 7.0), rel=1e-12)
    assert check["agree"] is False and check["second"] == pytest.approx(8.0)
    assert "ThroughputTimer" in check["reading"] and "it is taken" in check["note"]
    assert not any("given global batch" in note for note in record["reading_notes"])


NEOX_DELTA = DISAGREE / "gpt-neox" / "1n1g" / "delta-moe2-338m_b1_bf16_1.log"


def test_a_real_gpt_neox_log_is_its_own_samples_per_sec_after_its_first_interval(tmp_path):
    """A real GPT-NeoX run's rank-0 stdout (a 338M 2-expert MoE on one GPU, train_batch_size 1, iterations 10-270
    every 10, DeepSpeed's timer lines not printed): iteration 10's interval (1.328 samples/s, the start-up) is the
    first 10 iterations, dropped; iterations 11-270 are 26 lines of 10 iterations, each at its printed rate, by hand
    26 x 10 / sum(10 / samples/sec) = 6.0896 samples/s (each rate is train_batch_size over the line's elapsed time:
    1 / 0.1643 s = 6.086 for 6.085). The figure needs no batch: the path's b4 changes nothing and says nothing."""
    rates = [float(r) for r in re.findall(r"^ samples/sec: ([\d.]+) \|", NEOX_DELTA.read_text("utf-8"), re.M)]
    assert len(rates) == 27 and rates[0] == 1.328
    by_hand = 26 * 10 / sum(10 / rate for rate in rates[1:])
    assert round(by_hand, 4) == 6.0896
    record = read(NEOX_DELTA)
    assert reading(record) == ("ok", "gpt-neox", "samples/s", [20, 270])
    assert record["throughput"] == pytest.approx(by_hand, rel=1e-12) and record["cross_check"]["agree"] is None
    lines = NEOX_DELTA.read_text("utf-8").splitlines()
    elsewhere = read(copy_to(tmp_path, NEOX_DELTA, lines, name="delta_b4_bf16_1.log"))
    assert elsewhere["throughput"] == record["throughput"]
    assert not any("given global batch" in note for note in elsewhere["reading_notes"])


def test_gpt_neox_lines_after_an_engine_line_are_still_neoxs(tmp_path):
    """The log's first known line is DeepSpeed's `[Rank 0] step=`: NeoX's iteration lines name the format (the
    file read again as gpt-neox), not the engine's timer nor Megatron's reader of the same line shape."""
    lines = NEOX.read_text("utf-8").splitlines()
    assert "[Rank 0] step=" in lines[0]
    assert read(copy_to(tmp_path, NEOX, lines))["format"] == "gpt-neox"


def test_engine_lines_alone_with_the_engines_printed_batch_take_their_stamps(tmp_path):
    """Read as DeepSpeed (forced), the same log's stamps at the path's placeholder batch (8 an iteration) are 6x
    below the timer's batch-free 8.0: refused, both causes named (the held-out NeoX log read 0.034x by them). With
    DeepSpeed's own config line (`train_batch_size ............. 32`, as DeepSpeedConfig.print writes it) the stamps
    count 32 samples a step: they cover the whole iteration and are taken, the timer's figure the evidence."""
    with pytest.raises(DataError, match="the log prints no batch to tell"):
        read(NEOX, format="deepspeed", warmup=1)
    config = "[2024-05-01 10:00:00,000] [INFO] [config.py:964:print]   train_batch_size ............. 32"
    record = read(copy_to(tmp_path, NEOX, [config, *NEOX.read_text("utf-8").splitlines()]), format="deepspeed",
                  warmup=1)  # fmt: skip
    assert (record["status"], record["rule"]) == ("ok", "timestamp")
    assert record["throughput"] == pytest.approx(20 * 32 / (136.010 - 40.010))
    assert record["cross_check"]["second"] == pytest.approx(8.0)
    assert "samples per step: the engine's printed train_batch_size" in record["reading_notes"]


def test_deepspeed_chat_reads_its_rlhf_steps_not_the_actors_training_timer(tmp_path):
    """DeepSpeed-Chat step 3 (OPT-1.3b actor, OPT-350m critic, 16 GPUs x 4 prompts): the hybrid engine's
    CurSamplesPerSec of steps 2-21, each step's 64 prompts at its rate, 16.84 prompts/s; the actor's ThroughputTimer
    in the same log (86 samples/s) times its training alone. The last AvgSamplesPerSec (16.00) is its own reading."""
    text = DSCHAT.read_text("utf-8")
    rates = [float(r) for r in re.findall(r"\|CurSamplesPerSec=([\d.]+) ", text)]
    record = read(DSCHAT)
    assert (record["status"], record["format"], record["kept_steps"]) == ("ok", "deepspeed-chat", [2, 21])
    assert record["throughput"] == pytest.approx(len(rates[1:]) / sum(1 / r for r in rates[1:]), rel=1e-12)
    assert record["own_reading"]["figure"] == 16.0
    lines = text.splitlines()
    engine_first = lines[next(i for i, line in enumerate(lines) if "[Rank 0]" in line) :]
    assert read(copy_to(tmp_path, DSCHAT, engine_first))["format"] == "deepspeed-chat"


def test_aws_fsdp_speed_is_each_steps_global_rate():
    """awsome-distributed-training's FSDP README excerpts: batches 90-97 of Llama 3.1 8B on 4 nodes x 8 GPUs, each
    step at its printed global Speed (8.94 samples/s); their whole-second stamps leave 7 steps of ~3.7 s unknown to
    4 %: no second reading. The Slurm excerpt's 6 lines are all inside the 5-batch warm-up: its later half."""
    speeds = [float(s) for s in re.findall(r"Speed: ([\d.]+) samples/sec", FSDP_K8S.read_text("utf-8"))]
    record = read(FSDP_K8S)
    assert (record["status"], record["format"], record["kept_steps"]) == ("ok", "aws-fsdp", [90, 97])
    assert record["throughput"] == pytest.approx(len(speeds) / sum(1 / s for s in speeds), rel=1e-12)
    assert record["cross_check"]["agree"] is None
    slurm = read(FSDP_SLURM)
    assert slurm["kept_steps"] == [3, 5] and slurm["throughput"] == pytest.approx(
        3 / (1 / 10.61 + 1 / 10.18 + 1 / 8.98)
    )


def test_nanochat_is_the_total_batch_over_each_steps_dt_after_step_10(tmp_path):
    """nanochat's own practice counts the steps after step 10; without its `Total batch size` line the printed
    tok/sec x dt stands in, said so (lines from base_train.py's print statement; no real log was found)."""
    head, step = NANOCHAT.read_text("utf-8").splitlines()[:3], NANOCHAT.read_text("utf-8").splitlines()[4]
    lines = [*head, *(step.replace("00001/00004", f"{n:05d}/00020") for n in range(20))]
    record = read(copy_to(tmp_path, NANOCHAT, lines))
    assert (record["format"], record["unit"], record["kept_steps"]) == ("nanochat", "tokens/s", [11, 19])
    assert record["throughput"] == pytest.approx(524288 / 1.0, rel=1e-12)
    bare = read(copy_to(tmp_path, NANOCHAT, [line for line in lines if "Total batch" not in line], "1n4g"))
    assert bare["throughput"] == pytest.approx(524288, rel=1e-12)
    assert any("printed tok/sec x dt" in note for note in bare["reading_notes"])


def test_nanochat_reads_a_real_logs_steps_at_their_printed_rate_x_dt():
    """Real lines (karpathy/nanochat PR 147, an A100 SXM4 run: steps 4-10, no `Total batch size` line): each step's
    tokens are its printed tok/sec x dt (524,285-524,289, the d20 speedrun's 524,288), over the steps' summed dt.
    All lie inside nanochat's 10-step warm-up: the later 4 are kept and the record says so; --log-warmup 3 keeps
    steps 4-10. Hand reading of steps 7-10: 527,053 tokens/s."""
    rows = re.findall(r"^step (\d+)/\d+ .*? \| dt: ([\d.]+)ms \| tok/sec: ([\d,]+) \|", NANOCHAT_A100.read_text(), re.M)
    steps = {int(n): (float(ms) / 1000, int(rate.replace(",", ""))) for n, ms, rate in rows}

    def by_hand(first: int) -> float:
        kept = [steps[n] for n in range(first, 11)]
        return sum(dt * rate for dt, rate in kept) / sum(dt for dt, _ in kept)

    record = read(NANOCHAT_A100)
    assert reading(record) == ("ok", "nanochat", "tokens/s", [7, 10])
    assert record["throughput"] == pytest.approx(by_hand(7), rel=1e-12) and round(by_hand(7)) == 527053
    assert "all inside the 10-iteration warm-up: kept the later 4" in record["window_note"]
    assert any("printed tok/sec x dt" in note for note in record["reading_notes"])
    assert read(NANOCHAT_A100, warmup=3)["throughput"] == pytest.approx(by_hand(4), rel=1e-12)


def test_modded_nanogpt_is_a_steps_tokens_over_its_training_clock():
    """Two speedrun records (excerpts: the printed code's batch lines, the first 30 steps and the last ones): the
    2024 clock restarts at step 10, so the window runs from step 11's train_time to the last step's; 512 x 1024
    tokens a step (Nov 2024) and 2048 x 16 x 8 (Oct 2025). The last step_avg as a rate is the framework's own."""
    old = read(MODDED / "castbf16-2024-11-08_b64_bf16_1.log")
    assert (old["status"], old["format"], old["rule"], old["kept_steps"]) == ("ok", "modded-nanogpt", "timestamp",
                                                                              [12, 3242])  # fmt: skip
    assert old["throughput"] == pytest.approx((3242 - 11) * 524288 / ((467564 - 99) / 1000), rel=1e-12)
    assert old["own_reading"]["figure"] == pytest.approx(524288 / 0.14467)
    new = read(MODDED / "adamsync-2025-10-31_b1_bf16_1.log")
    assert new["throughput"] == pytest.approx((2245 - 11) * 262144 / ((137492 - 654) / 1000), rel=1e-12)
    with pytest.raises(DataError, match="schedules the batch size"):
        read(MODDED / "fp8downproj-2026-07-17-staged_b1_bf16_1.log")


HF_STEPS = DISAGREE / "hf-trainer-steps" / "1n1g" / "msft-pr7-ort-steps_b36_fp32_1.log"


def test_a_trainer_forks_per_step_dicts_are_each_steps_samples_over_its_runtime(tmp_path):
    """microsoft/huggingface-transformers PR 7's sample prints: five per-step dicts between the tqdm bar's lines,
    steps 2086-2090 of 2120 (each dict is the step the bar counted last; the first, before any bar line, the bar's
    first count), far past the 5-step warm-up: every step's runtime x rate (36.00 samples, no batch from the path)
    over the summed runtime, by hand 180.0 / 3.2506 s = 55.374 samples/s. An evaluation's bar between them counts
    no steps; without the bar lines the dicts are steps 1-5, all inside the warm-up: the later half (steps 3-5)."""
    text = HF_STEPS.read_text("utf-8")
    step = r"'train_step_runtime': ([\d.]+), 'train_step_samples_per_second': ([\d.]+)"
    pairs = [(float(t), float(v)) for t, v in re.findall(step, text)]
    assert [round(t * v, 2) for t, v in pairs] == [36.0] * 5
    record = read(HF_STEPS)
    assert reading(record) == ("ok", "hf-trainer-steps", "samples/s", [2086, 2090])
    assert record["throughput"] == pytest.approx(sum(t * v for t, v in pairs) / sum(t for t, _ in pairs), rel=1e-12)
    assert round(record["throughput"], 3) == 55.374 and record["cross_check"]["agree"] is None
    assert not any("given global batch" in note for note in record["reading_notes"])
    lines = text.splitlines()
    evaluated = [*lines[:6], " 50%|█████     | 5/10 [00:01<00:01,  4.30it/s]", *lines[6:]]  # a bar of another total
    assert read(copy_to(tmp_path, HF_STEPS, evaluated))["kept_steps"] == [2086, 2090]
    bare = read(copy_to(tmp_path, HF_STEPS, [line for line in lines if "it/s" not in line], "1n2g"))
    assert bare["kept_steps"] == [3, 5]
    assert bare["throughput"] == pytest.approx(sum(t * v for t, v in pairs[2:]) / sum(t for t, _ in pairs[2:]))


def test_a_batch_taken_from_the_path_is_said_in_the_record_and_the_report(tmp_path):
    """A Megatron line with no `global batch size` (cut from the handwritten line here, as newer lines print none)
    is read at the path's batch (b16 on 8 GPUs, the 128 the line printed): the record says so and the report flags
    the row; the line with its own batch says nothing."""
    from dlperf.reporting.doubts import case_flags

    megatron = PEER_LOGS / "handwritten" / "megatron" / "1n8g" / "gpt_b4_bf16_1.log"
    own = read(megatron)
    assert not any("given global batch" in note for note in own["reading_notes"])
    cut = [re.sub(r" global batch size: +\d+ \|", "", line) for line in megatron.read_text("utf-8").splitlines()]
    record = read(copy_to(tmp_path, megatron, cut, name="gpt_b16_bf16_1.log"))
    assert record["status"] == "ok" and record["throughput"] == pytest.approx(own["throughput"])
    note = (
        "samples per iteration: the given global batch, 128 (16 per device x 8, from the file's path or --batch-size)"
    )
    assert any(n.startswith(note) for n in record["reading_notes"])
    assert [f.label for f in case_flags([record]) if f.label == "batch given"] == ["batch given"]


def test_deepspeed_pipeline_engine_lines_are_its_batch_free_whole_iterations(tmp_path):
    """DeepSpeed's pipeline engine (`steps: 2 loss: 12.8004 iter time (s): 145.206 samples/sec: 7.052`: its
    train_batch_size over the train_batch timer, every micro-batch and the optimizer step): the Megatron-DeepSpeed
    log without its own iteration lines is read by them, at no batch of the path's (b12 where 16 trained); its
    first known line, `[Rank 0] step=0`, is the engine's, which yields to them."""
    pipe = DISAGREE / "megatron-deepspeed" / "16n4g" / "bigscience-meg-ds-3d-gpt2-pipe_b16_fp16_1.log"
    lines = [line for line in pipe.read_text("utf-8").splitlines() if "| elapsed time per iteration" not in line]
    assert "[Rank 0] step=0" in lines[1] and detect(lines[1]).name == "deepspeed"
    record = read(copy_to(tmp_path, pipe, lines, name="pipe_b12_fp16_1.log"))
    assert (record["status"], record["format"], record["kept_steps"]) == ("ok", "deepspeed-pipe", [2, 2])
    assert record["throughput"] == 7.052 and record["unit"] == "samples/s"
    assert not any("given global batch" in note for note in record["reading_notes"])
