"""A results folder as Weights & Biases runs in offline mode: run folders under `DIR/wandb/` that `wandb sync` uploads
later, with the same content as the MLflow export (`reporting/tracking.py`).

W&B has no parent runs: the records' runs share the sweep as their `group`, and one more run (job type `sweep`)
holds the sweep's figures and report. A run's id is made from its identity (the record's key, the sweep's).

Exactly once, and resumable: a run folder counts as written only with dlperf's marker file in it, written last,
after W&B has finished the run, its `.wandb` file is checked whole (ending in the run's exit record) and flushed
to disk. W&B's writer does not tell its caller when a write fails (a full disk left a `.wandb` file cut short
and the export none the wiser), hence the check. A folder without the marker (a fault's, a killed export's) is
removed and written again by the next export. Two exports of one folder to one DIR take turns
(`reporting/export_lock.py`). W&B's own logs go to the run folder only: on a full disk Python's logging would print
a traceback for each of its failed writes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf.errors import DlperfError, ResultsError, first_line
from dlperf.records.store import write_text_atomic
from dlperf.reporting.export_lock import export_lock
from dlperf.reporting.extras import require_extra
from dlperf.reporting.tracking import TrackedRun, TrackedSweep, tracked_sweeps

ID_CHARS = 32  # of the identity's hex digits in a W&B run id
TAG_CHARS = 64  # W&B's limit on a tag
MARKER = "dlperf-exported.json"  # in a run folder: written whole; `wandb sync` reads only the .wandb file
BLOCK, HEADER = 32768, 7  # a .wandb file's framing (LevelDB's log): 32 KiB blocks; a record's CRC, length, type
WHOLE, LAST = 1, 4  # record types that end a record (2 and 3: its first and middle parts)
Tracked = TrackedRun | TrackedSweep
RERUN = "free space there, or choose a writable --dir, and rerun: the rerun keeps the runs written and writes the rest"


@dataclass(frozen=True)
class WandbOutcome:
    run_dirs: list[Path]  # the new runs' folders, for `wandb sync`
    existing: int  # runs already there


def run_id(kind: str, key: str) -> str:
    plain = key.replace(":", "").replace("-", "").lower()
    return f"{kind}-{plain[:ID_CHARS]}"


def export_wandb(folder: str | Path, out: str | Path, project: str = "dlperf") -> WandbOutcome:
    require_extra("wandb", "wandb", "dlperf export wandb")
    import wandb

    root = Path(out)
    try:
        with tracked_sweeps(folder) as sweeps, export_lock(folder, f"wandb {root.resolve()}"), _quiet_logging():
            _writable(root / "wandb")
            planned = [(_group(sweep), *run) for sweep in sweeps for run in _planned(sweep)]
            todo = [run for run in planned if not _written(root, run[1])]
            done, failure = _write_all(wandb, root, project, todo)
            made = []
            for id_, name in done:
                try:
                    made.append(_seal(root, id_))
                except (OSError, DlperfError) as error:
                    failure = failure or _failed(root, id_, name, error)
    except OSError as error:  # a read-only DIR, a full disk before a run's writing
        raise ResultsError(f"cannot write W&B offline runs under {root}: {error.strerror or error}: {RERUN}") from None
    if failure is not None:
        raise failure
    return WandbOutcome(made, len(planned) - len(todo))


def _writable(runs: Path) -> None:
    """W&B writes to a temporary folder instead of a DIR it cannot write, and says so only in a warning."""
    runs.mkdir(parents=True, exist_ok=True)
    if not os.access(runs, os.W_OK):
        raise ResultsError(f"cannot write W&B offline runs under {runs}: not writable (read-only?): {RERUN}")


def _write_all(
    wandb: Any, root: Path, project: str, todo: list[tuple[str, str, str, Tracked]]
) -> tuple[list[tuple[str, str]], ResultsError | None]:
    """The runs written until one fails, then W&B's writer process shut down: only then are its files closed (its
    `finish` returns before the last records are on disk). The runs written, and the failure, if any."""
    done: list[tuple[str, str]] = []
    failure = None
    for group, id_, job, item in todo:
        try:
            _run(wandb, root, project, group, id_, job, item)
        except Exception as error:
            failure = _failed(root, id_, item.name, error)
            break
        done.append((id_, item.name))
    with contextlib.suppress(Exception, SystemExit):  # its writer ended badly: each run's file is checked anyway
        wandb.teardown()
    return done, failure


def _failed(root: Path, id_: str, name: str, error: BaseException) -> ResultsError:
    """The run's folders removed (the next export writes it again) and the one line that says why."""
    free = _free_bytes(root)
    for left in _run_dirs(root, id_):
        shutil.rmtree(left, ignore_errors=True)
    reason = error.strerror if isinstance(error, OSError) and error.strerror else first_line(error)
    if not isinstance(error, (OSError, DlperfError)):
        reason = f"W&B: {reason}"
    return ResultsError(f"cannot write W&B offline run {name} under {root}: {reason} ({free}): {RERUN}")


@contextlib.contextmanager
def _quiet_logging() -> Iterator[None]:
    """A failed write of W&B's file logs dropped instead of printed as a traceback (hundreds on a full disk)."""
    saved = logging.raiseExceptions
    logging.raiseExceptions = False
    try:
        yield
    finally:
        logging.raiseExceptions = saved


def _group(sweep: TrackedSweep) -> str:
    sweep_id = sweep.tags["dlperf.sweep_id"]
    return sweep_id if sweep_id != "none" else sweep.key[:ID_CHARS]


def _planned(sweep: TrackedSweep) -> list[tuple[str, str, Tracked]]:
    """(run id, job type, what the run holds) of the sweep's run, then of its records'."""
    return [(run_id("sweep", sweep.key), "sweep", sweep), *((run_id("run", r.key), "record", r) for r in sweep.runs)]


def _labels(item: Tracked) -> tuple[list[str], str]:
    """A run's W&B tags and its files' artifact name: a record's status, flags and sweep; the sweep's report."""
    if isinstance(item, TrackedSweep):
        return ["sweep"], f"report-{run_id('sweep', item.key)}"
    flags = [] if item.tags["dlperf.flags"] == "none" else item.tags["dlperf.flags"].split(";")
    tags = [f"status:{item.status}", *(f"flag:{f}" for f in flags), f"sweep:{item.tags['dlperf.sweep_id']}"]
    return tags, f"record-{item.key[:ID_CHARS]}"


def _run_dirs(root: Path, id_: str) -> list[Path]:
    return sorted((root / "wandb").glob(f"offline-run-*-{id_}"))


def _written(root: Path, id_: str) -> bool:
    """Whether the run's folder is there with its marker; every other folder of the run (half-written, or a
    second copy) is removed, so the run is written again or kept once."""
    kept = False
    for run_dir in _run_dirs(root, id_):
        if not kept and (run_dir / MARKER).is_file():
            kept = True
        else:
            shutil.rmtree(run_dir)
    return kept


def _free_bytes(root: Path) -> str:
    try:
        return f"{shutil.disk_usage(root).free} bytes free there"
    except OSError:
        return "free space unknown"


def _run(wandb: Any, root: Path, project: str, group: str, id_: str, job: str, item: Tracked) -> None:
    """One W&B run with the same parts as its MLflow twin (`reporting/tracking.py`)."""
    tags, artifact_name = _labels(item)
    settings = wandb.Settings(
        mode="offline", console="off", save_code=False, disable_git=True, x_disable_stats=True, silent=True
    )
    run = wandb.init(
        project=project,
        dir=str(root),
        id=id_,
        name=item.name,
        group=group,
        job_type=job,
        config=item.params,
        tags=[t[:TAG_CHARS] for t in tags],
        settings=settings,
    )
    for key, values in (item.steps if isinstance(item, TrackedRun) else {}).items():
        for step, value in enumerate(values):
            run.log({key: value}, step=step)
    run.summary.update({**item.metrics, **item.tags})
    if item.files:
        artifact = wandb.Artifact(artifact_name, type="dlperf-" + job)
        for path in item.files:
            artifact.add_file(str(path), name=f"plots/{path.name}" if path.parent.name == "plots" else path.name)
        run.log_artifact(artifact)
    run.finish(exit_code=0 if isinstance(item, TrackedSweep) or item.status == "ok" else 1)


def _seal(root: Path, id_: str) -> Path:
    """The finished run's folder, its `.wandb` file checked whole and flushed, then marked written."""
    found = _run_dirs(root, id_)
    if not found:
        raise ResultsError(f"W&B wrote no offline run folder under {root / 'wandb'}")
    run_dir = found[-1]
    log = next(run_dir.glob("*.wandb"), None)
    kinds = None if log is None else wandb_records(log)
    if not kinds or kinds[-1].WhichOneof("record_type") != "exit":
        raise ResultsError(f"W&B could not write all of its run file {log or run_dir / '*.wandb'}")
    with log.open("rb") as f:  # W&B's writer leaves it to the page cache: on disk before the marker says done
        os.fsync(f.fileno())
    write_text_atomic(run_dir / MARKER, json.dumps({"id": id_, "records": len(kinds)}) + "\n")
    return run_dir


def wandb_records(path: Path) -> list[Any] | None:
    """The records of a `.wandb` file, W&B's own protobuf messages in LevelDB-log framing (a 7-byte `:W&B` header,
    then 32 KiB blocks of records, each a 4-byte CRC, a 2-byte length, a 1-byte type), or None where the file is
    cut inside a record or is not one."""
    from google.protobuf.message import DecodeError
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    if data[:4] != b":W&B":
        return None
    records, offset, parts = [], HEADER, b""
    while offset + HEADER <= len(data):
        if BLOCK - offset % BLOCK < HEADER:  # a block's tail too short for a record header is padding
            offset += BLOCK - offset % BLOCK
            continue
        length, kind = int.from_bytes(data[offset + 4 : offset + 6], "little"), data[offset + 6]
        if offset + HEADER + length > len(data):
            return None
        parts += data[offset + HEADER : offset + HEADER + length]
        offset += HEADER + length
        if kind in (WHOLE, LAST):
            record = wandb_internal_pb2.Record()
            try:
                record.ParseFromString(parts)
            except DecodeError:
                return None
            records.append(record)
            parts = b""
    return None if parts else records
