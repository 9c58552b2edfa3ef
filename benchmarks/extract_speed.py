"""How fast `dlperf extract` reads logs, and that its memory does not grow with the log.

Generates a few hundred MB of logs in several peer formats in a temporary folder, reads each to the end
(window 0: every line is parsed), and prints MB/s and the process's peak RSS after each file. Peak RSS staying
flat while hundreds of MB stream through shows the readers never hold a whole file. With `--real DIR` it also
times `dlperf extract DIR` end to end (reading, records, report, with and without plots) and the start of
`dlperf extract --list-formats` in a fresh interpreter (which must not import torch).

    python benchmarks/extract_speed.py [--mb 300] [--real tests/fixtures/peer-logs/real]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dlperf.framework_logs.extract import Options, extract_dir, read_run
from dlperf.framework_logs.published_names import parse_log_path

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=300, help="total MB of logs to generate (default 300)")
    parser.add_argument("--real", type=Path, help="also time `dlperf extract` on this folder of real logs")
    args = parser.parse_args()
    if args.real:
        time_real(args.real)
    per_file = args.mb / len(GENERATORS)
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
