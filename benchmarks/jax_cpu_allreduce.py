"""Why JAX's two-process CPU runs scale so poorly (docs/jax.md): one XLA all-reduce of K arrays across 2 processes
(JAX's CPU collectives, gloo), against one array of the same total size.

    python benchmarks/jax_cpu_allreduce.py                  # K = 1 and 36 (the tiny GPT's gradient arrays)
    python benchmarks/jax_cpu_allreduce.py --arrays 1 36 161 --calls 20

The compiled data-parallel step holds one all-reduce of every gradient array (a tuple; count them with
`XLA_FLAGS=--xla_dump_to=DIR`): if gloo runs it operand by operand, it costs K round trips where torch's DDP buckets
pay one or a few. Prints each K's milliseconds per call, measured by process 0, both processes started here.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

TOTAL = 130_000  # fp32 values in all, about the tiny GPT's parameters


def worker(rank: int, arrays: int, calls: int, port: int) -> None:
    import jax
    import numpy as np

    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=rank)
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()), ("dp",))
    rows = NamedSharding(mesh, P("dp"))
    xs = [
        jax.make_array_from_process_local_data(rows, np.ones((1, TOTAL // arrays), np.float32)) for _ in range(arrays)
    ]
    reduce = jax.jit(lambda *a: [x.sum(axis=0) for x in a], out_shardings=[NamedSharding(mesh, P())] * arrays)
    jax.block_until_ready(reduce(*xs))
    started = time.perf_counter()
    for _ in range(calls):
        jax.block_until_ready(reduce(*xs))
    if rank == 0:
        per_call = (time.perf_counter() - started) / calls * 1000
        print(f"{arrays:>4} arrays ({TOTAL * 4 / 1e6:.2f} MB in all): {per_call:7.1f} ms per all-reduce", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arrays", type=int, nargs="+", default=[1, 36])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--worker", type=int, nargs=3, help=argparse.SUPPRESS)  # rank, arrays, port
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker[:2], args.calls, args.worker[2])
        return
    for i, arrays in enumerate(args.arrays):
        port = 29700 + i
        command = [sys.executable, __file__, "--calls", str(args.calls), "--worker"]
        other = subprocess.Popen([*command, "1", str(arrays), str(port)], stdout=subprocess.DEVNULL)
        subprocess.run([*command, "0", str(arrays), str(port)], check=True)
        other.wait()


if __name__ == "__main__":
    main()
