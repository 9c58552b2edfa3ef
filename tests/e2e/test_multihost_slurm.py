"""`--launcher slurm` against a real slurmctld + slurmd on loopback: sbatch outside, srun inside."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import TINY
from slurm_cluster import slurm_cluster

pytestmark = pytest.mark.slow


def test_sbatch_then_srun_runs_a_one_node_two_task_case(tmp_path):
    with slurm_cluster(tmp_path / "slurm") as env:
        out = tmp_path / "out"
        command = [sys.executable, "-m", "dlperf", "run", *TINY, "--devices-per-node", "2", "--launcher", "slurm"]
        done = subprocess.run([*command, "--out", str(out)], env=env, capture_output=True, text=True, timeout=300)
        folder = out / "resnet50" / "1n2g"
        batch_output = folder / "resnet50_b4_fp32.sbatch.out"
        assert done.returncode == 0, done.stderr + (batch_output.read_text() if batch_output.exists() else "")
    record = json.loads((folder / "resnet50_b4_fp32_1.json").read_text())
    assert record["status"] == "ok" and record["world_size"] == 2 and record["throughput"] > 0
    assert record["env"]["nodes"][0]["node"]  # the node's own environment came back through srun
    script = (folder / "resnet50_b4_fp32.sbatch").read_text()
    assert "#SBATCH --nodes=1" in script and "--launcher slurm" in script
    assert (folder / "resnet50_b4_fp32_1.node0.console.txt").exists()  # srun's per-node output
    assert not list(folder.glob(".*.slurm"))  # the shared hand-over folder is gone


def test_a_multi_node_job_that_leaves_no_record_is_a_failed_record(tmp_path):
    """A 2-node sbatch job whose nodes exit at once (their python is /bin/false): the parent writes the run's
    failed record naming the job, instead of stopping on a check meant for local runs."""
    with slurm_cluster(tmp_path / "slurm", nodes=2) as env:
        out = tmp_path / "out"
        command = [sys.executable, "-m", "dlperf", "run", *TINY, "--nodes", "2", "--launcher", "slurm"]
        command += ["--remote-python", "/bin/false", "--out", str(out)]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and "ended without a record" in done.stderr
    record = json.loads((out / "resnet50" / "2n1g" / "resnet50_b4_fp32_1.json").read_text())
    assert record["status"] == "failed" and record["nodes"] == 2
    assert record["error"].startswith("slurm job ") and "resnet50_b4_fp32.sbatch.out" in record["error"]


def test_dry_run_prints_the_batch_script_and_submits_nothing(tmp_path):
    command = [sys.executable, "-m", "dlperf", "run", *TINY, "--nodes", "2", "--launcher", "slurm", "--dry-run"]
    command += ["--partition", "gpu", "--account", "bench", "--time", "00:30:00", "--out", str(tmp_path)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    for line in ("#SBATCH --nodes=2", "#SBATCH --partition=gpu", "#SBATCH --account=bench", "#SBATCH --time=00:30:00"):
        assert line in done.stdout
    assert "sbatch --parsable" in done.stdout and "--launcher slurm --remote-python" in done.stdout
    assert not list(tmp_path.rglob("*"))
