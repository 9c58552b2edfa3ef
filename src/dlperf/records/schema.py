"""The JSON record of one run: the contract that reports and users' scripts read.

`dlperf.run/2` (this version) keeps only the workload's own keys in `config` and adds `batch_size_per_device`,
`micro_batch_size`, `engine` and `table`; `dlperf.run/1` records (one flat config for every model) stay
readable: `upgrade` fills the new fields from the old ones.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

SCHEMA = "dlperf.run/2"
READABLE = ("dlperf.run/1", SCHEMA)


def upgrade(record: dict[str, Any]) -> dict[str, Any]:
    """A record of any readable version in today's shape (in place): derived fields from the old ones."""
    if record.get("schema") == "dlperf.run/1":
        parallel = record.get("parallel") or {}
        if record.get("model") == "gpt" and parallel.get("dp"):
            per_device = int(parallel["global_batch_size"]) // int(parallel["dp"])
            record["batch_size"] = per_device
            record.setdefault("micro_batch_size", parallel.get("micro_batch_size"))
        record.setdefault("batch_size_per_device", record.get("batch_size"))
        record.setdefault("engine", "torch")
        record.setdefault("table", "layouts" if record.get("model") == "gpt" else "scaling")
    return record


def read_record(path: str | Path, schemas: tuple[str, ...] = READABLE) -> dict[str, Any] | None:
    """A record of one of `schemas` (default: run records), or None when the file is missing, partial or not one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("schema") not in schemas or "status" not in data:
        return None
    return upgrade(data)


MAXBATCH_SCHEMA = "dlperf.maxbatch/1"  # `dlperf maxbatch`'s record; the report's bsz=max column reads it
_BATCH_PREFIX = re.compile(r"^b\d+_")


def batch_free_group(group: str) -> str:
    """A table group without its batch (`b128_fp32` -> `fp32`): what a max-batch search shares with every run of
    its variant, whatever batch they ran at."""
    return _BATCH_PREFIX.sub("", group)
