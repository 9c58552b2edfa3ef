"""The published log layout: `.../<N>n<G>g/<model>_b<batch>_<precision>[_<variant>...]_<repeat>.log`.

The model and tag taken from a name become folder and file names of the output (records/<model>/<case>/...), so
only plain names are accepted: a model `..` would move a record out of its folder.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from dlperf.errors import DataError
from dlperf.records.walk import find_named

CASE_RE = re.compile(r"^(?P<nodes>\d+)n(?P<devices>\d+)[gd]$")
STEM_RE = re.compile(r"^(?P<model>.+?)_b(?P<batch>\d+)_(?P<tag>[^_].*?)_(?P<repeat>\d+)$")
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # never `.` or `..`, no separators or control characters


@dataclass(frozen=True)
class LogInfo:
    """What a log's path says about its run."""

    path: Path
    model: str
    nodes: int
    devices_per_node: int
    batch_size: int
    tag: str  # precision plus dlperf's variant switches, e.g. `fp32_compile`
    repeat: int

    @property
    def case(self) -> str:
        return f"{self.nodes}n{self.devices_per_node}g"

    @property
    def world_size(self) -> int:
        return self.nodes * self.devices_per_node

    @property
    def precision(self) -> str:
        return self.tag.split("_", 1)[0]

    @property
    def group(self) -> str:
        return f"b{self.batch_size}_{self.tag}"


def parse_log_path(path: Path) -> LogInfo:
    """Read the run's shape from the file's folder and name; DataError says what does not fit the layout."""
    case = CASE_RE.fullmatch(path.parent.name)
    if not case:
        raise DataError(f"its folder {path.parent.name!r} is not a topology like 1n8g or 12n8g")
    stem = STEM_RE.fullmatch(path.stem)
    if not stem:
        raise DataError("its name is not <model>_b<batch>_<precision>_<repeat>.log, e.g. rn50_b128_fp32_1.log")
    for part, value in (("model name", stem["model"]), ("precision and variants", stem["tag"])):
        if not PLAIN_NAME.fullmatch(value):
            raise DataError(
                f"its {part} {value!r} is not a plain name (letters, digits, '.', '_', '-', starting with a letter "
                f"or digit): rename the file"
            )
    nodes, devices, batch = int(case["nodes"]), int(case["devices"]), int(stem["batch"])
    if not (nodes and devices and batch):
        raise DataError("nodes, devices and batch size in its path must be positive")
    return LogInfo(path, stem["model"], nodes, devices, batch, stem["tag"], int(stem["repeat"]))


@dataclass(frozen=True)
class Skipped:
    """A log that gave no record, and why."""

    path: Path
    reason: str


KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in KINDS if test(mode)), "not a regular file")


def _not_a_log(path: Path) -> str | None:
    """Why `path` cannot be read as a log (None: a regular file, or a symlink to one). Nothing is opened: a FIFO
    opened for reading would wait for a writer forever."""
    try:
        mode = os.lstat(path).st_mode
        if stat.S_ISREG(mode):
            return None
        if not stat.S_ISLNK(mode):
            return f"is {_kind(mode)}, not a log file"
        target = os.stat(path).st_mode
    except OSError as error:
        if error.errno == errno.ELOOP:
            return "is a symlink loop"
        if error.errno == errno.ENOENT:
            return "is a broken symlink (its target does not exist)"
        return f"cannot read it: {error.strerror or error}"
    return None if stat.S_ISREG(target) else f"is a symlink to {_kind(target)}, not a log file"


def find_logs(root: Path) -> tuple[list[Path], list[Skipped]]:
    """Every `*.log` under `root` (any depth, so `bz128/` and model folders are fine), sorted, and the `*.log`
    entries that are not regular files, with why. Symlinked folders are not entered (no loops, no escapes);
    a symlink to a regular file is read."""
    logs: list[Path] = []
    skipped: list[Skipped] = []

    for path in find_named(root, ".log", lambda path, reason: skipped.append(Skipped(path, reason))):
        if (reason := _not_a_log(path)) is None:
            logs.append(path)
        else:
            skipped.append(Skipped(path, reason))
    return sorted(logs), sorted(skipped, key=lambda s: s.path)
