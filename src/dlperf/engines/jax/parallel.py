"""Processes, devices and shardings through JAX's own machinery: jax.distributed for the processes that
dlperf's launchers start (one device each, as torchrun's workers have), one device Mesh of named axes ((dp, tp) by
default), and NamedShardings from which XLA's partitioner derives every collective.

A workload names how its parameters split (e.g. workloads/gpt/jax_model.py TP_PLAN over "tp"); ranks are row-major
over the axes as in PyTorch's mesh: the innermost axis (TP) groups neighbouring ranks.
"""

from __future__ import annotations

import errno
import math
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from dlperf.errors import ConfigError

SpecOf = Callable[[tuple[str, ...], tuple[int, ...]], P]  # (parameter path names, shape) -> its split


def initialize(coordinator: str | None, world_size: int, rank: int, local_rank: int, device: str) -> None:
    """Pick the platform and, for several processes, join them through jax.distributed.

    Must run before anything touches a JAX backend. On CPUs the collectives go through gloo, so multi-process
    runs (and their tests) work without an accelerator; on GPUs each process owns device `local_rank`.
    """
    if device == "cpu":
        jax.config.update("jax_platforms", "cpu")
    elif device == "cuda":
        jax.config.update("jax_platforms", "cuda")
    if world_size == 1:
        return
    if not coordinator:
        raise ConfigError(f"a {world_size}-process JAX run needs a coordinator address (host:port)")
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if rank == 0:
        check_coordinator_port(coordinator)
    local_ids = None if device == "cpu" else [local_rank]
    jax.distributed.initialize(coordinator, num_processes=world_size, process_id=rank, local_device_ids=local_ids)
    if device == "cpu" and os.environ.get("GLOO_SOCKET_IFNAME"):
        gloo_on_interface(os.environ["GLOO_SOCKET_IFNAME"])


def check_coordinator_port(coordinator: str) -> None:
    """Rank 0 serves jax.distributed's coordinator on every interface; where its port is taken, JAX's gRPC server
    fails to add it and the process dies with SIGSEGV (jax 0.10.2) rather than raising: say so in one line."""
    port = int(coordinator.rsplit(":", 1)[1])
    for family, address in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((address, port))
            return
        except OSError as error:
            if family == socket.AF_INET6 and error.errno == errno.EAFNOSUPPORT:
                continue  # no IPv6 on this host: check IPv4's wildcard instead
            raise ConfigError(
                f"jax.distributed's coordinator port {port} (the rendezvous port + 1) is in use on this host: "
                f"pass --master-port with a free port P and P + 1 ({error.strerror})"
            ) from None


def gloo_on_interface(interface: str) -> None:
    """Pin JAX's CPU collectives to the launcher's --ifname, as torch's gloo reads GLOO_SOCKET_IFNAME.

    JAX's gloo otherwise finds its own address from the host name, which is loopback where hosts share one
    name (network namespaces, some containers); jax.config has no switch for it, so the CPU backend is
    registered again (JAX's extension API) with gloo on the interface, before any backend starts.
    """
    from jax._src import distributed, xla_bridge
    from jax._src.lib import _jax
    from jax.extend.backend import register_backend_factory

    collectives = _jax.make_gloo_tcp_collectives(
        distributed_client=distributed.global_state.client, interface=interface
    )
    register_backend_factory("cpu", lambda: xla_bridge.make_cpu_client(collectives), priority=0, fail_quietly=False)


def build_mesh(axes: Sequence[tuple[str, int]]) -> Mesh:
    """The mesh of the named axes (outermost first, e.g. (("dp", 2), ("tp", 2))) over the first devices of all
    processes, with JAX's automatic (GSPMD) sharding propagation between the shardings given here."""
    names, sizes = zip(*axes)
    needed = math.prod(sizes)
    devices = jax.devices()
    if len(devices) < needed:
        layout = " x ".join(f"{name} {size}" for name, size in axes)
        raise ConfigError(
            f"the layout {layout} needs {needed} devices, JAX sees {len(devices)}: start {needed} processes or "
            "lower the layout"
        )
    return Mesh(np.asarray(devices[:needed]).reshape(sizes), names, axis_types=(AxisType.Auto,) * len(names))


def tp_plan_spec(tp_plan: Mapping[tuple[str, str], P], tp: int) -> SpecOf:
    """A parameter's split from a (module, parameter) -> PartitionSpec plan over "tp", where tp > 1."""
    return lambda names, _shape: tp_plan.get(names[-2:], P()) if tp > 1 else P()


def param_shardings(mesh: Mesh, abstract_params: Any, spec_of: SpecOf) -> Any:
    """A NamedSharding per parameter, its PartitionSpec from `spec_of(path names, shape)`."""

    def sharding(path: tuple, leaf: Any) -> NamedSharding:
        names = tuple(str(getattr(key, "key", key)) for key in path)
        return NamedSharding(mesh, spec_of(names, tuple(leaf.shape)))

    return jax.tree_util.tree_map_with_path(sharding, abstract_params)


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P())


def first_value(array: jax.Array) -> float:
    """A replicated scalar as a float on any process (its local copy; no collective)."""
    return float(np.asarray(array.addressable_data(0)))
