"""Hostile sweep files end in exit 2 with one short line, within a memory and time bound, before anything runs."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

from dlperf.errors import ConfigError
from dlperf.launch import LaunchOptions, launcher_for
from dlperf.orchestration.sweep_plan import load_sweep_file, plan_sweep

BASE = "model: resnet50\ndevice: cpu\nimage_size: 32\nnum_classes: 10\n"
BOMB = (
    "momentum: [&a [x,x,x,x,x,x,x,x,x], &b [*a,*a,*a,*a,*a,*a,*a,*a,*a], &c [*b,*b,*b,*b,*b,*b,*b,*b,*b],"
    " &d [*c,*c,*c,*c,*c,*c,*c,*c,*c], &e [*d,*d,*d,*d,*d,*d,*d,*d,*d], [*e,*e,*e,*e,*e,*e,*e,*e,*e]]\n"
)

CASES = {
    "wrong-type": (BASE + "momentum: abc\n", "key 'momentum' must be a number"),
    "infinite-lr": (BASE + "lr: .inf\n", "positive finite number"),
    "nan-lr": (BASE + "lr: .nan\n", "positive finite number"),
    "duplicate-key": (BASE + "batch_size: 2\nbatch_size: 4\n", "key 'batch_size' is given twice"),
    "repeats-1e9": (BASE + "repeats: 1000000000\n", "more than 100000"),
    "matrix-1e6": (
        BASE + "lr: [" + ",".join(f"0.{i}1" for i in range(1000)) + "]\nseed: " + str(list(range(1000))) + "\n",
        "more than 100000",
    ),  # fmt: skip
    "alias-bomb": (BASE + BOMB, "more than 100000 values"),
    # past any YAML parser's own limit (libyaml's is 1000 levels, with wording of its own): dlperf's line, at its limit
    "deep-nesting": (BASE + "batch_size: " + "[" * 3000 + "]" * 3000 + "\n", "nests deeper than 32 levels"),
    "deep-block-nesting": (BASE + "batch_size:\n" + "- " * 1500 + "1\n", "nests deeper than 32 levels"),
    "unhashable-key": (BASE + "? [a, b]\n: 1\n", "plain value"),
    "unhashable-value": (BASE + "precision: {a: 1}\n", "key 'precision' must be a string"),
    "huge-file": (BASE + "lr: [" + ",".join(["0.1"] * 400_000) + "]\n", "larger than 1024 KiB"),
    "long-value": (BASE + "precision: " + "x" * 3_000_000 + "\n", "larger than"),
    "not-a-mapping": ("- a\n- b\n", "must be a mapping"),
}


@pytest.mark.parametrize("text,expected", CASES.values(), ids=CASES.keys())
def test_hostile_sweep_file_is_one_config_error(tmp_path, text, expected):
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=expected) as caught:
        plan_sweep(load_sweep_file(path), launcher_for(LaunchOptions()))
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 400


def test_non_utf8_file(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_bytes(b"model: \xff\xfe\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_sweep_file(path)


def test_quoted_values_are_cut_in_the_cli_line(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(BASE + "precision: " + "y" * 900_000 + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "dlperf", "sweep", str(path), "--dry-run"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and len(done.stderr) < 1200, done.stderr[:300]


def limited(seconds: int, megabytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds))
    resource.setrlimit(resource.RLIMIT_DATA, (megabytes << 20, megabytes << 20))


@pytest.mark.parametrize("name", ["alias-bomb", "repeats-1e9", "deep-nesting", "matrix-1e6"])
def test_hostile_file_within_memory_and_time(tmp_path, name):
    """Loading and planning in a child capped at 20 CPU seconds and 1 GiB of heap: exit 2, not a kill."""
    path = tmp_path / "sweep.yaml"
    path.write_text(CASES[name][0])
    code = (
        "import sys; from dlperf.cli.main import main; "
        "from dlperf.orchestration.sweep_plan import load_sweep_file, plan_sweep; "
        "from dlperf.launch import LaunchOptions, launcher_for; from dlperf.errors import ConfigError\n"
        "try: plan_sweep(load_sweep_file(sys.argv[1]), launcher_for(LaunchOptions()))\n"
        "except ConfigError: sys.exit(2)"
    )
    done = subprocess.run([sys.executable, "-c", code, str(path)], preexec_fn=lambda: limited(20, 1024), timeout=60)
    assert done.returncode == 2
