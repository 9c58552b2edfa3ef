"""The one codec of records and messages (records/codec.py): strict types at every depth, one line per problem,
parts as dataclasses, and messages that cross a process unchanged."""

from __future__ import annotations

import math

import pytest

from dlperf.errors import ResultsError
from dlperf.harness.loop import Measurement
from dlperf.harness.results import RankFacts, RunMeasurement
from dlperf.launch.messages import CommandFacts, NodeResult
from dlperf.records.codec import DecodeError, decode
from dlperf.records.load import as_record
from dlperf.records.parts import Energy, MachineLoad, StepPhases, given
from dlperf.records.validate import record_problem

GOOD = {"schema": "dlperf.run/2", "model": "resnet50", "case": "1n1g", "group": "b128_fp32", "precision": "fp32",
        "nodes": 1, "devices_per_node": 1, "world_size": 1, "status": "ok", "throughput": 100.0}  # fmt: skip


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("loss_first", math.nan, "loss_first nan is not a finite number"),
        ("energy", {"joules": math.inf}, "energy.joules inf is not a finite number"),
        ("energy", {"joules": "many"}, "energy.joules 'many' is not a finite number"),
        ("step_phases", {"steps": 2.0}, "step_phases.steps 2.0 is not an integer"),
        ("ranks", [{"rank": 0}, {"rank": True}], "ranks[1].rank True is not an integer"),
        ("stragglers", [], "stragglers list is not a mapping"),
        ("status", "fine", "status 'fine' is not one of 'ok', 'failed' or 'diverged'"),
    ],
)
def test_a_wrong_part_is_one_line_naming_its_field(field, value, problem):
    assert record_problem({**GOOD, field: value}) == problem
    with pytest.raises(ResultsError, match="^" + problem.replace("[", r"\[").replace(".", r"\.") + "$"):
        decode(type(as_record(GOOD)), {**GOOD, field: value})


def test_parts_load_as_dataclasses_and_unknown_keys_stay_in_origin():
    record = as_record(
        {**GOOD, "energy": {"joules": 12, "later": 1}, "step_phases": {"phases_ms": {"data": 1.5}}, "mystery": 2}
    )
    assert record.energy == Energy(joules=12.0) and record.energy.reason is None
    assert isinstance(record.step_phases, StepPhases) and record.step_phases.phases_ms.data == 1.5
    assert record.origin.data["energy"]["later"] == 1 and record.origin.data["mystery"] == 2
    assert given(as_record({**GOOD, "failure": {"rank": 0, "signal": None}}).failure) == {"rank": 0}
    with pytest.raises(DecodeError):
        as_record({**GOOD, "energy": {"joules": "x"}})


def test_a_node_result_crosses_a_process_with_its_nan_loss_and_typed_facts():
    measurement = Measurement(10, 32, 1.0, 0.5, [30.0], loss_first=math.nan, phase_ms={"data": [1.0]})
    ranks = [RankFacts(0, "h", "cpu", {"rss": 10.0}, machine_load={"wall_s": 1.0})]
    load = {"wall_s": 2.0, "cpu_count": 4, "load_avg_start": [0.1, 0.2, 0.3], "gpu_other_processes": [{"pid": 7}]}
    facts = decode(CommandFacts, {"ended_by": "the command exited", "machine_load": load}, strict=False)
    sent = NodeResult(
        host="h", measured=RunMeasurement(measurement, ranks, "cpu", 12), env={"node": "h"}, command_facts=facts
    )
    got = NodeResult.from_json(sent.to_json())
    assert math.isnan(got.measured.measurement.loss_first) and got.measured.ranks == ranks
    assert (
        isinstance(got.command_facts.machine_load, MachineLoad)
        and got.command_facts.machine_load.gpu_other_processes[0].pid == 7
    )
    assert got.command_facts == facts and got.env == {"node": "h"}


def test_the_strict_writer_names_an_undeclared_key_inside_a_part():
    from dlperf.records.schema import undeclared_fields

    record = {**GOOD, "energy": {"joules": 1.0, "kwh": 2}, "ranks": [{"rank": 0, "gpu_temp": 60}], "mystery": 1}
    assert undeclared_fields(record) == ["mystery", "energy.kwh", "ranks[].gpu_temp"]
