"""Readers for lines a simple rule reads and dlperf did not (issue 53), each quoting its framework's source in its
module docstring; fixtures under tests/fixtures/peer-logs/disagree/ (SOURCES.md)."""

from __future__ import annotations

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
    assert (record["status"], record["format"], record["unit"], record["kept_steps"]) == (
        "ok",
        "llmc",
        "tokens/s",
        [2, 10],
    )
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


def test_the_llmc_reader_gives_no_figure_from_another_trainers_log():
    for path in _small_logs():
        if path == LLMC:
            continue
        try:
            record = read_run(parse_log_path(path), Options(format="llmc"))
        except DataError as refusal:
            assert "\n" not in str(refusal)
            continue
        assert record["status"] == "failed", f"llmc read {path.relative_to(PEER_LOGS)}"
