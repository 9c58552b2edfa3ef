"""Where the scaling went, on real runs of the tiny GPT against one 1n1g baseline (one core, as each rank below
has): two hosts behind a bandwidth cap lose their scaling to communication; a planted slow rank and a planted slow
loader show as straggler wait and data stall. Every part is read from `dlperf report`'s summary.json."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from netns_hosts import netns_hosts
from tiny import as_flags, tiny_gpt

from dlperf.cli.main import main

pytestmark = pytest.mark.slow

RUN = as_flags(tiny_gpt(micro_batch_size=2, warmup_iters=2, iters=6, print_every=3, device="cpu"))
SLOW_RANK_MS, SLOW_LOADER_MS = 150, 100


def _dlperf(args: list[str], env: dict[str, str] | None = None, pin: str | None = None) -> None:
    pinned = ["taskset", "-c", pin] if pin else []
    done = subprocess.run(
        [*pinned, sys.executable, "-m", "dlperf", *args], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> Path:
    """The folder of the 1n1g run, on one core."""
    out = tmp_path_factory.mktemp("baseline")
    _dlperf(["run", *RUN, "--out", str(out)], pin=str(min(os.sched_getaffinity(0))))
    return out


def _waterfall(baseline: Path, out: Path) -> dict:
    """The multi-device case's scaling_loss, reported beside the baseline's record (GPT: each case its own group)."""
    shutil.copytree(baseline, out, dirs_exist_ok=True)
    assert main(["report", str(out), "--format", "json", "--out", str(out / "report")]) == 0
    summary = json.loads((out / "report" / "summary.json").read_text())
    cases = [case for group in summary["gpt"].values() for case in group.values()]
    (loss,) = [case["scaling_loss"] for case in cases if "scaling_loss" in case]
    return loss


def test_two_capped_hosts_lose_their_scaling_to_communication(baseline, tmp_path):
    """~0.5 MB of gradients a step through a 16 Mbit/s link: ~0.3 s of all-reduce against a few ms of compute."""
    out = tmp_path / "records"
    with netns_hosts(2, tmp_path / "netns", pin_cpus=True) as cluster:
        cluster.cap_bandwidth("16mbit")
        hosts = ",".join(cluster.addresses)
        _dlperf(["run", *RUN, "--hosts", hosts, *cluster.ssh_options(), "--ifname", cluster.ifname, "--out", str(out)])
    loss = _waterfall(baseline, out)
    parts = loss["components"]
    assert loss["measured_loss"] > 0
    assert parts["exposed_communication"] == max(parts.values())
    assert parts["exposed_communication"] > 0.5 * loss["measured_loss"]
    measured = sum(v for k, v in parts.items() if k != "unexplained")
    assert abs(measured - loss["measured_loss"]) < 0.10 * loss["measured_loss"]  # unexplained under 10 %


def test_planted_slow_rank_and_slow_loader(baseline, tmp_path):
    """Rank 1 sleeps SLOW_RANK_MS in every forward; every rank's batch comes SLOW_LOADER_MS late."""
    out = tmp_path / "records"
    env = {**os.environ, "DLPERF_TEST_SLOW_RANK": f"1:{SLOW_RANK_MS}", "DLPERF_TEST_SLOW_LOADER": str(SLOW_LOADER_MS)}
    _dlperf(["run", *RUN, "--devices-per-node", "2", "--out", str(out)], env=env)
    loss = _waterfall(baseline, out)
    ms = loss["components_ms"]
    assert SLOW_RANK_MS * 0.7 < ms["straggler_wait"] < SLOW_RANK_MS * 1.4
    assert SLOW_LOADER_MS * 0.95 < ms["data_stall"] < SLOW_LOADER_MS * 1.2
    # summary.json rounds each part and the loss to 0.01: their sum is the loss within half a unit per figure
    rounding = 0.005 * (len(loss["components"]) + 1)
    assert sum(loss["components"].values()) == pytest.approx(loss["measured_loss"], abs=rounding)


def test_ablate_sync_times_the_same_ranks_without_gradient_sync(tmp_path):
    """`--ablate sync` on 2 gloo ranks of the tiny GPT under DDP: after the timed window, windows under DDP's no_sync()
    alternating with synchronised ones, between barriers, in the record's `ablation` that the waterfall reads."""
    out = tmp_path / "records"
    gpt = as_flags(tiny_gpt(micro_batch_size=2, warmup_iters=1, iters=2, print_every=1, device="cpu"))
    _dlperf(["run", *gpt, "--devices-per-node", "2", "--ablate", "sync", "--out", str(out)])
    (path,) = (out / "gpt" / "1n2g").glob("*.json")
    record = json.loads(path.read_text())
    ablation = record["ablation"]
    assert ablation["method"].startswith("no_sync") and ablation["iters"] == 2
    assert len(ablation["window_throughputs"]) == len(ablation["synced_window_throughputs"]) == 2
    assert ablation["step_ms"] == pytest.approx(record["global_batch_size"] / ablation["throughput"] * 1000)
    assert ablation["ratio"] == pytest.approx(ablation["step_ms"] / ablation["synced_step_ms"])
    assert (
        record["config"]["ablate"] == "sync" and record["group"] == "DP_2x1x1_4_64x2_fp32"
    )  # the unablated run's name


def test_unsynchronised_steps_all_reduce_nothing():
    """Under the loop's `--ablate sync` windows, 2 gloo ranks of dlperf's tiny GPT step: a DDP comm hook counts
    the gradient buckets each step all-reduces; no step inside no_sync() reduces any, every step outside does."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    helper = Path(__file__).parent.parent / "helpers" / "ablation_allreduces.py"
    done = subprocess.run([sys.executable, str(helper), str(port)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    steps = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(steps) == 2 * (4 + 2)  # 4 steps of each mode in windows of 2, an untimed step before each window
    assert sorted({buckets for inside, buckets in steps if inside}) == [0]
    assert all(buckets > 0 for inside, buckets in steps if not inside)
    assert [inside for inside, _ in steps[::3]] == [True, False, False, True]  # pairs in both orders
