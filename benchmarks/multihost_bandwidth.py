"""2-host data-parallel speedup under bandwidth caps, measured and predicted, on network-namespace hosts (root).

    sudo python benchmarks/multihost_bandwidth.py                       # ResNet-50 at 32x32, batch 16, CPU/gloo
    sudo python benchmarks/multihost_bandwidth.py --rates 1gbit 200mbit --iters 8

Builds two hosts with sshd (tests/netns_hosts.py), runs `dlperf run` over ssh on one host (1n1g) and, for each
tbf cap on every host's link, `dlperf commbench` on both hosts (2n1g, all-reduce only), the 2n1g prediction from
the 1n1g record and that commbench record (`dlperf.predict`, the same code as `dlperf predict`), and the measured
2n1g `dlperf run`; prints both speedups and the prediction's error. Each host is pinned to its own CPU core.
Each ResNet-50 step all-reduces ~100 MB of fp32 gradients, so the speedup falls as the cap tightens.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from netns_hosts import Cluster, cannot_build_reason, netns_hosts  # noqa: E402

from dlperf.predict import links_from_records, predict_data_parallel, run_from_record  # noqa: E402

SRC = Path(__file__).resolve().parents[1] / "src"


def remote_python(folder: Path) -> str:
    """This interpreter with this checkout's dlperf first: ssh starts the hosts' agents without our environment."""
    path = folder / "python"
    path.write_text(f'#!/bin/sh\nPYTHONPATH={SRC} exec {sys.executable} "$@"\n')
    path.chmod(0o755)
    return str(path)


def dlperf(cluster: Cluster, nodes: int, args: list[str], what: str) -> None:
    command = [sys.executable, "-m", "dlperf", *args, "--hosts", ",".join(cluster.addresses[:nodes]),
               "--ifname", cluster.ifname, *cluster.ssh_options(), "--overwrite",
               "--remote-python", remote_python(cluster.workdir)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"dlperf {what} on {nodes} host(s) failed: {done.stderr.strip()}")


def commbench(cluster: Cluster, args: argparse.Namespace, out: Path) -> dict:
    """The all-reduce fit over both hosts' (capped) link."""
    dlperf(cluster, 2, ["commbench", "--device", "cpu", "--ops", "all_reduce", "--sizes", args.sizes,
                        "--warmup", "1", "--repeats", str(args.repeats), "--out", str(out)], "commbench")  # fmt: skip
    return json.loads(next((out / "commbench" / "2n1g").glob("*.json")).read_text())


def measure(cluster: Cluster, nodes: int, args: argparse.Namespace, out: Path) -> dict:
    """The record of one `dlperf run` on the first `nodes` hosts."""
    command = [
        "run", "--model", "resnet50", "--device", "cpu",
        "--image-size", str(args.image_size), "--num-classes", "10", "--batch-size", str(args.batch_size),
        "--warmup-iters", "2", "--iters", str(args.iters), "--print-every", str(args.iters),
        "--out", str(out),
    ]  # fmt: skip
    dlperf(cluster, nodes, command, "run")
    record = next((out / "resnet50" / f"{nodes}n1g").glob("*.json"))
    return json.loads(record.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", nargs="+", default=["1gbit", "100mbit"], help="tbf rates, e.g. 1gbit 100mbit")
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--iters", type=int, default=4)
    parser.add_argument("--sizes", default="1M,4M,16M", help="commbench all-reduce sizes")
    parser.add_argument("--repeats", type=int, default=3, help="commbench timed calls per size")
    parser.add_argument("--backward-share", type=float, default=2 / 3)
    args = parser.parse_args()
    reason = cannot_build_reason()
    if reason:
        print(f"cannot build hosts: {reason}", file=sys.stderr)
        return 1
    with (
        tempfile.TemporaryDirectory(prefix="dlperf-bw-") as tmp,
        netns_hosts(2, Path(tmp) / "hosts", pin_cpus=True) as cluster,
    ):
        out = Path(tmp) / "results"
        print(
            "| cap | all-reduce busbw (MB/s) | 1 host samples/s | 2 hosts samples/s | measured speedup "
            "| predicted, DDP overlap | error | predicted, no overlap | error |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|", flush=True)
        for rate in [None, *args.rates]:
            one = measure(cluster, 1, args, out)  # beside each 2-host run: the machine's load drifts
            single = run_from_record(one, backward_share=args.backward_share)
            cluster.cap_bandwidth(rate)
            fit = commbench(cluster, args, out)
            _, inter = links_from_records([fit])
            predicted = predict_data_parallel(single, 1, 2, None, inter).speedup
            serial = predict_data_parallel(single, 1, 2, None, inter, overlap=False).speedup
            two = measure(cluster, 2, args, out)["throughput"]
            measured = two / one["throughput"]
            busbw = fit["fits"]["all_reduce"]["busbw_gbps"] * 1e3
            print(f"| {rate or 'none'} | {busbw:.1f} | {one['throughput']:.2f} | {two:.2f} | {measured:.2f} "
                  f"| {predicted:.2f} | {(predicted - measured) / measured:+.1%} "
                  f"| {serial:.2f} | {(serial - measured) / measured:+.1%} |",
                  flush=True)  # fmt: skip
        cluster.cap_bandwidth(None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
