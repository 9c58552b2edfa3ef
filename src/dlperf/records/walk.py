"""Files under a folder the user named, found without recursion: a folder chain 1,400 deep made `rglob` and
`os.walk` (recursive in Python 3.11) die with RecursionError. An explicit stack and a depth bound instead; what
is too deep or cannot be listed is named, never silently dropped."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

MAX_DEPTH = 64  # folders below the root; results and log layouts are a handful deep
OnProblem = Callable[[Path, str], None]


def find_named(root: str | Path, suffix: str, on_problem: OnProblem, max_depth: int = MAX_DEPTH) -> list[Path]:
    """Every entry under `root` whose name ends in `suffix` (of any kind: callers check what it is), sorted.
    Symlinked folders are not entered (no loops, no escapes); a folder deeper than `max_depth` or one that cannot
    be listed goes to `on_problem` with the reason."""
    found: list[Path] = []
    stack: list[tuple[Path, int]] = [(Path(root), 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as entries:
                listed = list(entries)
        except OSError as error:
            on_problem(folder, f"cannot list it: {error.strerror or error}")
            continue
        for entry in listed:
            path = folder / entry.name
            if entry.name.endswith(suffix):
                found.append(path)
            try:
                is_folder = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_folder = False
            if not is_folder:
                continue
            if depth + 1 > max_depth:
                on_problem(path, f"lies more than {max_depth} folders below {root}: not searched")
            else:
                stack.append((path, depth + 1))
    return sorted(found)
