"""A sweep's effective options, kept in its results folder so `dlperf sweep --resume --out OUT` finishes the same
sweep: the same file, repeats rule and launch flags, without the user retyping (or forgetting) any of them.

`OUT/sweep_options.json` holds the options as given on the command line (flag name -> value) and the path of the
sweep file; `OUT/sweep.yaml` a copy of the file, so a resumed sweep plans from what the first start planned from.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from dlperf.errors import ConfigError
from dlperf.orchestration.sweep_plan import SweepOptions, default_out
from dlperf.records.store import write_json_atomic, write_text_atomic

OPTIONS_FILE = "sweep_options.json"
CONFIG_COPY = "sweep.yaml"


def save_sweep_options(out: str | Path, config: str, config_text: str, options: dict[str, Any]) -> None:
    """Store the sweep file's path and text and the options that shape the sweep (flag -> value)."""
    folder = Path(out)
    write_text_atomic(folder / CONFIG_COPY, config_text)
    write_json_atomic(folder / OPTIONS_FILE, {"config": config, "options": options})


def load_sweep_options(out: str | Path) -> dict[str, Any] | None:
    """What an earlier start stored, or None (a folder from before options were stored, or no sweep at all)."""
    path = Path(out) / OPTIONS_FILE
    if not path.is_file():
        return None
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ConfigError(f"{path} cannot be read ({error}): delete it and give every option again") from None
    if not isinstance(stored, dict) or not isinstance(stored.get("options"), dict):
        raise ConfigError(f"{path} is not a sweep's stored options: delete it and give every option again")
    return stored


def stored_config(out: str | Path) -> Path:
    """The copy of the sweep file a resumed sweep plans from."""
    return Path(out) / CONFIG_COPY


def merge_options(stored: Mapping[str, Any], given: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The stored options, with every flag given now that leaves them unchanged; a flag given now with another
    value would change the sweep half-way, so it is refused by name."""
    merged = dict(stored)
    for flag, value in given.items():
        if value == defaults.get(flag) or value == stored.get(flag, defaults.get(flag)):
            continue
        before = stored.get(flag, defaults.get(flag))
        was = f"differs from this sweep's stored {before}" if before is not None else "was not given when this "
        was += f" ({OPTIONS_FILE})" if before is not None else "sweep started (its sweep file decided)"
        raise ConfigError(
            f"--{flag.replace('_', '-')} {value} {was}: --resume finishes the sweep as it started; drop the flag, "
            "or start again with --overwrite"
        )
    return merged


@dataclass(frozen=True)
class ResolvedSweep:
    """A sweep's options once --resume filled them in: the file and folder decided, and the flags that shape the
    sweep (flag -> value: the repeat rule and where it runs) as the folder keeps them for the next --resume."""

    options: SweepOptions
    flags: dict[str, Any]


def resolve_sweep(options: SweepOptions, given: Mapping[str, Any], defaults: Mapping[str, Any]) -> ResolvedSweep:
    """The sweep `options` and the shaping flags `given` (with their `defaults`) ask for: with --resume, the sweep
    file and flags the folder stored at the sweep's start, a flag given now with another value refused; without
    --out, the folder is results/<the sweep file's name>."""
    if options.out is None and options.resume:
        raise ConfigError("--resume needs --out: the folder of the sweep to finish (e.g. --out results/quick)")
    flags = dict(given)
    if options.resume and (stored := load_sweep_options(str(options.out))) is not None:
        options, flags = _resumed(options, stored, given, defaults)
    if options.config is None:
        hint = " (this folder stored no sweep options to resume)" if options.resume else ""
        raise ConfigError(f"give the sweep file, e.g. `dlperf sweep configs/quick.yaml`{hint}")
    return ResolvedSweep(replace(options, out=options.out or default_out(options.config)), flags)


def _resumed(
    options: SweepOptions, stored: dict[str, Any], given: Mapping[str, Any], defaults: Mapping[str, Any]
) -> tuple[SweepOptions, dict[str, Any]]:
    """The options and flags an earlier start `stored`, each flag given now checked against them; the sweep file
    is the folder's copy of it unless one is given."""
    merged = merge_options(stored["options"], given, defaults)
    flags = {key: merged.get(key, value) for key, value in given.items()}
    options = replace(options, **{f.name: flags[f.name] for f in fields(SweepOptions) if f.name in flags})
    if options.config is None:
        copy = stored_config(str(options.out))
        options = replace(options, config=str(copy) if copy.is_file() else stored.get("config"))
    return options, flags
