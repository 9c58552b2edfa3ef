"""An agent told to stop exits within its grace even where the stop's SystemExit cannot end the process, and
removes its orphaned run folder: CI once found a lone-rank agent still running 60 s after its parent's SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

# the agent's own SIGTERM handler, a grace of 1 s, and what holds an exit forever: a non-daemon thread that never
# ends (the interpreter waits for it) and a SystemExit dropped where it was raised
CHILD = """
import ctypes, signal, sys, threading, time
from dlperf.launch import agent
agent.STOP_GRACE_S = 1.0
signal.signal(signal.SIGTERM, agent.stop_on_sigterm)
threading.Thread(target=threading.Event().wait, name="never-ends").start()
if sys.argv[1] == "held-in-c":  # the main thread in a C call that no signal ends: it never runs the handler
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    threading.Thread(target=agent.watch_lifeline, args=(0,), daemon=True).start()
    print("ready", flush=True)
    ctypes.CDLL(None).sleep(1000)
print("ready", flush=True)
while True:
    try:
        time.sleep(0.01)
    except SystemExit:
        if sys.argv[1] == "dropped":
            continue
        raise
"""


def stop_child(tmp_path, how: str) -> tuple[subprocess.CompletedProcess, float]:
    run_dir = tmp_path / "dlperf-run"
    run_dir.mkdir()
    (run_dir / "result.json").write_text("{}")
    env = {**os.environ, "DLPERF_PARENT_PID": "1", "DLPERF_RUN_DIR": str(run_dir)}  # not our parent: orphaned
    proc = subprocess.Popen([sys.executable, "-c", CHILD, how], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
    assert proc.stdout.readline() == "ready\n"
    started = time.monotonic()
    if how == "held-in-c":
        proc.stdin.close()  # the lifeline: the parent is gone
    else:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)  # its output is a few lines: no pipe fills
        out, err = proc.stdout.read(), proc.stderr.read()
    finally:
        proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), time.monotonic() - started


def test_an_exit_held_by_a_thread_ends_after_the_grace(tmp_path):
    ended, took = stop_child(tmp_path, "raised")
    assert ended.returncode == 128 + signal.SIGTERM
    assert 1.0 <= took < 10, took
    assert "still running 1 s after SIGTERM" in ended.stderr
    assert "Thread 0x" in ended.stderr and "wait" in ended.stderr  # where the held thread was
    assert not (tmp_path / "dlperf-run").exists()


def test_a_dropped_systemexit_ends_after_the_grace(tmp_path):
    ended, took = stop_child(tmp_path, "dropped")
    assert ended.returncode == 128 + signal.SIGTERM
    assert 1.0 <= took < 10, took
    assert not (tmp_path / "dlperf-run").exists()


def test_a_main_thread_held_in_c_ends_when_its_lifeline_closes(tmp_path):
    ended, took = stop_child(tmp_path, "held-in-c")
    assert ended.returncode == 128 + signal.SIGTERM
    assert 1.0 <= took < 10, took
    assert "still running 1 s after SIGTERM" in ended.stderr
    assert not (tmp_path / "dlperf-run").exists()
