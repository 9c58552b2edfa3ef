"""What the workloads declare for the rest of dlperf (workloads/base.py), read through the registry: maxbatch's
batch, the report's titles, other frameworks' names, and extract's speed bounds. Each test is a property of every
registered workload, held against what the workload or its reader does, so a new workload needs no edit here."""

from __future__ import annotations

import math
import re

import pytest

from dlperf.errors import ConfigError
from dlperf.framework_logs.base import RunShape
from dlperf.framework_logs.plausibility import workload_class
from dlperf.framework_logs.registry import BY_NAME
from dlperf.reporting.layouts_table import formula, title
from dlperf.reporting.sources import canonical_model
from dlperf.workloads import (
    all_workloads,
    known_workload,
    model_aliases,
    model_names,
    plausible_work,
    searched_batch,
    spec_from_mapping,
)

WORKLOADS = all_workloads()
SEARCHED = [w for w in WORKLOADS if w.batch_key]


@pytest.mark.parametrize("workload", SEARCHED, ids=lambda w: w.name)
def test_maxbatch_varies_the_batch_each_device_computes(workload):
    """The declared key is an int config field, and doubling it doubles the samples a device computes at once (the
    micro-batch where the plan splits the batch, else the batch per device): what maxbatch's search relies on."""
    assert searched_batch(workload.name) == workload.batch_key
    assert isinstance(getattr(workload.config_type(), workload.batch_key), int)

    def at_once(extra: dict) -> int:
        plan = workload.plan(spec_from_mapping({"model": workload.name, "device": "cpu", **extra}))
        return plan.micro_batch or plan.batch_per_device

    doubled = 2 * getattr(workload.config_type(), workload.batch_key)
    assert at_once({workload.batch_key: doubled}) == 2 * at_once({})


def test_maxbatch_refuses_a_model_without_a_batch_naming_those_with_one():
    assert SEARCHED, "no workload declares a batch for maxbatch"
    for workload in (w for w in WORKLOADS if w.batch_key is None):
        with pytest.raises(ConfigError) as error:
            searched_batch(workload.name)
        assert str(error.value).endswith(f"{' or '.join(w.name for w in SEARCHED)}, not {workload.name}")


@pytest.mark.parametrize("workload", WORKLOADS, ids=lambda w: w.name)
def test_report_title_and_formula_are_the_declared_ones(workload):
    assert title(workload.name) == (workload.report_title or workload.name)
    assert formula(workload.name) == workload.flops_formula
    assert known_workload(workload.name) is workload


def test_report_titles_tell_workloads_apart_and_a_foreign_model_keeps_its_name():
    titles = [title(w.name) for w in WORKLOADS]
    assert len(set(titles)) == len(titles), titles  # one heading would merge two workloads' tables
    assert (title("nanogpt"), formula("nanogpt"), known_workload("nanogpt")) == ("nanogpt", "", None)


@pytest.mark.parametrize("workload", WORKLOADS, ids=lambda w: w.name)
def test_aliases_meet_their_model_in_reports(workload):
    """A report meets another framework's name with dlperf's (reporting/sources.canonical_model): each alias is in
    the form the name is reduced to, and neither an alias nor the model's own name lands on another model."""
    assert canonical_model(workload.name) == workload.name
    for alias in workload.aliases:
        assert re.fullmatch(r"[a-z0-9]+", alias), f"{alias!r} is not lower-case letters and digits: it never matches"
        assert alias not in model_names()
        assert canonical_model(alias.upper()) == workload.name


def test_no_alias_is_claimed_twice():
    assert len(model_aliases()) == sum(len(w.aliases) for w in WORKLOADS)


@pytest.mark.parametrize("workload", [w for w in WORKLOADS if w.plausible], ids=lambda w: w.name)
def test_plausible_work_bounds_the_logs_that_name_it(workload):
    """Extract's table holds the declared bound, and a log whose model name holds one of its name parts gets that
    workload's bound, not another entry's (framework_logs/plausibility.workload_class, on a samples/s format)."""
    what, parts, flops = workload.plausible
    assert workload.plausible in plausible_work()
    assert what and parts and math.isfinite(flops) and flops > 0
    fmt = next(f for f in BY_NAME.values() if f.unit == "samples/s")
    for part in parts:
        assert workload_class(fmt, RunShape(8, 8, f"run-{part.upper()}-1")) == (what, flops), part
