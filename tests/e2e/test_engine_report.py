"""One sweep folder with both engines: `dlperf report DIR --by engine` puts them in one table per case with the
ratio, against hand-computed medians; the JAX engine's refusals are one line before any process starts."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli, run_dlperf
from source_records import record

from dlperf.records.store import write_json_atomic
from dlperf.reporting.sources import series_of

SPEEDS = {  # (engine, case) -> throughputs of the repeats
    ("torch", "1n1g"): [100.0, 110.0, 90.0],  # median 100
    ("torch", "1n2g"): [180.0, 190.0, 170.0],  # median 180
    ("jax", "1n1g"): [50.0, 60.0, 55.0],  # median 55: 0.55 of torch
    ("jax", "1n2g"): [99.0],  # 0.55 of torch
}


@pytest.fixture
def sweep(tmp_path):
    folder = tmp_path / "sweep"
    for (engine, case), speeds in SPEEDS.items():
        group = "b4_fp32" if engine == "torch" else "b4_fp32_jax"
        for i, speed in enumerate(speeds, 1):
            rec = record("resnet50", case, 4, "fp32", i, speed, engine=engine, group=group)
            write_json_atomic(folder / "resnet50" / case / f"resnet50_{group}_{i}.json", rec)
    return folder


def test_engine_token_is_not_part_of_the_series():
    jax = record("resnet50", "1n1g", 4, "fp32", 1, 1.0, engine="jax", group="b4_fp32_jax")
    assert series_of(jax) == series_of(record("resnet50", "1n1g", 4, "fp32", 1, 1.0, engine="torch"))


def test_report_by_engine_on_one_sweep(sweep, capsys):
    code, out, err = run_cli(["report", str(sweep), "--by", "engine", "--format", "json"], capsys)
    assert code == 0, err
    assert str(sweep / "engines" / "summary.json") in out
    summary = json.loads((sweep / "engines" / "summary.json").read_text())
    assert summary["sources"] == ["torch", "jax"]
    (series,) = summary["series"]
    assert series["variant"] == "fp32" and series["common_case"] == "1n2g"
    for case, torch_median, jax_median in (("1n1g", 100.0, 55.0), ("1n2g", 180.0, 99.0)):
        cells = series["cases"][case]
        assert cells["sources"]["torch"]["median_speed"] == torch_median
        assert cells["sources"]["jax"]["median_speed"] == jax_median
        assert cells["ratio_to_first"]["jax"] == 0.55
    # rebuilt in place like the folder's own report: no --overwrite needed the second time
    assert run_cli(["report", str(sweep), "--by", "engine", "--format", "md"], capsys)[0] == 0
    assert "| 1n2g | 2 | 180.00 | 99.00 | 0.550 |" in (sweep / "engines" / "report.md").read_text()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--model", "gpt", "--devices-per-node", "2", "--pp", "2", "--num-layers", "2"], "no pipeline parallelism"),
        (["--model", "resnet50", "--precision", "amp-fp16"], "amp-fp16 is not available on the JAX engine"),
        (["--model", "resnet50", "--compile"], "compiled by XLA already"),
        (["--model", "resnet50", "--channels-last"], "--channels-last True is read by --engine torch only"),
    ],
)
def test_jax_refusals_one_line(tmp_path, flags, message):
    done = run_dlperf(["run", "--engine", "jax", "--device", "cpu", *flags, "--out", str(tmp_path)])
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not any(tmp_path.iterdir())
