"""A full disk names the file that could not be written and how to resume; checked up front where possible."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import TINY, run_cli

from dlperf.errors import ResultsError
from dlperf.launch import Launcher, LaunchOptions
from dlperf.launch.messages import RunResult
from dlperf.orchestration.run import execute, plan_jobs
from dlperf.records.paths import run_paths
from dlperf.records.store import claim_paths, write_json_atomic
from dlperf.workloads import check_spec, spec_from_mapping


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs of our own (we run as root in CI); skipped where mounting is not allowed."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip() or done.returncode}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> None:
    """Take every free byte of the disk."""
    with open(disk / "filler", "wb", buffering=0) as f:  # unbuffered: closing must not retry a failed write
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass


def test_write_on_a_full_disk_names_the_file_and_leaves_no_tmp(small_disk):
    fill(small_disk)
    target = small_disk / "resnet50" / "1n1g" / "r_1.json"
    os.makedirs(target.parent, exist_ok=True)
    with pytest.raises(ResultsError, match=rf"cannot write {target}: .*disk is full.*--resume"):
        write_json_atomic(target, {"x": "y" * 100_000})
    assert [p.name for p in target.parent.iterdir()] == []


class FillingLauncher(Launcher):
    """Fills the disk while 'running', then hands back a result the parent must record."""

    def describe(self, job):
        return []

    def run(self, job, workdir):
        fill(job.paths.root)
        return RunResult.failed("worker rank 0 on h exited with code 1")


def test_disk_filling_up_during_a_run_is_one_resumable_error(small_disk):
    spec = spec_from_mapping({"model": "resnet50", "device": "cpu", "iters": 4})
    jobs = plan_jobs(spec, check_spec(spec), [1], small_disk)
    with pytest.raises(ResultsError, match=rf"cannot write {jobs[0].paths.record}: .*--resume"):
        execute(jobs, FillingLauncher(LaunchOptions()), {}, overwrite=False)


def test_too_little_space_is_refused_before_running(small_disk, capsys):
    fill(small_disk)
    os.truncate(small_disk / "filler", 800 * 1024)  # 224 KiB left: less than one run's output
    code, _, err = run_cli(["run", *TINY, "--out", str(small_disk)], capsys)
    assert code == 2 and "MiB free under" in err and err.count("\n") == 1, err
    assert not list(small_disk.rglob("*.log"))


def test_directory_where_a_record_belongs(tmp_path):
    paths = run_paths(tmp_path, "resnet50", "1n1g", "resnet50_b4_fp32", 1)
    paths.record.mkdir(parents=True)
    with pytest.raises(ResultsError, match="is a directory where a run's file belongs"):
        claim_paths(paths, overwrite=True)


def test_leftover_temporary_files_are_cleared(tmp_path):
    paths = run_paths(tmp_path, "resnet50", "1n1g", "resnet50_b4_fp32", 1)
    paths.folder.mkdir(parents=True)
    leftover = paths.folder / f".{paths.record.name}.k2j3.tmp"
    leftover.write_text("{half")
    other = paths.folder / ".resnet50_b4_fp32_2.json.x.tmp"  # another repeat's, maybe being written now
    other.write_text("{")
    claim_paths(paths, overwrite=False)
    assert not leftover.exists() and other.exists()


def test_report_onto_a_full_disk_is_one_line_and_leaves_nothing_half_written(small_disk, tmp_path, capsys):
    """The lock file, a table and a plot each hit the full disk in turn: one line and exit 2 each time (an internal
    error, exit 1, before), no temporary file and no lock file left behind."""
    from report_records import record

    results = tmp_path / "results"
    for case, speed in (("1n1g", 100.0), ("1n2g", 190.0)):
        write_json_atomic(results / "resnet50" / case / "resnet50_b128_fp32_1.json", record(case, 1, speed))
    fill(small_disk)
    free = (small_disk / "filler").stat().st_size
    for room in (0, 12 * 1024, 40 * 1024):  # nothing; the lock and the tables but no plot; more of the plot
        os.truncate(small_disk / "filler", free - room)
        code, _, err = run_cli(["report", str(results), "--out", str(small_disk / "report"), "--overwrite"], capsys)
        assert code == 2 and err.count("\n") == 1 and "internal error" not in err, err
        assert "No space left on device" in err
        left = [p.name for p in (small_disk / "report").rglob("*") if p.is_file()]
        assert not [name for name in left if name.endswith(".tmp") or name == ".dlperf.lock"], left
