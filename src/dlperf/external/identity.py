"""Which framework an external command runs, and its version, asked of the command's own interpreter in the
command's own environment.

A record's `framework` is `name version` (`tensorflow 2.20.0`). dlperf cannot import another framework's script,
so on the node that runs it, it finds the command's Python: the first word of its argument list when that is a
Python interpreter (`python`, `python3.11`, a venv's `.../bin/python`, `{python}`), else the interpreter named by
that program's `#!` line (`torchrun`, a console script). A leading `env` (its `VAR=value`, `-u VAR`, `-i`,
`-C DIR`) and a shell line's `VAR=value` words are read, not skipped: the version is asked with the environment
the script itself gets, so `env PYTHONPATH=/other/site python train.py` reports the framework that PYTHONPATH
loads. The interpreter finds where the framework's module would be imported from and the distribution installed
there (`importlib.metadata`); a module found outside any distribution (a source tree on PYTHONPATH) reports its
`__version__`. Where no interpreter is found, or the framework is not there, the version is None and the record
says `unknown`.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field

PYTHON_RE = re.compile(r"^python[0-9.]*$")
ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
# Framework names -> the distribution whose version they mean (what `pip install` names) and the module it imports.
DISTRIBUTIONS = {
    "tensorflow": ("tensorflow", "tensorflow"),
    "tf": ("tensorflow", "tensorflow"),
    "paddle": ("paddlepaddle", "paddle"),
    "paddlepaddle": ("paddlepaddle", "paddle"),
    "mxnet": ("mxnet", "mxnet"),
    "torch": ("torch", "torch"),
    "pytorch": ("torch", "torch"),
    "jax": ("jax", "jax"),
    "oneflow": ("oneflow", "oneflow"),
    "mindspore": ("mindspore", "mindspore"),
    "transformers": ("transformers", "transformers"),
    "keras": ("keras", "keras"),
    "lightning": ("lightning", "lightning"),
    "pytorch-lightning": ("pytorch-lightning", "pytorch_lightning"),
    "timm": ("timm", "timm"),
}
PROBE_TIMEOUT_S = 60.0
# argv: distribution, module. The distribution's version where the module would be imported from inside it (the
# first on sys.path, as an import finds it), else the imported module's __version__.
PROBE = """
import importlib.metadata as m, importlib.util as u, os, sys
dist, module = sys.argv[1], sys.argv[2]
try:
    spec = u.find_spec(module)
except (ImportError, ValueError):
    spec = None
try:
    found = m.distribution(dist)
except m.PackageNotFoundError:
    found = None
where = None
if spec is not None:
    where = list(spec.submodule_search_locations or [])[:1] or [spec.origin]
    where = where[0] and os.path.realpath(where[0])
root = found is not None and os.path.realpath(str(found.locate_file("")))
if found is not None and (where is None or where.startswith(root + os.sep)):
    print(found.version)
elif spec is not None:
    print(getattr(__import__(module), "__version__", ""))
"""


def distribution(framework: str) -> tuple[str, str]:
    """(distribution, module) a framework name means; an unknown name is both (`-` read as `_` for the module)."""
    return DISTRIBUTIONS.get(framework.lower(), (framework, framework.replace("-", "_")))


@dataclass(frozen=True)
class CommandLine:
    """A `--command` process's program and arguments (its argument list, or the shell line it runs, split), and what
    its leading `env` / `VAR=value` words do to its environment."""

    words: list[str]
    assigned: dict[str, str] = field(default_factory=dict)
    unset: tuple[str, ...] = ()
    cleared: bool = False  # `env -i`: the program starts from an empty environment
    chdir: str | None = None  # `env -C DIR`

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """The environment the program gets when started from `base`."""
        env = {} if self.cleared else dict(base)
        for name in self.unset:
            env.pop(name, None)
        return {**env, **self.assigned}


def command_line(argv: list[str]) -> CommandLine:
    """The command's own words: `/bin/sh -c LINE` split again; leading `env` (with its options) and `VAR=value`
    words read into the environment they give the program."""
    if len(argv) >= 3 and argv[0] == "/bin/sh" and argv[1] == "-c":
        try:
            argv = shlex.split(argv[2])
        except ValueError:
            return CommandLine([])
    words, env = list(argv), _EnvWords()
    while words:
        if m := ASSIGNMENT.match(words[0]):
            env.assigned[m[1]] = m[2]
            words.pop(0)
        elif os.path.basename(words[0]) == "env":
            words.pop(0)
            env.read_options(words)
        else:
            break
    return CommandLine(words, env.assigned, tuple(env.unset), env.cleared, env.chdir)


@dataclass
class _EnvWords:
    """What the leading `env` and `VAR=value` words read so far do to the program's environment."""

    assigned: dict[str, str] = field(default_factory=dict)
    unset: list[str] = field(default_factory=list)
    cleared: bool = False
    chdir: str | None = None

    def read_options(self, words: list[str]) -> None:
        """Consume `env`'s options from `words` (GNU and BSD spellings), noting what they do."""
        while words and words[0].startswith("-") and not ASSIGNMENT.match(words[0]):
            option = words.pop(0)
            if option == "--":
                break
            self._option(option, words)

    def _option(self, option: str, words: list[str]) -> None:
        """One option; its value is the next word, after `=`, or (short spellings) joined to it."""
        if option in ("-", "-i", "--ignore-environment"):
            self.cleared = True
            self.assigned.clear()
            self.unset.clear()
        elif option in ("-u", "--unset", "-C", "--chdir", "-S", "--split-string") and words:
            self._value(option, words.pop(0), words)
        elif option.startswith(("--unset=", "--chdir=", "--split-string=")):
            name, value = option.split("=", 1)
            self._value(name, value, words)
        elif option[:2] in ("-u", "-C", "-S") and len(option) > 2:
            self._value(option[:2], option[2:], words)

    def _value(self, option: str, value: str, words: list[str]) -> None:
        if option in ("-u", "--unset"):
            self.unset.append(value)
        elif option in ("-S", "--split-string"):
            words[:0] = shlex.split(value)
        else:
            self.chdir = value


def interpreter(argv: list[str], cwd: str | None = None, env: Mapping[str, str] | None = None) -> str | None:
    """The Python interpreter a command runs under, if it can be told from its first word (looked up on the
    command's own PATH)."""
    line = command_line(argv)
    if not line.words:
        return None
    first = line.words[0]
    if PYTHON_RE.match(os.path.basename(first)):
        return first
    local = os.path.join(cwd or ".", first)
    search = line.environment(env if env is not None else os.environ).get("PATH")
    path = local if os.sep in first and os.path.isfile(local) else shutil.which(first, path=search)
    return _shebang_python(path) if path else None


def _shebang_python(path: str) -> str | None:
    """The Python interpreter a program's `#!` line names (None: it names none, or the file cannot be read)."""
    try:
        with open(path, "rb") as f:
            shebang = f.readline(400).decode("utf-8", "replace")
    except OSError:
        return None
    if not shebang.startswith("#!"):
        return None
    words = command_line(shebang[2:].split()).words
    return words[0] if words and PYTHON_RE.match(os.path.basename(words[0])) else None


def framework_version(
    framework: str, argv: list[str], cwd: str | None = None, env: Mapping[str, str] | None = None
) -> str | None:
    """The version of `framework` the command's interpreter imports, in the environment the command gets (`env`:
    what it is started with, default dlperf's own); None where it cannot tell."""
    line = command_line(argv)
    base = os.environ if env is None else env
    python = interpreter(argv, cwd, base)
    if python is None:
        return None
    program_env = line.environment(base)
    if "PATH" not in program_env and os.sep not in python:  # `env -i python`: env itself finds it on its PATH
        python = shutil.which(python, path=base.get("PATH")) or python
    where = os.path.join(cwd or ".", line.chdir) if line.chdir else cwd
    return _probe(python, framework, where, program_env)


def _probe(python: str, framework: str, cwd: str | None, env: dict[str, str]) -> str | None:
    """PROBE's answer from `python` started in `cwd` with `env` (None: it gives none)."""
    try:
        done = subprocess.run(
            [python, "-c", PROBE, *distribution(framework)],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            cwd=cwd,
            env=env,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = done.stdout.strip()
    return text.splitlines()[-1] if done.returncode == 0 and text else None


def framework_label(name: str, version: str | None) -> str:
    """`tensorflow 2.20.0`, or `tensorflow (version unknown)`."""
    return f"{name} {version}" if version else f"{name} (version unknown)"
