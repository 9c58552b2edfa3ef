"""The cross-source report against hand-computed medians, speedups and ratios, and with real TF2 Keras logs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli
from source_records import env, record, write_source

from dlperf.errors import ConfigError
from dlperf.framework_logs.extract import Options, extract_dir
from dlperf.records.store import write_json_atomic
from dlperf.reporting.comparison_files import case_table, series_notes, summary_table
from dlperf.reporting.sources import SeriesKey, Source, build_comparison, load_sources

TF2_LOGS = Path(__file__).parents[1] / "fixtures" / "peer-logs" / "tf2-keras-resnet50"


@pytest.fixture
def two_sources(tmp_path):
    return [write_source(tmp_path, "A"), write_source(tmp_path, "B")]


def test_summary_row_per_source_at_largest_common_case(two_sources):
    comparison = build_comparison(load_sources(two_sources))
    assert comparison.labels == ["A", "B"]
    fp32, amp = comparison.series  # sorted: amp-fp16 before fp32
    fp32, amp = (fp32, amp) if fp32.key.variant == "fp32" else (amp, fp32)
    # fp32: batch 128 is the largest both ran, so B's b64 2n8g never counts: the largest shared case is 1n4g
    assert fp32.batches == {"A": 128, "B": 128}
    assert fp32.common_case == "1n4g"
    assert fp32.cell("A", "1n4g").throughput == 380.0 and fp32.cell("A", "1n4g").speedup == 3.8
    assert fp32.cell("B", "1n4g").throughput == 410.0 and fp32.cell("B", "1n4g").speedup == 3.42
    assert fp32.cell("A", "1n1g").repeats == 3 and fp32.cell("A", "1n1g").failed == 1
    assert fp32.max_batches == {"A": 160, "B": None}
    # amp: no shared batch, so each source's own largest
    assert amp.batches == {"A": 256, "B": 192}
    assert amp.common_case == "1n4g"
    assert amp.cell("A", "1n4g").speedup == 3.46 and amp.cell("B", "1n4g").speedup == 3.2

    header, rows = summary_table(comparison)
    assert header[0] == "source" and [r[0] for r in rows] == ["A", "B"]
    fp32_col = header.index("resnet50 fp32 samples/s, 4 devices (1n4g)")
    assert rows[0][fp32_col : fp32_col + 4] == ["380.00", "3.80", "128", "160"]
    assert rows[1][fp32_col : fp32_col + 4] == ["410.00", "3.42", "128", ""]
    amp_col = header.index("resnet50 amp-fp16 samples/s, 4 devices (1n4g)")
    assert rows[0][amp_col : amp_col + 3] == ["710.00", "3.46", "256"]
    assert rows[1][amp_col : amp_col + 3] == ["800.00", "3.20", "192"]


def test_case_table_ratio_to_first(two_sources):
    comparison = build_comparison(load_sources(two_sources, labels=["native", "peer"]))
    fp32 = next(s for s in comparison.series if s.key == SeriesKey("resnet50", "fp32"))
    header, rows = case_table(fp32)
    assert header == [
        "case", "devices", "native samples/s (b128)", "peer samples/s (b128)", "peer / native",
        "native flags", "peer flags",
    ]  # fmt: skip
    # the doubt flags beside each source's figure: native 1n1g repeats 100, 110, 90 vary by CV 10 %, peer has 1
    assert rows == [
        ["1n1g", "1", "100.00", "120.00", "1.200", "CV", "n=1"],
        ["1n4g", "4", "380.00", "410.00", f"{410 / 380:.3f}", "", ""],
        ["2n8g", "16", "1500.00", "", "", "CV", ""],
    ]
    notes = series_notes(fp32)
    assert notes[0].startswith("native 1n1g [CV]: repeats vary by CV 10.0%") and notes[1].startswith("peer 1n1g [n=1]")


def test_environment_differences(two_sources):
    comparison = build_comparison(load_sources(two_sources))
    rows = {row.fact: row for row in comparison.environment}
    assert rows["torch"].values == {"A": "2.4.0", "B": "2.5.1"} and rows["torch"].differs
    assert not rows["python"].differs and not rows["gpu driver"].differs
    assert rows["engine / format"].values == {"A": "torch", "B": "torch"}


def test_real_tf2_keras_logs_as_a_source(tmp_path):
    """The published TF2 figures (2n8g 4849.68 img/s, speedup 15.07) come through as one row of the summary."""
    peer, skipped = extract_dir(TF2_LOGS, Options())
    assert not skipped
    native = [record("resnet50", c, 128, "fp32", 1, s) for c, s in (("1n1g", 300.0), ("2n8g", 4200.0))]
    comparison = build_comparison([Source.from_records("pytorch", native), Source.from_records("tf2-keras", peer)])
    (series,) = comparison.series  # rn50 and resnet50 are one model
    assert series.key == SeriesKey("resnet50", "fp32")
    assert series.common_case == "2n8g"
    header, rows = summary_table(comparison)
    assert rows[1][:4] == ["tf2-keras", "4849.68", "15.07", "128"]
    assert rows[0][:4] == ["pytorch", "4200.00", "14.00", "128"]
    assert series.ratios("1n1g")["tf2-keras"] == round(321.80 / 300.0, 3)
    assert comparison.environment[0].values == {"pytorch": "torch", "tf2-keras": "tf2-keras"}


def test_cli_several_folders(two_sources, tmp_path, capsys):
    out = tmp_path / "cmp"
    args = ["report", *map(str, two_sources), "--label", "native", "--label", "peer", "--out", str(out)]
    code, stdout, err = run_cli(args, capsys)
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sources"] == ["native", "peer"]
    fp32 = next(s for s in summary["series"] if s["variant"] == "fp32")
    assert fp32["common_case"] == "1n4g"
    assert fp32["cases"]["1n4g"]["sources"]["peer"]["median_speed"] == 410.0
    assert fp32["cases"]["1n4g"]["ratio_to_first"]["peer"] == round(410 / 380, 3)
    assert summary["environment"]["torch"]["differs"] is True
    report = (out / "report.md").read_text()
    assert "| 380.00 | 3.80 | 128 | 160 |" in report and "| peer | 800.00 | 3.20 | 192 |" in report
    assert "**torch** (differs)" in report
    for name in ("report.html", "plots/compare_resnet50_fp32.png", "plots/compare_resnet50_amp-fp16.png"):
        assert (out / name).stat().st_size > 0 and str(out / name) in stdout


def test_cli_by_engine_pools_folders(two_sources, tmp_path, capsys):
    peer_dir = tmp_path / "tf2"
    code, _, err = run_cli(["extract", str(TF2_LOGS), "--out", str(peer_dir)], capsys)
    assert code == 0, err
    out = tmp_path / "by-engine"
    code, _, err = run_cli(["report", str(two_sources[0]), str(peer_dir), "--by", "engine", "--out", str(out)], capsys)
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sources"] == ["torch", "tf2-keras"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--label", "only-one"], "1 --label for 2 folders"),
        (["--label", "x", "--label", "x"], "two sources are labelled 'x'"),
        ([], "need --out DIR"),
    ],
)
def test_cli_bad_usage_one_line(two_sources, tmp_path, capsys, extra, message):
    out = [] if message == "need --out DIR" else ["--out", str(tmp_path / "o")]
    code, _, err = run_cli(["report", *map(str, two_sources), *extra, *out], capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_load_sources_refuses_labels_by_engine(two_sources):
    with pytest.raises(ConfigError, match="drop --label"):
        load_sources(two_sources, labels=["a", "b"], by="engine")


def test_aliases_pool_into_one_table():
    """`rn50` and `resnet50` records in one source are the same cases: their repeats pool (median of 3)."""
    records = [record("rn50", "1n1g", 128, "fp32", 1, 100.0), record("resnet50", "1n1g", 128, "fp32", 2, 130.0)]
    records.append(record("ResNet-50", "1n1g", 128, "fp32", 3, 110.0))
    source = Source.from_records("pooled", records)
    (cases,) = source.series[SeriesKey("resnet50", "fp32")].values()
    assert cases[0].speeds == [100.0, 130.0, 110.0] and cases[0].stats["median"] == 110.0


def test_a_tensorflow_command_is_named_by_its_framework_and_no_row_is_empty(tmp_path):
    """A `--command` TensorFlow run carries dlperf's environment (no torch of its own): the environment table has
    a framework row saying `tensorflow 2.20.0`, and no fact that no source knows is an empty row."""
    machine = {"host": "h", "cpu": "Xeon", "os": "Linux", "python": "3.11.9"}
    tf = [
        record(
            "resnet50",
            case,
            128,
            "fp32",
            1,
            speed,
            kind="external",
            framework="tensorflow 2.20.0",
            env=machine,
        )
        for case, speed in (("1n1g", 300.0), ("1n2g", 580.0))
    ]
    native = [
        record("resnet50", case, 128, "fp32", 1, speed, engine="torch", framework="torch 2.14.1", env=env("2.14.1"))
        for case, speed in (("1n1g", 310.0), ("1n2g", 600.0))
    ]
    comparison = build_comparison([Source.from_records("torch", native), Source.from_records("tf", tf)])
    rows = {row.fact: row.values for row in comparison.environment}
    assert rows["framework"] == {"torch": "torch 2.14.1", "tf": "tensorflow 2.20.0"}
    assert all(any(v is not None for v in values.values()) for values in rows.values())
    assert "cudnn" not in rows and "nccl" not in rows and "jax" not in rows  # nobody knows them: no row


def test_report_environment_names_the_commands_framework(tmp_path, capsys):
    machine = {"host": "h", "cpu": "Xeon", "os": "Linux", "python": "3.11.9"}
    for case, speed in (("1n1g", 300.0), ("1n2g", 580.0)):
        rec = record("resnet50", case, 128, "fp32", 1, speed, kind="external", framework="tensorflow 2.20.0")
        write_json_atomic(tmp_path / "tf" / "resnet50" / case / "resnet50_b128_fp32_1.json", {**rec, "env": machine})
    code, _, err = run_cli(["report", str(tmp_path / "tf"), "--out", str(tmp_path / "out")], capsys)
    assert code == 0, err
    report = (tmp_path / "out" / "report.md").read_text()
    assert "- Python 3.11.9, tensorflow 2.20.0" in report and "torch None" not in report
