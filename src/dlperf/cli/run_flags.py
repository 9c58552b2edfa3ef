"""The run options shared by `dlperf run` and `dlperf sweep`: the shared keys, each model's own, and the launch."""

from __future__ import annotations

import argparse
from dataclasses import Field, dataclass, fields
from typing import Any, get_type_hints

from dlperf.cli.declared_flags import add_declared, declared_options, field_help, flag_kind
from dlperf.cli.parser import Declared
from dlperf.engines import engine_names
from dlperf.launch import launcher_names
from dlperf.launch.hosts import parse_hosts, read_hostfile
from dlperf.launch.options import WHERE, LaunchOptions
from dlperf.orchestration.kinds import TASK
from dlperf.spec import COMMON_KEYS, RunSpec, flag, setting
from dlperf.workloads import OLD_EXTERNAL, Workload, all_workloads, model_names


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
        choices=[*engine_names(), OLD_EXTERNAL],  # `external`: deprecated, --command alone says it
        help="framework that runs dlperf's loop (default torch; none with --command: `external` is deprecated)",
    )
    hints = get_type_hints(RunSpec)
    for f in fields(RunSpec):
        if "help" in f.metadata:
            title = f.metadata["group"] or RUN_GROUP
            if title not in groups:
                groups[title] = _group(parser, title)
            groups[title](flag(f.name), help=field_help(f).replace("%", "%%"), **flag_kind(f, hints[f.name]))
    add_workload_options(parser)


def add_workload_options(parser: argparse.ArgumentParser, only: dict[str, frozenset[str]] | None = None) -> None:
    """Each training workload's settings as flags, made from its config dataclass: the type and choices from the
    annotation (`Literal[...]`), help and bound from the field's `setting` metadata. A key that several models
    share is one flag, its help naming each model's meaning. `only`: those workloads, less the fields named."""
    groups: dict[str, Any] = {}
    for name, owned in _training_fields(only).items():
        workload = owned[0][0]
        title = (workload.title or f"--model {workload.name}") if len(owned) == 1 else "shared by several models"
        if title not in groups:
            groups[title] = _group(parser, title)
        groups[title](flag(name), help=_shared_help(owned).replace("%", "%%"), **_shared_kind(owned))


def _shared_help(owned: list[tuple[Workload, Field, Any]]) -> str:
    """A key's help: its one model's, or each model's meaning by name."""
    helps = [field_help(f) for _, f, _ in owned]
    return helps[0] if len(owned) == 1 else "; ".join(f"{w.name}: {h}" for (w, _, _), h in zip(owned, helps))


def _shared_kind(owned: list[tuple[Workload, Field, Any]]) -> dict[str, Any]:
    """A key's argparse kind; one that several models share takes any model's choice (the model's checks refuse)."""
    _, f, hint = owned[0]
    kind = flag_kind(f, hint)
    if "choices" in kind:
        kind["choices"] = tuple(dict.fromkeys(c for _, g, h in owned for c in flag_kind(g, h).get("choices", ())))
        kind["type"] = Declared(str, choices=kind["choices"])
    return kind


def _training_fields(only: dict[str, frozenset[str]] | None) -> dict[str, list[tuple[Workload, Field, Any]]]:
    """Each config key of the training workloads (or those `only` names, less its fields) -> the workloads that have
    it, with its field and annotation (a measurement of its own, like commbench, has its own command and flags)."""
    owners: dict[str, list[tuple[Workload, Field, Any]]] = {}
    for workload in all_workloads():
        if not TASK.owns(workload) and (only is None or workload.name in only):
            hints = get_type_hints(workload.config_type)
            for f in fields(workload.config_type):
                if f.name not in (only or {}).get(workload.name, ()):
                    owners.setdefault(f.name, []).append((workload, f, hints[f.name]))
    return owners


def add_launch_options(parser: argparse.ArgumentParser) -> list[str]:
    """Where the run happens: this machine, hosts over ssh, or Slurm; none of it changes what is measured. The
    flags are made from LaunchOptions' declarations (`--launcher`'s choices from the launcher registry), but
    `--hosts`/`--hostfile`, two ways to give one field. Returns the names (argparse dests) of the flags that say
    where, which a sweep's folder keeps for --resume (not --dry-run: how this call was asked)."""
    group = parser.add_argument_group(WHERE)
    hosts = group.add_mutually_exclusive_group()
    where = [
        hosts.add_argument(name, help=text).dest
        for name, text in (
            ("--hosts", "comma-separated hosts, one node agent each over ssh; --nodes defaults to their count"),
            ("--hostfile", "file with one host per line, optionally `slots=N`; like --hosts"),
        )
    ]
    dests = add_declared(parser, LaunchOptions, {WHERE: group}, {"launcher": launcher_names()})
    return where + [dest for dest in dests if dest != "dry_run"]


def launch_options(args: argparse.Namespace) -> LaunchOptions:
    """The launch flags given, as LaunchOptions (a flag not given: the field's own default)."""
    hosts = parse_hosts(args.hosts) if args.hosts else read_hostfile(args.hostfile) if args.hostfile else []
    return declared_options(LaunchOptions, args, hosts=tuple(hosts))


RUN_KEYS = tuple(
    dict.fromkeys(["model", *COMMON_KEYS, *(f.name for w in all_workloads() for f in fields(w.config_type))])
)


def explicit_run_values(args: argparse.Namespace) -> dict[str, Any]:
    """The run options the user actually gave on the command line."""
    return {key: getattr(args, key) for key in RUN_KEYS if hasattr(args, key)}


@dataclass(frozen=True)
class OutputOptions:
    """Where a single run's record goes: the results folder, the repeat number in its name, and --overwrite."""

    out: str = setting("results", "results folder (default ./results)", bound="non-empty", group="output")
    repeat: int = setting(1, "repeat number in the file names (default 1)", bound="positive", group="output")
    overwrite: bool = setting(False, "replace an existing run or record of the same name", group="output")


def add_output_options(parser: argparse.ArgumentParser) -> None:
    add_declared(parser, OutputOptions)
