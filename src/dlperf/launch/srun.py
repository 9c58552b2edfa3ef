"""Slurm inside an allocation: one srun step with one node agent per node.

The results folder must be on a filesystem the nodes share (as Slurm's own output files are); the spec and
each node's result pass through a hidden folder there.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from dlperf.errors import LaunchError
from dlperf.launch.base import Launcher, RunJob
from dlperf.launch.hosts import allocation_hosts, host_port
from dlperf.launch.local import agent_argv, free_port, stop_process_group, timed_out
from dlperf.launch.messages import AgentSpec, NodeResult, RunResult, merge_results
from dlperf.records.paths import RunPaths
from dlperf.records.store import write_text_atomic


def first_node() -> str:
    """The allocation's first host name, which hosts the rendezvous."""
    hosts = allocation_hosts()
    if not hosts:
        raise LaunchError("cannot list the allocation's nodes with scontrol (is SLURM_JOB_NODELIST set?)")
    return hosts[0]


def in_slurm_allocation() -> bool:
    return bool(os.environ.get("SLURM_JOB_ID"))


class SrunLauncher(Launcher):
    """One `srun` step across the allocation's first N nodes, one agent (one torchrun) per node."""

    @staticmethod
    def _shared_dir(paths: RunPaths) -> Path:
        return paths.folder.resolve() / f".{paths.log.stem}.slurm"

    def _spec(self, job: RunJob, port: int | str) -> AgentSpec:
        return job.agent_spec(self.options).with_launch(
            rdzv_endpoint=host_port(self.options.master_addr or first_node(), port),
            is_host=None,  # c10d: the node whose name or address matches the endpoint hosts the store
            log_dir=str(self._shared_dir(job.paths) / "elastic-%t"),
            collect_env=True,
        )

    def srun_argv(self, nodes: int, paths: RunPaths) -> list[str]:
        shared = self._shared_dir(paths)
        cpus = os.environ.get("SLURM_CPUS_ON_NODE")
        return [
            "srun",
            f"--nodes={nodes}",
            f"--ntasks={nodes}",
            "--ntasks-per-node=1",
            *([f"--cpus-per-task={cpus}"] if cpus else []),
            "--kill-on-bad-exit=1",
            f"--output={paths.console.with_name(f'{paths.log.stem}.node%t.console.txt')}",
            *agent_argv(self.options.remote_python, str(shared / "spec.json"), str(shared / "result-%t.json")),
        ]

    def node_addrs(self, job: RunJob) -> list[str]:
        """Known only inside the allocation: the agent reads them from SLURM_JOB_NODELIST."""
        return [f"<node {i} of the allocation>" for i in range(job.spec.nodes)]

    def describe(self, job: RunJob) -> list[str]:
        return [
            f"# spec in {self._shared_dir(job.paths) / 'spec.json'}:",
            self._spec(job, self.options.master_port or "<free port>").to_json(),
            shlex.join(self.srun_argv(job.spec.nodes, job.paths)),
        ]

    def run(self, job: RunJob, workdir: Path) -> RunResult:
        shared = self._shared_dir(job.paths)
        shared.mkdir(parents=True, exist_ok=True)
        nodes = job.spec.nodes
        write_text_atomic(
            shared / "spec.json", self._spec(job, self.options.master_port or free_port(count=2)).to_json()
        )
        proc = subprocess.Popen(self.srun_argv(nodes, job.paths), start_new_session=True, stdin=subprocess.DEVNULL)
        try:
            proc.wait(timeout=job.spec.timeout)
        except subprocess.TimeoutExpired:
            return timed_out(job.spec.timeout)
        finally:
            stop_process_group(proc)
            result_files = sorted(shared.glob("result-*.json"))
            results = [NodeResult.from_json(p.read_text(encoding="utf-8")) for p in result_files]
            ended = [p.stat().st_mtime for p in result_files]
            for path in sorted(shared.rglob("*"), reverse=True):
                path.unlink() if path.is_file() else path.rmdir()
            shared.rmdir()
        if len(results) < nodes:
            return RunResult.failed(
                f"srun ended with code {proc.returncode} and {len(results)} of {nodes} node results; "
                f"see {job.paths.console.with_name(job.paths.log.stem + '.node*.console.txt')}"
            )
        return merge_results(results, ended)
