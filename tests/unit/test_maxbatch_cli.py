"""`dlperf maxbatch` end to end with a fake probe (a known 1000 MiB boundary, no real runs: the one real capped
search is in test_maxbatch.py), its record, and the report's bsz=max column that reads it."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli
from source_records import record
from test_maxbatch import fake

from dlperf.orchestration import maxbatch as maxbatch_search
from dlperf.records.store import write_json_atomic

CASE = ["--model", "resnet50", "--image-size", "32", "--num-classes", "10", "--device", "cpu"]


@pytest.fixture
def probes(monkeypatch: pytest.MonkeyPatch) -> list:
    """Swap the fresh-process probe for the fake; keep what the command asked of it."""
    asked = []

    def make_probe(case_args, batch_flag, workdir, args):
        asked.append((case_args, batch_flag, args.memory_cap))
        return fake

    monkeypatch.setattr(maxbatch_search, "make_probe", make_probe)
    return asked


def test_search_table_record_and_report_column(tmp_path, capsys, probes):
    args = ["maxbatch", *CASE, "--start", "8", "--max-batch", "1024", "--memory-cap", "0.5", "--out", str(tmp_path)]
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    ((case_args, batch_flag, cap),) = probes  # one probe factory for the whole search, with the case's own flags
    assert (batch_flag, cap) == ("--batch-size", 0.5) and sorted(case_args) == sorted(CASE)
    # x2 from 8 to the first OOM at 128, then bisect (64, 128): 96 oom, 80, 88 ok, 92 oom, 90 ok, 91 oom
    assert "| 128 | no | oom |" in out
    assert "| 90 | yes | ok | 18.00 | 1000 |" in out  # 90 / (1 + 8100 / 2025) samples/s, 100 + 10 x 90 MiB
    assert "largest batch that fits: 90" in out
    assert "best throughput: batch 32 at 21.25 samples/s" in out
    path = tmp_path / "resnet50" / "1n1g" / "maxbatch_fp32.json"
    saved = json.loads(path.read_text())
    assert saved["schema"] == "dlperf.maxbatch/1" and saved["status"] == "ok"
    assert (saved["max_batch"], saved["best_batch"], saved["variant"]) == (90, 32, "fp32")
    assert [p["batch"] for p in saved["probes"]] == [8, 16, 32, 64, 128, 96, 80, 88, 92, 90, 91]

    # a run of the same variant at another batch gets the column; the report still reads only run records else
    write_json_atomic(
        tmp_path / "resnet50" / "1n1g" / "r_1.json",
        record("resnet50", "1n1g", 16, "fp32", 1, 50.0),
    )
    code, _, err = run_cli(["report", str(tmp_path), "--format", "md"], capsys)
    assert code == 0, err
    rows = [line for line in (tmp_path / "report.md").read_text().splitlines() if line.startswith("| ")]
    assert rows[0].endswith("| bsz=max | flags |") and rows[1].startswith("| 1 | 1 | 50.00 |")
    assert rows[1].split("|")[-3].strip() == "90"  # the column before the flags


def test_the_searched_flag_is_refused(tmp_path, capsys, probes):
    code, _, err = run_cli(["maxbatch", *CASE, "--batch-size", "4", "--out", str(tmp_path)], capsys)
    assert code != 0 and "--batch-size is what maxbatch varies" in err and not probes


def test_a_cpu_search_gets_a_memory_cap_by_default(tmp_path, capsys, probes, monkeypatch):
    """No --memory-cap on a CPU: 80 % of the available memory over the ranks, said in the output."""
    monkeypatch.setattr(maxbatch_search, "available_gib", lambda: 10.0)
    args = ["maxbatch", *CASE, "--devices-per-node", "2", "--start", "8", "--max-batch", "16", "--out", str(tmp_path)]
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    ((_, _, cap),) = probes
    assert cap == pytest.approx(0.8 * 10.0 / 2)
    assert "memory cap: 4.0 GiB of address space per process (default on a CPU: 80% of the 10.0 GiB available" in out


LLAMA = ["--model", "llama", "--size", "debug", "--seq-length", "16", "--device", "cpu"]


def test_llama_searches_its_micro_batch(tmp_path, capsys, probes):
    """The probe varies what the workload declares (`batch_key`): Llama's micro-batch per data-parallel rank."""
    args = ["maxbatch", *LLAMA, "--start", "8", "--max-batch", "128", "--memory-cap", "1", "--out", str(tmp_path)]
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    ((case_args, batch_flag, _),) = probes
    assert batch_flag == "--micro-batch-size" and sorted(case_args) == sorted(LLAMA)
    assert "largest batch that fits: 90" in out
    (path,) = (tmp_path / "llama" / "1n1g").glob("maxbatch_*.json")
    saved = json.loads(path.read_text())
    assert (saved["model"], saved["batch_flag"], saved["max_batch"]) == ("llama", "--micro-batch-size", 90)
    assert saved["variant"] == "llama3-debug_single_s16_gbs8_fp32"  # the first probe's group, as GPT's


def test_a_model_without_a_batch_is_refused(tmp_path, capsys, probes):
    from dlperf.workloads import all_workloads

    code, _, err = run_cli(["maxbatch", "--model", "commbench", "--out", str(tmp_path)], capsys)
    searched = " or ".join(w.name for w in all_workloads() if w.batch_key)  # every workload that declares a batch
    assert code == 2 and f"searches the batch of {searched}, not commbench" in err and not probes
    code, _, err = run_cli(["maxbatch", *LLAMA, "--micro-batch-size", "2", "--out", str(tmp_path)], capsys)
    assert code == 2 and "--micro-batch-size is what maxbatch varies" in err and not probes


@pytest.mark.slow
def test_llama_debug_real_probes(tmp_path, capsys):
    """Two real probes of the Llama debug size (sequence 16) on the CPU, each a fresh `dlperf run`: both fit."""
    args = ["maxbatch", *LLAMA, "--warmup-iters", "1", "--iters", "1", "--print-every", "1",
            "--start", "1", "--max-batch", "2", "--out", str(tmp_path)]  # fmt: skip
    code, out, err = run_cli(args, capsys)
    assert code == 0, out + err
    assert "| 1 | yes | ok |" in out and "| 2 | yes | ok |" in out
    saved = json.loads(next((tmp_path / "llama" / "1n1g").glob("maxbatch_*.json")).read_text())
    assert saved["max_batch"] == 2 and saved["best_throughput"] > 0
