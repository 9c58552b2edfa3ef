"""The published figures: the shipped table, the accelerator a record names, and a report row's share of the best
figure for the same work on the same accelerator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli
from report_records import record

from dlperf.machine.environment import _gpus
from dlperf.metrics.accelerator import accelerator_identity
from dlperf.metrics.peaks import lookup_peak
from dlperf.records.store import write_json_atomic
from dlperf.references import figures, load

FIXTURES = Path(__file__).parents[1] / "fixtures" / "peer-logs" / "real"
H100 = "NVIDIA H100 80GB HBM3"


class NvmlWithLinks:
    """Two H100s: 18 NVLink links up on each (links past 18 do not exist), PCIe gen 5 x16."""

    NVML_NVLINK_MAX_LINKS = 20

    class NVMLError(Exception):
        pass

    def nvmlInit(self) -> None: ...

    def nvmlShutdown(self) -> None: ...

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        return H100.encode()

    def nvmlDeviceGetMemoryInfo(self, handle: int):
        return type("Memory", (), {"total": 81559 * 1024 * 1024})()

    def nvmlDeviceGetNvLinkState(self, handle: int, link: int) -> int:
        if link >= 18:
            raise self.NVMLError("invalid argument")
        return 1

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: int) -> int:
        return 5

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: int) -> int:
        return 16


def test_h100_identity_from_nvml_and_a_cpu_identity():
    gpus = _gpus(NvmlWithLinks())
    assert gpus[0]["interconnect"] == {"nvlink_links": 18, "pcie_generation": 5, "pcie_width": 16}
    identity = accelerator_identity("cuda", H100, {"gpus": gpus}, 8, 8)
    assert identity["model"] == "H100 SXM" and identity["name"] == H100
    assert identity["memory_gib"] == 79.6  # 81559 MiB / 1024 = 79.65
    assert (identity["count"], identity["per_node"], identity["source"]) == (8, 8, "NVML")
    assert identity["interconnect"]["nvlink_links"] == 18
    cpu = accelerator_identity("cpu", "cpu", {"cpu": "AMD EPYC 7763", "memory_gib": 503.2, "gpus": []}, 2, 2)
    assert (cpu["kind"], cpu["name"], cpu["model"], cpu["memory_gib"]) == ("cpu", "AMD EPYC 7763", None, 503.2)


def test_every_figure_cites_its_source_and_its_arithmetic_holds():
    table = load()
    assert table["schema"] == "dlperf.references/1" and table["version"]
    for f in table["figures"]:
        assert f["url"].startswith("https://github.com/") and f["how"]
        if f.get("published_total"):  # the per-device figure is the published total over its devices
            assert f["value"] == pytest.approx(f["published_total"] / f["devices"], abs=0.006)
    with pytest.raises(ValueError, match="lacks source"):
        load(json.dumps({"schema": "dlperf.references/1", "figures": [{**table["figures"][0], "source": ""}]}))


def test_mlperf_figure_is_what_dlperfs_reader_reads(tmp_path, capsys):
    """The Fujitsu 2 x A100 row: the median of the five MLPerf v3.1 logs' images/s (the fixtures are those logs),
    over the 2 devices."""
    code, _, err = run_cli(["extract", str(FIXTURES / "mlperf" / "1n2g"), "--out", str(tmp_path), "--no-plots"], capsys)
    assert code == 0, err
    (case,) = json.loads((tmp_path / "summary.json").read_text())["resnet-fujitsu"]["b408_mixed"].values()
    (row,) = [f for f in figures("resnet50") if f["source"].endswith("primergy-cdi-A100x2-mxnet-ngc23.09, resnet")]
    assert row["published_total"] == case["median_speed"] and row["value"] == case["median_speed_per_device"]


def _h100_run(root: Path, case: str, throughput: float, accelerator: dict) -> None:
    rec = record(case, 1, throughput, group="b400_amp-fp16", accelerator=accelerator)
    write_json_atomic(root / "resnet50" / case / "resnet50_b400_amp-fp16_1.json", rec)


def test_an_h100_row_at_its_share_of_the_best_published_figure(tmp_path, capsys):
    """8 H100s at 42,337.86 samples/s: 5,292.2325 a device, 75.0 % of the best published H100 SXM figure at
    amp-fp16 (MLPerf v3.1 Dell XE9680: 7,056.31 a device)."""
    h100 = accelerator_identity("cuda", H100, {"gpus": _gpus(NvmlWithLinks())}, 8, 8)
    _h100_run(tmp_path, "1n8g", 42337.86, h100)
    code, _, err = run_cli(["report", str(tmp_path), "--format", "md"], capsys)
    assert code == 0, err
    code, _, err = run_cli(["report", str(tmp_path), "--format", "json", "--overwrite"], capsys)
    assert code == 0, err
    published = json.loads((tmp_path / "summary.json").read_text())["resnet50"]["b400_amp-fp16"]["1n8g"]["published"]
    assert published["percent_of_best"] == 75.0 and published["best"] == 7056.31
    assert "MLPerf Training v3.1" in published["source"] and "Dell XE9680x8H100" in published["source"]
    text = (tmp_path / "report.md").read_text()
    assert "% of best published |" in text and "| 75.0 |" in text
    assert "## Published figures" in text and "training_results_v3.1" in text


def test_a_cpu_row_gets_no_column(tmp_path, capsys):
    cpu = accelerator_identity("cpu", "cpu", {"cpu": "AMD EPYC", "memory_gib": 23.5, "gpus": []}, 8, 8)
    _h100_run(tmp_path, "1n8g", 100.0, cpu)
    code, _, err = run_cli(["report", str(tmp_path), "--format", "md"], capsys)
    assert code == 0, err
    text = (tmp_path / "report.md").read_text()
    assert "% of best published" not in text and "## Published figures" not in text


def test_references_command(capsys):
    code, out, _ = run_cli(["references", "--model", "resnet50", "--json"], capsys)
    assert code == 0
    rows = json.loads(out)["figures"]
    assert rows and {f["model"] for f in rows} == {"resnet50"}
    code, _, err = run_cli(["references", "--model", "nonesuch"], capsys)
    assert code == 2 and "no published figures for model 'nonesuch'" in err and "Traceback" not in err


def test_references_model_matches_its_family(capsys):
    """`--model llama` lists every Llama row (the table names them llama3-8b, llama3-70b); a cut name does not."""
    code, out, _ = run_cli(["references", "--model", "llama", "--json"], capsys)
    assert code == 0 and {"llama3-8b", "llama3-70b"} <= {f["model"] for f in json.loads(out)["figures"]}
    assert all(f["model"].startswith("llama") for f in json.loads(out)["figures"])
    code, _, err = run_cli(["references", "--model", "llama3-8"], capsys)
    assert code == 2 and "no published figures for model 'llama3-8'" in err


def test_dlperf_pytorch_column_names_what_that_column_ran():
    """The DLPerf report's PyTorch ResNet-50 column links to its PyTorch/resnet50v1.5 folder: pytorch/examples with
    DALI on PyTorch 1.6.0, not DeepLearningExamples on NGC 20.03."""
    (row,) = [f for f in figures("resnet50") if f["value"] == 354.40]
    assert row["framework"].startswith("PyTorch 1.6.0 (pytorch/examples") and "DALI" in row["framework"]
    assert "NGC" not in row["framework"]


def test_published_llm_tables_agree_with_dlperfs_peaks_and_flop_count():
    """MaxText's README table (TPU v5p) prints TFLOP/s per chip and MFU: their ratio is the v5p's 459 dense bf16
    TFLOP/s of dlperf's peak table, on every row. NeMo 24.07's table prints tokens/s and model TFLOP/s per GPU:
    for Llama 3 8B at 8,192 tokens their ratio is the PaLM count dlperf reports MFU by, 6N + 12·L·H·Q·T =
    57,914,449,920 FLOPs per token (within NeMo's rounding)."""
    v5p = [f for f in figures("maxtext") if f["accelerator"] == "TPU v5p"]
    assert len(v5p) == 8
    peak = lookup_peak("TPU v5p", "bf16").tflops
    for f in v5p:  # the 1024B v5p-2048 row's two figures disagree (249 TFLOP/s is 54.2 %): the row says so
        consistent = f["value"] / f["mfu"] == pytest.approx(peak, rel=0.005)
        assert consistent != ("contradicts itself" in f["how"]), f["how"]
    assert sum("contradicts itself" in f["how"] for f in v5p) == 1
    (nemo,) = [f for f in figures("llama3-8b") if f["framework"].startswith("NeMo")]
    assert nemo["tflops_per_device"] * 1e12 / nemo["value"] == pytest.approx(57_914_449_920, rel=0.002)
    assert all(f["url"].endswith(".md") and "/blob/" in f["url"] for f in [*v5p, nemo])
