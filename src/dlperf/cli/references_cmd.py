"""`dlperf references`: the published training figures the report sets its rows beside (dlperf.references)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

from dlperf.cli.display import say
from dlperf.errors import ConfigError
from dlperf.references import figures, load
from dlperf.spec import setting
from dlperf.wording import count

DESCRIPTION = (
    "List the shipped table of published training figures (per device), each with its source, "
    "accelerator, precision, batch and framework. A report row of the same model on the same accelerator at the "
    "same precision shows its percentage of the best one."
)


@dataclass(frozen=True)
class ReferencesOptions:
    model: str | None = setting(None, "only this model's figures (e.g. resnet50)")
    json: bool = setting(False, "print the figures as JSON")


OPTIONS = (ReferencesOptions,)


def run(args: argparse.Namespace) -> int:
    rows = figures(args.model)
    if not rows:
        models = ", ".join(sorted({f["model"] for f in figures()}))
        raise ConfigError(f"no published figures for model {args.model!r}: the table has {models}")
    if args.json:
        print(json.dumps({"version": load()["version"], "figures": rows}, indent=2))
        return 0
    say(f"published training figures (table version {load()['version']}), best first:")
    for f in rows:
        say(
            f"{f['model']:<11} {f['accelerator']:<16} {f['precision']:<9} {f['value']:>9g} {f['metric']}  "
            f"batch {f['batch_per_device']}, {count(f['devices'], 'device')}, {f['framework']}"
        )
        say(f"{'':<11} source: {f['source']}; {f.get('url') or ''}")
    return 0
