"""Machine-load snapshots against a process that burns a known amount of CPU, and the noisy verdict by hand."""

from __future__ import annotations

import statistics
import subprocess
import sys

import pytest

from dlperf.metrics.noise import MachineLoad, machine_load, noise_verdict, other_cores_limit, take_snapshot

TICK = 0.05  # psutil reads CPU times in clock ticks (10 ms); allow a few
BURN = "import time\nwhile time.process_time() < 0.4: pass\nprint('done', flush=True)\ntime.sleep(60)"


@pytest.fixture
def burner():
    proc = subprocess.Popen([sys.executable, "-c", BURN], stdout=subprocess.PIPE, text=True)
    yield proc
    proc.kill()
    proc.wait()


def test_other_processes_cpu_time_counted_and_own_tree_excluded(burner):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        start = take_snapshot(root_pid=sleeper.pid)  # pretend the run is the sleeper: the burner is someone else
        assert burner.stdout.readline().strip() == "done"
        end = take_snapshot(root_pid=sleeper.pid)
        keys = [key for key in end.cpu_seconds if key[0] == burner.pid]
        assert len(keys) == 1 and end.cpu_seconds[keys[0]] >= 0.4 - TICK
        assert all(pid != sleeper.pid for pid, _ in end.cpu_seconds)
        load = machine_load(start, end)
        assert load.other_cpu_s >= 0.4 - TICK - start.cpu_seconds.get(keys[0], 0.0)
        assert load.other_cores == pytest.approx(load.other_cpu_s / load.wall_s)
        assert load.gpu_other_processes is None
        ours = take_snapshot()  # this process's tree: the burner is our child, so not "other"
        assert all(pid != burner.pid for pid, _ in ours.cpu_seconds)
    finally:
        sleeper.kill()
        sleeper.wait()


def _load(other_cores: float, cpu_count: int = 2, gpus: list | None = None) -> MachineLoad:
    return MachineLoad(10.0, cpu_count, (1.0, 1.0, 1.0), (1.0, 1.0, 1.0), other_cores * 10, other_cores, gpus, None)


def test_noisy_verdict_reasons():
    windows = [53.7, 20.1, 5.7, 57.0, 7.2, 5.3]  # the loaded machine
    verdict = noise_verdict(windows, [_load(1.5)])
    assert verdict.noisy
    assert verdict.window_cv == pytest.approx(statistics.stdev(windows) / statistics.fmean(windows))
    assert "CV 97.8%" in verdict.reasons[0]  # mean 24.83, sample sd 24.29
    assert "1.50 of 2 cores" in verdict.reasons[1] and "limit 0.50" in verdict.reasons[1]
    quiet = noise_verdict([100.0, 101.0, 99.0], [_load(0.2)])
    assert not quiet.noisy and quiet.reasons == [] and quiet.window_cv == pytest.approx(0.01)
    gpu = noise_verdict([100.0, 100.0], [_load(0.0, gpus=[{"device": 0, "pid": 4242, "used_mib": 500.0}])])
    assert gpu.noisy and "pid 4242" in gpu.reasons[0] and "GPU 0" in gpu.reasons[0]
    assert other_cores_limit(2) == 0.5 and other_cores_limit(64) == pytest.approx(6.4)
    assert noise_verdict([100.0]).window_cv is None
