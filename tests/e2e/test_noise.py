"""Machine-load snapshots against a process that burns a known amount of CPU, and the noisy verdict by hand."""

from __future__ import annotations

import statistics
import subprocess
import sys

import pytest

from dlperf.metrics.noise import MachineLoad, machine_load, noise_verdict, other_cores_limit, take_snapshot

TICK = 0.05  # psutil reads CPU times in clock ticks (10 ms); allow a few
BURN = "import time\nwhile time.process_time() < 0.4: pass\nprint('done', flush=True)\ntime.sleep(60)"


def test_other_processes_cpu_time_counted_and_own_tree_excluded():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        start = take_snapshot(root_pid=sleeper.pid)  # pretend the run is the sleeper: the burner is someone else
        burner = subprocess.Popen([sys.executable, "-c", BURN], stdout=subprocess.PIPE, text=True)
        assert burner.stdout.readline().strip() == "done"
        end = take_snapshot(root_pid=sleeper.pid)
        assert [pid for pid, _ in end.own_seconds] == [sleeper.pid]
        load = machine_load(start, end)
        assert load.other_cpu_s >= 0.4 - TICK  # the burner's 0.4 s, whatever else ran
        assert load.other_cores == pytest.approx(load.other_cpu_s / load.wall_s)
        assert load.gpu_other_processes is None
        ours = take_snapshot()  # this process's tree: the burner is our child, so ours, not "other"
        assert burner.pid in {pid for pid, _ in ours.own_seconds}
        burner.kill()
        burner.wait()
    finally:
        sleeper.kill()
        sleeper.wait()


SHORT_LIVED = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.08: pass"


def test_short_lived_processes_between_the_snapshots_are_counted():
    """A build or a test suite is many processes that start and end between two snapshots: a process list at
    each snapshot sees none of them (a run at load 10-14 on 2 cores measured others at 0.22 cores and was not
    flagged). The machine's own CPU accounting counts them: 12 processes of 0.08 s each burn at least 0.96 s."""
    start = take_snapshot()
    for _ in range(12):
        subprocess.run([sys.executable, "-S", "-c", SHORT_LIVED], check=True)
    end = take_snapshot()
    # ours: they are this process's children while they run, but ended before the snapshot: only the machine saw
    load = machine_load(start, end)
    assert load.other_cpu_s >= 12 * 0.08 - TICK, load
    assert noise_verdict([10.0, 10.0], [load]).noisy == (load.other_cores > other_cores_limit(load.cpu_count))


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
