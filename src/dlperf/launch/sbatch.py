"""Slurm outside an allocation: one sbatch job per case, submitted, waited on and collected.

Each case's batch script runs `dlperf run ... --launcher slurm` once per repeat inside its allocation, so both
Slurm paths measure through the same srun step (srun.py), and each run writes its own record there.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

from dlperf.errors import ConfigError, LaunchError
from dlperf.launch.base import Launcher, OnDone, RunJob
from dlperf.launch.messages import RunResult
from dlperf.records.store import write_text_atomic
from dlperf.spec import RunSpec

POLL_S = 1.0
CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


def script_path_value(path: Path) -> str:
    """A path for an `#SBATCH` line: refused with control characters (a newline would add a line to the script),
    double-quoted where it holds a space or a quote-free shell character."""
    text = str(path)
    if CONTROL_RE.search(text) or '"' in text:
        raise ConfigError(
            f"results path {ascii(text)[:120]} holds a control character or a double quote: choose "
            "another --out for Slurm"
        )
    return text if re.fullmatch(r"[A-Za-z0-9_./%+=:,@-]+", text) else f'"{text}"'


def spec_flags(spec: RunSpec) -> list[str]:
    """`dlperf run` flags that rebuild `spec`: model and topology always, other values where not the default."""
    defaults = {
        **{f.name: f.default for f in fields(RunSpec) if f.name not in ("model", "workload")},
        **{f.name: f.default for f in fields(type(spec.workload))},
    }
    fixed = ("model", "nodes", "devices_per_node")
    given = {k: v for k, v in spec.to_dict().items() if k not in fixed and v != defaults.get(k)}
    return value_flags({"model": spec.model, "nodes": spec.nodes, "devices_per_node": spec.devices_per_node, **given})


def value_flags(values: dict[str, Any]) -> list[str]:
    """Values as `dlperf run` flags: `--key value`, a switch on or off (`--no-key`); None left out."""
    flags: list[str] = []
    for key, value in values.items():
        name = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            flags.append(name if value else "--no-" + name[2:])
        elif value is not None:
            flags += [name, str(value)]
    return flags


class SbatchLauncher(Launcher):
    """Submits every case of a batch of runs as one sbatch job and collects what each run recorded."""

    def _script_path(self, job: RunJob) -> Path:
        return job.paths.folder / f"{job.paths.case_stem}.sbatch"

    def batch_script(self, job: RunJob, repeats: list[int]) -> str:
        """One case's sbatch script: a whole-node allocation, then `dlperf run` for each repeat in it."""
        spec, options = job.spec, self.options
        out = job.paths.root.resolve()
        lines = [
            "#!/bin/bash",
            f"#SBATCH --job-name=dlperf-{spec.model}-{spec.topology}",
            f"#SBATCH --nodes={spec.nodes}",
            "#SBATCH --ntasks-per-node=1",
            "#SBATCH --exclusive",
            f"#SBATCH --output={script_path_value(self._script_path(job).with_suffix('.sbatch.out').resolve())}",
        ]
        if spec.device == "cuda":
            lines.append(f"#SBATCH --gpus-per-node={spec.devices_per_node}")
        for name in ("partition", "account", "time"):
            value = getattr(options, name)
            if value:
                lines.append(f"#SBATCH --{name}={value}")
        launch = ["--launcher", "slurm", "--remote-python", options.remote_python]
        if options.ifname:
            launch += ["--ifname", options.ifname]
        if options.master_port:
            launch += ["--master-port", str(options.master_port)]
        subcommand = spec.model if job.kind == "task" else "run"  # a task run has its own: `dlperf commbench`
        for repeat in repeats:
            argv = [options.remote_python, "-m", "dlperf", subcommand, *spec_flags(spec), *launch]
            argv += ["--repeat", str(repeat), "--out", str(out), "--overwrite"]
            lines.append(shlex.join(argv))
        return "\n".join(lines) + "\n"

    def _cases(self, jobs: list[RunJob]) -> list[tuple[RunJob, list[int]]]:
        """Jobs grouped by case (same spec), each case with its repeats."""
        cases: dict[Path, tuple[RunJob, list[int]]] = {}
        for job in jobs:
            cases.setdefault(self._script_path(job), (job, []))[1].append(job.repeat)
        return list(cases.values())

    def _submission(self, job: RunJob, repeats: list[int]) -> list[str]:
        path = self._script_path(job)
        return [f"# {path}", self.batch_script(job, repeats).rstrip(), shlex.join(["sbatch", "--parsable", str(path)])]

    def node_addrs(self, job: RunJob) -> list[str]:
        """Known only inside the allocation: the agent reads them from SLURM_JOB_NODELIST."""
        return [f"<node {i} of the allocation>" for i in range(job.spec.nodes)]

    def describe(self, job: RunJob) -> list[str]:
        return self._submission(job, [job.repeat])

    def describe_all(self, jobs: list[RunJob]) -> str:
        return "\n".join(
            line
            for job, repeats in self._cases(jobs)
            for line in self._submission(job, repeats) + self.describe_processes(job)
        )

    def run(self, job: RunJob, workdir: Path) -> RunResult:
        raise LaunchError("sbatch runs are submitted together: use run_all")  # a programming error, not input

    def run_all(self, jobs: list[RunJob], on_done: OnDone) -> None:
        """Submit one script per case, wait for every job, then report each run: None where its record was
        written by the job, else a failure naming the job and its output file."""
        submitted: dict[Path, str] = {}
        try:
            for job, repeats in self._cases(jobs):
                path = self._script_path(job)
                write_text_atomic(path, self.batch_script(job, repeats))
                submitted[path] = submit(path)
            wait_for_jobs(list(submitted.values()))
        except BaseException:
            if submitted:
                subprocess.run(["scancel", *submitted.values()], check=False)
            raise
        for job in jobs:
            path = self._script_path(job)
            if job.paths.record.exists():
                on_done(job, None)
            else:
                on_done(
                    job,
                    RunResult.failed(
                        f"slurm job {submitted[path]} ended without a record for this run; "
                        f"see {path.with_suffix('.sbatch.out')}"
                    ),
                )


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
