"""`dlperf env`: the environment every record carries."""

from __future__ import annotations

import argparse
import json

from rich.console import Console

from dlperf.engines import engine_names, engine_versions
from dlperf.metrics.environment import collect_environment


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "env",
        parents=[common],
        help="print the environment (devices, topology, driver, library versions, commit)",
        description="Print the environment that every run record carries.",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a readable list")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    env = {**collect_environment(), **engine_versions(engine_names())}
    if args.json:
        print(json.dumps(env, indent=2, default=str))
        return 0
    console = Console(highlight=False)
    topology = env.pop("topology")
    gpus = env.pop("gpus")
    for key, value in env.items():
        console.print(f"[bold]{key}[/bold]: {value}")
    for gpu in gpus:
        console.print(
            f"[bold]gpu {gpu['index']}[/bold]: {gpu['name']}, {gpu['memory_mib']} MiB, driver {gpu['driver']}"
        )
    if topology:
        console.print("[bold]nvidia-smi topo -m[/bold]:")
        console.print(topology, markup=False)
    return 0
