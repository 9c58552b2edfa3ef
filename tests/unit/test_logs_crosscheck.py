"""Each class of misreading planted in an otherwise real log, and the second reading catching it: per device read
as global, tokens read as sequences, a step time in the wrong unit. The plain figures come from the real logs
(tests/fixtures/peer-logs/real*/); the plants change only the figures named."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dlperf.errors import DataError
from dlperf.framework_logs.extract import Options, read_run
from dlperf.framework_logs.published_names import parse_log_path

FIXTURES = Path(__file__).parents[1] / "fixtures" / "peer-logs"


def planted(tmp_path: Path, source: str, change, name: str | None = None) -> Path:
    """A copy of a real log at the same layout path (or `name` in its folder) with `change(event)` applied to every
    MLLOG event."""
    out = tmp_path / Path(source).parent.name / (name or Path(source).name)
    out.parent.mkdir(parents=True)
    lines = []
    for line in (FIXTURES / source).read_text(encoding="utf-8").splitlines():
        if ":::MLLOG {" in line:
            head, body = line.split(":::MLLOG ", 1)
            event = json.loads(body)
            change(event)
            line = f"{head}:::MLLOG {json.dumps(event)}"
        lines.append(line)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def read(path: Path) -> dict:
    return read_run(parse_log_path(path), Options())


def scale_throughput(factor: float):
    def change(event: dict) -> None:
        if event["key"] == "tracked_stats" and "throughput" in event["value"]:
            event["value"]["throughput"] *= factor

    return change


def test_per_device_printed_where_the_counts_say_global_is_refused_with_both_figures(tmp_path):
    """BERT's tracked throughput planted per device (/ 8): its own sample counts and stamps say 8x more."""
    real = read(FIXTURES / "real/mlperf/1n8g/bert-dell_b96_mixed_1.log")["throughput"]
    with pytest.raises(DataError, match=r"contradicts itself.*about the device count") as caught:
        read(planted(tmp_path, "real/mlperf/1n8g/bert-dell_b96_mixed_1.log", scale_throughput(1 / 8)))
    shown = [float(x) for x in re.findall(r"gives? ([\d.]+)", str(caught.value))]
    assert shown[0] == pytest.approx(real / 8, rel=0.005) and shown[1] == pytest.approx(real, rel=0.005)


def test_per_device_epoch_figures_are_scaled_by_the_epoch_evidence_and_say_so(tmp_path):
    """ResNet's per-epoch throughput planted per device (/ 2 on 1n2g): the epoch time stamps x ImageNet's size
    decide it is per device; the figure is the real one and the record says why."""
    source = "real/mlperf/1n2g/resnet-fujitsu_b408_mixed_1.log"
    real = read(FIXTURES / source)
    record = read(planted(tmp_path, source, scale_throughput(1 / 2)))
    assert record["throughput"] == pytest.approx(real["throughput"], rel=1e-6)
    assert any("per device (x 2)" in note for note in record["reading_notes"])
    assert record["cross_check"]["agree"] is True


def test_tokens_read_as_sequences_is_refused(tmp_path):
    """gpt3's step time replaced by a tracked throughput in tokens/s (2048 tokens per sequence). Named `lm` so
    that the physical bound of a GPT-3 sequence (which refuses it too) leaves it to the cross-check."""

    def change(event: dict) -> None:
        if event["key"] == "tracked_stats" and "train_step_timing" in event["value"]:
            event["value"] = {"throughput": 2688 * 2048 / event["value"]["train_step_timing"]}

    with pytest.raises(DataError, match="about the tokens per sample"):
        read(planted(tmp_path, "real/mlperf/1344n8g/gpt3-azure_b1_mixed_1.log", change, "lm_b1_mixed_1.log"))


def test_a_step_time_in_the_wrong_unit_is_refused(tmp_path):
    """NeMo's `train_step_timing in s` planted in milliseconds: 1000x off against the step counts' stamps."""

    def change(event: dict) -> None:
        if event["key"] == "tracked_stats" and "train_step_timing in s" in event["value"]:
            event["value"]["train_step_timing in s"] *= 1000

    with pytest.raises(DataError, match=r"contradicts itself.*by no factor"):
        read(planted(tmp_path, "real-2/mlperf/8n8g/gpt3-nvidia-v41_b32_mixed_1.log", change))


def test_a_wrong_batch_in_the_path_is_named_and_flagged_not_hidden():
    """MXNet prints its own speed; the path's batch (a placeholder) disagrees with the log's stamps: kept, flagged,
    with the batch the stamps imply (256 = 32 per device x 8)."""
    record = read(FIXTURES / "real/mxnet/1n8g/inceptionv4-mxnet-issue3072_b1_fp32_1.log")
    assert record["throughput"] == pytest.approx(92.71)
    assert record["cross_check"]["agree"] is False
    assert "global batch of about 256" in record["cross_check"]["note"]


def test_the_report_flags_a_row_whose_readings_disagree():
    from dlperf.reporting.aggregate import summarise

    flagged = read(FIXTURES / "real/mxnet/1n8g/inceptionv4-mxnet-issue3072_b1_fp32_1.log")
    clean = read(FIXTURES / "real/mxnet/1n4g/resnet18v2-cifar-mxnet-issue15962_b32_fp32_1.log")
    labels = {
        case.case: [f.label for f in case.flags()] for cases in summarise([flagged, clean]).values() for case in cases
    }
    assert "readings" in labels["1n8g"] and "readings" not in labels["1n4g"]


def test_tokens_counted_as_samples_are_beyond_the_physical_bound_of_the_workload(tmp_path):
    """maxtext's gpt3 log without the two events that say its counts are tokens (benchmark, sequence length):
    read as samples, 176k sequences/s on 512 chips is 344 per chip, above 1e16 FLOP/s / 1e15 FLOPs per sequence."""

    def change(event: dict) -> None:
        if event["key"] in ("submission_benchmark", "max_sequence_length"):
            event["key"] = "x_removed"

    with pytest.raises(DataError, match=r"above the plausible 10 samples/s per device .*GPT-3"):
        read(planted(tmp_path, "real-2/mlperf/128n4g/gpt3-google-v40_b4_mixed_1.log", change))


HABANA_GPT3 = "real-2/mlperf/128n8g/gpt3-intelhabanalabs-v40_b2_mixed_1.log"


def test_a_block_whose_own_count_disagrees_with_its_evaluations_contradicts_itself(tmp_path):
    """Habana's gpt3 run is one timed block with 25 evaluations inside. Planted: its block_stop says it ended at
    one evaluation interval (24,576 sequences), as the block's epoch_count does. The evaluations' counts over their
    stamps (about 155 sequences/s) are the second reading: 25x apart is a contradiction, not a figure."""

    def one_interval(event: dict) -> None:
        if event["key"] == "block_stop":
            event["metadata"]["samples_count"] = 24576

    with pytest.raises(DataError, match=r"contradicts itself.*give 155\.") as caught:
        read(planted(tmp_path, HABANA_GPT3, one_interval))
    assert "6.09" in str(caught.value)  # the block's own count over its time: the figure dlperf used to print


def test_a_lower_bound_reading_refutes_a_slower_figure_and_only_a_much_faster_one():
    """Arrival times hold what a script's own clock leaves out (its printing, a loaded machine's pauses): a keras-style
    script printing 385/s whose lines came at 156/s (2.47x, seen at load 2 on 2 cores) is kept with a note; 10x
    faster, or over 2x slower, contradicts them."""
    from dlperf.framework_logs.base import RunShape
    from dlperf.framework_logs.crosscheck import cross_check
    from dlperf.framework_logs.measure import Measured

    shape = RunShape(32, 1, "gpt")

    def check(first: float, second: float):
        measured = Measured(throughput=first, kept=4, first_step=None, last_step=None, latency_ms=None,
                            memory_mib=None, metrics={}, window_note=None, runs=1, second=second,
                            second_reading="arrival times of its lines")  # fmt: skip
        return cross_check(measured, "printed", "images/s", shape, second_is_lower_bound=True)

    kept = check(384.987, 155.702)
    assert kept["agree"] is False and "a lower bound" in kept["note"]
    for first, second in ((1000.0, 100.0), (100.0, 250.0)):
        with pytest.raises(DataError, match="the log contradicts itself"):
            check(first, second)
