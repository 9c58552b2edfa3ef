"""dlperf across real separate hosts: network namespaces with their own sshd, reached over OpenSSH.

One 3-host cluster serves the module; 2-host runs use its first two hosts. Each run is ResNet-50 at 32x32
(or the tiny GPT) with one gloo process per host.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml
from conftest import TINY
from netns_hosts import netns_hosts
from tiny import QUICK_RUN, as_flags, tiny_gpt, tiny_llama

pytestmark = pytest.mark.slow

TINY_GPT = as_flags(tiny_gpt(micro_batch_size=2, **QUICK_RUN))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with netns_hosts(3, tmp_path_factory.mktemp("netns")) as built:
        yield built


def dlperf(cluster, args: list[str], hosts: list[str], timeout: float = 240) -> subprocess.CompletedProcess:
    """`dlperf ARGS --hosts ...` from the machine outside the hosts, with the throw-away key."""
    command = [sys.executable, "-m", "dlperf", *args, "--hosts", ",".join(hosts), *cluster.ssh_options()]
    return subprocess.run([*command, "--ifname", cluster.ifname], capture_output=True, text=True, timeout=timeout)


def only_record_path(out: Path) -> Path:
    (path,) = [p for p in out.rglob("*.json") if not p.name.startswith(".")]
    return path


def only_record(out: Path) -> dict:
    return json.loads(only_record_path(out).read_text())


def test_two_hosts_resnet50(cluster, tmp_path):
    hosts = cluster.addresses[:2]
    done = dlperf(cluster, ["run", *TINY, "--out", str(tmp_path)], hosts)
    assert done.returncode == 0, done.stderr
    record = only_record(tmp_path)
    assert record["status"] == "ok" and record["nodes"] == 2
    assert record["world_size"] == 2 and record["case"] == "2n1g"
    assert record["hosts"] == sorted(hosts)  # one rank on each node, by its address
    assert sorted(r["host"] for r in record["ranks"]) == sorted(hosts)
    assert record["throughput"] > 0
    assert [env["node"] for env in record["env"]["nodes"]] == hosts  # every node's environment
    folder = tmp_path / "resnet50" / "2n1g"
    log = (folder / "resnet50_b4_fp32_1.log").read_text().splitlines()
    # rank 0's log came back over ssh: the config, the warm-up line, and one line per window (4 iterations, 2 each)
    assert log[0].startswith("[dlperf] config") and log[1].startswith("[dlperf] warmup done") and len(log) == 4
    consoles = sorted(p.name for p in folder.glob("*.node*.console.txt"))
    assert consoles == [f"resnet50_b4_fp32_1.node{i}-{h}.console.txt" for i, h in enumerate(hosts)]
    assert cluster.stray_pids() == {}


def test_three_hosts_by_hostfile_and_ipv6_address(cluster, tmp_path):
    """The tiny GPT on 3 hosts named in a hostfile (slots, comments), the first two by their IPv6 addresses: ssh,
    the c10d rendezvous ([addr]:port) and the record all take IPv6 addresses, bracketed or bare, beside IPv4."""
    v6 = cluster.addresses6
    hosts = [f"[{v6[0]}]", v6[1], cluster.addresses[2]]
    hostfile = tmp_path / "hosts"
    hostfile.write_text("".join(f"{address} slots=1  # node {i}\n" for i, address in enumerate(hosts)))
    command = [sys.executable, "-m", "dlperf", "run", *TINY_GPT, "--hostfile", str(hostfile), "--out", str(tmp_path)]
    command += [*cluster.ssh_options(), "--ifname", cluster.ifname]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    record = only_record(tmp_path)
    assert record["status"] == "ok" and record["model"] == "gpt" and record["case"] == "3n1g"
    assert record["world_size"] == 3 and record["hosts"] == sorted([v6[0], v6[1], cluster.addresses[2]])
    assert record["global_batch_size"] == 3 * 2 and record["throughput"] > 0  # 3 data-parallel ranks of 2
    assert cluster.stray_pids() == {}


def test_two_hosts_llama_fsdp_by_tp(cluster, tmp_path):
    """FSDP across 2 hosts x TP 2 within each (4 gloo ranks, the mesh's tp groups inside a host): the record's first
    and last losses are those of one process training the same global batch; it names the case as the peers do and
    carries tokens/s and the PaLM formula's FLOPs (MFU empty on a CPU, with the reason)."""
    from dlperf.engines.base import RankEnv
    from dlperf.engines.torch.engine import TorchEngine
    from dlperf.workloads import check_spec, get_workload, spec_from_mapping

    keys = tiny_llama(micro_batch_size=2, devices_per_node=2, tp=2, **{**QUICK_RUN, "iters": 2})
    done = dlperf(cluster, ["run", *as_flags(keys), "--out", str(tmp_path)], cluster.addresses[:2])
    assert done.returncode == 0, done.stderr
    record = only_record(tmp_path)
    assert record["status"] == "ok" and record["world_size"] == 4 and record["report_group"] == "FSDP+TP"
    assert (record["parallel"]["dp_shard"], record["parallel"]["tp"]) == (2, 2)
    assert record["group"] == "llama3-64x2_fsdp2_tp2_s32_gbs4_fp32"
    assert only_record_path(tmp_path).name.startswith(record["group"] + "_nh4_kv2_ffn128_v512")
    non_embedding = 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64) + 64 + 512 * 64
    assert record["flops_per_token"] == 6 * non_embedding + 12 * 2 * 4 * 16 * 32
    assert record["flops_per_iteration"] == record["flops_per_token"] * 4 * 32
    assert record["tokens_per_s"] == pytest.approx(record["throughput"] * 32)
    assert record["tokens_per_s_per_device"] == pytest.approx(record["tokens_per_s"] / 4)
    assert record["mfu"] is None and "pass --peak-tflops" in record["mfu_note"]
    engine = TorchEngine()
    engine.rank = RankEnv(rank=0, world_size=1, local_rank=0, local_world_size=1)
    single = spec_from_mapping({**keys, "devices_per_node": 1, "tp": 1, "global_batch_size": 4})
    step = get_workload("llama").builder("torch")(single, check_spec(single), engine)
    losses = [step.read_loss(step.run()) for _ in range(3)]  # 1 warm-up and 2 timed iterations
    assert [record["loss_first"], record["loss_last"]] == pytest.approx([losses[0], losses[2]], rel=1e-5)
    assert cluster.stray_pids() == {}


@pytest.mark.parametrize("fault", ["refused", "no route", "wrong key"])
def test_unreachable_host_fails_fast_naming_it(cluster, tmp_path, fault):
    subnet = cluster.addresses[0].rsplit(".", 1)[0]
    bad = {"refused": cluster.gateway, "no route": f"{subnet}.200", "wrong key": cluster.addresses[1]}[fault]
    options = cluster.ssh_options()
    if fault == "wrong key":
        key = tmp_path / "stranger"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        options = cluster.ssh_options(key)
    command = [sys.executable, "-m", "dlperf", "run", *TINY, "--hosts", f"{bad},{cluster.addresses[0]}"]
    command += [*options, "--connect-timeout", "3", "--out", str(tmp_path)]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - started
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and bad in lines[0] and "Traceback" not in done.stderr, done.stderr
    reasons = {"refused": ["refused"], "no route": ["No route to host", "timed out"], "wrong key": ["denied"]}
    assert any(reason in lines[0] for reason in reasons[fault])
    assert elapsed < 3 + 15  # the connect timeout, plus dlperf's own start-up
    record = only_record(tmp_path)
    assert record["status"] == "failed" and record["failure"]["host"] == bad


def test_shell_metacharacters_in_host_are_refused(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "dlperf", "run", *TINY, "--hosts", "node1,$(touch pwned)", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 2 and "not a host name" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "pwned").exists() and not list(tmp_path.rglob("*.json"))


AGENT = "dlperf.launch.agent"


def _worker_pids(cluster, host_index: int) -> list[int]:
    """The training processes on one host: the ranks torchrun's launcher forked from the node's agent (a forked
    rank's command line is its agent's)."""
    pids = []
    for pid in cluster.pids(cluster.hosts[host_index]):
        try:
            proc = psutil.Process(pid)
            parent = proc.parent()
            if parent is not None and all(AGENT in " ".join(p.cmdline()) for p in (proc, parent)):
                pids.append(pid)
        except psutil.Error:
            continue
    return pids


def test_killed_worker_fails_the_run_and_the_sweep_goes_on(cluster, tmp_path):
    """A SIGKILLed rank on the second host: failed record naming the node and signal, nothing left behind."""
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        yaml.safe_dump(
            {**tiny_gpt(device="cpu", warmup_iters=1, print_every=2, repeats=1),
             "matrix": [{"micro_batch_size": 2, "iters": 2000}, {"micro_batch_size": 1, "iters": 4}]}
        )
    )  # fmt: skip
    hosts = cluster.addresses[:2]
    command = [sys.executable, "-m", "dlperf", "sweep", str(sweep), "--hosts", ",".join(hosts)]
    command += [*cluster.ssh_options(), "--ifname", cluster.ifname, "--out", str(tmp_path / "out")]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # a guard against a hang, not a timing: at load 15 two hosts' torch imports took the ranks past 120 s
        deadline = time.monotonic() + 600
        log = tmp_path / "out" / "gpt" / "2n1g"
        victims: set[int] = set()
        while not victims:  # a rank seen twice, a second apart: a process the agent forks to exec a command
            # (nvidia-smi, lscpu) also shows the agent's command line until it execs
            assert time.monotonic() < deadline and proc.poll() is None, "the first run never started its workers"
            seen = set(_worker_pids(cluster, 1)) if list(log.glob("*.console.txt")) else set()
            time.sleep(1)
            victims = seen & set(_worker_pids(cluster, 1))
        time.sleep(2)  # let the ranks meet and start training
        victim = min(victims)
        psutil.Process(victim).kill()
        output, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, output  # one run failed
    records = {r["global_batch_size"]: r for r in map(json.loads, map(Path.read_text, log.glob("*.json")))}
    failed, next_run = records[4], records[2]
    assert failed["status"] == "failed"
    assert failed["failure"]["host"] == hosts[1] and failed["failure"]["signal"] == "SIGKILL"
    assert hosts[1] in failed["error"] and "SIGKILL" in failed["error"]
    assert next_run["status"] == "ok" and next_run["throughput"] > 0
    assert cluster.stray_pids() == {}
