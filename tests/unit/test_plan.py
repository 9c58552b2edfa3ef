"""One plan per run: the spec's keys by workload, the GPT batch fields in records and summaries, old records."""

from __future__ import annotations

import dataclasses
import json

import pytest
from tiny import tiny_gpt

from dlperf.errors import ConfigError
from dlperf.harness.loop import Measurement
from dlperf.harness.results import RankFacts, RunMeasurement
from dlperf.launch.messages import AgentSpec, CommandLaunch, NodeLaunch, NodeResult, RunResult
from dlperf.orchestration.kinds import build_record
from dlperf.orchestration.run import plan_jobs
from dlperf.records.codec import DecodeError
from dlperf.records.load import load_record
from dlperf.records.written import record_json
from dlperf.reporting.aggregate import summarise
from dlperf.reporting.report import build_summary
from dlperf.workloads import check_spec, decode_spec, spec_from_mapping

TINY_GPT = tiny_gpt(num_layers=4)


def gpt_record(tmp_path, **layout) -> dict:
    spec = spec_from_mapping({**TINY_GPT, "device": "cpu", **layout})
    job = plan_jobs(spec, check_spec(spec), [1], tmp_path)[0]
    measurement = Measurement(4, job.plan.global_batch, elapsed_s=2.0, first_step_s=1.0, step_ms=[500.0] * 4)
    ranks = [RankFacts(r, "h", "cpu", {"rss": 100.0}) for r in range(spec.world_size)]
    result = RunResult(measured=RunMeasurement(measurement, ranks, "cpu"))
    return record_json(build_record(job, result, {"host": "h"}, 0.0, 1.0))  # the JSON the codec writes


@pytest.mark.parametrize(
    ("layout", "per_device", "micro", "global_batch"),
    [
        # DP=4: 16 samples per iteration over 4 replicas
        ({"devices_per_node": 4, "micro_batch_size": 2, "global_batch_size": 16}, 4, 2, 16),
        # TP=4: one replica holds the whole global batch
        ({"devices_per_node": 4, "tp": 4, "micro_batch_size": 2, "global_batch_size": 8}, 8, 2, 8),
        # DP=2 x PP=2: 8 samples per iteration, 4 per replica, micro batches of 1
        ({"devices_per_node": 4, "pp": 2, "micro_batch_size": 1, "global_batch_size": 8}, 4, 1, 8),
    ],
)
def test_gpt_records_and_summaries_carry_the_right_batch_fields(tmp_path, layout, per_device, micro, global_batch):
    record = gpt_record(tmp_path, **layout)
    assert record["batch_size_per_device"] == record["batch_size"] == per_device
    assert record["micro_batch_size"] == micro and record["global_batch_size"] == global_batch
    assert record["throughput"] == global_batch * 4 / 2.0
    assert "batch_size" not in record["config"]  # a ResNet key has no place in a GPT config
    summary = build_summary(summarise([record]))
    case = summary["gpt"][record["group"]]["1n4g"]
    assert case["batch_size_per_device"] == per_device


def test_keys_of_another_model_are_refused_by_name():
    with pytest.raises(ConfigError, match="key 'case' applies to --model gpt, not resnet50"):
        spec_from_mapping({"model": "resnet50", "case": "DP_8x1x1_16_1536x16"})
    with pytest.raises(ConfigError, match="key 'batch_size' applies to --model resnet50, not gpt"):
        spec_from_mapping({**TINY_GPT, "batch_size": 8})
    with pytest.raises(ConfigError, match="unknown key 'batch'"):
        spec_from_mapping({"batch": 8})
    with pytest.raises(ConfigError, match="must be a number"):
        spec_from_mapping({"momentum": "abc"})


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("compile", "yes", "must be true or false"),  # bool
        ("iters", 2.5, "must be an integer"),  # int
        ("cpu_threads", "many", "must be an integer"),  # int | str: an integer or `auto`
        ("peak_tflops", "fast", "must be a number"),  # float | None
        ("device", 3, "must be a string"),  # str
    ],
)
def test_a_keys_type_comes_from_its_annotation(key, value, problem):
    """`coerce` reads each field's declared type (typing's introspection): the refusals, `auto` where a key takes
    it, an int widened to a float, a Literal left to its own check."""
    with pytest.raises(ConfigError, match=f"key '{key}' {problem}"):
        spec_from_mapping({"model": "resnet50", key: value})
    spec = spec_from_mapping({"model": "resnet50", "cpu_threads": "auto", "lr": 1, "iters": 3})
    assert spec.cpu_threads == "auto" and spec.workload.lr == 1.0 and isinstance(spec.workload.lr, float)


def test_spec_and_messages_round_trip_through_json():
    spec = spec_from_mapping({**TINY_GPT, "devices_per_node": 2, "tp": 2, "case": None})
    assert decode_spec(json.loads(json.dumps(spec.to_dict()))) == spec
    launch = NodeLaunch(nnodes=1, nproc_per_node=2, run_id="r")
    agent = AgentSpec(run=spec.to_dict(), log_path="/x.log", launch=launch, kind="native")
    assert AgentSpec.from_json(agent.to_json()) == agent
    measured = RunMeasurement(
        Measurement(2, 8, 1.0, 0.5, [8.0], [1.0, 2.0], 3.0, 2.0), [RankFacts(0, "h", "cpu", {})], "cpu"
    )
    node = NodeResult(host="h", measured=measured, env={"node": "h"})
    assert NodeResult.from_json(node.to_json()) == node
    failed = NodeResult.failed("boom", rank=1, host="h", exitcode=-9, signal="SIGKILL")
    assert NodeResult.from_json(failed.to_json()) == failed


def test_an_agent_spec_whose_kind_and_command_disagree_is_refused():
    """An external run, and only one, carries its command, however the spec is made or read."""
    launch = NodeLaunch(nnodes=1, nproc_per_node=1, run_id="r")
    native = AgentSpec(run={}, log_path="/x.log", launch=launch, kind="native")
    with pytest.raises(DecodeError, match="kind 'external' with no command"):
        AgentSpec.from_json(native.to_json().replace('"native"', '"external"'))
    command = CommandLaunch("python train.py", "node", False, {}, "/")
    with pytest.raises(ValueError, match="kind 'native' with a command"):
        dataclasses.replace(native, command=command)


def test_print_every_defaults_to_one_window_of_at_most_twenty():
    assert spec_from_mapping({"iters": 6}).window == 6
    assert spec_from_mapping({"iters": 100}).window == 20
    assert spec_from_mapping({"iters": 100, "print_every": 25}).window == 25


def test_schema_1_records_stay_readable(tmp_path):
    old = {
        "schema": "dlperf.run/1", "model": "gpt", "status": "ok", "batch_size": 128, "group": "g", "case": "1n4g",
        "parallel": {"dp": 2, "tp": 2, "pp": 1, "micro_batch_size": 2, "global_batch_size": 8},
        "nodes": 1, "devices_per_node": 4, "world_size": 4, "precision": "fp32", "throughput": 10.0,
    }  # fmt: skip
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    record = load_record(path)
    assert record.batch_size == record.batch_size_per_device == 4  # not the ResNet default of 128
    assert record.micro_batch_size == 2 and record.table == "layouts" and record.engine == "torch"
    assert record.kind == "native"  # derived: a dlperf.run/1 record says none
