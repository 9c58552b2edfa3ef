"""One writer per results folder: a second sweep is refused in one line, readers are not, stale locks are taken."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_dlperf

from dlperf.errors import ResultsError
from dlperf.records.lock import results_lock

HOLD = "import sys, time; from dlperf.records.lock import results_lock\nwith results_lock(sys.argv[1]):\n" \
    "    print('held', flush=True); time.sleep(600)"  # fmt: skip


@pytest.fixture
def held(tmp_path):
    """Another process holding the lock of tmp_path/out."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / "out")], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    yield proc
    proc.kill()
    proc.wait()


def test_second_writer_refused_naming_the_holder(tmp_path, held):
    expected = rf"in use by dlperf pid {held.pid} on host {socket.gethostname()}"
    with pytest.raises(ResultsError, match=expected), results_lock(tmp_path / "out"):
        pass


def test_lock_of_a_killed_holder_is_taken_over(tmp_path, held):
    held.send_signal(signal.SIGKILL)
    held.wait()
    with results_lock(tmp_path / "out"):
        assert f'"pid": {os.getpid()}' in (tmp_path / "out" / ".dlperf.lock").read_text()
        with results_lock(tmp_path / "out"):  # nested in one process (a sweep's runs): no self-refusal
            pass


def test_sweep_on_a_locked_folder_is_refused_and_report_still_reads(tmp_path, held):
    config = tmp_path / "sweep.yaml"
    config.write_text("model: resnet50\nimage_size: 32\nnum_classes: 10\nbatch_size: 2\ndevice: cpu\nrepeats: 1\n")
    refused = run_dlperf(["sweep", str(config), "--out", str(tmp_path / "out")])
    assert refused.returncode == 2
    assert refused.stderr.strip().count("\n") == 0 and f"in use by dlperf pid {held.pid}" in refused.stderr
    assert not list((tmp_path / "out").rglob("*.json")), "the refused sweep wrote something"
    reading = run_dlperf(["report", str(tmp_path / "out")])
    # readers take no lock; a folder with no records yet names its writer (issue 39), not `dlperf extract`
    assert reading.returncode == 2 and f"no run records under {tmp_path / 'out'} yet" in reading.stderr
    assert f"in use by dlperf pid {held.pid}" in reading.stderr and "extract" not in reading.stderr


def test_extract_and_report_out_into_a_held_folder_are_refused(tmp_path, held):
    """`extract --out` and `report --out --overwrite` write records and reports: a running sweep's folder is
    refused in one line, and nothing is written there."""
    keras = Path(__file__).parents[1] / "fixtures" / "peer-logs" / "tf2-keras-resnet50"
    out = tmp_path / "out"
    extract = run_dlperf(["extract", str(keras), "--out", str(out), "--no-plots", "--overwrite"])
    assert extract.returncode == 2 and extract.stderr.strip().count("\n") == 0, extract.stderr
    assert f"in use by dlperf pid {held.pid}" in extract.stderr
    done = run_dlperf(["extract", str(keras), "--out", str(tmp_path / "mine"), "--no-plots"])
    assert done.returncode == 0, done.stderr
    for extra in ([], ["--label", "a"]):
        report = run_dlperf(["report", str(tmp_path / "mine"), *extra, "--out", str(out), "--overwrite"])
        assert report.returncode == 2 and report.stderr.strip().count("\n") == 0, report.stderr
        assert f"in use by dlperf pid {held.pid}" in report.stderr
    assert sorted(p.name for p in out.iterdir()) == [".dlperf.lock"], "a refused writer wrote something"


def test_a_finished_writer_leaves_no_lock_file(tmp_path):
    with results_lock(tmp_path / "out"):
        assert (tmp_path / "out" / ".dlperf.lock").exists()
    assert list((tmp_path / "out").iterdir()) == []


def test_the_next_writer_clears_a_killed_writers_half_written_files(tmp_path):
    """SIGKILL while a sweep writes its report leaves `.report.md.XXXXXXXX.tmp` (an atomic write's temporary):
    the next writer of the folder (--resume, report) holds the lock, so no write is under way, and removes them;
    files that are not dlperf's temporaries stay."""
    out = tmp_path / "out"
    leftovers = [out / ".report.md.k2j_8xq0.tmp", out / "resnet50" / "1n2g" / ".resnet50_b4_fp32_1.json.abcdefgh.tmp"]
    kept = [out / "notes.tmp", out / ".editor.swp", out / "resnet50" / ".hidden.tmp"]
    for path in leftovers + kept:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("half")
    with results_lock(out):
        assert [p for p in leftovers if p.exists()] == []
    assert all(p.exists() for p in kept)
