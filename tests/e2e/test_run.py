"""Real runs of ResNet-50 at 32x32 on the CPU: one process, and two gloo ranks under torchrun's launcher."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import TINY, run_dlperf

from dlperf.records.runlog import parse_config, parse_warmup, parse_window

pytestmark = pytest.mark.slow


def load_run(out, topology: str, stem: str = "resnet50_b4_fp32_1"):
    folder = out / "resnet50" / topology
    return json.loads((folder / f"{stem}.json").read_text()), (folder / f"{stem}.log").read_text().splitlines()


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Path:
    """2 classes of 4 JPEGs: an image folder for the real-data path."""
    from PIL import Image

    root = tmp_path_factory.mktemp("data")
    for label in ("cat", "dog"):
        (root / label).mkdir()
        for i in range(4):
            Image.new("RGB", (40, 40), color=(i * 40, 100, 200)).save(root / label / f"{i}.jpg")
    return root


def run_args(devices: int, images: Path, out: Path) -> list[str]:
    """The tiny ResNet-50 on `devices` ranks: one process reads the image folder, two ranks synthetic data (both
    paths, each run once)."""
    data = ["--data", str(images), "--workers", "0"] if devices == 1 else []
    return ["run", *TINY, "--devices-per-node", str(devices), *data, "--out", str(out)]


STEMS = {1: "resnet50_b4_fp32_realdata_1", 2: "resnet50_b4_fp32_1"}


@pytest.fixture(scope="module")
def finished(tmp_path_factory, images):
    """The folder and stdout (a pipe) of the module's run on `devices` ranks, under umask 022 into a long folder name,
    run on first use: the record, live-lines and overwrite tests share the one-process run."""
    made: dict[int, tuple[Path, str]] = {}

    def run(devices: int) -> tuple[Path, str]:
        if devices not in made:
            out = tmp_path_factory.mktemp(f"run{devices}") / ("a-results-folder-with-a-long-name-" * 3)
            done = subprocess.run([sys.executable, "-m", "dlperf", *run_args(devices, images, out)],
                                  capture_output=True, text=True, timeout=300, umask=0o022)  # fmt: skip
            assert done.returncode == 0, done.stderr
            made[devices] = out, done.stdout
        return made[devices]

    return run


@pytest.mark.parametrize("devices", [1, 2])
def test_run_writes_log_and_record(finished, images, devices):
    record, log = load_run(finished(devices)[0], f"1n{devices}g", STEMS[devices])
    assert record["status"] == "ok" and record["error"] is None
    assert record["config"]["data"] == (str(images) if devices == 1 else "synthetic")
    assert record["world_size"] == devices
    assert record["global_batch_size"] == 4 * devices
    assert record["throughput"] > 0
    assert record["throughput_per_device"] == pytest.approx(record["throughput"] / devices)
    assert len(record["window_throughputs"]) == 2  # 4 iterations in windows of 2
    assert 0 < record["latency_ms"]["p50"] <= record["latency_ms"]["p90"]
    assert record["peak_memory_mib"]["rss"] > 100
    assert record["loss_first"] > 0 and record["loss_last"] > 0
    # ResNet-50: 23,508,032 parameters before the classifier, which has 2048 x 10 weights and 10 biases
    assert record["parameters"] == 23_508_032 + 2048 * 10 + 10
    assert record["gradient_bytes"] == 4 * record["parameters"]  # fp32 gradients
    assert len(record["ranks"]) == devices and [r["rank"] for r in record["ranks"]] == list(range(devices))
    # alone, a run's CPU devices share this machine's cores (a sweep shares them by its largest topology)
    assert [r["cpu_threads"] for r in record["ranks"]] == [max(1, len(os.sched_getaffinity(0)) // devices)] * devices
    assert record["env"]["torch"] and record["env"]["python"]
    assert record["config"]["devices_per_node"] == devices
    # dlperf's own log: a config header, then one parseable line per window
    header = parse_config(log[0])
    assert header["global_batch_size"] == 4 * devices and header["world_size"] == devices
    warmup = parse_warmup(log[1])
    assert warmup.iters == 1 and 0 < warmup.first_step_s <= warmup.elapsed_s
    windows = [parse_window(line) for line in log[2:]]
    assert [w.iteration for w in windows] == [2, 4]
    assert [w.samples_per_s for w in windows] == [round(t, 2) for t in record["window_throughputs"]]
    assert windows[0].timestamp <= windows[1].timestamp
    # the window throughput and latency agree: samples/s = global batch / (ms/iter / 1000), to the line's printed
    # 2 decimals (on a loaded machine 0.36 samples/s is 0.365 rounded: 1.4 % off, within 0.005)
    expected = 4 * devices * 1000 / windows[1].ms_per_iter
    assert windows[1].samples_per_s == pytest.approx(expected, rel=0.01, abs=0.005)


def test_live_lines_through_a_pipe_and_files_under_umask_022(finished):
    """The one-process run: live lines and the whole record path through a pipe, files 0644 under umask 022."""
    out, stdout = finished(1)
    lines = stdout.splitlines()
    folder = out / "resnet50" / "1n1g"
    assert lines[0] == f"log: {folder / STEMS[1]}.log"
    assert any(line.startswith("ranks up (1): warming up 1 iterations") for line in lines)
    assert any(line.startswith("warm-up done in ") for line in lines)
    assert [line.split()[1] for line in lines if line.startswith("iter ")] == ["2/4", "4/4"]
    assert lines[-1] == f"record: {folder / STEMS[1]}.json"  # never wrapped at 80 columns
    for suffix in (".json", ".log"):
        assert stat.S_IMODE((folder / f"{STEMS[1]}{suffix}").stat().st_mode) == 0o644


def test_existing_run_is_not_overwritten(finished, images, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(finished(1)[0], out)  # the module's one-process run, copied: a run done before
    record_path = out / "resnet50" / "1n1g" / f"{STEMS[1]}.json"
    before = record_path.read_text()
    again = run_dlperf(run_args(1, images, out))
    assert again.returncode == 2
    assert "already exists: pass --overwrite" in again.stderr and "Traceback" not in again.stderr
    assert record_path.read_text() == before
    assert run_dlperf([*run_args(1, images, out), "--overwrite"]).returncode == 0
    assert json.loads(record_path.read_text())["started_at"] > json.loads(before)["started_at"]


def test_timeout_is_a_failed_record(tmp_path):
    done = run_dlperf(["run", *TINY, "--iters", "400", "--timeout", "3", "--out", str(tmp_path)])
    assert done.returncode == 1
    assert "timed out after 3 s" in done.stderr
    record = json.loads((tmp_path / "resnet50" / "1n1g" / "resnet50_b4_fp32_1.json").read_text())
    assert record["status"] == "failed" and "timed out" in record["error"]


@pytest.mark.parametrize("devices", [1, 2])
def test_killed_worker_fails_the_run_with_its_signal(tmp_path, devices):
    """SIGKILL a rank mid-run (of two, the last; a lone rank runs inside its agent): a failed record naming rank and
    signal, and no process left."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "dlperf", "run", *TINY, "--devices-per-node", str(devices), "--iters", "2000",
         "--print-every", "1", "--out", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    log = tmp_path / "resnet50" / f"1n{devices}g" / "resnet50_b4_fp32_1.log"
    deadline = time.time() + 120
    while time.time() < deadline and not (log.exists() and "iter 2/" in log.read_text()):
        time.sleep(0.5)
    (agent,) = [p for p in psutil.Process(proc.pid).children() if "dlperf.launch.agent" in " ".join(p.cmdline())]
    workers = agent.children() if devices > 1 else [agent]  # the ranks, forked from the agent
    assert len(workers) == devices, workers
    workers[-1].send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    record, _ = load_run(tmp_path, f"1n{devices}g")
    assert record["status"] == "failed"
    assert f"worker rank {devices - 1} on " in record["error"] and record["error"].endswith("was killed by SIGKILL")
    assert record["failure"]["signal"] == "SIGKILL" and record["failure"]["rank"] == devices - 1
    assert "SIGKILL" in err and "Traceback" not in err
    assert not [p for p in workers if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
