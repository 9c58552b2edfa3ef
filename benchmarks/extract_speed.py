"""How fast `dlperf extract` reads logs, and that its memory does not grow with the log.

Generates a few hundred MB of logs in several peer formats in a temporary folder, reads each to the end
(window 0: every line is parsed), and prints MB/s and the process's peak RSS after each file. Peak RSS staying
flat while hundreds of MB stream through shows the readers never hold a whole file. With `--real DIR` it also
times `dlperf extract DIR` end to end (reading, records, report, with and without plots) and the start of
`dlperf extract --list-formats` in a fresh interpreter (which must not import torch).

With `--lines N` it instead times `dlperf extract` as a whole process on logs of N lines of `--line-mb` MB each
(issue 50: such a log took 8 s, then over 240 s): junk, digits, `key: value |` pairs, JSON, a format's record
start repeated (a near-match), and a real Megatron log with a long junk line after each of its lines (detected,
then every long line goes through the reader). It runs whatever `dlperf` PYTHONPATH names, so an older commit's
tree can be timed with the same script.

    python benchmarks/extract_speed.py [--mb 300] [--real tests/fixtures/peer-logs/real]
    python benchmarks/extract_speed.py --lines 150 [--line-mb 1] [--variants junk,json] [--timeout 600]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

T0 = 1_700_000_000.0


def _stamp(step: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(T0 + step * 0.4)) + f".{step % 1000:03d}000"


def keras(step: int) -> str:
    clock = time.strftime("%m%d %H:%M:%S", time.gmtime(T0 + step * 39))
    return (
        f"I{clock}.256277 140405777909504 keras_utils.py:133] TimeHistory: 39.13 seconds, "
        f"{320 + step % 10}.08 examples/second between steps {step * 100} and {step * 100 + 100}"
    )


def dllogger(step: int) -> str:
    return (
        f"DLL {_stamp(step)} - Epoch: 0 Iteration: {step}  train.loss : 6.93504  "
        f"train.total_ips : {4294 + step % 7}.91 img/s"
    )


def mxnet(step: int) -> str:  # two ranks per iteration
    line = f"{_stamp(step).replace('.', ',')[:23]} Epoch[0] Batch [{step * 20}]\tSpeed: {385 + step % 3}.21 samples/sec"
    return f"{line}\taccuracy=0.000000\n{line}\taccuracy=0.001000"


def megatron(step: int) -> str:
    return (
        f"[{_stamp(step)[:19]}] iteration {step:>8}/ 9999999 | consumed samples: {step * 128:>12} | "
        f"elapsed time per iteration (ms): {800 + step % 5}.4 | throughput per GPU (TFLOP/s/GPU): 181.2 | "
        "learning rate: 1.500000E-05 | global batch size:   128 | lm loss: 8.123456E+00 | loss scale: 1.0 |"
    )


def oneflow(step: int) -> str:
    return (
        f"train: epoch 0, iter {step}, loss: 7.087004, top_1: 0.000000, top_k: 0.000000, "
        f"samples/s: {3988 + step % 9}.891 {T0 + step * 0.6:.7f}"
    )


def noise(step: int) -> str:
    return f"INFO:root:step {step} data loader queue depth 4, host memory 12.5 GiB, nothing to parse here"


GENERATORS: dict[str, Callable[[int], str]] = {
    "tf2-keras": keras,
    "dllogger-pytorch": dllogger,
    "mxnet": mxnet,
    "megatron": megatron,
    "oneflow-resnet": oneflow,
}


def write_log(path: Path, line: Callable[[int], str], megabytes: float) -> int:
    """Throughput lines with a noise line between each, up to `megabytes`; returns the size in bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    limit, size, step = megabytes * 1e6, 0, 1
    with open(path, "w", encoding="utf-8") as f:
        while size < limit:
            chunk = "".join(f"{line(s)}\n{noise(s)}\n" for s in range(step, step + 1000))
            f.write(chunk)
            size += len(chunk)
            step += 1000
    return size


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def time_real(root: Path) -> None:
    """`dlperf extract` on a folder of real logs, in this process: what a user waits for, minus start-up."""
    from dlperf.cli.main import main as dlperf_main
    from dlperf.framework_logs.extract import Options, extract_dir

    size = sum(p.stat().st_size for p in root.rglob("*.log"))
    for flags in (["--no-plots"], []):
        with tempfile.TemporaryDirectory(prefix="dlperf-extract-real-") as tmp:
            started = time.perf_counter()
            dlperf_main(["extract", str(root), "--out", str(Path(tmp) / "out"), *flags])
            seconds = time.perf_counter() - started
        print(f"extract {root} {' '.join(flags) or '(with plots)'}: {size / 1e6:.1f} MB in {seconds:.2f} s", flush=True)
    started = time.perf_counter()
    records, skipped = extract_dir(root, Options())
    print(f"reading only: {len(records)} records, {len(skipped)} skipped, {time.perf_counter() - started:.2f} s")
    probe = (
        "import sys, time; t = time.perf_counter(); from dlperf.cli import extract_cmd; "
        "from dlperf.framework_logs.registry import describe; describe(); "
        "print(f'{time.perf_counter() - t:.3f} s, torch imported: {\"torch\" in sys.modules}')"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    print(f"--list-formats imports (dlperf.cli.extract_cmd + describe): {out}")


MEGATRON_LOG = (
    Path(__file__).parent.parent / "tests/fixtures/peer-logs/real/megatron/1n1g/correctness-j1728522_b80_bf16_1.log"
)


def _filled(unit: str, chars: int) -> str:
    return (unit * (chars // len(unit) + 1))[:chars]


def _junk(chars: int) -> str:
    """Printable text no format recognises, with the punctuation their records use."""
    return "".join(random.Random(0).choices("abcdefghijklmnopqrstuvwxyz0123456789 .,:;-_=/|[]{}()", k=chars))


LONG_LINES: dict[str, Callable[[int], str]] = {
    "junk": _junk,
    "digits": lambda chars: _filled("1234567890", chars),
    "key-value": lambda chars: _filled("key: value | ", chars),
    "json": lambda chars: json.dumps({f"k{i}": i * 1.5 for i in range(chars // 12)})[:chars],
    "near-match": lambda chars: _filled(" iteration       10/     100 | consumed samples: 640 | ", chars),
    "megatron+junk": _junk,  # between a real log's lines
}


def _long_lines(variant: str, lines: int, chars: int) -> Iterator[str]:
    """The log's lines: each long line a rotation of one block (distinct lines, cheap to make)."""
    block = LONG_LINES[variant](chars)
    real = MEGATRON_LOG.read_text().splitlines() if variant == "megatron+junk" else []
    for i in range(max(lines, len(real))):
        if i < len(real):
            yield real[i]
        if i < lines:
            cut = i * 7919 % chars
            yield block[cut:] + block[:cut]


def time_long_lines(variants: list[str], lines: int, line_mb: float, timeout: float) -> None:
    """`dlperf extract` in a fresh process on each variant's log: wall and CPU seconds, and how it ended."""
    chars = int(line_mb * 1e6)
    print(f"load {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}; {lines} lines x {chars:,}")
    print(f"{'log':<15} {'MB':>6} {'wall s':>8} {'cpu s':>7}  exit  result")
    for variant in variants:
        with tempfile.TemporaryDirectory(prefix="dlperf-long-lines-") as tmp:
            path = Path(tmp) / "logs" / "1n1g" / "long_b80_bf16_1.log"
            path.parent.mkdir(parents=True)
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(f"{line}\n" for line in _long_lines(variant, lines, chars))
            print(f"{variant:<15} {path.stat().st_size / 1e6:6.1f} " + _extract_process(path.parent.parent, timeout))


def _extract_process(logs: Path, timeout: float) -> str:
    """One `dlperf extract` run's wall and CPU seconds, exit status and last stderr line (or that it timed out)."""
    command = [sys.executable, "-m", "dlperf", "extract", str(logs), "--out", str(logs.parent / "out"), "--no-plots"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"{'>' + format(timeout, '.0f'):>8} {'-':>7}     -  killed at the timeout"
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    said = (done.stderr.strip().splitlines() or ["(nothing on stderr)"])[0].replace(f"{logs}/1n1g/", "")
    return f"{wall:8.2f} {cpu:7.2f} {done.returncode:5}  {said[:90]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=300, help="total MB of logs to generate (default 300)")
    parser.add_argument("--real", type=Path, help="also time `dlperf extract` on this folder of real logs")
    parser.add_argument("--lines", type=int, default=0, help="time logs of this many long lines instead")
    parser.add_argument("--line-mb", type=float, default=1.0, help="MB per long line (default 1)")
    parser.add_argument("--variants", default=",".join(LONG_LINES), help="long-line logs to time (comma-separated)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds before a long-line run is killed")
    args = parser.parse_args()
    if args.lines:
        time_long_lines(args.variants.split(","), args.lines, args.line_mb, args.timeout)
        return
    if args.real:
        time_real(args.real)
    time_streaming(args.mb)


def time_streaming(mb: float) -> None:
    """Logs in several formats, `mb` in all, each read to the end in this process: MB/s and peak RSS."""
    from dlperf.framework_logs.extract import Options, read_run
    from dlperf.framework_logs.published_names import parse_log_path

    per_file = mb / len(GENERATORS)
    print(f"peak RSS before: {peak_rss_mib():.0f} MiB")
    print(f"{'format':<18} {'MB':>7} {'s':>6} {'MB/s':>7} {'peak RSS MiB':>13}  throughput")
    total_bytes, total_s = 0, 0.0
    with tempfile.TemporaryDirectory(prefix="dlperf-extract-speed-") as tmp:
        for name, line in GENERATORS.items():
            path = Path(tmp) / name / "1n8g" / "bench_b16_fp32_1.log"
            size = write_log(path, line, per_file)
            started = time.perf_counter()
            record = read_run(parse_log_path(path), Options(warmup=1, window=0))
            seconds = time.perf_counter() - started
            assert record["format"] == name, record["format"]
            total_bytes, total_s = total_bytes + size, total_s + seconds
            print(
                f"{name:<18} {size / 1e6:7.1f} {seconds:6.2f} {size / 1e6 / seconds:7.1f} {peak_rss_mib():13.0f}"
                f"  {record['throughput']:.2f} {record['unit']}"
            )
            path.unlink()
    print(
        f"{'all':<18} {total_bytes / 1e6:7.1f} {total_s:6.2f} {total_bytes / 1e6 / total_s:7.1f} {peak_rss_mib():13.0f}"
    )


if __name__ == "__main__":
    main()
