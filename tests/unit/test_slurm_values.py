"""Values written into an sbatch script cannot add lines to it: control characters are refused in one line."""

from __future__ import annotations

import pytest
from conftest import TINY, run_cli

from dlperf.errors import ConfigError
from dlperf.launch import LaunchOptions
from dlperf.launch.sbatch import SbatchLauncher
from dlperf.orchestration.run import plan_jobs
from dlperf.workloads import check_spec, spec_from_mapping

INJECTED = "gpu\n#SBATCH --wrap=rm -rf ~"


@pytest.mark.parametrize("flag", ["--partition", "--account", "--time"])
@pytest.mark.parametrize("value", [INJECTED, "gpu\r", "a b", "x\x1b[2J", "01:00:00;reboot"])
def test_control_characters_in_slurm_flags_are_refused(tmp_path, capsys, flag, value):
    args = ["run", *TINY, "--launcher", "slurm", flag, value, "--dry-run", "--out", str(tmp_path)]
    code, out, err = run_cli(args, capsys)
    assert code == 2 and err.count("\n") == 1 and f"{flag} " in err and "#SBATCH" not in out, err


@pytest.mark.parametrize(
    "flag,value", [("--partition", "gpu,debug"), ("--account", "bench-1"), ("--time", "2-00:30:00")]
)
def test_real_slurm_values_pass(flag, value):
    LaunchOptions(launcher="slurm", **{flag[2:]: value}).validate()


def test_out_path_with_a_newline_is_refused_and_a_space_is_quoted(tmp_path):
    spec = spec_from_mapping({"model": "resnet50", "nodes": 2, "devices_per_node": 1})
    launcher = SbatchLauncher(LaunchOptions(launcher="slurm"))
    bad = plan_jobs(spec, check_spec(spec), [1], tmp_path / "x\n#SBATCH --wrap=id")[0]
    with pytest.raises(ConfigError, match="control character"):
        launcher.batch_script(bad, [1])
    spaced = plan_jobs(spec, check_spec(spec), [1], tmp_path / "my results")[0]
    script = launcher.batch_script(spaced, [1])
    assert f'#SBATCH --output="{tmp_path}/my results/' in script
    assert all(line.startswith("#") or " -m dlperf run " in line for line in script.splitlines())
