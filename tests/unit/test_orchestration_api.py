"""The orchestration package's API: every exported name imported plainly, none shadowed by a submodule
of the same name, and sweep resume takes typed options in and gives typed options out."""

from __future__ import annotations

import subprocess
import sys

import pytest

import dlperf.orchestration as orchestration
from dlperf.errors import ConfigError
from dlperf.orchestration import SweepOptions, resolve_sweep
from dlperf.orchestration.sweep_state import save_sweep_options


def test_every_exported_name_is_imported_plainly_and_none_is_a_submodule():
    """The package's API is its plain imports: every name defined, none the name of a submodule (which importing
    that submodule would shadow), and nothing loaded by hand on first use."""
    import pkgutil

    submodules = {m.name for m in pkgutil.iter_modules(orchestration.__path__)}
    assert all(getattr(orchestration, name) is not None for name in orchestration.__all__)
    assert not set(orchestration.__all__) & submodules
    assert not hasattr(orchestration, "__getattr__")


def test_importing_the_package_loads_no_framework():
    code = (
        "import sys, dlperf.orchestration; print(sorted({'torch', 'jax', 'matplotlib', 'plotly'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_resume_takes_the_stored_file_and_flags(tmp_path):
    out = tmp_path / "quick"
    out.mkdir()
    save_sweep_options(out, "configs/quick.yaml", "model: resnet50\n", {"repeats": 3, "launcher": "local"})
    given = {"repeats": None, "launcher": None}
    resolved = resolve_sweep(SweepOptions(out=str(out), resume=True), given, given)
    assert resolved.options.config == str(out / "sweep.yaml") and resolved.options.repeats == 3
    assert resolved.flags == {"repeats": 3, "launcher": "local"}
    with pytest.raises(ConfigError, match="--repeats 5 differs from this sweep's stored 3"):
        resolve_sweep(SweepOptions(out=str(out), resume=True), {**given, "repeats": 5}, given)


def test_without_resume_the_folder_follows_the_file():
    resolved = resolve_sweep(SweepOptions(config="configs/quick.yaml"), {"repeats": 2}, {"repeats": None})
    assert resolved.options.out == "results/quick" and resolved.flags == {"repeats": 2}
    with pytest.raises(ConfigError, match="--resume needs --out"):
        resolve_sweep(SweepOptions(config="configs/quick.yaml", resume=True), {}, {})
