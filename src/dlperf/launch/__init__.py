"""Launchers: where a run's node agents start. Adding one: a module with a `Launcher` subclass, one line here."""

from __future__ import annotations

from dlperf.launch.base import Launcher, RunJob
from dlperf.launch.local import LocalLauncher
from dlperf.launch.options import LaunchOptions
from dlperf.launch.sbatch import SbatchLauncher
from dlperf.launch.srun import SrunLauncher, in_slurm_allocation
from dlperf.launch.ssh import SshLauncher

LAUNCHERS: dict[str, type[Launcher]] = {
    "local": LocalLauncher,
    "ssh": SshLauncher,
    "srun": SrunLauncher,
    "sbatch": SbatchLauncher,
}


def launcher_for(options: LaunchOptions) -> Launcher:
    """`--launcher slurm` is srun inside an allocation and sbatch outside one."""
    kind = options.kind
    if kind == "slurm":
        kind = "srun" if in_slurm_allocation() else "sbatch"
    return LAUNCHERS[kind](options)


__all__ = ["LaunchOptions", "Launcher", "RunJob", "launcher_for"]
