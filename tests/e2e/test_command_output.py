"""A `--command`'s output, streamed: a large output is written once (the run's log), the console and the terminal
show a bounded view of it, dlperf's processes stay small; a script whose windows do not come through its stdout
(they go to stderr, or it closes stdout, or it writes them to its own file) is read, or told exactly where its
output went, never recorded as having printed nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest

SCRIPT = Path(__file__).parents[1] / "fixtures" / "scripts" / "loud_windows.py"
MIB = 2**20


def run_args(out: Path, command: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "dlperf", "run", "--model", "resnet50", "--batch-size", "32", "--instrument", "off",
            "--command", command, "--out", str(out), *extra]  # fmt: skip


def the_record(out: Path) -> dict:
    (path,) = out.rglob("*_1.json")
    return json.loads(path.read_text())


def dlperf_peak_rss(proc: subprocess.Popen, stop: threading.Event, peaks: dict[int, int]) -> None:
    """The peak resident memory of each of dlperf's own processes (the CLI, the agent), not the script's."""
    root = psutil.Process(proc.pid)
    while not stop.is_set():
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return
        for p in procs:
            try:
                if p.cmdline()[1:2] != [str(SCRIPT)]:
                    peaks[p.pid] = max(peaks.get(p.pid, 0), p.memory_info().rss)
            except psutil.Error:
                continue
        stop.wait(0.05)


@pytest.mark.slow
def test_a_large_output_is_on_disk_once_and_dlperf_stays_small(tmp_path):
    size = 160 * MIB  # long lines: many bytes, few lines for the reader
    command = f"{sys.executable} {SCRIPT} --bytes {size} --line-bytes 8000 --gap-s 0"
    out = tmp_path / "out"
    proc = subprocess.Popen(run_args(out, command, "--log-format", "dlperf"), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)  # fmt: skip
    stop, peaks = threading.Event(), {}
    sampler = threading.Thread(target=dlperf_peak_rss, args=(proc, stop, peaks), daemon=True)
    sampler.start()
    console, _ = proc.communicate(timeout=600)
    stop.set()
    sampler.join()
    assert proc.returncode == 0, console[-3000:]
    record = the_record(out)
    assert record["status"] == "ok" and record["format"] == "dlperf" and record["kept_lines"] == 8
    folder = next(out.rglob("*_1.log")).parent
    sizes = {p.suffix: p.stat().st_size for p in folder.iterdir()}
    assert sizes[".log"] > 0.99 * size  # every line, once
    assert sizes[".txt"] < MIB and sizes[".arrivals"] < MIB  # the console is a view; stamps are coalesced
    assert len(console) < MIB  # the terminal too
    assert b"not shown here" in console and b"[dlperf] iter 80/80" in console
    assert max(peaks.values()) < size / 2, {pid: rss // MIB for pid, rss in peaks.items()}
    assert record["host_memory_mib_sampled"] < size / MIB / 2  # the agent and the script, as the record samples them


def run_script(tmp_path: Path, where: str, shell: str = "") -> tuple[int, str, dict]:
    own = tmp_path / "own.log"
    command = f"{sys.executable} {SCRIPT} --where {where} --file {own}{shell}"
    done = subprocess.run(run_args(tmp_path / "out", command, *(["--shell"] if shell else [])),
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    return done.returncode, done.stderr, the_record(tmp_path / "out")


@pytest.mark.parametrize(("where", "shell"), [("stderr", ""), ("close-stdout", ""), ("fd3", " 3>&1")])
def test_windows_through_stderr_a_closed_stdout_or_another_descriptor_are_read(tmp_path, where, shell):
    code, err, record = run_script(tmp_path, where, shell)
    assert code == 0, err
    assert record["status"] == "ok" and record["format"] == "dlperf" and record["kept_lines"] == 8


def test_windows_written_to_the_scripts_own_file_are_named_not_called_nothing(tmp_path):
    """The script closes stdout and stderr after its first line and writes its windows to a file it names."""
    code, err, record = run_script(tmp_path, "file")
    assert code == 1 and record["status"] == "failed"
    assert "printed nothing" not in record["error"]
    own = tmp_path / "own.log"
    assert "rank 0 closed its standard output and error after 1 line and ran on" in record["error"]
    assert str(own) in record["error"] and own.read_text().count("[dlperf] iter") == 8


def test_a_shell_redirect_is_named_where_the_command_printed_nothing(tmp_path):
    own = tmp_path / "own.log"
    code, err, record = run_script(tmp_path, "stdout", f" > {own} 2>&1")
    assert code == 1 and record["status"] == "failed"
    assert (
        f"the command printed nothing to its standard output or error; rank 0's output went to {own}"
        in (record["error"])
    )
