"""The JAX engine through dlperf's own CLI and launchers: records like the torch engine's (FLOPs and MFU from
metrics/flops.py, XLA's compile time as compile_s), TP=2 under torchrun's launcher and DP=2 over two
network-namespace hosts giving the 1-process losses. (ResNet-50's sweep on JAX is test_jax_parallel.py's, where
its record is the one-device reference of DP=2.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_dlperf
from netns_hosts import remote_python
from tiny import QUICK_RUN, as_flags, tiny_gpt

from dlperf.metrics.flops import gpt_flops_per_iteration

pytest.importorskip("flax", reason="the JAX engine needs jax, flax and optax: pip install 'dlperf[jax]'")

pytestmark = pytest.mark.slow

# global batch 8 in every layout: 4 micro-batches of 2 on one device, 2 per replica at dp 2, 4 at tp 2
TINY_GPT = as_flags(tiny_gpt(micro_batch_size=2, global_batch_size=8, lr=1e-3, **QUICK_RUN))


def jax_run(out: Path, args: list[str]) -> dict:
    done = run_dlperf(["run", "--engine", "jax", *args, "--out", str(out)], timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    (path,) = out.rglob("*_jax_*.json")
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def one_process_gpt(tmp_path_factory) -> dict:
    """The tiny GPT on one process: checked as a record, and the losses the 2-process layouts must give."""
    return jax_run(tmp_path_factory.mktemp("one"), TINY_GPT)


def test_gpt_one_process_record(one_process_gpt):
    record = one_process_gpt
    assert record["status"] == "ok" and record["engine"] == "jax" and record["group"].endswith("_fp32_jax")
    # 2 layers, hidden 64, 32 tokens, vocab 512 (already a multiple of 128): the torch engine's definition
    flops = gpt_flops_per_iteration(8, 32, 2, 64, 512)
    assert record["flops_per_iteration"] == flops == 213_909_504  # 72·8·32·2·64²·(1 + 32/384 + 512/1536)
    seconds = 8 / record["throughput"]
    assert record["tflops_per_device"] == pytest.approx(flops / seconds / 1e12)
    assert record["mfu"] is None and "pass --peak-tflops" in record["mfu_note"]  # no datasheet peak for a CPU
    assert record["compile_s"] > 0 and record["env"]["jax"] and record["device_type"] == "cpu"
    assert record["loss_last"] < record["loss_first"]
    # JAX dispatch is asynchronous: per-step latency is each window's mean, so a window's steps are equal
    assert record["latency_ms"]["p50"] == pytest.approx(record["latency_ms"]["mean"], rel=0.5)


def assert_one_process_losses(pair: dict, single: dict) -> None:
    """Same global batch and seed: the first and last loss of 2 processes match 1 process."""
    assert pair["world_size"] == 2 and len(pair["ranks"]) == 2
    assert pair["loss_first"] == pytest.approx(single["loss_first"], abs=1e-4)
    assert pair["loss_last"] == pytest.approx(single["loss_last"], abs=1e-4)
    assert pair["loss_last"] != pytest.approx(pair["loss_first"], abs=1e-3)  # five steps of training moved it


def test_tp2_under_the_launcher_gives_one_process_losses(tmp_path, one_process_gpt):
    """TP=2 in 2 processes under torchrun's launcher, each pinned to its share of the cores (DP=2 is the two-host
    test's)."""
    pair = jax_run(tmp_path / "two", [*TINY_GPT, "--devices-per-node", "2", "--tp", "2"])
    assert_one_process_losses(pair, one_process_gpt)
    cores = len(os.sched_getaffinity(0))  # XLA's CPU pool follows the cores each rank is pinned to
    assert [r["cpu_threads"] for r in one_process_gpt["ranks"]] == [cores]
    assert [r["cpu_threads"] for r in pair["ranks"]] == [max(1, cores // 2)] * 2


def test_dp2_over_two_hosts_gives_one_process_losses(tmp_path_factory, tmp_path, one_process_gpt):
    from netns_hosts import netns_hosts

    with netns_hosts(2, tmp_path_factory.mktemp("netns")) as cluster:
        command = [sys.executable, "-m", "dlperf", "run", "--engine", "jax", *TINY_GPT, "--out", str(tmp_path)]
        command += ["--hosts", ",".join(cluster.addresses), *cluster.ssh_options(), "--ifname", cluster.ifname]
        command += ["--remote-python", remote_python(tmp_path)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        (path,) = tmp_path.rglob("*_jax_*.json")
        record = json.loads(path.read_text())
        assert record["status"] == "ok" and record["case"] == "2n1g" and record["parallel"]["dp"] == 2
        assert sorted(r["host"] for r in record["ranks"]) == sorted(cluster.addresses)
        assert_one_process_losses(record, one_process_gpt)
        assert cluster.stray_pids() == {}
