"""Which framework an external command runs, and its version, asked of the command's own interpreter.

A record's `framework` is `name version` (`tensorflow 2.20.0`). dlperf cannot import another framework's script,
so on the node that runs it, it finds the command's Python: the first word of its argument list when that is a
Python interpreter (`python`, `python3.11`, a venv's `.../bin/python`, `{python}`), else the interpreter named by
that program's `#!` line (`torchrun`, a console script); `env A=1 python ...` is looked through. That interpreter
prints the distribution's version from its own package metadata (`importlib.metadata.version`), so a command run
in another virtual environment reports that environment's version. Where no interpreter is found, or the
distribution is not installed there, the version is None and the record says `unknown`.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess

PYTHON_RE = re.compile(r"^python[0-9.]*$")
# Framework names -> the distribution whose version they mean (what `pip install` names).
DISTRIBUTIONS = {
    "tensorflow": "tensorflow",
    "tf": "tensorflow",
    "paddle": "paddlepaddle",
    "paddlepaddle": "paddlepaddle",
    "mxnet": "mxnet",
    "torch": "torch",
    "pytorch": "torch",
    "jax": "jax",
    "oneflow": "oneflow",
    "mindspore": "mindspore",
}
PROBE_TIMEOUT_S = 60.0
PROBE = "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))"


def distribution(framework: str) -> str:
    return DISTRIBUTIONS.get(framework.lower(), framework)


def _words(argv: list[str]) -> list[str]:
    """The command's own words: `/bin/sh -c LINE` split again, leading `env` and `VAR=value` dropped."""
    if len(argv) >= 3 and argv[0] == "/bin/sh" and argv[1] == "-c":
        try:
            argv = shlex.split(argv[2])
        except ValueError:
            return []
    words = list(argv)
    while words and (os.path.basename(words[0]) == "env" or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0])):
        words.pop(0)
    return words


def interpreter(argv: list[str], cwd: str | None = None) -> str | None:
    """The Python interpreter a command runs under, if it can be told from its first word."""
    words = _words(argv)
    if not words:
        return None
    first = words[0]
    if PYTHON_RE.match(os.path.basename(first)):
        return first
    local = os.path.join(cwd or ".", first)
    path = local if os.sep in first and os.path.isfile(local) else shutil.which(first)
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            line = f.readline(400).decode("utf-8", "replace")
    except OSError:
        return None
    if not line.startswith("#!"):
        return None
    shebang = _words(line[2:].split())
    return shebang[0] if shebang and PYTHON_RE.match(os.path.basename(shebang[0])) else None


def framework_version(framework: str, argv: list[str], cwd: str | None = None) -> str | None:
    """The installed version of `framework` as the command's interpreter sees it; None where it cannot tell."""
    python = interpreter(argv, cwd)
    if python is None:
        return None
    try:
        done = subprocess.run(
            [python, "-c", PROBE, distribution(framework)],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            cwd=cwd,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = done.stdout.strip()
    return text.splitlines()[-1] if done.returncode == 0 and text else None


def framework_label(name: str, version: str | None) -> str:
    """`tensorflow 2.20.0`, or `tensorflow (version unknown)`."""
    return f"{name} {version}" if version else f"{name} (version unknown)"
