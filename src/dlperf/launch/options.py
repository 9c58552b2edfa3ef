"""Where and how a run is launched (local, over ssh, under Slurm): apart from the RunSpec, which is what is measured.
Each field declares its flag (`spec.setting`), from which `dlperf run`, `sweep` and `commbench` make theirs."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dlperf.errors import ConfigError
from dlperf.launch.hosts import Host, check_host_name, slots_per_node
from dlperf.spec import coerce, setting

WHERE = "where to run (multi-node)"
IFNAME_RE = re.compile(r"^[\^=]{0,2}[A-Za-z0-9_.:-]+(,[A-Za-z0-9_.:-]+)*$")
SSH_OPTION_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]*=[^\n\r]+$")
# Values written into an sbatch script's `#SBATCH` lines: Slurm's own name and time syntax, nothing that could
# end the line or start another one.
SLURM_VALUE_RE = {
    "partition": re.compile(r"^[A-Za-z0-9_.+-]+(,[A-Za-z0-9_.+-]+)*$"),
    "account": re.compile(r"^[A-Za-z0-9_.+-]+$"),
    "time": re.compile(r"^(\d+-)?\d+(:\d+){0,2}$|^(?i:unlimited|infinite)$"),
}
SLURM_EXAMPLES = {"partition": "gpu", "account": "bench", "time": "01:00:00 or 2-00:00:00"}


@dataclass(frozen=True)
class LaunchOptions:
    """The launch flags of `dlperf run` and `dlperf sweep`; `launcher` None means ssh with hosts, else local. The
    launcher's choices are the registry's (`dlperf.launch.LAUNCHERS`); `hosts` has two flags of its own
    (`--hosts`, `--hostfile`)."""

    FLAGS_GROUP = WHERE

    launcher: str | None = setting(
        None, "local, ssh (the default with --hosts), srun, sbatch, or slurm: srun inside an allocation, else sbatch"
    )
    hosts: tuple[Host, ...] = ()
    master_addr: str | None = setting(None, "rendezvous address (default: the first host)")
    master_port: int | None = setting(None, "rendezvous port (default: a free port on the first host)", bound="port")
    ifname: str | None = setting(
        None, "network interface for NCCL and Gloo (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME), e.g. eth0"
    )
    ssh_options: tuple[str, ...] = setting((), "extra `ssh -o` option KEY=VALUE, repeatable", flag="--ssh-option")
    connect_timeout: int = setting(10, "ssh connect timeout in seconds", bound="positive")
    remote_python: str = setting(
        None, "python on the hosts that has dlperf installed (default: this one's path)", factory=lambda: sys.executable
    )
    dry_run: bool = setting(False, "print the exact commands and scripts without running them")
    partition: str | None = setting(None, "Slurm partition for sbatch")
    account: str | None = setting(None, "Slurm account for sbatch")
    time: str | None = setting(None, "Slurm time limit for sbatch, e.g. 01:00:00")

    @property
    def kind(self) -> str:
        return self.launcher or ("ssh" if self.hosts else "local")

    def place(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """A run's keys (flags or a sweep file's) with what the hosts decide where the keys leave it open: the
        nodes, one per host; the devices per node, from a hostfile whose every host gives `slots=N` (unless a
        topology or a case names them)."""
        placed = dict(values)
        if self.hosts and not {"topology", "nodes"} & set(placed):
            placed["nodes"] = len(self.hosts)
        slots = slots_per_node(list(self.hosts))
        if slots is not None and not {"topology", "devices_per_node", "devices-per-node", "case"} & set(placed):
            placed["devices_per_node"] = slots
        return placed

    def validate(self) -> None:
        """The values, each of its own form (which launcher takes hosts is the launcher's own check)."""
        if self.ifname is not None and not IFNAME_RE.fullmatch(self.ifname):
            raise ConfigError(f"--ifname {self.ifname!r} is not a network interface name like eth0 or ib0")
        for option in self.ssh_options:
            if not SSH_OPTION_RE.fullmatch(option):
                raise ConfigError(f"--ssh-option {option!r} is not KEY=VALUE, e.g. IdentityFile=~/.ssh/bench")
        coerce(LaunchOptions, "master_port", self.master_port)  # its bound, for a --resume folder's stored value too
        if self.master_addr is not None:
            check_host_name(self.master_addr, "--master-addr")
        for name in SLURM_VALUE_RE:
            _check_slurm_value(name, getattr(self, name))

    def worker_env(self) -> dict[str, str]:
        """Environment for every worker: the socket interface NCCL and Gloo should use."""
        if not self.ifname:
            return {}
        return {"NCCL_SOCKET_IFNAME": self.ifname, "GLOO_SOCKET_IFNAME": self.ifname}


def _check_slurm_value(name: str, value: str | None) -> None:
    """A Slurm value (partition, account, ...) that cannot change the sbatch script it goes into."""
    if value is not None and not SLURM_VALUE_RE[name].fullmatch(value):
        raise ConfigError(
            f"--{name} {ascii(value)[:80]} is not a Slurm {name} (letters, digits, . _ + -; e.g. "
            f"{SLURM_EXAMPLES[name]}): control characters and spaces would change the sbatch script"
        )
