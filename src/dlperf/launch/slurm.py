"""Slurm: inside an allocation, one srun step with one node agent per node; outside, an sbatch job per case.

The batch script of a case runs `dlperf run ... --launcher slurm` once per repeat inside its allocation, so
both paths measure through the same srun step. The results folder must be on a filesystem the nodes share
(as Slurm's own output files are); the spec and each node's result pass through a hidden folder there.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from collections.abc import Iterable
from dataclasses import fields
from pathlib import Path
from typing import Any

from dlperf.config import RunConfig
from dlperf.errors import LaunchError
from dlperf.launch.hosts import host_port
from dlperf.launch.local import free_port, stop_process_group
from dlperf.launch.options import LaunchOptions
from dlperf.launch.runner import check_config, check_writable, claim_paths
from dlperf.launch.ssh import merge_results
from dlperf.metrics.environment import collect_environment
from dlperf.reporting.files import write_json_atomic, write_text_atomic
from dlperf.reporting.layout import RunPaths, run_paths
from dlperf.reporting.record import build_record, read_record

POLL_S = 1.0


def first_node() -> str:
    """The allocation's first host name, which hosts the rendezvous."""
    nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST", "")
    try:
        done = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as error:
        raise LaunchError(f"cannot list the allocation's nodes with scontrol: {error}") from None
    return done.stdout.split()[0]


class SrunLauncher:
    """One `srun` step across the allocation's first N nodes, one agent (one torchrun) per node."""

    def __init__(self, options: LaunchOptions) -> None:
        self.options = options

    @staticmethod
    def _shared_dir(paths: RunPaths) -> Path:
        return paths.folder.resolve() / f".{paths.log.stem}.slurm"

    def _spec(self, spec: dict[str, Any], paths: RunPaths, port: int | str) -> dict[str, Any]:
        endpoint = host_port(self.options.master_addr or first_node(), port)
        launch = {
            **spec["launch"],
            "rdzv_endpoint": endpoint,
            "is_host": None,  # c10d: the node whose name or address matches the endpoint hosts the store
            "log_dir": str(self._shared_dir(paths) / "elastic-%t"),
            "collect_env": True,
        }
        return {**spec, "launch": launch}

    def srun_command(self, config_nodes: int, paths: RunPaths) -> list[str]:
        shared = self._shared_dir(paths)
        cpus = os.environ.get("SLURM_CPUS_ON_NODE")
        return [
            "srun",
            f"--nodes={config_nodes}",
            f"--ntasks={config_nodes}",
            "--ntasks-per-node=1",
            *([f"--cpus-per-task={cpus}"] if cpus else []),
            "--kill-on-bad-exit=1",
            f"--output={paths.console.with_name(f'{paths.log.stem}.node%t.console.txt')}",
            self.options.remote_python,
            "-m",
            "dlperf.launch.agent",
            str(shared / "spec.json"),
            str(shared / "result-%t.json"),
        ]

    def describe(self, spec: dict[str, Any], paths: RunPaths) -> list[str]:
        port = self.options.master_port or "<free port>"
        nodes = spec["launch"]["nnodes"]
        return [
            f"# spec in {self._shared_dir(paths) / 'spec.json'}:",
            json.dumps(self._spec(spec, paths, port)),
            shlex.join(self.srun_command(nodes, paths)),
        ]

    def run(self, spec: dict[str, Any], workdir: Path, paths: RunPaths, timeout: float) -> dict[str, Any]:
        shared = self._shared_dir(paths)
        shared.mkdir(parents=True, exist_ok=True)
        nodes = spec["launch"]["nnodes"]
        write_json_atomic(shared / "spec.json", self._spec(spec, paths, self.options.master_port or free_port()))
        proc = subprocess.Popen(self.srun_command(nodes, paths), start_new_session=True, stdin=subprocess.DEVNULL)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"status": "failed", "error": f"timed out after {timeout:g} s: raise --timeout or lower --iters"}
        finally:
            stop_process_group(proc)
            result_files = sorted(shared.glob("result-*.json"))
            results = [json.loads(p.read_text(encoding="utf-8")) for p in result_files]
            ended = [p.stat().st_mtime for p in result_files]
            for path in shared.rglob("*"):
                if path.is_file():
                    path.unlink()
            for path in sorted(shared.rglob("*"), reverse=True):
                path.rmdir()
            shared.rmdir()
        if len(results) < nodes:
            return {
                "status": "failed",
                "error": f"srun ended with code {proc.returncode} and {len(results)} of {nodes} node results; "
                f"see {paths.console.with_name(paths.log.stem + '.node*.console.txt')}",
            }
        return merge_results(results, ended)


def config_flags(config: RunConfig) -> list[str]:
    """`dlperf run` flags that rebuild `config`: model and topology always, other fields where not the default."""
    default = RunConfig()
    always = ("model", "nodes", "devices_per_node")
    flags = ["--model", config.model, "--nodes", str(config.nodes), "--devices-per-node", str(config.devices_per_node)]
    for field in fields(RunConfig):
        value = getattr(config, field.name)
        if field.name in always or value == getattr(default, field.name) or value is None:
            continue
        flag = "--" + field.name.replace("_", "-")
        if isinstance(value, bool):
            flags.append(flag if value else "--no-" + flag[2:])
        else:
            flags += [flag, str(value)]
    return flags


def case_file(out: str | Path, config: RunConfig, suffix: str) -> Path:
    """A file of the whole case (all repeats) beside its runs: the sbatch script and its output."""
    paths = run_paths(out, config, 1)
    return paths.folder / f"{paths.log.stem.rsplit('_', 1)[0]}{suffix}"


def batch_script(config: RunConfig, repeats: list[int], out: str | Path, options: LaunchOptions) -> str:
    """One case's sbatch script: a whole-node allocation, then `dlperf run` for each repeat in it."""
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name=dlperf-{config.model}-{config.topology}",
        f"#SBATCH --nodes={config.nodes}",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --exclusive",
        f"#SBATCH --output={case_file(out, config, '.sbatch.out').resolve()}",
    ]
    if config.device == "cuda":
        lines.append(f"#SBATCH --gpus-per-node={config.devices_per_node}")
    for name in ("partition", "account", "time"):
        value = getattr(options, name)
        if value:
            lines.append(f"#SBATCH --{name}={value}")
    launch = ["--launcher", "slurm", "--remote-python", options.remote_python]
    if options.ifname:
        launch += ["--ifname", options.ifname]
    if options.master_port:
        launch += ["--master-port", str(options.master_port)]
    for repeat in repeats:
        command = [options.remote_python, "-m", "dlperf", "run", *config_flags(config), *launch]
        command += ["--repeat", str(repeat), "--out", str(Path(out).resolve()), "--overwrite"]
        lines.append(shlex.join(command))
    return "\n".join(lines) + "\n"


def _by_case(runs: Iterable[tuple[RunConfig, int]]) -> list[tuple[RunConfig, list[int]]]:
    cases: dict[str, tuple[RunConfig, list[int]]] = {}
    for config, repeat in runs:
        cases.setdefault(json.dumps(config.to_dict(), sort_keys=True), (config, []))[1].append(repeat)
    return list(cases.values())


def submit_runs(
    runs: list[tuple[RunConfig, int]], out: str | Path, options: LaunchOptions, overwrite: bool
) -> list[dict[str, Any] | None]:
    """Write and submit one sbatch script per case, wait for the jobs, and return the runs' records.

    With --dry-run the scripts and sbatch commands are printed and nothing runs (records are None). A job
    that ends without writing a run's record gets a failed record naming the job and its output file.
    """
    scripts = []
    for config, repeats in _by_case(runs):
        scripts.append(
            (config, repeats, case_file(out, config, ".sbatch"), batch_script(config, repeats, out, options))
        )
    if options.dry_run:
        for _, _, path, text in scripts:
            print(f"# {path}\n{text}{shlex.join(['sbatch', '--parsable', str(path)])}")
        return [None] * len(runs)
    check_writable(out)
    for config, repeats, path, text in scripts:
        for repeat in repeats:
            claim_paths(run_paths(out, config, repeat), overwrite)
        write_text_atomic(path, text)
    jobs = {}
    started = time.time()
    try:
        for config, repeats, path, _ in scripts:
            jobs[submit(path)] = (config, repeats, path)
        wait_for_jobs(list(jobs))
    except BaseException:
        if jobs:
            subprocess.run(["scancel", *jobs], check=False)
        raise
    return [_collected(config, repeat, out, jobs, started) for config, repeat in runs]


def submit(script: Path) -> str:
    try:
        done = subprocess.run(
            ["sbatch", "--parsable", str(script)], capture_output=True, text=True, check=False, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise LaunchError(f"cannot run sbatch: {error}; is Slurm installed and slurmctld reachable?") from None
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        raise LaunchError(f"sbatch refused {script}: {reason}")
    return done.stdout.strip().split(";")[0]


def wait_for_jobs(job_ids: list[str]) -> None:
    """Until none of the jobs is pending or running in squeue."""
    while True:
        done = subprocess.run(
            ["squeue", "-h", "-o", "%i", "-j", ",".join(job_ids)], capture_output=True, text=True, check=False
        )
        if done.returncode == 0 and not done.stdout.split():
            return
        if done.returncode != 0 and "Invalid job id" in done.stderr:
            return  # the jobs left squeue's memory: all ended
        time.sleep(POLL_S)


def _collected(config: RunConfig, repeat: int, out: str | Path, jobs: dict, started: float) -> dict[str, Any]:
    paths = run_paths(out, config, repeat)
    record = read_record(paths.record)
    if record is not None:
        return record
    job = next(j for j, (c, repeats, _) in jobs.items() if c == config and repeat in repeats)
    output = case_file(out, config, ".sbatch.out")
    result = {"status": "failed", "error": f"slurm job {job} ended without a record for this run; see {output}"}
    record = build_record(config, check_config(config), repeat, result, collect_environment(), started, time.time())
    write_json_atomic(paths.record, record)
    return record
