"""`dlperf peak`: measure the matmul TFLOP/s this device sustains per dtype, store it, set it beside the datasheet."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

from dlperf.cli.display import print_table
from dlperf.engines.torch.peak import DEFAULT_PEAKS_FILE, DTYPES
from dlperf.errors import ConfigError, clip
from dlperf.metrics.peaks import lookup_peak
from dlperf.orchestration import measure_and_store
from dlperf.spec import setting

DESCRIPTION = (
    "A sweep of GEMM shapes per dtype (best sustained rate), stored in --out so that runs on this "
    "device report MFU against the measured peak beside the datasheet one."
)


@dataclass(frozen=True)
class PeakOptions:
    device: str = setting("auto", "auto (default: cuda if present), cuda or cpu", choices=("auto", "cuda", "cpu"))
    dtypes: str = setting(",".join(DTYPES), f"comma-separated (default {','.join(DTYPES)})")
    shapes: str | None = setting(None, "comma-separated MxNxK GEMM shapes (default: a sweep for the device)")
    iters: int = setting(20, "GEMMs per timed run (default 20)", bound="positive")
    out: str = setting(str(DEFAULT_PEAKS_FILE), f"peaks file (default {DEFAULT_PEAKS_FILE})", bound="non-empty")
    json: bool = setting(False, "print the results as JSON")


OPTIONS = (PeakOptions,)


MAX_SIDE = 65536  # a 65536-square fp32 matrix is 16 GiB already


def _shapes(text: str | None) -> list[tuple[int, int, int]] | None:
    if text is None:
        return None
    try:
        shapes = [tuple(int(x) for x in item.lower().split("x")) for item in text.split(",")]
    except ValueError:
        shapes = []
    if not shapes or any(len(s) != 3 or min(s) < 1 or max(s) > MAX_SIDE for s in shapes):
        raise ConfigError(
            f"--shapes must be MxNxK[,MxNxK...] with sizes from 1 to {MAX_SIDE}, e.g. 8192x8192x8192, "
            f"got {clip(repr(text), 200)}"
        )
    return shapes  # type: ignore[return-value]


def _dtypes(text: str) -> list[str]:
    dtypes = [d.strip() for d in text.split(",") if d.strip()]
    if not dtypes or set(dtypes) - set(DTYPES):
        raise ConfigError(f"--dtypes takes {', '.join(DTYPES)}; got {text!r}")
    return dtypes


def _device(choice: str) -> str:
    """`auto` picks CUDA when torch sees it; an explicit `cuda` without one is refused before any work."""
    import torch

    if choice == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if choice == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda, but torch sees no CUDA device: use --device cpu")
    return choice


def _peak_row(device_name: str, dtype: str, result: dict[str, Any]) -> tuple[str, ...]:
    """One table row: the measured rate beside the datasheet's, blank where either is unknown."""
    sheet = lookup_peak(device_name, dtype)
    measured = result["tflops"]
    return (
        dtype,
        "" if measured is None else f"{measured:.2f}",
        "" if result["best_shape"] is None else "x".join(map(str, result["best_shape"])),
        "" if sheet.tflops is None else f"{sheet.tflops:g}",
        f"{measured / sheet.tflops:.1%}" if measured is not None and sheet.tflops else "",
        result["reason"] or sheet.reason or "",
    )


def run(args: argparse.Namespace) -> int:
    dtypes = _dtypes(args.dtypes)
    results = measure_and_store(_device(args.device), dtypes, _shapes(args.shapes), args.iters, args.out)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    name = next(iter(results.values()))["device_name"]
    columns = ("dtype", "measured TFLOP/s", "best shape", "datasheet TFLOP/s", "measured/datasheet", "note")
    rows = [_peak_row(name, dtype, result) for dtype, result in results.items()]
    print_table(f"matmul peak on {name} (stored in {args.out})", columns, rows)
    return 0
