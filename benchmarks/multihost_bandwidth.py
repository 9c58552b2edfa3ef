"""2-host data-parallel speedup under bandwidth caps, on hosts built from network namespaces (root only).

    sudo python benchmarks/multihost_bandwidth.py                       # ResNet-50 at 32x32, batch 16, CPU/gloo
    sudo python benchmarks/multihost_bandwidth.py --rates 10gbit 1gbit 100mbit --iters 8

Builds two hosts with sshd (tests/netns_hosts.py), runs `dlperf run` over ssh on one host (1n1g), then on
both (2n1g) uncapped and with every host's link capped by tbf at each rate; prints the speedup 2n1g / 1n1g.
Each host is pinned to its own CPU core (one core per host in both cases). Each ResNet-50 step all-reduces
~100 MB of fp32 gradients, so the speedup falls as the cap tightens.
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


def measure(cluster: Cluster, nodes: int, args: argparse.Namespace, out: Path) -> float:
    """Throughput (global samples/s) of one `dlperf run` on the first `nodes` hosts."""
    command = [
        sys.executable, "-m", "dlperf", "run", "--model", "resnet50", "--device", "cpu",
        "--image-size", str(args.image_size), "--num-classes", "10", "--batch-size", str(args.batch_size),
        "--warmup-iters", "2", "--iters", str(args.iters), "--print-every", str(args.iters),
        "--hosts", ",".join(cluster.addresses[:nodes]), "--ifname", cluster.ifname, *cluster.ssh_options(),
        "--out", str(out), "--overwrite",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"dlperf run on {nodes} host(s) failed: {done.stderr.strip()}")
    record = next((out / "resnet50" / f"{nodes}n1g").glob("*.json"))
    return json.loads(record.read_text())["throughput"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", nargs="+", default=["1gbit", "100mbit"], help="tbf rates, e.g. 1gbit 100mbit")
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--iters", type=int, default=4)
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
        one = measure(cluster, 1, args, out)
        print(f"1 host : {one:8.2f} samples/s (uncapped)")
        for rate in [None, *args.rates]:
            cluster.cap_bandwidth(rate)
            two = measure(cluster, 2, args, out)
            cap = rate or "no cap"
            print(f"2 hosts: {two:8.2f} samples/s at {cap:>8}: speedup {two / one:.2f} (ideal 2.00)", flush=True)
        cluster.cap_bandwidth(None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
