"""The `dlperf.maxbatch/1` record: every probe, the largest fitting batch and the fastest one."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from dlperf.maxbatch.search import MaxBatchResult
from dlperf.records.schema import MAXBATCH_SCHEMA, batch_free_group


def build_maxbatch_record(
    result: MaxBatchResult,
    *,
    model: str,
    case: str,
    group: str,
    precision: str,
    batch_flag: str,
    config: dict[str, Any],
    memory_cap_gib: float | None,
) -> dict[str, Any]:
    """`group` is a planned run's table group; the record keeps it without the batch (`variant`), which is what
    the report matches its runs on."""
    return {
        "schema": MAXBATCH_SCHEMA,
        "status": "ok" if result.max_batch else "failed",
        "error": result.error,
        "model": model,
        "case": case,
        "variant": batch_free_group(group),
        "precision": precision,
        "batch_flag": batch_flag,
        "config": config,
        "headroom_pct": result.headroom_pct,
        "memory_cap_gib": memory_cap_gib,
        "max_batch": result.max_batch,
        "best_batch": result.best_batch,
        "best_throughput": result.best_throughput,
        "probes": [asdict(p) for p in result.probes],
        "finished_at": time.time(),
    }
