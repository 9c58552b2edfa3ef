"""`--command` across two real hosts (network namespaces with their own sshd): the ssh launcher places one rank of
a PyTorch-examples-style script on each, with the rendezvous at the first."""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

import pytest
from netns_hosts import netns_hosts, remote_python
from tiny import failing_rank_script

pytestmark = pytest.mark.slow
SCRIPTS = Path(__file__).parents[1] / "fixtures" / "scripts"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with netns_hosts(2, tmp_path_factory.mktemp("netns")) as built:
        yield built


def test_pytorch_script_on_two_hosts(cluster, tmp_path):
    import subprocess

    hosts = cluster.addresses
    template = f"{sys.executable} {SCRIPTS / 'pytorch_imagenet_style.py'} --batch-size {{batch_size}} --iters 24"
    command = [sys.executable, "-m", "dlperf", "run", "--batch-size", "4", "--command", template]
    command += ["--hosts", ",".join(hosts), *cluster.ssh_options(), "--ifname", cluster.ifname]
    command += ["--remote-python", remote_python(tmp_path), "--out", str(tmp_path / "out")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    folder = tmp_path / "out" / "resnet50" / "2n1g"
    record = json.loads((folder / "resnet50_b4_fp32_external_1.json").read_text())
    assert (
        record["status"] == "ok"
        and record["kind"] == "external"
        and record["engine"] is None
        and record["world_size"] == 2
    )
    assert record["hosts"] == sorted(hosts) and [env["node"] for env in record["env"]["nodes"]] == hosts
    log = (folder / "resnet50_b4_fp32_external_1.log").read_text()
    times = [float(t) for t in re.findall(r"\tTime\s+([\d.]+) \(", log)]
    assert len(times) == 24  # node 0's rank only: the other node's lines are in its console
    after = record["warmup_iterations"]  # 20, or where the steady-state test found the lines settled
    assert record["throughput"] == pytest.approx(8 / statistics.fmean(times[after:]), rel=1e-9)
    consoles = {p.name: p.read_text() for p in folder.glob("*.node*.console.txt")}
    assert sorted(consoles) == [f"resnet50_b4_fp32_external_1.node{i}-{h}.console.txt" for i, h in enumerate(hosts)]
    assert "[rank 1] Epoch: [0][24/24]" in consoles[f"resnet50_b4_fp32_external_1.node1-{hosts[1]}.console.txt"]
    assert cluster.stray_pids() == {}


def test_pytorch_script_under_slurm(tmp_path):
    """sbatch outside an allocation, then srun inside it: the node agent learns its node rank from Slurm."""
    import subprocess

    from slurm_cluster import slurm_cluster

    template = f"{sys.executable} {SCRIPTS / 'pytorch_imagenet_style.py'} --batch-size {{batch_size}} --iters 22"
    command = [sys.executable, "-m", "dlperf", "run", "--batch-size", "2", "--devices-per-node", "2"]
    command += ["--command", template, "--launcher", "slurm", "--out", str(tmp_path / "out")]
    with slurm_cluster(tmp_path / "slurm") as env:
        done = subprocess.run(command, env={**env, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=300)
    folder = tmp_path / "out" / "resnet50" / "1n2g"
    batch_output = folder / "resnet50_b2_fp32_external.sbatch.out"
    assert done.returncode == 0, done.stderr + (batch_output.read_text() if batch_output.exists() else "")
    record = json.loads((folder / "resnet50_b2_fp32_external_1.json").read_text())
    assert (
        record["status"] == "ok"
        and record["kind"] == "external"
        and record["engine"] is None
        and record["world_size"] == 2
    )
    log = (folder / "resnet50_b2_fp32_external_1.log").read_text()
    assert len(re.findall(r"Epoch: \[0\]", log)) == 44  # both ranks of node 0
    assert record["throughput"] > 0 and record["env"]["nodes"][0]["node"]


def test_a_failing_rank_on_the_second_host_is_named_and_the_first_is_stopped(cluster, tmp_path):
    import subprocess

    hosts = cluster.addresses
    script = failing_rank_script(tmp_path / "train.py", "up", "boom: shard missing")
    command = [sys.executable, "-m", "dlperf", "run", "--command", f"{sys.executable} {script}"]
    command += ["--hosts", ",".join(hosts), *cluster.ssh_options(), "--ifname", cluster.ifname]
    command += ["--remote-python", remote_python(tmp_path), "--out", str(tmp_path / "out")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    record = json.loads(next((tmp_path / "out").rglob("*.json")).read_text())
    assert record["status"] == "failed" and record["failure"]["host"] == hosts[1] and record["failure"]["rank"] == 1
    assert record["error"] == f"command rank 1 on {hosts[1]} exited with code 1: boom: shard missing"
    assert record["log_tail"] == ["rank 0 up"]  # node 0's log came back
    assert cluster.stray_pids() == {}
