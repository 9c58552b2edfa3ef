"""The run options shared by `dlperf run` and `dlperf sweep`: the shared keys, each model's own, and the launch."""

from __future__ import annotations

import argparse
from dataclasses import Field, dataclass, fields
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from dlperf.cli.args import (
    non_empty,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    warmup_iters,
)
from dlperf.engines import engine_names, engine_versions
from dlperf.errors import ResultsError
from dlperf.launch import Launcher, RunJob
from dlperf.launch.hosts import parse_hosts, read_hostfile
from dlperf.launch.options import LAUNCHERS, LaunchOptions
from dlperf.metrics.environment import collect_environment
from dlperf.orchestration.run import check_run, launcher_for, plan_jobs
from dlperf.records.lock import results_lock
from dlperf.records.store import check_writable
from dlperf.spec import COMMON_KEYS, EXTERNAL, RunSpec, flag
from dlperf.workloads import Workload, WorkloadPlan, all_workloads, model_names


def _group(parser: argparse.ArgumentParser, title: str):
    """add_argument for a titled group whose unset flags stay out of the namespace."""
    group = parser.add_argument_group(title)
    return lambda *names, **kwargs: group.add_argument(*names, default=argparse.SUPPRESS, **kwargs)


RUN_GROUP = "what to run"


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The shared keys and each model's own as flags, both made from their declarations (RunSpec's fields, the
    workloads' config fields); unset flags stay out of the namespace so YAML and case values survive, and a flag
    of another model is refused by name."""
    groups = {RUN_GROUP: _group(parser, RUN_GROUP)}
    groups[RUN_GROUP]("--model", help=f"workload to benchmark: {', '.join(model_names())} (default resnet50)")
    groups[RUN_GROUP](
        "--engine",
        choices=[*engine_names(), EXTERNAL],
        help=f"framework that runs it (default torch; {EXTERNAL} with --command)",
    )
    hints = get_type_hints(RunSpec)
    for f in fields(RunSpec):
        if "help" in f.metadata:
            title = f.metadata["group"] or RUN_GROUP
            if title not in groups:
                groups[title] = _group(parser, title)
            groups[title](flag(f.name), help=_help(f).replace("%", "%%"), **_flag_kind(f, hints[f.name]))
    add_workload_options(parser)


def add_workload_options(parser: argparse.ArgumentParser) -> None:
    """Each training workload's settings as flags, made from its config dataclass: the type and choices from the
    annotation (`Literal[...]`), help and bound from the field's `setting` metadata. A key that several models
    share is one flag, its help naming each model's meaning."""
    groups: dict[str, Any] = {}
    for name, owned in _training_fields().items():
        workload, f, hint = owned[0]
        title = (workload.title or f"--model {workload.name}") if len(owned) == 1 else "shared by several models"
        if title not in groups:
            groups[title] = _group(parser, title)
        helps = [_help(g) for _, g, _ in owned]
        text = helps[0] if len(owned) == 1 else "; ".join(f"{w.name}: {h}" for (w, _, _), h in zip(owned, helps))
        kind = _flag_kind(f, hint)
        if "choices" in kind:  # a key several models share takes any model's choice; the model's checks refuse
            kind["choices"] = list(dict.fromkeys(c for _, g, h in owned for c in _flag_kind(g, h).get("choices", ())))
        groups[title](flag(name), help=text.replace("%", "%%"), **kind)


def _training_fields() -> dict[str, list[tuple[Workload, Field, Any]]]:
    """Each config key of the training workloads -> the workloads that have it, with its field and annotation (a
    measurement of its own, like commbench, has its own command and flags)."""
    owners: dict[str, list[tuple[Workload, Field, Any]]] = {}
    for workload in all_workloads():
        if not workload.tasks:
            hints = get_type_hints(workload.config_type)
            for f in fields(workload.config_type):
                owners.setdefault(f.name, []).append((workload, f, hints[f.name]))
    return owners


def _help(f: Field) -> str:
    text = f.metadata.get("help", "")
    if not (f.default is None or isinstance(f.default, bool) or "(default" in text):
        text = f"{text} (default {f.default:g})" if isinstance(f.default, float) else f"{text} (default {f.default})"
    engines = f.metadata.get("engines")
    return f"{text} [--engine {' or '.join(engines)} only]" if engines else text


def _flag_kind(f: Field, hint: Any) -> dict[str, Any]:
    """argparse's type, action or choices for a field's annotation (None allowed: the flag sets a value)."""
    options = [arg for arg in get_args(hint) if arg is not type(None)] if get_origin(hint) in (Union, UnionType) else []
    base = options[0] if len(options) == 1 else hint
    bound = f.metadata.get("bound")
    if f.metadata.get("choices"):
        return {"choices": f.metadata["choices"]}
    if bound == "positive or auto":
        return {"type": warmup_iters}
    if base is bool:
        return {"action": argparse.BooleanOptionalAction}
    if get_origin(base) is Literal:
        return {"choices": get_args(base)}
    if base is int:
        return {"type": {"positive": positive_int, "non-negative": non_negative_int}.get(bound, int)}
    if base is float:
        return {"type": {"positive": positive_float, "non-negative": non_negative_float}.get(bound, float)}
    return {"type": str}


def add_launch_options(parser: argparse.ArgumentParser) -> list[str]:
    """Where the run happens: this machine, hosts over ssh, or Slurm; none of it changes what is measured.
    Returns the names (argparse dests) of the flags that say where, which a sweep's folder keeps for --resume."""
    group = parser.add_argument_group("where to run (multi-node)")
    hosts = group.add_mutually_exclusive_group()
    where: list[str] = []

    def add(*names: str, within: Any = group, **kwargs: Any) -> None:
        where.append(within.add_argument(*names, **kwargs).dest)

    add("--hosts", within=hosts, help="comma-separated hosts, one node agent each over ssh; --nodes defaults to "
        "their count")  # fmt: skip
    add("--hostfile", within=hosts, help="file with one host per line, optionally `slots=N`; like --hosts")
    add(
        "--launcher",
        choices=LAUNCHERS,
        help="local, ssh (the default with --hosts) or slurm (srun inside an allocation, else sbatch)",
    )
    add("--master-addr", help="rendezvous address (default: the first host)")
    add("--master-port", type=positive_int, help="rendezvous port (default: a free port on the first host)")
    add("--ifname", help="network interface for NCCL and Gloo (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME), e.g. eth0")
    add("--ssh-option", action="append", default=[], metavar="KEY=VALUE", help="extra `ssh -o` option, repeatable")
    add("--connect-timeout", type=positive_int, default=10, help="ssh connect timeout in seconds (default 10)")
    add("--remote-python", help="python on the hosts that has dlperf installed (default: this one's path)")
    add("--partition", help="Slurm partition for sbatch")
    add("--account", help="Slurm account for sbatch")
    add("--time", help="Slurm time limit for sbatch, e.g. 01:00:00")
    group.add_argument(
        "--dry-run", action="store_true", help="print the exact commands and scripts without running them"
    )
    return where


def launch_options(args: argparse.Namespace) -> LaunchOptions:
    hosts = parse_hosts(args.hosts) if args.hosts else read_hostfile(args.hostfile) if args.hostfile else []
    extra = {"remote_python": args.remote_python} if args.remote_python else {}
    return LaunchOptions(
        launcher=args.launcher,
        hosts=tuple(hosts),
        master_addr=args.master_addr,
        master_port=args.master_port,
        ifname=args.ifname,
        ssh_options=tuple(args.ssh_option),
        connect_timeout=args.connect_timeout,
        dry_run=args.dry_run,
        partition=args.partition,
        account=args.account,
        time=args.time,
        **extra,
    )


RUN_KEYS = tuple(
    dict.fromkeys(["model", *COMMON_KEYS, *(f.name for w in all_workloads() for f in fields(w.config_type))])
)


def explicit_run_values(args: argparse.Namespace) -> dict[str, Any]:
    """The run options the user actually gave on the command line."""
    return {key: getattr(args, key) for key in RUN_KEYS if hasattr(args, key)}


def add_output_options(parser: argparse.ArgumentParser, what: str) -> None:
    """Where a single run's record goes: the results folder, the repeat number in its name, and --overwrite."""
    output = parser.add_argument_group("output")
    output.add_argument("--out", type=non_empty, default="results", help="results folder (default ./results)")
    output.add_argument("--repeat", type=positive_int, default=1, help="repeat number in the file names (default 1)")
    output.add_argument("--overwrite", action="store_true", help=f"replace an existing {what} with the same name")


@dataclass(frozen=True)
class SingleRun:
    """One checked and planned run of `dlperf run` or `dlperf commbench`, ready to execute."""

    launcher: Launcher
    plan: WorkloadPlan
    job: RunJob
    env: dict[str, Any]


def refuse_early(job: RunJob, overwrite: bool) -> None:
    """What execute() would refuse after the environment is collected (a minute), refused now."""
    existing = [p for p in (job.paths.log, job.paths.record) if p.exists()]
    if existing and not overwrite:
        raise ResultsError(f"{existing[0]} already exists: pass --overwrite to replace it, or another --out")
    with results_lock(job.paths.root):  # another writer holds the folder: refused here, taken again to run
        pass


def prepare_single_run(
    spec: RunSpec, launch: LaunchOptions, repeat: int, out: str, overwrite: bool = False
) -> SingleRun | None:
    """Check and plan one run; with --dry-run print its commands and return None, else check that --out can be
    written (no other writer, no earlier run of the same name unless `overwrite`), then capture the environment:
    a refusal comes before the slow part."""
    launcher = launcher_for(launch)
    plan = check_run(spec, launcher)
    jobs = plan_jobs(spec, plan, [repeat], out)
    if launch.dry_run:
        print(launcher.describe_all(jobs))
        return None
    check_writable(out)
    refuse_early(jobs[0], overwrite)
    return SingleRun(launcher, plan, jobs[0], {**collect_environment(), **engine_versions([spec.engine])})
