"""A results folder into an MLflow tracking server: the sweep as a parent run, one child run per record
(`reporting/tracking.py` says what each carries), through MLflow's own client.

Each run is looked up by its identity tag before it is made, so a second export adds nothing. A run is made whole
or not at all: its parameters, metrics and tags in batches, its files, then the `dlperf.exported` tag last; an
error on the way deletes the run it was making, and a run an interrupted export left without that tag is replaced.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from dlperf.errors import ResultsError, first_line
from dlperf.reporting.extras import require_extra
from dlperf.reporting.tracking import COMPLETE_TAG, RECORD_TAG, SWEEP_TAG, TrackedRun, TrackedSweep, tracked_sweeps

PARENT_TAG = "mlflow.parentRunId"
BATCH = {"metrics": 800, "params": 100, "tags": 100}  # MLflow: at most 100 params, 100 tags, 1000 in all
STATUS = {"ok": "FINISHED", "failed": "FAILED", "diverged": "FAILED"}
# A server that cannot be reached answers in seconds, not after MLflow's default of 7 retries over minutes; a user's
# own setting of these is kept; the client's "View run" lines on stdout are left out
CLIENT_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
}


@dataclass(frozen=True)
class MlflowOutcome:
    experiment_id: str
    parent_run_id: str
    created: list[str]  # the new child runs' names
    existing: int  # records already exported


def export_mlflow(folder: str | Path, tracking_uri: str, experiment: str = "dlperf") -> list[MlflowOutcome]:
    """Each sweep of the folder as a parent run with its records' runs; what was made, per sweep."""
    require_extra("mlflow", "mlflow", "dlperf export mlflow")
    for name, value in CLIENT_DEFAULTS.items():
        os.environ.setdefault(name, value)
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    try:
        with tracked_sweeps(folder) as sweeps:
            experiment_id = _experiment(client, experiment)
            return [_export(client, sweep, experiment_id) for sweep in sweeps]
    except (MlflowException, OSError) as error:  # OSError: requests' connection errors are OSErrors
        raise ResultsError(f"cannot export {folder} to MLflow at {tracking_uri}: {first_line(error)}") from None


def _export(client: Any, sweep: TrackedSweep, experiment_id: str) -> MlflowOutcome:
    parent = _find(client, experiment_id, SWEEP_TAG, sweep.key)
    changed = parent is None or parent.data.tags.get(COMPLETE_TAG) is None
    if parent is None:
        fill = partial(_log, client, params=sweep.params)
        parent_id = _make(client, experiment_id, sweep.name, {SWEEP_TAG: sweep.key}, None, fill)
    else:
        parent_id = parent.info.run_id
    created, existing = [], 0
    for run in sweep.runs:
        found = _find(client, experiment_id, RECORD_TAG, run.key)
        if found is not None and found.data.tags.get(COMPLETE_TAG):
            existing += 1
            continue
        if found is not None:  # an interrupted export's run: made again, whole
            client.delete_run(found.info.run_id)
        tags = {PARENT_TAG: parent_id}
        _make(client, experiment_id, run.name, tags, run.started_ms, partial(_child, client, run=run))
        created.append(run.name)
        changed = True
    if changed:  # the sweep's figures and report as they are now, after its new records
        now = int(time.time() * 1000)
        _log(client, parent_id, metrics=[(k, v, now, 0) for k, v in sweep.metrics.items()], tags=sweep.tags)
        _files(client, parent_id, sweep.files)
        client.set_tag(parent_id, COMPLETE_TAG, "complete")
        client.set_terminated(parent_id, "FINISHED")
    return MlflowOutcome(experiment_id, parent_id, created, existing)


def _experiment(client: Any, name: str) -> str:
    from mlflow.exceptions import MlflowException

    found = client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    try:  # MLflow 3's UI then opens it as model training (runs and charts), not as a GenAI app's traces
        return client.create_experiment(name, tags={"mlflow.experimentKind": "custom_model_development"})
    except MlflowException:  # made by another exporter meanwhile
        found = client.get_experiment_by_name(name)
        if found is None:
            raise
        return found.experiment_id


def _find(client: Any, experiment_id: str, tag: str, value: str) -> Any:
    runs = client.search_runs([experiment_id], filter_string=f"tags.`{tag}` = '{value}'", max_results=2)
    return runs[0] if runs else None


def _make(
    client: Any, experiment_id: str, name: str, tags: dict[str, str], start_ms: int | None, fill: Callable[[str], None]
) -> str:
    """A run made and filled by `fill`; deleted again where filling fails, so no half-made run stays."""
    run_id = client.create_run(experiment_id, start_time=start_ms, tags=tags, run_name=name).info.run_id
    try:
        fill(run_id)
    except BaseException:
        try:
            client.delete_run(run_id)
        finally:
            raise
    return run_id


def _child(client: Any, run_id: str, run: TrackedRun) -> None:
    stamp = run.finished_ms or run.started_ms or int(time.time() * 1000)
    metrics = [(k, v, stamp, 0) for k, v in run.metrics.items()]
    metrics += [(k, v, stamp, step) for k, values in run.steps.items() for step, v in enumerate(values)]
    _log(client, run_id, params=run.params, metrics=metrics, tags=run.tags)
    _files(client, run_id, run.files)
    client.set_tag(run_id, COMPLETE_TAG, "complete")
    client.set_terminated(run_id, STATUS.get(run.status, "FAILED"), end_time=run.finished_ms)


def _log(
    client: Any,
    run_id: str,
    params: dict[str, str] | None = None,
    metrics: Sequence[tuple[str, float, int, int]] = (),
    tags: dict[str, str] | None = None,
) -> None:
    from mlflow.entities import Metric, Param, RunTag

    entities = {
        "params": [Param(k, v) for k, v in (params or {}).items()],
        "metrics": [Metric(k, v, t, s) for k, v, t, s in metrics],
        "tags": [RunTag(k, v) for k, v in (tags or {}).items()],
    }
    while any(entities.values()):  # as few requests as MLflow's limits per batch allow
        batch = {kind: items[: BATCH[kind]] for kind, items in entities.items()}
        entities = {kind: items[BATCH[kind] :] for kind, items in entities.items()}
        client.log_batch(run_id, **batch)


def _files(client: Any, run_id: str, files: Iterable[Path]) -> None:
    for path in files:
        client.log_artifact(run_id, str(path), "plots" if path.parent.name == "plots" else None)
