"""How to install one of dlperf's extras, said for the way dlperf itself was installed: a checkout's editable
install (the README's set-up) takes `pip install -e '.[NAME]'` in that checkout, where `pip install 'dlperf[NAME]'`
would fetch another dlperf from the package index beside it."""

from __future__ import annotations

from pathlib import Path


def extra(name: str) -> str:
    """The pip command that brings extra `name` into the environment this dlperf runs in."""
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file() and (checkout / "src" / "dlperf").is_dir():
        return f"pip install -e '.[{name}]' in {checkout}"
    return f"pip install 'dlperf[{name}]'"
