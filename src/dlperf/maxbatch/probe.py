"""A probe that runs `dlperf run` as a fresh process, optionally under a memory cap, and reads its record.

The cap travels to the ranks in `MEMORY_CAP_ENV`; each engine applies it where it knows the device: a
device-memory fraction on a GPU (torch.cuda.set_per_process_memory_fraction, XLA's memory fraction) and RLIMIT_AS
on a CPU. An address-space cap on the whole process tree would break CUDA's start-up, which maps far more
virtual memory than any GPU holds, so every GPU probe would read as out of memory.

A fresh process per batch is the point: after an out-of-memory error an allocator may hold fragments or (on
CUDA) a broken context, so the next, smaller batch must not run in the same process.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from dlperf.maxbatch.search import ProbeOutcome
from dlperf.records.load import RecordLike, as_record, load_record
from dlperf.records.parts import Failure
from dlperf.records.schema import RunRecord
from dlperf.spec import MEMORY_CAP_ENV

# What PyTorch, Python and the C++ runtime print when an allocation fails (CPU and CUDA).
OOM_TEXT = re.compile(
    r"out of memory|OutOfMemoryError|MemoryError|can't allocate memory|Cannot allocate memory|std::bad_alloc"
    r"|killed by SIGKILL",
    re.IGNORECASE,
)
# Under an address-space cap oneDNN reports a failed scratchpad allocation only as this.
CAPPED_OOM_TEXT = re.compile(r"could not create a primitive")


def dlperf_run_argv(case_args: Sequence[str], batch_flag: str = "--batch-size") -> Callable[[int, Path], list[str]]:
    """`dlperf run CASE_ARGS BATCH_FLAG N --out DIR --overwrite` in this interpreter (GPT: --micro-batch-size)."""

    def argv(batch: int, out: Path) -> list[str]:
        return [sys.executable, "-m", "dlperf", "run", *case_args, batch_flag, str(batch), "--out", str(out),
                "--overwrite"]  # fmt: skip

    return argv


def _read_record(out: Path) -> tuple[RunRecord | None, str]:
    """The run's record and what its processes printed (the `.console.txt` beside it)."""
    for path in sorted(out.rglob("*.json")):
        record = load_record(path)
        if record is not None:
            console = path.with_suffix(".console.txt")
            return record, console.read_text(errors="replace") if console.exists() else ""
    return None, ""


def _peak_and_limit(record: RunRecord) -> tuple[float | None, float | None]:
    """CUDA: the allocator's reserved peak against the device's memory. CPU: peak RSS and no limit, since an
    address-space cap bounds virtual memory, which resident memory does not measure."""
    peak = record.peak_memory_mib or {}
    if "reserved" in peak:
        gpus = (record.env or {}).get("gpus") or []
        return peak["reserved"], (gpus[0]["memory_mib"] if gpus else None)
    return peak.get("rss"), None


def classify(returncode: int, record: RecordLike | None, console: str, capped: bool = False) -> ProbeOutcome:
    """ok / oom / error from the exit status, the record and what the processes printed."""
    record = RunRecord(status="failed") if record is None else as_record(record)
    if record.status == "ok" and returncode == 0:
        peak, limit = _peak_and_limit(record)
        return ProbeOutcome("ok", record.throughput, peak, limit)
    return _failed(returncode, record, console, capped)


def _failed(returncode: int, record: RunRecord, console: str, capped: bool) -> ProbeOutcome:
    """oom where the run was killed or its words say an allocation failed; else error, with its last words."""
    failure = record.failure or Failure()
    error = record.error or ""
    if returncode == -signal.SIGKILL or failure.signal == "SIGKILL":
        return ProbeOutcome("oom", reason=f"killed by SIGKILL (out of memory) {error}".strip())
    oom = _oom_line(error, console, capped)
    if oom is not None:
        return ProbeOutcome("oom", reason=oom)
    last = error or next((ln for ln in reversed(console.splitlines()) if ln.strip()), "")
    return ProbeOutcome("error", reason=f"exit status {returncode}: {last.strip()[-300:]}")


def _oom_line(error: str, console: str, capped: bool) -> str | None:
    """The line that says an allocation failed (the record's error before the console), its last 300
    characters; None where nothing says so. Under a cap, oneDNN's own wording counts too."""
    patterns = (OOM_TEXT, CAPPED_OOM_TEXT) if capped else (OOM_TEXT,)
    match = next((m for pattern in patterns for m in (pattern.search(error), pattern.search(console)) if m), None)
    if match is None:
        return None
    line = next((ln for ln in (error + "\n" + console).splitlines() if match.group(0) in ln), match.group(0))
    return line.strip()[-300:]


@dataclass
class RunProbe:
    """Each call runs argv(batch, out) in a fresh process group, its ranks capped at `memory_cap_bytes`."""

    argv: Callable[[int, Path], list[str]]
    workdir: Path
    memory_cap_bytes: int | None = None
    timeout_s: float = 1800.0

    def __call__(self, batch: int) -> ProbeOutcome:
        out = Path(self.workdir) / f"b{batch}"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        console_path = out / "probe.console.txt"
        env = {**os.environ, MEMORY_CAP_ENV: str(self.memory_cap_bytes)} if self.memory_cap_bytes else None
        with console_path.open("w") as console:
            proc = subprocess.Popen(
                self.argv(batch, out), stdout=console, stderr=subprocess.STDOUT, env=env,
                start_new_session=True,
            )  # fmt: skip
            try:
                returncode = proc.wait(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                returncode = None
            finally:  # nothing of this probe may live on holding memory while the next one runs
                _kill_session(proc)
                proc.wait()
        if returncode is None:
            return ProbeOutcome("error", reason=f"no result within {self.timeout_s:g} s")
        record, run_console = _read_record(out)
        console = console_path.read_text(errors="replace") + "\n" + run_console
        outcome = classify(returncode, record, console, capped=self.memory_cap_bytes is not None)
        if self.memory_cap_bytes and outcome.limit_mib is not None:  # a GPU's headroom is taken of the cap
            outcome = replace(outcome, limit_mib=min(outcome.limit_mib, self.memory_cap_bytes / 2**20))
        return outcome


def _kill_session(proc: subprocess.Popen) -> None:
    """The probe's launcher, agent and workers share its session."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
