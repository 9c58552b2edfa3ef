"""`dlperf run --model moe` end to end: 2 gloo ranks under EP 2 with balanced routing write a record whose measured
routing is exactly even, with the active and total parameters and the active-expert FLOPs; bad input is refused
in one line before any process starts."""

from __future__ import annotations

import json

import pytest
from conftest import assert_one_line_error, run_dlperf
from tiny import QUICK_RUN, as_flags, tiny_moe

from dlperf.workloads import spec_from_mapping
from dlperf.workloads.moe.config import parameter_counts

pytestmark = pytest.mark.slow


def test_balanced_expert_parallel_run_records_its_routing(tmp_path):
    keys = tiny_moe(ep=2, routing="balanced", **QUICK_RUN)
    done = run_dlperf(["run", *as_flags(keys), "--devices-per-node", "2", "--out", str(tmp_path)])
    assert done.returncode == 0, done.stderr
    (path,) = (tmp_path / "moe" / "1n2g").glob("*.json")
    record = json.loads(path.read_text())
    moe = record["moe"]
    assert (moe["routing"], moe["imbalance"], moe["ep_imbalance"], moe["dropped_tokens"]) == ("balanced", 1, 1, 0)
    # 4 timed steps of 2 ranks x 32 tokens x top 2 in the one MoE block, evenly over the 4 experts and 2 EP ranks
    assert moe["tokens_per_expert"] == [4 * 2 * 32 * 2 // 4] * 4 and moe["tokens_per_ep_rank"] == [256] * 2
    assert [window["imbalance"] for window in moe["windows"]] == [1.0, 1.0]
    counts = parameter_counts(spec_from_mapping(keys).workload)
    assert (record["parameters_total"], record["parameters_active"]) == (counts.total, counts.active)
    assert record["parallel"]["ep"] == 2 and "_ep2_balanced_" in record["report_case"]
    assert record["tokens_per_s"] > 0 and record["flops_per_token"] > 0
    shown = [line.split() for line in done.stdout.splitlines() if line.startswith("expert imbalance")]
    assert shown == [["expert", "imbalance", "(max/mean)", "1.00,", "worst", "block", "1.00", "(balanced", "routing)"]]


def test_bad_input_is_one_line_before_any_process(tmp_path):
    done = run_dlperf(["run", *as_flags(tiny_moe(num_experts=3, ep=2)), "--devices-per-node", "2"], cwd=tmp_path)
    assert_one_line_error(done.returncode, done.stderr, "--num-experts 3 is not divisible by --ep 2")
    assert not (tmp_path / "results").exists()
