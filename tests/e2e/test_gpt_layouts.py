"""The GPT's pipeline through dlperf's CLI and torchrun's launcher. (The GPT's layouts against one process run in
test_llama_layouts.py's launches, beside the Llama's.)"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow


def test_pipeline_run_logs_last_stage_loss(tmp_path):
    """Through the CLI and torchrun's launcher: rank 0 (first stage) logs the last stage's loss, and the
    record carries the GPT metrics."""
    from conftest import run_dlperf

    args = ["run", "--model", "gpt", "--num-layers", "2", "--hidden-size", "64", "--num-heads", "4",
            "--seq-length", "32", "--vocab-size", "512", "--micro-batch-size", "2", "--global-batch-size", "8",
            "--pp", "2", "--devices-per-node", "2", "--device", "cpu", "--warmup-iters", "1", "--iters", "4",
            "--print-every", "2", "--out", str(tmp_path)]  # fmt: skip
    done = run_dlperf(args)
    assert done.returncode == 0, done.stderr
    [path] = (tmp_path / "gpt" / "1n2g").glob("*.json")
    assert path.name == "DP_PP_1x1x2_8_64x2_fp32_1f1b_pretrain_gpt_1n2d_dp1_mp1_pp2_mbz2_gbz8_s32_l2_h64_nh4_1.json"
    record = json.loads(path.read_text())
    assert record["status"] == "ok"
    assert 5.0 < record["loss_first"] < 7.0 and 5.0 < record["loss_last"] < 7.0
    laid = {key: value for key, value in record["parallel"].items() if value is not None}  # a part's keys all written
    assert laid == {"dp": 1, "tp": 1, "pp": 2, "micro_batch_size": 2, "global_batch_size": 8, "accumulation_steps": 4,
                    "pp_schedule": "1f1b"}  # fmt: skip
    assert record["flops_per_iteration"] == 72 * 8 * 32 * 2 * 64**2 + 12 * 8 * 32**2 * 2 * 64 + 6 * 8 * 32 * 64 * 512
    assert record["tokens_per_s"] == pytest.approx(record["throughput"] * 32)
    seconds = 8 / record["throughput"]
    assert record["tflops_per_device"] == pytest.approx(record["flops_per_iteration"] / seconds / 2 / 1e12)
    assert record["mfu"] is None and "pass --peak-tflops" in record["mfu_note"]
    log = path.with_suffix(".log").read_text().splitlines()
    assert len(log) == 4 and all(" loss nan " not in line for line in log[2:])
    # one name everywhere: the console, the record's group (the report's case) and the file name
    assert record["group"] == "DP_PP_1x1x2_8_64x2_fp32_1f1b" and record["report_group"] == "DP_PP"
    assert f"gpt 1n2g {record['group']} repeat 1" in done.stdout and path.name.startswith(record["group"])
    # live view through a pipe: the log path first, the warm-up, then each window with the GPT figures
    assert done.stdout.splitlines()[0] == f"log: {path.with_suffix('.log')}"
    assert "warm-up done in" in done.stdout
    assert "iter 4/4" in done.stdout and "tokens/s" in done.stdout and "TFLOP/s per device  MFU n/a" in done.stdout
