"""The same case on the PyTorch and JAX engines in one process: throughput per engine and their ratio.

    # CPU smoke run at tiny sizes
    python benchmarks/engines.py --device cpu --set model=resnet50 --set batch_size=4 --set image_size=32 \
        --set num_classes=10 --iters 4 --rounds 3
    python benchmarks/engines.py --device cpu --set model=gpt --set num_layers=2 --set hidden_size=64 \
        --set num_heads=4 --set seq_length=32 --set vocab_size=512 --set micro_batch_size=4 --iters 8 --rounds 3
    # one GPU: ResNet-50 in bf16, and the 1.3B GPT of the report (MFU from the datasheet peak)
    python benchmarks/engines.py --device cuda --precision amp-bf16 --set model=resnet50 --set batch_size=256
    python benchmarks/engines.py --device cuda --precision amp-bf16 --set model=gpt --set case=MP_1x1x1_8_768x12 \
        --set num_layers=24 --set hidden_size=2048 --set num_heads=16 --set micro_batch_size=4

Each engine runs in its own process (two frameworks' thread pools in one process slow each other down), builds
(and compiles) its step once; then rounds alternate between the engines (the order reversed every other round),
each round the same timed loop as `dlperf run` (`--warmup` untimed steps, then `--iters` timed ones, synced at
the window's end only). The table gives each engine's median over rounds and the ratio JAX / PyTorch; for the
GPT also TFLOP/s per device and MFU, from the definitions the records use.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
from multiprocessing.connection import Connection
from typing import Any

import yaml

from dlperf.engines import engine_host, get_engine
from dlperf.engines.base import RankEnv
from dlperf.harness.loop import timed_loop
from dlperf.workloads import check_spec, get_workload, spec_from_mapping

ENGINES = ("torch", "jax")


def serve(conn: Connection, name: str, values: dict[str, Any], warmup: int, iters: int) -> None:
    """One engine's process: set up, build once, then one timed loop per request until the parent sends None."""
    spec = spec_from_mapping({**values, "engine": name, "print_every": iters})
    plan = check_spec(spec)
    engine = get_engine(name)
    engine_host(name).preflight(spec, local=True)
    engine.setup(spec, RankEnv(0, 1, 0, 1))
    step = get_workload(spec.model).builder(name)(spec, plan, engine)
    conn.send((plan.group, engine.device_name(), step.compile_s, engine.device_type))
    while conn.recv() is not None:
        measured = timed_loop(
            step, engine, warmup_iters=warmup, iters=iters, print_every=iters, global_batch=plan.global_batch
        )
        conn.send(measured.throughput)
    engine.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a run key (YAML value)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    values: dict[str, Any] = {key: yaml.safe_load(value) for key, value in (i.split("=", 1) for i in args.set)}
    values.update(device=args.device, precision=args.precision, warmup_iters=args.warmup, iters=args.iters)
    context = multiprocessing.get_context("spawn")
    conns, procs, facts = {}, {}, {}
    for name in ENGINES:
        conns[name], child = context.Pipe()
        procs[name] = context.Process(target=serve, args=(child, name, values, args.warmup, args.iters))
        procs[name].start()
    for name in ENGINES:
        facts[name] = conns[name].recv()  # (group, device, compile_s)
    rates: dict[str, list[float]] = {name: [] for name in ENGINES}
    for round_ in range(args.rounds):
        for name in ENGINES if round_ % 2 == 0 else ENGINES[::-1]:
            conns[name].send(True)
            rates[name].append(conns[name].recv())
            print(f"round {round_ + 1} {name}: {rates[name][-1]:.5g} samples/s", flush=True)
    for name in ENGINES:
        conns[name].send(None)
        procs[name].join()
    group, device, _, _ = facts["torch"]
    print(
        f"\n{values.get('model', 'resnet50')} {group} on {device}, median of {args.rounds} rounds of {args.iters} steps"
    )
    print(f"{'engine':8} {'samples/s':>12} {'TFLOP/s/dev':>12} {'MFU':>8}  compile_s")
    for name in ENGINES:
        spec = spec_from_mapping({**values, "engine": name})
        median = statistics.median(rates[name])
        derived = get_workload(spec.model).derived_metrics(
            spec,
            check_spec(spec),
            {"throughput": median, "ranks": [{"device": facts[name][1]}], "device_type": facts[name][3]},
        )
        tflops, mfu, compile_s = derived.get("tflops_per_device"), derived.get("mfu"), facts[name][2]
        print(
            f"{name:8} {median:12.5g} {'' if tflops is None else f'{tflops:.4g}':>12} "
            f"{'' if mfu is None else f'{mfu:.1%}':>8}  {'' if compile_s is None else f'{compile_s:.1f}'}"
        )
    ratio = statistics.median(rates["jax"]) / statistics.median(rates["torch"])
    print(f"jax / torch: {ratio:.3f}")


if __name__ == "__main__":
    main()
