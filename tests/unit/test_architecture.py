"""The layer rules hold (import-linter), and reading results never loads a framework."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def test_import_linter_contracts_are_kept():
    lint = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    done = subprocess.run([lint, "--config", str(ROOT / "pyproject.toml")], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def test_no_module_imports_itself_through_others():
    """No module-level import cycle (the contracts hold packages; this holds modules), counting every import,
    those inside functions too: for each import a -> b, no chain leads from b back to a."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("dlperf")
    modules = [m for m in graph.modules if m.startswith("dlperf")]
    edges = [(a, b) for a in modules for b in graph.find_modules_directly_imported_by(a) if b.startswith("dlperf")]
    assert len(modules) > 100 and len(edges) > 300  # the graph was read
    assert [(a, b) for a, b in edges if graph.chain_exists(importer=b, imported=a)] == []


PROBE = """
import json, sys
from dlperf.cli.main import main
for argv in {argvs!r}:
    try:
        main(argv)
    except SystemExit:
        pass
print(json.dumps(sorted(m for m in ("torch", "torchvision", "jax", "scipy", "matplotlib") if m in sys.modules)))
"""


@pytest.mark.parametrize(
    "argvs",
    [
        [["--version"]],
        [["extract", "--list-formats"]],
        [["report", "--help"], ["compare", "--help"], ["history", "--help"], ["extract", "--help"]],
    ],
)
def test_reading_commands_start_without_torch(argvs):
    done = subprocess.run([sys.executable, "-c", PROBE.format(argvs=argvs)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded == []  # no framework, and none of the heavy libraries only some commands need


def test_reporting_modules_import_without_torch():
    code = (
        "import sys; import dlperf.cli.report_cmd, dlperf.cli.extract_cmd, dlperf.cli.compare_cmd, "
        "dlperf.cli.history_cmd, dlperf.reporting.report, dlperf.records.load; print('torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


PARENT = """
import json, sys
from dlperf.engines import engine_host, engine_versions
from dlperf.workloads import spec_from_mapping
for engine in ("torch", "jax"):
    engine_host(engine).preflight(spec_from_mapping({"engine": engine, "device": "auto"}), local=True)
facts = engine_versions(["torch", "jax"])
loaded = sorted(m for m in ("torch", "torchvision", "jax") if m in sys.modules)
import torch
print(json.dumps([loaded, facts["torch"], str(torch.__version__), facts["cuda_available"], torch.cuda.is_available()]))
"""


def test_parent_of_a_run_checks_and_states_versions_without_a_framework():
    """The parent's side of both engines (their preflight, their versions for the record) loads neither torch nor
    JAX on a machine without a GPU driver, and still states torch's version as torch itself does (`+cu130`
    and all) and whether CUDA is available as torch says."""
    done = subprocess.run([sys.executable, "-c", PARENT], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    loaded, stated, actual, stated_cuda, actual_cuda = json.loads(done.stdout.strip().splitlines()[-1])
    if not Path("/dev/nvidiactl").exists():
        assert loaded == []
    assert stated == actual and stated_cuda == actual_cuda
