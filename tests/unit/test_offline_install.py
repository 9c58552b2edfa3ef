"""Installing dlperf where there is no package index (the lent GPU machine): a fresh venv whose packages come from
elsewhere (as a framework image's torch, setuptools and pip do: here this venv's, through a .pth line), pip told
`--no-index`. The plain `pip install --no-deps -e .` builds in isolation and looks for setuptools on the index;
`--no-build-isolation` builds with the environment's own; and with no install at all, src/ on PYTHONPATH runs."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OFFLINE = ["--no-index", "--no-deps", "--disable-pip-version-check"]


def _fresh_venv(tmp_path: Path) -> Path:
    """A venv without pip or setuptools of its own, seeing this environment's packages after its own."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    python = tmp_path / "venv" / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    Path(purelib, "framework_image.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def _run(python: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHONPATH"))}
    return subprocess.run([str(python), *args], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**environ, "PIP_CONFIG_FILE": os.devnull, **env})  # fmt: skip


@pytest.mark.slow
def test_offline_install_without_build_isolation_and_running_from_src(tmp_path: Path):
    python = _fresh_venv(tmp_path)
    assert _run(python, "-c", "import dlperf").returncode != 0  # not installed in the fresh venv
    # no install: this checkout's src/ on the path (what benchmarks/gpu_validate.py gives its steps)
    ran = _run(python, "-m", "dlperf", "--help", PYTHONPATH=str(ROOT / "src"))
    assert ran.returncode == 0 and "usage: dlperf" in ran.stdout, ran.stderr[-2000:]
    # the plain editable install needs the index for its isolated build's setuptools
    plain = _run(python, "-m", "pip", "install", *OFFLINE, "-e", ".")
    assert plain.returncode != 0 and "setuptools" in plain.stdout + plain.stderr
    # the documented offline install: the environment's own setuptools builds it
    done = _run(python, "-m", "pip", "install", *OFFLINE, "--no-build-isolation", "-e", ".")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    dlperf = tmp_path / "venv" / "bin" / "dlperf"
    ran = subprocess.run([str(dlperf), "--help"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert ran.returncode == 0 and "usage: dlperf" in ran.stdout, ran.stderr[-2000:]
