"""The JAX coordinator's port beside the rendezvous port: the local launcher picks a pair that is free, and rank 0
refuses a taken coordinator port in one line (jax.distributed crashed the rank with SIGSEGV on one)."""

from __future__ import annotations

import socket

import pytest

from dlperf.engines.jax.parallel import check_coordinator_port
from dlperf.errors import ConfigError
from dlperf.launch.local import free_port


def test_free_port_leaves_the_next_port_free():
    for _ in range(20):
        port = free_port(count=2)
        for taken in (port, port + 1):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind(("127.0.0.1", taken))


def test_a_taken_coordinator_port_is_one_line():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("0.0.0.0", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(ConfigError, match=f"coordinator port {port} .* in use .* --master-port"):
            check_coordinator_port(f"127.0.0.1:{port}")
    check_coordinator_port(f"127.0.0.1:{free_port()}")  # a free one passes
