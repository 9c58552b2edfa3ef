"""Host lists for multi-node runs: `--hosts a,b` or a hostfile, checked before anything reaches ssh.

A host is `[user@]name` where name is a DNS name, an IPv4 address or an IPv6 address (bare or in brackets).
Anything else (spaces, quotes, `;`, `$`, a leading `-` that ssh would read as an option) is refused: host names
reach ssh as arguments, never through a shell, and a name that looks like an option or a command is a mistake
or an attack either way.
"""

from __future__ import annotations

import ipaddress
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from dlperf.errors import ConfigError
from dlperf.user_files import read_user_text

USER_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]*")
SLOTS_RE = re.compile(r"slots=(\d+)")


@dataclass(frozen=True)
class Host:
    """One node: the name ssh is given, and how many devices it offers (`slots=N` in a hostfile)."""

    name: str
    slots: int | None = None

    @property
    def address(self) -> str:
        """The name without the user: what other nodes connect to."""
        return self.name.rpartition("@")[2]


def check_host_name(name: str, where: str = "--hosts") -> str:
    """The host as ssh takes it: `[user@]name`, an IPv6 address without the brackets a user may have written."""
    user, at, address = name.rpartition("@")
    if address.startswith("[") and address.endswith("]"):
        address = address[1:-1]
    if at and not USER_RE.fullmatch(user):
        raise ConfigError(f"user {user!r} of host {name!r} in {where} has characters a user name cannot have")
    if ":" in address:
        try:
            ip = ipaddress.IPv6Address(address)
        except ValueError:
            raise ConfigError(f"host {name!r} in {where} is not a valid IPv6 address") from None
        if ip.scope_id is not None:
            raise ConfigError(f"host {name!r} in {where} has a zone (%...): give a global or unique-local address")
    elif not NAME_RE.fullmatch(address):
        raise ConfigError(
            f"host {name!r} in {where} is not a host name or IP address ([user@]name with letters, digits, "
            f"'.', '-'): remove shell characters and spaces"
        )
    return f"{user}{at}{address}"


def host_port(address: str, port: int | str) -> str:
    """`address:port` as c10d's rendezvous endpoint reads it: an IPv6 address goes in brackets."""
    address = address.removeprefix("[").removesuffix("]")  # --master-addr may come bracketed
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def parse_hosts(text: str) -> list[Host]:
    """`node1,node2` -> hosts, in order; the first one hosts the rendezvous."""
    names = [part.strip() for part in text.split(",")]
    if not any(names) or not all(names):
        raise ConfigError(f"--hosts {text!r} has an empty entry: give a comma-separated list like node1,node2")
    return _unique([Host(check_host_name(name)) for name in names], "--hosts")


def read_hostfile(path: str | Path) -> list[Host]:
    """One host per line, optionally `slots=N`; blank lines and `#` comments are skipped."""
    lines = read_user_text(path, "hostfile", 2**20).splitlines()
    hosts = []
    for number, line in enumerate(lines, start=1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        where = f"hostfile {path} line {number}"
        slots = None
        for word in words[1:]:
            match = SLOTS_RE.fullmatch(word)
            if not match or int(match.group(1)) < 1:
                raise ConfigError(f"{where}: {word!r} is not slots=N with N >= 1")
            slots = int(match.group(1))
        hosts.append(Host(check_host_name(words[0], where), slots))
    if not hosts:
        raise ConfigError(f"hostfile {path} lists no hosts: write one host per line")
    return _unique(hosts, f"hostfile {path}")


def _unique(hosts: list[Host], where: str) -> list[Host]:
    seen: set[str] = set()
    for host in hosts:
        if host.address in seen:
            raise ConfigError(f"host {host.address} appears twice in {where}: list each node once")
        seen.add(host.address)
    return hosts


def slots_per_node(hosts: list[Host]) -> int | None:
    """Processes per node from a hostfile's `slots=N` (the MPI and DeepSpeed habit) when every host gives one:
    the smallest, so every node runs the same number; None otherwise."""
    slots = [h.slots for h in hosts]
    return min(slots) if slots and None not in slots else None  # type: ignore[type-var]


def hosts_for(hosts: list[Host], nodes: int, devices_per_node: int) -> list[Host]:
    """The first `nodes` hosts, each with room for `devices_per_node` processes."""
    if nodes > len(hosts):
        raise ConfigError(f"--nodes {nodes} needs {nodes} hosts but the host list has {len(hosts)}: add hosts")
    chosen = hosts[:nodes]
    for host in chosen:
        if host.slots is not None and devices_per_node > host.slots:
            raise ConfigError(
                f"--devices-per-node {devices_per_node} is more than host {host.name}'s slots={host.slots}: "
                f"lower --devices-per-node or raise its slots"
            )
    return chosen


def allocation_hosts() -> list[str] | None:
    """The Slurm allocation's host names in order (scontrol), or None where they cannot be listed."""
    nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST", "")
    try:
        done = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return done.stdout.split()
