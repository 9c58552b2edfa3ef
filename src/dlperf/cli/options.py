"""Argument types and the run options shared by `dlperf run` and `dlperf sweep`."""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

from dlperf.config import CONFIG_KEYS, PRECISIONS, RunConfig
from dlperf.workloads import model_names


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line that points at --help."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        raise SystemExit(2)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0 or str(value) != text.strip().lstrip("+"):
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    if text.strip().isdigit():
        return int(text)
    raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}")


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def _group(parser: argparse.ArgumentParser, title: str):
    """add_argument for a titled group whose unset flags stay out of the namespace."""
    group = parser.add_argument_group(title)
    return lambda *names, **kwargs: group.add_argument(*names, default=argparse.SUPPRESS, **kwargs)


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """Every RunConfig field as a flag; unset flags stay out of the namespace so YAML/case values survive."""
    d = RunConfig()
    add = _group(parser, "what to run")
    add("--model", help=f"workload to benchmark: {', '.join(model_names())} (default {d.model})")
    add("--nodes", type=positive_int, help="number of nodes (hosts); default 1")
    add("--devices-per-node", type=positive_int, help="processes/devices per node, each a DDP rank; default 1")
    add("--batch-size", type=positive_int, help=f"batch size per device (default {d.batch_size})")
    add(
        "--precision",
        help=f"one of {', '.join(PRECISIONS)} (default {d.precision}); amp-fp16 uses a dynamic loss scale",
    )
    add(
        "--compile",
        action=argparse.BooleanOptionalAction,
        help="torch.compile the model (the reports' XLA on)",
    )
    add("--channels-last", action=argparse.BooleanOptionalAction, help="channels-last memory format (images)")
    add("--device", help="auto (CUDA when present, else CPU), cuda or cpu; default auto")
    add("--seed", type=non_negative_int, help=f"random seed (default {d.seed})")
    add = _group(parser, "data and model shape")
    add(
        "--data",
        help="`synthetic` (one fixed random batch on the device) or a folder of class sub-folders of JPEGs",
    )
    add(
        "--workers",
        type=non_negative_int,
        help=f"DataLoader worker processes for --data PATH (default {d.workers})",
    )
    add("--image-size", type=positive_int, help=f"image side in pixels (default {d.image_size})")
    add("--num-classes", type=positive_int, help=f"classifier outputs (default {d.num_classes})")
    add = _group(parser, "optimizer")
    add("--lr", type=positive_float, help="learning rate (default 0.1 x global batch / 256)")
    add("--momentum", type=float, help=f"SGD momentum (default {d.momentum})")
    add("--weight-decay", type=float, help=f"weight decay (default {d.weight_decay})")
    add = _group(parser, "timing")
    add("--warmup-iters", type=positive_int, help=f"untimed iterations first (default {d.warmup_iters})")
    add("--iters", type=positive_int, help=f"timed iterations (default {d.iters})")
    add(
        "--print-every",
        type=positive_int,
        help=f"iterations per timing window and log line (default {d.print_every})",
    )
    add(
        "--timeout",
        type=positive_float,
        help=f"seconds before a run is stopped and recorded as failed (default {d.timeout:g})",
    )


def explicit_config_values(args: argparse.Namespace) -> dict[str, Any]:
    """The run options the user actually gave on the command line."""
    return {key: getattr(args, key) for key in CONFIG_KEYS if hasattr(args, key)}
