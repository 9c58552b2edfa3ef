"""A BERT run whose only progress line is inside the warm-up: the figure its own script printed for the whole run
(DeepLearningExamples' DLLogger `training_sequences_per_second`, TensorFlow's final `throughput_train`) where there is
one, else a one-line refusal naming why. The lines are written here in the scripts' print format (run_pretraining.py
`dllogger.log(step=tuple(), data={"e2e_train_time": ..., "training_sequences_per_second": ...})` through BERT's
`format_step`; the TensorFlow hook's `Iteration:` lines); the figures are made up."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlperf.errors import DataError
from dlperf.framework_logs.extract import Options, read_run
from dlperf.framework_logs.published_names import LogInfo

PYTORCH = [
    "DLL 2021-06-01 10:00:00.000000 - PARAMETER SEED : 42",
    "DLL 2021-06-01 10:01:00.000000 - Training Epoch: 0 Training Iteration: 1  average_loss : 11.03  "
    "learning_rate : 0.0  skipped_steps : 0",
]
PYTORCH_SUMMARY = (
    "DLL 2021-06-01 10:09:00.000000 -  e2e_train_time : 540.2 s training_sequences_per_second : 3456.5 sequences/s "
    "final_loss : 7.91 None raw_train_time : 480.1 s"
)
TENSORFLOW = [
    "DLL 2021-06-01 10:01:00.000000 - Iteration: 1  throughput_train : 95.2 seq/s mlm_loss : 10.37  total_loss : 11.1",
    "DLL 2021-06-01 10:09:00.000000 -  throughput_train : 1234.5 ",
]


def _read(tmp_path: Path, lines: list[str], **options) -> dict:
    path = tmp_path / "bert.log"
    path.write_text("\n".join(lines) + "\n")
    return read_run(LogInfo(path, "bert", 1, 8, 32, "fp16", 1), Options(**options))


def test_the_script_s_own_whole_run_figure_is_taken_where_the_only_line_is_in_the_warm_up(tmp_path):
    record = _read(tmp_path, [*PYTORCH, PYTORCH_SUMMARY])
    assert (record["status"], record["format"]) == ("ok", "dllogger-pytorch-bert")
    assert record["throughput"] == pytest.approx(3456.5)  # global: the script multiplies by its GPU count
    assert record["throughput_per_device"] == pytest.approx(3456.5 / 8)
    assert "inside the 20-iteration warm-up" in record["window_note"] and "whole-run" in record["window_note"]
    assert any("training_sequences_per_second" in note for note in record["reading_notes"])
    assert record["cross_check"]["agree"] is None and "latency_ms" not in record


def test_tensorflow_bert_s_final_throughput_is_its_whole_run_figure(tmp_path):
    record = _read(tmp_path, TENSORFLOW)
    assert (record["format"], record["throughput"]) == ("dllogger-tf", pytest.approx(1234.5))


def test_without_a_whole_run_figure_the_run_is_refused_in_one_line_saying_why(tmp_path):
    with pytest.raises(DataError, match=r"only 1 dllogger-pytorch-bert progress line.*inside the 20-iteration") as e:
        _read(tmp_path, PYTORCH)
    assert "\n" not in str(e.value)


def test_a_run_with_a_window_keeps_the_rule_s_figure(tmp_path):
    """Iterations 1-4 every 0.25 s at a global batch of 256: the time stamps give 1,024/s; the summary is not used."""
    lines = [
        f"DLL 2021-06-01 10:01:0{i}.000000 - Training Epoch: 0 Training Iteration: {4 * i + 1}  average_loss : 11.0"
        for i in range(4)
    ]
    record = _read(tmp_path, [*lines, PYTORCH_SUMMARY], warmup=1, window=0)
    assert record["throughput"] == pytest.approx(12 * 256 / 3)
    assert record["window_note"] is None
