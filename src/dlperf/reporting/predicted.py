"""Predicted data-parallel speedups for the report's scaling tables, from commbench records (`report --predict`).

A group's 1n1g case gives the single-device run (its median throughput over repeats and the `gradient_bytes`
its records carry); every other case of the group is predicted with `dlperf.predict.predict_data_parallel`. A
case whose links were not measured (e.g. several nodes without an inter-node record) is left without a prediction.
"""

from __future__ import annotations

from collections.abc import Sequence

from dlperf.errors import ConfigError
from dlperf.predict import (
    Link,
    Prediction,
    SingleDeviceRun,
    links_from_records,
    predict_data_parallel,
    run_from_record,
)
from dlperf.records.schema import CommbenchRecord
from dlperf.reporting.aggregate import BASELINE_CASE, CaseSummary, GroupKey

CaseKey = tuple[str, str, str]  # (model, group, case)


def predictions(
    summary: dict[GroupKey, list[CaseSummary]], commbench: Sequence[CommbenchRecord], overlap: bool = True
) -> dict[CaseKey, Prediction]:
    """Every case of a scaling table with a baseline that `dlperf predict`'s model can predict (its `speedup`
    against the group's 1n1g, its `exposed_s`); `overlap=False` hides no communication behind the backward pass
    (as `dlperf predict --no-overlap`)."""
    if not commbench:
        return {}
    intra, inter = links_from_records(commbench)
    out: dict[CaseKey, Prediction] = {}
    for (model, group), cases in summary.items():
        single = _single_run(cases)
        for case in cases if single else []:
            got = _predict_case(single, case, intra, inter, overlap)
            if got is not None:
                out[(model, group, case.case)] = got
    return out


def _single_run(cases: list[CaseSummary]) -> SingleDeviceRun | None:
    """The scaling table's 1n1g at its median throughput, from a repeat that counted its gradient bytes."""
    base = next((c for c in cases if c.case == BASELINE_CASE and c.speeds and c.table == "scaling"), None)
    record = next((r for r in base.records if r.gradient_bytes), None) if base else None
    return None if record is None else run_from_record(record, throughput=base.stats["median"])


def _predict_case(
    single: SingleDeviceRun, case: CaseSummary, intra: Link | None, inter: Link | None, overlap: bool
) -> Prediction | None:
    """The model's prediction for a multi-device case; None for 1 device or a link the case crosses unmeasured."""
    if case.world_size == 1:
        return None
    try:
        return predict_data_parallel(single, case.devices_per_node, case.nodes, intra, inter, overlap)
    except ConfigError:
        return None
