"""Real separate hosts on one machine: network namespaces on a bridge, each running its own sshd.

`netns_hosts(count)` builds `count` namespaces, each with one veth (named `IFNAME` inside every namespace)
plugged into a bridge whose root-namespace address is where the test's dlperf runs from; every namespace
has an IPv4 and an IPv6 address and runs sshd on both with a throw-away host key and accepts one throw-away
client key. Processes in a namespace share the file system (the same python works there) but not the network:
traffic between hosts crosses the veth links, where `cap_bandwidth` puts a token-bucket (tbf) limit.
Everything is torn down at the end: processes still running in a namespace are killed, then namespaces, links
and keys are removed.
Where namespaces cannot be made (not root, no iproute2 or sshd), the test is skipped with the reason.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from tiny import OMP_PASSIVE

IFNAME = "dlnet0"
SSHD = "/usr/sbin/sshd"


@dataclass
class NetnsHost:
    netns: str
    address: str
    veth: str  # the root-namespace end, plugged into the bridge
    address6: str  # the same host's unique-local IPv6 address: every host is dual-stack


@dataclass
class Cluster:
    hosts: list[NetnsHost]
    bridge: str
    gateway: str
    workdir: Path
    ifname: str = IFNAME
    sshd_pids: dict[str, int] = field(default_factory=dict)

    @property
    def addresses(self) -> list[str]:
        return [h.address for h in self.hosts]

    @property
    def addresses6(self) -> list[str]:
        return [h.address6 for h in self.hosts]

    @property
    def client_key(self) -> Path:
        return self.workdir / "client_key"

    def ssh_options(self, key: Path | None = None) -> list[str]:
        """`--ssh-option` flags for dlperf: the throw-away key, and only the known throw-away host keys."""
        options = [
            f"IdentityFile={key or self.client_key}",
            f"UserKnownHostsFile={self.workdir / 'known_hosts'}",
            "StrictHostKeyChecking=yes",
            "IdentitiesOnly=yes",
        ]
        return [arg for option in options for arg in ("--ssh-option", option)]

    def run_in(self, host: NetnsHost, args: list[str], **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(["ip", "netns", "exec", host.netns, *args], **kwargs)

    def pids(self, host: NetnsHost) -> set[int]:
        """Every process whose network is this host's namespace."""
        done = subprocess.run(["ip", "netns", "pids", host.netns], capture_output=True, text=True, check=False)
        return {int(p) for p in done.stdout.split()}

    def stray_pids(self) -> dict[str, set[int]]:
        """Processes left on any host besides its sshd listener: orphans of a run."""
        strays = {}
        for host in self.hosts:
            left = self.pids(host) - {self.sshd_pids.get(host.netns, -1)}
            if left:
                strays[host.address] = left
        return strays

    def cap_bandwidth(self, rate: str | None) -> None:
        """Limit every host's outgoing traffic to `rate` (e.g. `100mbit`) with tbf; None lifts the limit."""
        for host in self.hosts:
            _sh(["ip", "netns", "exec", host.netns, "tc", "qdisc", "del", "dev", self.ifname, "root"], check=False)
            if rate:
                # tbf needs a bucket of at least rate / HZ; 10 ms of traffic is ample and keeps the cap
                burst = max(_bits_per_second(rate) // 8 // 100, 64 * 1024)
                _sh(["ip", "netns", "exec", host.netns, "tc", "qdisc", "add", "dev", self.ifname, "root",
                     "tbf", "rate", rate, "burst", str(burst), "latency", "50ms"])  # fmt: skip

    def stop_sshd(self, host: NetnsHost) -> None:
        """The host stays on the network but refuses ssh connections."""
        pid = self.sshd_pids.pop(host.netns, None)
        if pid:
            _kill_and_reap(pid)


def _bits_per_second(rate: str) -> int:
    """`100mbit` -> 100_000_000 (tc's decimal units)."""
    for unit, scale in (("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3), ("bit", 1)):
        if rate.endswith(unit):
            return int(float(rate[: -len(unit)]) * scale)
    raise ValueError(f"rate {rate!r} is not like 100mbit or 1gbit")


def _sh(args: list[str], check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, check=check)


def _kill_and_reap(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.time() + 5
    while time.time() < deadline and Path(f"/proc/{pid}").exists():
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # our own child (sshd) stays a zombie until reaped
        time.sleep(0.05)


def cannot_build_reason() -> str | None:
    """Why namespaces with sshd cannot be made here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "tc", "ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install iproute2 openssh-client openssh-server)"
    if not os.access(SSHD, os.X_OK):
        return f"{SSHD} is not installed (apt-get install openssh-server)"
    probe = f"dlpprobe{os.getpid()}"
    made = _sh(["ip", "netns", "add", probe], check=False)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    _sh(["ip", "netns", "del", probe], check=False)
    return None


def _unique_prefix() -> tuple[str, int]:
    """Names and a /24 of our own, so that harnesses of parallel test sessions do not meet."""
    tag = os.getpid() % 100000
    return f"dl{tag}", 64 + tag % 160


def _start_sshd(cluster: Cluster, host: NetnsHost, cpu: int | None) -> int:
    config = cluster.workdir / f"sshd_{host.netns}.conf"
    config.write_text(
        "\n".join(
            [
                f"ListenAddress {host.address}",
                f"ListenAddress {host.address6}",
                f"HostKey {cluster.workdir / 'host_key'}",
                f"AuthorizedKeysFile {cluster.workdir / 'authorized_keys'}",
                f"PidFile {cluster.workdir / f'sshd_{host.netns}.pid'}",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PermitRootLogin prohibit-password",
                "StrictModes no",
                "UsePAM no",
                "MaxStartups 100",
                f"SetEnv {'='.join(OMP_PASSIVE)}",  # the suite's OpenMP setting on every host (tiny.OMP_PASSIVE)
                "",
            ]
        )
    )
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # sshd's privilege-separation folder
    pin = [] if cpu is None else ["taskset", "-c", str(cpu)]  # sessions inherit it: a host of one core
    proc = subprocess.Popen(
        [*pin, "ip", "netns", "exec", host.netns, SSHD, "-D", "-f", str(config), "-E", str(config.with_suffix(".log"))],
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 10
    while time.time() < deadline:
        probe = _sh(["ip", "netns", "exec", host.netns, "ss", "-ltn"], check=False)
        if f"{host.address}:22" in probe.stdout and f"[{host.address6}]:22" in probe.stdout:
            return proc.pid
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    log = config.with_suffix(".log")
    raise RuntimeError(f"sshd in {host.netns} did not start: {log.read_text() if log.exists() else ''}")


@contextlib.contextmanager
def netns_hosts(count: int, workdir: Path, pin_cpus: bool = False) -> Iterator[Cluster]:
    """`count` hosts on a bridge, each with sshd; skips the test where namespaces cannot be made.

    `pin_cpus` gives host i only CPU i (modulo the CPUs there are), so hosts do not share cores for a timing.
    """
    reason = cannot_build_reason()
    if reason:
        pytest.skip(f"multi-host harness: {reason}")
    prefix, subnet = _unique_prefix()
    block = os.getpid() % 200 + 20  # the same /24 and /64 for both address families
    net, net6 = f"10.{subnet}.{block}", f"fd00:{subnet:x}:{block:x}:"
    workdir.mkdir(parents=True, exist_ok=True)
    for key in ("host_key", "client_key"):
        _sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(workdir / key)])
    (workdir / "authorized_keys").write_text((workdir / "client_key.pub").read_text())
    hosts = [NetnsHost(f"{prefix}h{i}", f"{net}.{i + 1}", f"{prefix}v{i}", f"{net6}:{i + 1}") for i in range(count)]
    cluster = Cluster(hosts=hosts, bridge=f"{prefix}br", gateway=f"{net}.254", workdir=workdir)
    host_key = (workdir / "host_key.pub").read_text().split()
    known = [f"{address} {host_key[0]} {host_key[1]}\n" for h in hosts for address in (h.address, h.address6)]
    (workdir / "known_hosts").write_text("".join(known))
    try:
        _sh(["ip", "link", "add", cluster.bridge, "type", "bridge"])
        _sh(["ip", "addr", "add", f"{cluster.gateway}/24", "dev", cluster.bridge])
        _sh(["ip", "addr", "add", f"{net6}:fe/64", "dev", cluster.bridge, "nodad"])
        _sh(["ip", "link", "set", cluster.bridge, "up"])
        for index, host in enumerate(hosts):
            _sh(["ip", "netns", "add", host.netns])
            _sh(["ip", "link", "add", host.veth, "type", "veth", "peer", "name", IFNAME, "netns", host.netns])
            _sh(["ip", "link", "set", host.veth, "master", cluster.bridge, "up"])
            inside = ["ip", "-n", host.netns]
            _sh([*inside, "addr", "add", f"{host.address}/24", "dev", IFNAME])
            _sh([*inside, "addr", "add", f"{host.address6}/64", "dev", IFNAME, "nodad"])  # usable at once
            _sh([*inside, "link", "set", IFNAME, "up"])
            _sh([*inside, "link", "set", "lo", "up"])
            cpu = sorted(os.sched_getaffinity(0))[index % len(os.sched_getaffinity(0))] if pin_cpus else None
            cluster.sshd_pids[host.netns] = _start_sshd(cluster, host, cpu)
        yield cluster
    finally:
        _teardown(cluster)


def _teardown(cluster: Cluster) -> None:
    for host in cluster.hosts:
        for pid in cluster.pids(host):
            _kill_and_reap(pid)
        _sh(["ip", "netns", "del", host.netns], check=False)
        _sh(["ip", "link", "del", host.veth], check=False)
    _sh(["ip", "link", "del", cluster.bridge], check=False)
    shutil.rmtree(cluster.workdir, ignore_errors=True)


def remote_python(folder: Path) -> str:
    """This interpreter, importing this checkout's dlperf, for `--remote-python`: ssh passes no environment, so a
    worktree's or a fresh clone's sources must be named, and the suite's XLA flags (conftest: XLA's cheap compile)
    given again; one thread per rank, as the local tests run."""
    import dlperf

    source = Path(dlperf.__file__).resolve().parents[1]
    path = ":".join(p for p in (str(source), os.environ.get("PYTHONPATH", "")) if p)
    env = f"PYTHONPATH={shlex.quote(path)} XLA_FLAGS={shlex.quote(os.environ.get('XLA_FLAGS', ''))} OMP_NUM_THREADS=1"
    wrapper = folder / "python"
    wrapper.write_text(f'#!/bin/sh\n{env} exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)
