"""The devices a log says it ran on, where the framework prints them: TensorFlow's device discovery lines
(`pciBusID: 0000:1a:00.0 name: Tesla V100-SXM2-16GB computeCapability: 7.0`), so a record read from another
framework's log names its accelerator as the log states it, not as the user declares it."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

from dlperf.errors import DataError
from dlperf.framework_logs.textlines import LogLines
from dlperf.metrics.peaks import device_key
from dlperf.wording import count

TF_DEVICE = re.compile(r"pciBusID: (?P<bus>\S+) name: (?P<name>.+?) computeCapability: \d+\.\d+")
SCANNED = 5000  # the discovery lines come at start-up: a long log is not read twice to its end for them


def logged_accelerator(path: Path, world_size: int, per_node: int) -> dict[str, Any] | None:
    """The record field `accelerator` from the log's device lines, or None where it prints none (or several
    kinds, which a one-device-type record cannot say)."""
    found: dict[str, str] = {}
    try:
        for line in itertools.islice(LogLines(path), SCANNED):
            if m := TF_DEVICE.search(line):
                found[m["bus"]] = m["name"].strip()
    except DataError:
        return None  # the reading itself reports what is wrong with the file
    names = set(found.values())
    if len(names) != 1:
        return None
    (name,) = names
    return {
        "kind": "cuda",
        "name": name,
        "model": device_key(name) or None,
        "memory_gib": None,
        "count": world_size,
        "per_node": per_node,
        "interconnect": None,
        "source": f"the log's TensorFlow device lines ({count(len(found), 'device')} listed on its host)",
    }
