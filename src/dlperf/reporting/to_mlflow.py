"""A results folder into an MLflow tracking server: the sweep as a parent run, one child run per record
(`reporting/tracking.py` says what each carries), through MLflow's own client.

Exactly once, and resumable: a run carries its identity tag (the record's key, the sweep's) from its creation on, so
every run an export made, whole or half, is found by the next one. A run is whole once its `dlperf.exported` tag
is set, last, after its batches, files and end status; a rerun keeps one whole run per record and deletes any other
(a half-made run an interrupted export left, a second copy) before it makes what is missing. Two exports of one
folder to one server and experiment take turns (`reporting/export_lock.py`), so both never make the same run.

A server that cannot be reached is told in seconds by a first cheap request with few retries (MLflow's default is
7 retries with backoff, minutes); once the server has answered, MLflow's own retries (or the user's
MLFLOW_HTTP_REQUEST_* settings) carry the export over a server's short outage.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf.errors import ResultsError, first_line
from dlperf.reporting.export_lock import export_lock
from dlperf.reporting.extras import require_extra
from dlperf.reporting.tracking import COMPLETE_TAG, RECORD_TAG, SWEEP_TAG, TrackedRun, TrackedSweep, tracked_sweeps
from dlperf.secrets import mask

PARENT_TAG = "mlflow.parentRunId"
BATCH = {"metrics": 800, "params": 100, "tags": 100}  # MLflow: at most 100 params, 100 tags, 1000 in all
STATUS = {"ok": "FINISHED", "failed": "FAILED", "diverged": "FAILED"}
# The first request's: a refused port or a wrong host answers in seconds (a user's own setting is kept)
PROBE = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
OS_REASON = re.compile(r"\[Errno -?\d+\] [^\"')(]+")  # "[Errno 111] Connection refused" inside requests' message
SEARCH = 100  # runs of one identity looked at: more than one is a fault's leftover


@dataclass(frozen=True)
class MlflowOutcome:
    experiment_id: str
    parent_run_id: str
    created: list[str]  # the new child runs' names
    existing: int  # records already exported


def export_mlflow(folder: str | Path, tracking_uri: str, experiment: str = "dlperf") -> list[MlflowOutcome]:
    """Each sweep of the folder as a parent run with its records' runs; what was made, per sweep."""
    require_extra("mlflow", "mlflow", "dlperf export mlflow")
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")  # the client's "View run" lines
    from mlflow.exceptions import MlflowException

    shown = mask(tracking_uri)
    client = _reached(tracking_uri, shown)  # before the report is made for the export: seconds of plotting
    try:
        with tracked_sweeps(folder) as sweeps, export_lock(folder, f"mlflow {tracking_uri} {experiment}"):
            experiment_id = _experiment(client, experiment)
            return [_export(client, sweep, experiment_id) for sweep in sweeps]
    except (MlflowException, OSError) as error:  # OSError: requests' connection errors are OSErrors
        raise ResultsError(
            f"cannot export {folder} to MLflow at {shown}: {_reason(error)}: rerun once that is fixed (the "
            "rerun keeps the runs made whole and makes the rest)"
        ) from None


def _reason(error: BaseException) -> str:
    found = OS_REASON.search(str(error))
    return found[0].strip() if found else first_line(error)


@contextlib.contextmanager
def _defaults(values: dict[str, str]) -> Iterator[None]:
    """The environment with `values` where the user set none, for the block only."""
    added = [name for name in values if name not in os.environ]
    os.environ.update({name: values[name] for name in added})
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def _reached(tracking_uri: str, shown: str) -> Any:
    """MLflow's client, once one cheap request with few retries has been answered: a server that cannot be
    reached, or an address MLflow does not take, is one line in seconds."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    try:
        client = MlflowClient(tracking_uri=tracking_uri)
        with _defaults(PROBE):
            client.search_experiments(max_results=1)
        return client
    except (MlflowException, OSError) as error:
        raise ResultsError(
            f"cannot reach MLflow at {shown}: {_reason(error)}: start the server, or check --tracking-uri"
        ) from None


def _export(client: Any, sweep: TrackedSweep, experiment_id: str) -> MlflowOutcome:
    found = _search(client, experiment_id, SWEEP_TAG, sweep.key)  # whole or not: an interrupted export's is completed
    parent = found[0] if found else None
    parent_id = parent.info.run_id if parent else _create(client, experiment_id, sweep.name, {SWEEP_TAG: sweep.key})
    changed = parent is None or COMPLETE_TAG not in parent.data.tags
    if changed:  # a half-made parent's too: MLflow takes a parameter logged again with its value
        _log(client, parent_id, params=sweep.params)
    created, existing = [], 0
    for run in sweep.runs:
        if _kept(client, experiment_id, run.key, parent_id) is not None:
            existing += 1
            continue
        run_id = _create(client, experiment_id, run.name, {**run.tags, PARENT_TAG: parent_id}, run.started_ms)
        _child(client, run_id, run)
        created.append(run.name)
        changed = True
    if changed:  # the sweep's figures and report as they are now, after its new records
        now = int(time.time() * 1000)
        _log(client, parent_id, metrics=[(k, v, now, 0) for k, v in sweep.metrics.items()], tags=sweep.tags)
        _files(client, parent_id, sweep.files)
        _complete(client, parent_id, "FINISHED", None)
        _drop_doubles(client, experiment_id, sweep.key, parent_id)
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


def _search(client: Any, experiment_id: str, tag: str, value: str) -> list[Any]:
    """The experiment's live runs whose `tag` is `value`, whole ones first, then the oldest."""
    runs = client.search_runs([experiment_id], filter_string=f"tags.`{tag}` = '{value}'", max_results=SEARCH)
    return sorted(runs, key=lambda r: (COMPLETE_TAG not in r.data.tags, r.info.start_time or 0, r.info.run_id))


def _kept(client: Any, experiment_id: str, key: str, parent_id: str) -> Any:
    """The record's whole run, preferably under `parent_id`, or None; every other run of the record is deleted:
    a half-made one an interrupted export left, a second copy."""
    found = _search(client, experiment_id, RECORD_TAG, key)
    whole = sorted(
        (r for r in found if COMPLETE_TAG in r.data.tags), key=lambda r: r.data.tags.get(PARENT_TAG) != parent_id
    )
    kept = whole[0] if whole else None
    for run in found:
        if run is not kept:
            client.delete_run(run.info.run_id)
    return kept


def _drop_doubles(client: Any, experiment_id: str, sweep_key: str, parent_id: str) -> None:
    """A run that a retried request made twice (the server gone before it answered `create_run`): the copy nobody
    fills is still RUNNING once the export has ended its own runs, under its parent or as a second parent."""
    for where in (f"tags.`{PARENT_TAG}` = '{parent_id}'", f"tags.`{SWEEP_TAG}` = '{sweep_key}'"):
        running = f"{where} and attributes.status = 'RUNNING'"
        for run in client.search_runs([experiment_id], filter_string=running, max_results=SEARCH):
            if run.info.run_id != parent_id:
                client.delete_run(run.info.run_id)


def _create(client: Any, experiment_id: str, name: str, tags: dict[str, str], start_ms: int | None = None) -> str:
    """A new run that carries its identity from the start, so a fault at any later step leaves it findable."""
    return client.create_run(experiment_id, start_time=start_ms, tags=tags, run_name=name).info.run_id


def _child(client: Any, run_id: str, run: TrackedRun) -> None:
    stamp = run.finished_ms or run.started_ms or int(time.time() * 1000)
    metrics = [(k, v, stamp, 0) for k, v in run.metrics.items()]
    metrics += [(k, v, stamp, step) for k, values in run.steps.items() for step, v in enumerate(values)]
    _log(client, run_id, params=run.params, metrics=metrics)
    _files(client, run_id, run.files)
    _complete(client, run_id, STATUS.get(run.status, "FAILED"), run.finished_ms)


def _complete(client: Any, run_id: str, status: str, end_ms: int | None) -> None:
    """The run's end, then its `dlperf.exported` tag, last: a run with the tag is whole and ended."""
    client.set_terminated(run_id, status, end_time=end_ms)
    client.set_tag(run_id, COMPLETE_TAG, "complete")


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
