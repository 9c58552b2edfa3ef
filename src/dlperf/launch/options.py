"""Where and how a run is launched (local, over ssh, under Slurm): apart from RunConfig, which is what is measured."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field

from dlperf.errors import ConfigError
from dlperf.launch.hosts import Host, check_host_name

LAUNCHERS = ("local", "ssh", "slurm")
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
    """The launch flags of `dlperf run` and `dlperf sweep`; `launcher` None means ssh with hosts, else local."""

    launcher: str | None = None
    hosts: tuple[Host, ...] = ()
    master_addr: str | None = None
    master_port: int | None = None
    ifname: str | None = None
    ssh_options: tuple[str, ...] = ()
    connect_timeout: int = 10
    remote_python: str = field(default_factory=lambda: sys.executable)
    dry_run: bool = False
    partition: str | None = None
    account: str | None = None
    time: str | None = None

    @property
    def kind(self) -> str:
        return self.launcher or ("ssh" if self.hosts else "local")

    def validate(self) -> None:
        if self.kind not in LAUNCHERS:
            raise ConfigError(f"unknown launcher {self.launcher!r}: choose one of {', '.join(LAUNCHERS)}")
        if self.kind == "ssh" and not self.hosts:
            raise ConfigError("--launcher ssh needs --hosts node1,node2 or --hostfile FILE")
        if self.kind != "ssh" and self.hosts:
            raise ConfigError(f"--hosts/--hostfile go with the ssh launcher, not --launcher {self.kind}")
        if self.ifname is not None and not IFNAME_RE.fullmatch(self.ifname):
            raise ConfigError(f"--ifname {self.ifname!r} is not a network interface name like eth0 or ib0")
        for option in self.ssh_options:
            if not SSH_OPTION_RE.fullmatch(option):
                raise ConfigError(f"--ssh-option {option!r} is not KEY=VALUE, e.g. IdentityFile=~/.ssh/bench")
        if self.master_port is not None and not 0 < self.master_port < 65536:
            raise ConfigError(f"--master-port must be between 1 and 65535, got {self.master_port}")
        if self.master_addr is not None:
            check_host_name(self.master_addr, "--master-addr")
        for name, pattern in SLURM_VALUE_RE.items():
            value = getattr(self, name)
            if value is not None and not pattern.fullmatch(value):
                raise ConfigError(
                    f"--{name} {ascii(value)[:80]} is not a Slurm {name} (letters, digits, . _ + -; e.g. "
                    f"{SLURM_EXAMPLES[name]}): control characters and spaces would change the sbatch script"
                )

    def worker_env(self) -> dict[str, str]:
        """Environment for every worker: the socket interface NCCL and Gloo should use."""
        if not self.ifname:
            return {}
        return {"NCCL_SOCKET_IFNAME": self.ifname, "GLOO_SOCKET_IFNAME": self.ifname}
