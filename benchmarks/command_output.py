"""A `--command` that prints a lot: dlperf's wall time, its processes' peak memory and what lands on disk and on
its console, beside the bare script writing the same output to /dev/null and to a file.

The script (tests/fixtures/scripts/loud_windows.py) prints 8 dlperf-format timing windows with `--bytes` of filler
lines between them. dlperf's side is `dlperf run --command` (instrument off: the script's lines are the figure),
its stdout (the console a user sees) counted, not kept; a psutil sampler every 50 ms sums the resident memory of
dlperf's own processes (the CLI and the node's agent, not the script), which is what must stay flat while the
output streams through, and their CPU seconds (as last seen: the machine may be shared, so times alone mislead).

    python benchmarks/command_output.py                 # 1 GiB
    python benchmarks/command_output.py --bytes 200e6
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

SCRIPT = Path(__file__).parents[1] / "tests" / "fixtures" / "scripts" / "loud_windows.py"
MIB = 2**20


def script_argv(size: int) -> list[str]:
    return [sys.executable, str(SCRIPT), "--bytes", str(size), "--windows", "8", "--gap-s", "0"]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bare(size: int, target: str) -> tuple[float, float]:
    """The script alone, its output into `target`: the time writing it takes, and its CPU seconds."""
    start, cpu = time.perf_counter(), children_cpu()
    with open(target, "wb") as sink:
        subprocess.run(script_argv(size), stdout=sink, stderr=subprocess.STDOUT, check=True)
    return time.perf_counter() - start, children_cpu() - cpu


class Peaks:
    """The peak resident memory of dlperf's processes under `root` (the CLI and its agent: not the script)."""

    def __init__(self, root: psutil.Process, out: Path) -> None:
        self.root, self.out, self.cli, self.agent, self.total = root, out, 0, 0, 0
        self.cpu: dict[int, float] = {}  # pid -> the CPU seconds it had used when last seen
        self.started, self.log_size, self.log_done = time.perf_counter(), 0, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                return
            sizes = {}
            for proc in procs:
                try:
                    if proc.cmdline()[1:2] != [str(SCRIPT)]:
                        sizes[proc.pid] = proc.memory_info().rss
                        self.cpu[proc.pid] = sum(proc.cpu_times()[:2])
                except psutil.Error:
                    continue
            self.cli = max(self.cli, sizes.get(self.root.pid, 0))
            self.agent = max([self.agent, *(v for k, v in sizes.items() if k != self.root.pid)])
            self.total = max(self.total, sum(sizes.values()))
            self._log_growth()
            self._stop.wait(0.05)

    def _log_growth(self) -> None:
        """When the log last grew: the command's output all written, the reading from there on."""
        try:
            size = sum(p.stat().st_size for p in self.out.rglob("*.log"))
        except OSError:
            return
        if size > self.log_size:
            self.log_size, self.log_done = size, time.perf_counter() - self.started

    def __enter__(self) -> Peaks:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()


def count_bytes(stream, counted: list[int]) -> None:
    while block := stream.read(1 << 16):
        counted[0] += len(block)


def under_dlperf(size: int, out: Path) -> dict:
    command = " ".join(script_argv(size))
    argv = [sys.executable, "-m", "dlperf", "run", "--model", "resnet50", "--batch-size", "32", "--instrument",
            "off", "--timeout", "3600", "--command", command, "--out", str(out)]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    printed = [0]
    reader = threading.Thread(target=count_bytes, args=(proc.stdout, printed), daemon=True)
    reader.start()
    with Peaks(psutil.Process(proc.pid), out) as peaks:
        proc.wait()
    reader.join()
    wall = time.perf_counter() - start
    files = {p.name: p.stat().st_size for p in sorted(out.rglob("*")) if p.is_file()}
    return {"rc": proc.returncode, "wall": wall, "peaks": peaks, "printed": printed[0], "files": files, "pid": proc.pid}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bytes", type=float, default=2**30, help="filler output of the script (default 1 GiB)")
    args = parser.parse_args()
    size = int(args.bytes)
    with tempfile.TemporaryDirectory(prefix="dlperf-output-") as tmp:
        null_s, _ = bare(size, os.devnull)
        file_s, script_cpu = bare(size, str(Path(tmp) / "bare.txt"))
        Path(tmp, "bare.txt").unlink()
        cpu = children_cpu()
        found = under_dlperf(size, Path(tmp) / "out")
        cpu = children_cpu() - cpu
    peaks = found["peaks"]
    print(f"output {size / MIB:.0f} MiB, load average {os.getloadavg()[0]:.1f} after the runs")
    print(f"bare script > /dev/null   {null_s:8.1f} s")
    print(f"bare script > file        {file_s:8.1f} s  ({script_cpu:.1f} CPU s)")
    print(f"dlperf run --command      {found['wall']:8.1f} s  (exit code {found['rc']}; the log complete at "
          f"{peaks.log_done:.1f} s, then read)")  # fmt: skip
    cli_cpu = peaks.cpu.get(found["pid"], 0.0)
    print(f"CPU seconds: {cpu:.1f} in all, dlperf CLI {cli_cpu:.1f} (its reading), agent "
          f"{sum(peaks.cpu.values()) - cli_cpu:.1f} (the copy), the script the rest")  # fmt: skip
    print(f"peak RSS: dlperf CLI {peaks.cli / MIB:.0f} MiB, agent {peaks.agent / MIB:.0f} MiB, "
          f"together {peaks.total / MIB:.0f} MiB")  # fmt: skip
    print(f"dlperf's console output   {found['printed'] / MIB:8.2f} MiB")
    for name, length in found["files"].items():
        print(f"  {name:50s} {length / MIB:10.2f} MiB")


if __name__ == "__main__":
    main()
