"""Two readings of one run that disagree are never both "ok", the lines that carry the iterations name the format,
and a refusal names its real cause (tests/fixtures/peer-logs/disagree/, real lines copied unchanged: SOURCES.md)."""

from __future__ import annotations

import re
import statistics
import time
from pathlib import Path

import pytest

from dlperf.cli.live import LogFollower
from dlperf.errors import DataError
from dlperf.framework_logs.extract import Options, read_run
from dlperf.framework_logs.published_names import parse_log_path
from dlperf.launch.external_node import last_words
from dlperf.orchestration.external_run import tail_with_error

DISAGREE = Path(__file__).parents[1] / "fixtures" / "peer-logs" / "disagree"
ALCF = DISAGREE / "megatron-deepspeed" / "2n4g" / "alcf-polaris-llama-1b_b32_fp16_1.log"
README = DISAGREE / "megatron-deepspeed" / "2n4g" / "alcf-readme-polaris-llama-7b_b96_fp16_1.log"
TORCHRUN = DISAGREE / "failures" / "1n4g" / "salmonn-torchrun-rank1-error_b6_bf16_1.log"
NEMO1_BAR = DISAGREE / "nemo1-bar" / "1n8g" / "awsome-nemo-launcher-gpt3-126m_b32_bf16_1.log"
BLOOM = DISAGREE / "megatron-deepspeed" / "48n8g" / "bloom176b-chronicles-wrapped_b5_bf16_1.log"
PIPE = DISAGREE / "megatron-deepspeed" / "16n4g" / "bigscience-meg-ds-3d-gpt2-pipe_b16_fp16_1.log"


def read(path: Path, **options) -> dict:
    return read_run(parse_log_path(path), Options(**options))


def test_alcf_megatron_deepspeed_key_value_lines_are_megatrons_not_the_engines():
    """ALCF's `iteration=  N/ M | ... elapsed_time_per_iteration_ms=` lines around DeepSpeed's engine lines (whose
    timer says 74.8 samples/s, 4.7x the iterations' own): read as Megatron, 256 over each iteration's time, its
    printed `samples_per_second` the second reading, agreeing."""
    times = [float(t) for t in re.findall(r"elapsed_time_per_iteration_ms=([\d.]+)", ALCF.read_text("utf-8"))]
    record = read(ALCF, warmup=2)
    assert (record["status"], record["format"], record["kept_steps"]) == ("ok", "megatron", [3, 9])
    assert record["throughput"] == pytest.approx(256 / (statistics.fmean(times[2:]) / 1000), rel=1e-9)
    assert record["throughput"] == pytest.approx(15.8935, abs=1e-4)
    assert record["cross_check"]["agree"] and record["cross_check"]["second"] == pytest.approx(15.8937, abs=1e-4)


def test_an_engine_line_first_does_not_name_the_format():
    """The README's excerpt starts with DeepSpeed's timer line; the iteration lines after it are the log's: read as
    Megatron (53.28 sequences/s), not as the timer's 58.76 beside a cross-check that disagrees."""
    record = read(README)
    assert (record["status"], record["format"], record["kept_steps"]) == ("ok", "megatron", [199, 200])
    assert record["throughput"] == pytest.approx(2 * 768 / (14.2875 + 14.5414), rel=1e-9)
    assert record["cross_check"]["agree"]


def test_a_hard_wrapped_bloom_line_takes_its_batch_from_the_continuation_line():
    """BLOOM-176B's chronicles quote five iteration lines wrapped at 153 columns: the first part (iteration, time)
    is a record on its own, `| global batch size: 2048 |` is on the line after. 2048 / 384 GPUs is no whole batch
    per device, so the path says b5 (1920: x0.938 where the first part was read alone); the cut line is joined with
    its rest: 5 x 2048 over the five times, the printed samples per second agreeing, no batch from the path."""
    parts = BLOOM.read_text("utf-8").splitlines()
    assert [len(line) for line in parts[:3]] == [153, 153, 62] and "global batch size: 2048" in parts[1]
    times = [float(t) for t in re.findall(r"elapsed time per iteration \(s\): ([\d.]+)", "".join(parts))]
    record = read(BLOOM)
    assert (record["status"], record["format"], record["kept_steps"]) == ("ok", "megatron", [42780, 42784])
    assert record["throughput"] == pytest.approx(5 * 2048 / sum(times), rel=1e-12)  # 19.037 sequences/s
    assert record["cross_check"]["agree"] and not any("given global batch" in n for n in record["reading_notes"])


def test_megatron_lines_without_a_batch_take_the_engines_printed_batch_else_say_the_paths(tmp_path):
    """A 2021 Megatron-DeepSpeed 3D run (Megatron-LM v1.1.5: no `global batch size` in its iteration lines) whose
    first known lines are DeepSpeed's (`[Rank 0] step=`, the pipeline engine's `steps: 1 ... samples/sec: 6.805`,
    printed just before each iteration line): read as Megatron, at the engine's printed train_batch_size (1024),
    whatever the path says (b12 here); with that line cut, at the path's batch, the record saying so and the
    report flagging the row."""
    from dlperf.reporting.doubts import case_flags

    lines = PIPE.read_text("utf-8").splitlines()
    elsewhere = tmp_path / "16n4g" / "meg-ds-3d_b12_fp16_1.log"
    elsewhere.parent.mkdir()
    elsewhere.write_text("\n".join(lines) + "\n")
    for log in (PIPE, elsewhere):
        record = read(log)
        assert (record["status"], record["format"], record["kept_steps"]) == ("ok", "megatron", [2, 2])
        assert record["throughput"] == pytest.approx(1024 / 145.207, rel=1e-12)
        assert "samples per step: the engine's printed train_batch_size" in record["reading_notes"]
    elsewhere.write_text("\n".join(line for line in lines if "train_batch_size" not in line) + "\n")
    record = read(elsewhere)
    assert record["throughput"] == pytest.approx(12 * 64 / 145.207, rel=1e-12)
    assert any(n.startswith("samples per iteration: the given global batch, 768") for n in record["reading_notes"])
    assert [f.label for f in case_flags([record]) if f.label == "batch given"] == ["batch given"]


def test_a_component_timer_that_disagrees_gives_way_to_the_stamps_kept_as_evidence(tmp_path):
    """Read as DeepSpeed (forced), the timer's 58.755 (forward, backward, step) and the time stamps' 768 / 14.542 s
    disagree (1.11x): where the log prints the engine's batch (DeepSpeedConfig.print's `train_batch_size ....` line,
    put before the README's lines here in the form the HelloDeepSpeed log holds it), the stamps count it and cover
    the whole iteration: they are the figure, the timer's the second reading, and the record says why. Never "ok"
    with the timer's figure beside `agree: false`."""
    log = tmp_path / "2n4g" / README.name
    log.parent.mkdir()
    config = "[2024-04-21 02:40:00,000] [INFO] [config.py:964:print]   train_batch_size ............. 768\n"
    log.write_text(config + README.read_text("utf-8"))
    record = read(log, format="deepspeed")
    check = record["cross_check"]
    assert (record["status"], record["rule"]) == ("ok", "timestamp")
    assert record["throughput"] == pytest.approx(768 / 14.542, rel=1e-6)  # the stamps' 1 ms
    assert check["agree"] is False and check["second"] == pytest.approx(58.755035155615545)
    assert check["ratio"] == pytest.approx(record["throughput"] / check["second"])
    assert "ThroughputTimer" in check["reading"] and "cover the whole iteration" in check["note"]
    assert check["note"] in record["reading_notes"]
    assert "samples per step: the engine's printed train_batch_size" in record["reading_notes"]
    assert set(check) <= {"agree", "second", "ratio", "reading", "tolerance", "note"}  # records/parts.py CrossCheck


@pytest.mark.parametrize(("log", "options", "figures"), [
    (README, {}, ("58.755", "52.8125", "1.11x")),
    (ALCF, {"warmup": 2}, ("74.8465", "15.8934", "4.71x")),
])  # fmt: skip
def test_a_batch_free_timer_faster_than_stamps_at_the_given_batch_is_refused_naming_both_causes(log, options, figures):
    """The engine's lines alone, no batch printed: the timer needs no batch but times a part of each iteration,
    the stamps cover it all but count the path's batch. Either can be wrong (a placeholder batch in the path read a
    GPT-NeoX log 0.034x by the stamps), so neither is taken: refused, both figures and both causes named."""
    with pytest.raises(DataError) as refused:
        read(log, format="deepspeed", **options)
    text = str(refused.value)
    assert all(figure in text for figure in figures) and "\n" not in text
    assert "needs no batch" in text and "the log prints no batch to tell" in text and "--rule timestamp" in text


def test_a_rule_asked_for_that_contradicts_the_stamps_is_refused_with_both_figures_and_no_flag_blamed():
    """`--rule printed` asks for the timer's figure: 4.71x the stamps, by no factor of the shape. Refused, both
    figures named, what the printed one times said, and the flags said not to be the cause."""
    with pytest.raises(DataError) as refused:
        read(ALCF, format="deepspeed", rule="printed", warmup=2)
    text = str(refused.value)
    assert "74.8465" in text and "15.8934" in text and "4.71x" in text
    assert "so not its --nodes, --devices-per-node or --batch-size" in text and "ThroughputTimer" in text


def test_a_failed_ranks_own_error_is_the_cause_not_torchruns_sigterm_warning():
    """torchrun's tagged `[rank1]: soundfile.LibsndfileError: ...` above its `closing signal SIGTERM` warnings and
    its report: the error is the run's, and the record's 20-line tail starts with it."""
    lines = TORCHRUN.read_text("utf-8").splitlines()
    assert last_words(lines) == "[rank1]: soundfile.LibsndfileError: <exception str() failed>"
    tail = tail_with_error(lines, 20)
    assert len(tail) == 20 and tail[0] == "[rank1]: soundfile.LibsndfileError: <exception str() failed>"
    assert tail[1:] == lines[-19:]
    assert tail_with_error(lines[-10:], 20) == lines[-10:]  # no error line above: the tail as it is
    record = read(TORCHRUN)
    assert record["status"] == "failed" and "LibsndfileError" in record["error"]


def test_a_nemo1_bar_is_never_sent_to_a_rule_its_format_refuses():
    """NeMo 1's one tqdm bar line: the tqdm format's only rule needs two lines. The refusal said "use --rule
    printed", which then said "supports only --rule timestamp"; it says the format has that rule only."""
    with pytest.raises(DataError) as refused:
        read(NEMO1_BAR)
    assert "--rule printed" not in str(refused.value)
    assert "the tqdm format has the timestamp rule only" in str(refused.value)


def test_the_live_line_of_a_silent_command_says_running_then_training_once_the_hook_timed_a_step(tmp_path):
    """A script that prints nothing: "... starting the ranks" until its log is opened (as its processes start),
    then "... running, no step seen yet" (never "starting the ranks" for its whole run), and "training" once the
    start-up hook writes its first step beside the log (`<run>.steps.<host>.<pid>`)."""
    log = tmp_path / "run.log"
    lines: list[str] = []
    with LogFollower(log, lines.append, quiet_s=0.05, poll_s=0.01, plain=True):
        _wait_for(lambda: any(line.startswith("... starting the ranks") for line in lines))
        log.write_text("")
        _wait_for(lambda: any(line.startswith("... running, no step seen yet: ") for line in lines))
        (tmp_path / "run.steps.host.123").write_text('{"step": 1}\n')
        _wait_for(lambda: any(line.startswith("... training") for line in lines))
    said = [line.split(":")[0] for line in lines if line.startswith("... ")]
    assert said == sorted(said, key=["... starting the ranks", "... running, no step seen yet", "... training"].index)
    assert "first step timed: training" in lines
    assert lines.index("first step timed: training") < next(i for i, t in enumerate(lines) if t.startswith("... tr"))


def _wait_for(condition, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the follower never said it"
        time.sleep(0.01)


def test_a_planned_sample_count_gives_way_to_the_hooks_count_of_what_trained():
    """HF Trainer's `train_samples_per_second` counts the planned 25 updates x 8 = 200 samples; the hook counted
    8, 8, 8, 8, 3 per update of each accumulation, 175 in all, over the same stretch (issue 53's run): 0.875x.
    Kept with the hook's figure and a note naming both counts, not refused blaming the batch flags; a format that
    counts what trained is still refused at that gap."""
    from dlperf.framework_logs.registry import get_format
    from dlperf.orchestration.external_run import like_for_like
    from dlperf.records.parts import CrossCheck

    assert get_format("hf-trainer").counts_planned and not get_format("megatron").counts_planned
    seconds = 10.0
    check = like_for_like(CrossCheck(ratio=0.9), 175 / seconds, 200 / seconds, "the whole run", "samples/s", True)
    assert check.agree is False and check.like_for_like.ratio == pytest.approx(0.875)
    assert "the samples its loop planned" in check.note and "the hook's count stands" in check.note
    with pytest.raises(DataError, match="contradicts itself"):
        like_for_like(CrossCheck(ratio=0.9), 175 / seconds, 200 / seconds, "the whole run", "samples/s")
    with pytest.raises(DataError, match="contradicts itself"):  # the hook counting more than planned: no rule
        like_for_like(CrossCheck(ratio=1.2), 230 / seconds, 200 / seconds, "the whole run", "samples/s", True)
