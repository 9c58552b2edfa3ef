"""Predicted data-parallel speedups for the report's scaling tables, from commbench records (`report --predict`).

A group's 1n1g case gives the single-device run (its median throughput over repeats and the `gradient_bytes`
its records carry); every other case of the group is predicted with `dlperf.predict.predict_data_parallel`. A
case whose links were not measured (e.g. several nodes without an inter-node record) is left without a prediction.
"""

from __future__ import annotations

from collections.abc import Sequence

from dlperf.errors import ConfigError
from dlperf.predict import Prediction, links_from_records, predict_data_parallel, run_from_record
from dlperf.records.schema import CommbenchRecord
from dlperf.reporting.aggregate import BASELINE_CASE, CaseSummary, GroupKey

CaseKey = tuple[str, str, str]  # (model, group, case)


def predicted_speedups(
    summary: dict[GroupKey, list[CaseSummary]], commbench: Sequence[CommbenchRecord], overlap: bool = True
) -> dict[CaseKey, float]:
    """(model, group, case) -> predicted speedup against the group's 1n1g, for scaling tables with a baseline;
    `overlap=False` hides no communication behind the backward pass (as `dlperf predict --no-overlap`)."""
    return {key: got.speedup for key, got in predictions(summary, commbench, overlap).items()}


def predicted_exposed_ms(
    summary: dict[GroupKey, list[CaseSummary]], commbench: Sequence[CommbenchRecord], overlap: bool = True
) -> dict[CaseKey, float]:
    """(model, group, case) -> the communication per step the model predicts the step waits for, in ms."""
    return {key: got.exposed_s * 1000 for key, got in predictions(summary, commbench, overlap).items()}


def predictions(
    summary: dict[GroupKey, list[CaseSummary]], commbench: Sequence[CommbenchRecord], overlap: bool = True
) -> dict[CaseKey, Prediction]:
    """Every case of a scaling table with a baseline that `dlperf predict`'s model can predict."""
    if not commbench:
        return {}
    intra, inter = links_from_records(commbench)
    out: dict[CaseKey, Prediction] = {}
    for (model, group), cases in summary.items():
        base = next((c for c in cases if c.case == BASELINE_CASE and c.speeds and c.table == "scaling"), None)
        record = next((r for r in base.records if r.gradient_bytes), None) if base else None
        if record is None:
            continue
        single = run_from_record(record, throughput=base.stats["median"])
        for case in cases:
            if case.world_size == 1:
                continue
            try:
                got = predict_data_parallel(single, case.devices_per_node, case.nodes, intra, inter, overlap)
            except ConfigError:  # a link this case crosses was not measured
                continue
            out[(model, group, case.case)] = got
    return out
