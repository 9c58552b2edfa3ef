"""A sweep parent killed by SIGKILL at any moment leaves no agent or worker running and no temporary folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from conftest import run_dlperf

SWEEP = """
model: resnet50
topology: {topology}
batch_size: 2
image_size: 32
num_classes: 10
device: cpu
warmup_iters: 1
iters: {iters}
print_every: 1
timeout: 600
repeats: 1
"""


def processes_with(token: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live process whose environment holds the test's token."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if token.encode() not in (entry / "environ").read_bytes():
                continue
            if (entry / "stat").read_text().split(") ")[-1].startswith("Z"):
                continue  # a zombie waits only for its reaper: it runs nothing
            found.append((int(entry.name), (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()))
        except OSError:
            continue
    return found


def wait_for(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def start_sweep(tmp_path: Path, token: str, iters: int, topology: str = "1n2g") -> subprocess.Popen:
    config = tmp_path / "sweep.yaml"
    config.write_text(SWEEP.format(iters=iters, topology=topology))
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = {**os.environ, "DLPERF_ORPHAN_TEST": token, "TMPDIR": str(tmp_path / "tmp")}
    return subprocess.Popen(
        [sys.executable, "-m", "dlperf", "sweep", str(config), "--out", str(tmp_path / "out")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip


def agent_started(token: str) -> bool:
    return any("dlperf.launch.agent" in cmd for _, cmd in processes_with(token))


def timing(tmp_path: Path) -> bool:
    """The lone rank, which runs inside its agent, is in its timed steps."""
    return any("iter " in log.read_text() for log in (tmp_path / "out").rglob("*.log"))


def workers_started(token: str) -> bool:
    return sum("dlperf.launch.agent" in cmd for _, cmd in processes_with(token)) >= 3  # the agent, its forked ranks


@pytest.mark.slow
@pytest.mark.parametrize(
    ("topology", "moment"),
    [
        pytest.param("1n2g", lambda token, tmp: agent_started(token), id="agent-starting"),
        pytest.param("1n2g", lambda token, tmp: workers_started(token), id="workers-running"),
        pytest.param("1n1g", lambda token, tmp: timing(tmp), id="lone-rank-timing"),
    ],
)
def test_killed_parent_leaves_nothing_running(tmp_path, topology, moment):
    token = uuid.uuid4().hex
    sweep = start_sweep(tmp_path, token, iters=100000, topology=topology)
    try:
        assert wait_for(lambda: moment(token, tmp_path), 120), "the run never reached the moment to kill it"
        sweep.send_signal(signal.SIGKILL)
        sweep.wait()
        assert wait_for(lambda: not processes_with(token), 60), processes_with(token)
        assert list((tmp_path / "tmp").glob("dlperf-*")) == [], "the run's temporary folder was left behind"
    finally:
        for pid, _ in processes_with(token):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_resume_after_a_killed_parent_measures_alone(tmp_path):
    token = uuid.uuid4().hex
    sweep = start_sweep(tmp_path, token, iters=2, topology="1n1g")  # one rank: the resume is what is tested
    sweep.send_signal(signal.SIGKILL)  # before the parent got anywhere: the earliest moment
    sweep.wait()
    assert wait_for(lambda: not processes_with(token), 60), processes_with(token)
    resumed = run_dlperf(["sweep", str(tmp_path / "sweep.yaml"), "--out", str(tmp_path / "out"), "--resume"])
    assert resumed.returncode == 0, resumed.stderr
    assert "1 run done (0 failed)" in resumed.stdout
