"""A real Slurm cluster on loopback: munged, slurmctld and one slurmd per node, all in a temporary folder.

Uses Debian's slurm-wlm and munge (apt-get install slurm-wlm munge). The daemons get their own munge key
and socket, ports, state and spool folders, so nothing of a system Slurm is touched; each node is this
machine as `slurmd -C` describes it (several nodes are several slurmd on their own ports, Slurm's
multiple-slurmd layout). Where the daemons cannot start, the fixture skips with the reason.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dlperf.launch.local import free_port

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "squeue", "scontrol")


def node_names(nodes: int) -> list[str]:
    return ["localhost"] if nodes == 1 else [f"node{i}" for i in range(nodes)]


def _node_lines(names: list[str]) -> list[str]:
    """This machine's NodeName line (CPUs, sockets, memory) once per node, each slurmd on its own port."""
    done = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True)
    words = done.stdout.splitlines()[0].split()
    return [
        " ".join(
            [f"NodeName={name}", "NodeHostname=localhost", "NodeAddr=127.0.0.1", f"Port={free_port()}", *words[1:]]
        )
        for name in names
    ]


def _config(folder: Path, sockets: Path, names: list[str]) -> Path:
    conf = folder / "slurm.conf"
    conf.write_text(
        "\n".join(
            [
                "ClusterName=dlperf-test",
                "SlurmctldHost=localhost(127.0.0.1)",
                f"SlurmctldPort={free_port()}",
                "SlurmUser=root",
                "SlurmdUser=root",
                "AuthType=auth/munge",
                "CredType=cred/munge",
                f"AuthInfo=socket={sockets / 'munge' / 'munge.socket'}",
                f"StateSaveLocation={folder / 'state'}",
                f"SlurmdSpoolDir={sockets / 'spool-%n'}",
                f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
                f"SlurmdPidFile={folder / 'slurmd-%n.pid'}",
                f"SlurmctldLogFile={folder / 'slurmctld.log'}",
                f"SlurmdLogFile={folder / 'slurmd-%n.log'}",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "JobAcctGatherType=jobacct_gather/none",
                "AccountingStorageType=accounting_storage/none",
                "JobCompType=jobcomp/none",
                "MpiDefault=none",
                "SchedulerType=sched/builtin",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core",
                "ReturnToService=2",
                "MinJobAge=10",
                *_node_lines(names),
                f"PartitionName=debug Nodes={','.join(names)} Default=YES MaxTime=INFINITE State=UP",
                "",
            ]
        )
    )
    (folder / "state").mkdir()
    return conf


def why_not_available() -> str | None:
    if os.geteuid() != 0:
        return "the test Slurm cluster runs its daemons as root"
    missing = [tool for tool in DAEMONS if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not installed (apt-get install slurm-wlm munge)"
    return None


@contextlib.contextmanager
def slurm_cluster(folder: Path, nodes: int = 1) -> Iterator[dict[str, str]]:
    """Start munged, slurmctld and a slurmd per node; yield the environment that points Slurm's commands at them."""
    reason = why_not_available()
    if reason:
        pytest.skip(reason)
    # Unix socket paths hold at most 107 bytes and slurmstepd's are long: munge's socket and the slurmd spool
    # (where the steps' sockets live) go in a short folder of /tmp, not under pytest's deep tmp_path.
    folder.mkdir(parents=True, exist_ok=True)
    sockets = Path(tempfile.mkdtemp(prefix="dlslurm", dir="/tmp"))
    procs: list[subprocess.Popen] = []
    munge = sockets / "munge"
    try:
        munge.mkdir(mode=0o700)
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        socket = munge / "munge.socket"
        names = node_names(nodes)
        env = {**os.environ, "SLURM_CONF": str(_config(folder, sockets, names))}
        for name in [k for k in env if k.startswith("SLURM_") and k != "SLURM_CONF"]:
            del env[name]  # this process may itself run inside an allocation
        started = subprocess.run(
            ["munged", "--force", f"--key-file={key}", f"--socket={socket}", f"--pid-file={munge / 'pid'}",
             f"--log-file={munge / 'log'}", f"--seed-file={munge / 'seed'}"],
            capture_output=True, text=True,
        )  # fmt: skip
        if started.returncode != 0:
            pytest.skip(f"munged did not start: {started.stderr.strip()}")
        for daemon in (["slurmctld", "-D", "-i"], *(["slurmd", "-D", "-N", name] for name in names)):
            procs.append(subprocess.Popen(daemon, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait_for_idle_nodes(env, folder, procs, len(names))
        yield env
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        pid_file = munge / "pid"
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid_file.read_text()), 15)
        shutil.rmtree(sockets, ignore_errors=True)


def _wait_for_idle_nodes(
    env: dict[str, str], folder: Path, procs: list[subprocess.Popen], nodes: int, limit_s: float = 30
) -> None:
    deadline = time.monotonic() + limit_s
    state = ""
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            break
        done = subprocess.run(["sinfo", "-h", "-N", "-o", "%t"], env=env, capture_output=True, text=True)
        state = done.stdout.strip() or done.stderr.strip()
        if state.split() == ["idle"] * nodes:
            return
        time.sleep(0.5)
    logs = " ".join(log.read_text()[-300:] for log in sorted(folder.glob("slurm*.log")))
    pytest.skip(f"the Slurm nodes did not become idle (states {state!r}): {logs}")
