"""Hostile input and faults, one test per failure class of issue 20 that is not about records: no recursion on
external data, bounds checked before work starts, validation that cannot be slipped past with a newline."""

from __future__ import annotations

import os
from pathlib import Path

from conftest import run_dlperf


def _chain(root: Path, depth: int) -> Path:
    """A folder chain `depth` deep under `root` (os.makedirs itself recurses), with its deepest folder."""
    root.mkdir()
    folder = str(root)
    for _ in range(depth):
        folder = os.path.join(folder, "d")
        os.mkdir(folder)
    return Path(folder)


def _unchain(deepest: Path, root: Path) -> None:
    """Remove the chain bottom-up: pytest's own clean-up (shutil.rmtree) recurses and would die on it."""
    folder = deepest
    while folder != root.parent:
        for entry in folder.iterdir():
            entry.unlink()
        folder.rmdir()
        folder = folder.parent


def test_deep_folder_chains_are_named_not_a_recursion_error(tmp_path):
    deepest = _chain(tmp_path / "data", 1400)
    try:
        _check_deep(tmp_path, deepest)
    finally:
        _unchain(deepest, tmp_path / "data")


def _check_deep(tmp_path: Path, deepest: Path) -> None:
    (deepest / "rn50_b1_fp32_1.log").write_text("noise\n")
    (deepest / "x.json").write_text("{}")
    for args in (["report", str(tmp_path / "data")], ["extract", str(tmp_path / "data"), "--out", str(tmp_path / "o")]):
        done = run_dlperf(args)
        assert done.returncode == 2 and "Error" not in done.stderr and "internal error" not in done.stderr
        assert "folders below" in done.stderr and done.stderr.count("\n") <= 3, done.stderr[:2000]
