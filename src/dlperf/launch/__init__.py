"""Launchers: where a run's node agents start. Adding one: a module with a `Launcher` subclass and one line in
LAUNCHERS; `--launcher` takes its choices from this registry, and a launcher's module loads only when it is used."""

from __future__ import annotations

import pkgutil

from dlperf.errors import ConfigError
from dlperf.launch.base import Launcher, RunJob
from dlperf.launch.options import LaunchOptions

# name -> "module:class"
LAUNCHERS: dict[str, str] = {
    "local": "dlperf.launch.local:LocalLauncher",
    "ssh": "dlperf.launch.ssh:SshLauncher",
    "srun": "dlperf.launch.srun:SrunLauncher",
    "sbatch": "dlperf.launch.sbatch:SbatchLauncher",
}
SLURM = "slurm"  # not a launcher of its own: srun inside an allocation, sbatch outside one


def launcher_names() -> list[str]:
    """`--launcher`'s choices: every registered launcher, and `slurm`."""
    return [*LAUNCHERS, SLURM]


def launcher_class(name: str) -> type[Launcher]:
    return pkgutil.resolve_name(LAUNCHERS[name])


def launcher_for(options: LaunchOptions) -> Launcher:
    """The launcher `options` name, checked against the hosts they give."""
    kind = options.kind
    if kind == SLURM:
        from dlperf.launch.srun import in_slurm_allocation

        kind = "srun" if in_slurm_allocation() else "sbatch"
    if kind not in LAUNCHERS:
        raise ConfigError(f"unknown launcher {options.launcher!r}: choose one of {', '.join(launcher_names())}")
    return launcher_class(kind)(options)


__all__ = ["LAUNCHERS", "LaunchOptions", "Launcher", "RunJob", "launcher_class", "launcher_for", "launcher_names"]
