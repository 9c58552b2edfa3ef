"""Published training figures (`published.json`, shipped and versioned): each as its source writes it, with the
source, accelerator, precision, batch and framework, and how the per-device figure follows from the published one.

A report row is set beside the best published figure of the same model on the same accelerator (dlperf's device-table
name, `accelerator.model` of its records) at the same precision (fp32 whose matmuls ran on TF32 tensor cores is
`tf32`); a row without an exact match gets no figure, never a near one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from dlperf.records.schema import RunRecord

SCHEMA = "dlperf.references/1"
THROUGHPUT = "samples/s per device"
FIELDS = ("model", "accelerator", "precision", "batch_per_device", "devices", "framework", "metric", "value", "source")


@dataclass(frozen=True)
class Published:
    """The best published figure for a row, and the row's share of it."""

    figure: dict[str, Any]
    percent: float

    def as_summary(self) -> dict[str, Any]:
        """summary.json's `published` of a case."""
        f = self.figure
        return {
            "percent_of_best": round(self.percent, 1),
            "best": f["value"],
            "metric": f["metric"],
            "accelerator": f["accelerator"],
            "precision": f["precision"],
            "framework": f["framework"],
            "source": f["source"],
            "url": f.get("url"),
        }


def load(text: str | None = None) -> dict[str, Any]:
    """The shipped table (or `text`), checked: every figure names its source and the facts a match needs."""
    data = json.loads(text if text is not None else resources.files(__name__).joinpath("published.json").read_text())
    if data.get("schema") != SCHEMA:
        raise ValueError(f"published figures: schema {data.get('schema')!r}, expected {SCHEMA}")
    for i, figure in enumerate(data["figures"]):
        missing = [key for key in FIELDS if figure.get(key) in (None, "")]
        if missing:
            raise ValueError(f"published figure {i} lacks {', '.join(missing)}")
    return data


def of_family(name: str, query: str) -> bool:
    """Whether the table's model `name` is `query` or of its family: `llama` and `llama3` match `llama3-8b`,
    `resnet` matches `resnet50`; `llama3-8` does not match `llama3-8b` (a name is cut only before a digit or a
    separator)."""
    name, query = name.lower(), query.lower()
    if name == query:
        return True
    rest = name[len(query) :] if name.startswith(query) else ""
    return bool(rest) and (rest[0] in "-_." or (rest[0].isdigit() and not query[-1:].isdigit()))


def figures(model: str | None = None) -> list[dict[str, Any]]:
    """The table's figures, of one model or family where given (`of_family`), best first within each model,
    accelerator and precision."""
    rows = [f for f in load()["figures"] if model is None or of_family(f["model"], model)]
    return sorted(rows, key=lambda f: (f["model"], f["accelerator"], f["precision"], f["metric"], -f["value"]))


def comparable_precision(record: RunRecord) -> str | None:
    """The precision a record's matmuls ran at, in the table's names: fp32 on TF32 tensor cores is `tf32`."""
    if record.precision == "fp32" and (record.tf32 or {}).get("matmul"):
        return "tf32"
    return record.precision


def best_match(
    model: str, records: Sequence[RunRecord], per_device: float | None, table: list[dict[str, Any]] | None = None
) -> Published | None:
    """The best published throughput per device of `model` on the records' accelerator at their precision (every
    record must agree on both), and `per_device` as a percentage of it; None without an exact match."""
    setting = _one_setting(records)
    if per_device is None or setting is None:
        return None
    wanted = (model, *setting, THROUGHPUT)
    same = [f for f in (figures() if table is None else table) if _key(f) == wanted]
    if not same:
        return None
    best = max(same, key=lambda f: f["value"])
    return Published(best, 100.0 * per_device / best["value"])


def _one_setting(records: Sequence[RunRecord]) -> tuple[str, str] | None:
    """(accelerator model, comparable precision) that every record shares; None where they differ or one is unknown."""
    accelerators = {r.accelerator.model if r.accelerator else None for r in records}
    precisions = {comparable_precision(r) for r in records}
    if len(accelerators) != 1 or len(precisions) != 1 or None in accelerators | precisions:
        return None
    return accelerators.pop(), precisions.pop()


def _key(figure: dict[str, Any]) -> tuple[str, str, str, str]:
    return figure["model"], figure["accelerator"], figure["precision"], figure["metric"]
