"""dlperf's zero-code instrumentation of a `--command` (dlperf.instrument): the start-up hook notes every optimizer
step in a side file without changing what the script does or prints, and the run's record is read from that file
with the run's own warm-up and window; the script's own printed figure is the second reading.

A plain PyTorch loop printing nothing always runs here. The HF Trainer, Keras 3 and Lightning runs need an
interpreter that has them: set DLPERF_TEST_TRAINERS_PYTHON (a venv with transformers, keras, lightning; see
tests/fixtures/peer-logs/trainers/SOURCES.md), else they are skipped with that reason (CI installs `.[test]`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_dlperf

from dlperf.instrument import STARTUP, STEPS_VARIABLE

SCRIPTS = Path(__file__).parents[1] / "fixtures" / "scripts" / "trainers"
TRAINERS_PYTHON = os.environ.get("DLPERF_TEST_TRAINERS_PYTHON")


def steps_rows(steps: Path) -> list[list[str]]:
    return [line.split() for line in steps.read_text().splitlines() if line[:1].isdigit()]  # not marks, notes


def steps_figure(steps: Path, warmup: int, iters: int, batch: int) -> float:
    """By hand: the samples of steps warmup+1 .. warmup+iters over the time between step `warmup` and the last."""
    rows = steps_rows(steps)
    times = {int(step): float(t) for step, t, *_ in rows}
    samples = {int(step): batch if n == "-" else int(n) for step, _, n, *_ in rows}
    last = min(warmup + iters, max(times))
    return sum(samples[s] for s in range(warmup + 1, last + 1)) / (times[last] - times[warmup])


def assert_window(record: dict, steps: Path, warmup: int, iters: int, batch: int, last_step: int) -> None:
    """The record's window: `iters` steps from where the steady-state test found the steps settled, at or past
    `warmup` (the record saying where it moved the start), its figure by hand over those steps."""
    found = record["warmup_iterations"]
    moved = [note for note in record["reading_notes"] if "settle only after" in note]
    assert found >= warmup and bool(moved) == (found > warmup)
    assert record["kept_steps"] == [found + 1, min(found + iters, last_step)]
    assert record["throughput"] == pytest.approx(steps_figure(steps, found, iters, batch), rel=1e-9)


def the_record(out: Path) -> dict:
    (path,) = [p for p in out.rglob("*.json") if p.parent != out]
    return json.loads(path.read_text())


def test_a_loop_that_prints_nothing_is_timed_by_the_hook_alone(tmp_path):
    script = SCRIPTS / "silent_torch_loop.py"
    command = f"{sys.executable} {script} --batch-size {{batch_size}} --steps 30"
    done = run_dlperf(["run", "--batch-size", "4", "--command", command, "--warmup-iters", "5", "--iters", "20",
                       "--out", str(tmp_path)])  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    record = the_record(tmp_path)
    (steps,) = tmp_path.rglob("*.steps")  # the run's stream, merged from each process's file
    assert record["status"] == "ok" and record["format"] == "dlperf-steps"
    assert_window(record, steps, 5, 20, 4, last_step=30)
    assert len(steps.read_text().splitlines()) == 30  # one line per optimizer step, nothing else
    assert "printed nothing" in record["cross_check"]["note"]
    assert record["samples_per_step"] == {"counted": 4, "declared": 4}  # its tensors, made once, the model's input
    assert any("counted from the model's input" in note for note in record["reading_notes"])
    assert not any(tmp_path.rglob("*.log")) or all(p.stat().st_size == 0 for p in tmp_path.rglob("*.log"))


HOOKED = """
import os, sys, torch
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
other = torch.optim.SGD(model.parameters(), lr=0.1)  # a second optimizer after the same backward: the same update
for _ in range(5):
    model(torch.randn(3, 4)).sum().backward()
    optimizer.step()
    other.step()
if os.fork() == 0:  # a forked worker never writes its parent's lines again
    os._exit(0)
os.wait()
print("done", torch.optim.SGD.__name__, file=sys.stdout)
"""


def test_the_hook_changes_nothing_the_script_prints_and_keeps_a_sites_own(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("print('the site hook ran')\n")
    base = {**os.environ, "PYTHONPATH": str(site)}
    plain = subprocess.run([sys.executable, "-c", HOOKED], env=base, capture_output=True, text=True, check=True)
    hooked_env = {**base, "PYTHONPATH": f"{STARTUP}{os.pathsep}{site}", STEPS_VARIABLE: str(tmp_path / "run.steps")}
    hooked = subprocess.run([sys.executable, "-c", HOOKED], env=hooked_env, capture_output=True, text=True, check=True)
    assert (hooked.stdout, hooked.stderr) == (plain.stdout, plain.stderr) == ("the site hook ran\ndone SGD\n", "")
    (side,) = tmp_path.glob("run.steps.*")  # one process, one file (the forked child stepped nothing)
    note, *lines = side.read_text().splitlines()
    rows = [line.split() for line in lines]
    assert [row[0] for row in rows] == ["1", "2", "3", "4", "5"]  # the two optimizers' calls: one update each
    assert all(row[2:] == ["3", "0", "-"] for row in rows)  # no DataLoader: the model's input, rank 0
    assert note.startswith("# samples counted from the model's input") and "Linear" in note


def trainers(module: str) -> str:
    if not TRAINERS_PYTHON:
        pytest.skip("set DLPERF_TEST_TRAINERS_PYTHON to a python with transformers, keras and lightning")
    found = subprocess.run([TRAINERS_PYTHON, "-c", f"import {module}"], capture_output=True, env={**os.environ,
                           "KERAS_BACKEND": "torch"}).returncode == 0  # fmt: skip
    if not found:
        pytest.skip(f"{TRAINERS_PYTHON} has no {module}")
    return TRAINERS_PYTHON


HF_RUNTIME = re.compile(r"'train_runtime': '?([0-9.]+)")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("module", "script", "batch", "fmt", "epoch", "planned"),
    [
        # 35 samples in batches of 4 (8 of 4, one of 3), 2 an update: by hand 8, 8, 8, 8, 3 an epoch, 175 in 25
        # updates; transformers' train_samples_per_second counts max_steps x 4 x 2 = 200 over its train_runtime
        ("transformers", "hf_trainer_tiny.py --steps 25 --accumulate 2 --samples 35", 4, "hf-trainer", [8, 8, 8, 8, 3],
         8),
        ("keras", "keras_fit_tiny.py --steps 8 --epochs 3 --verbose 2", 16, "keras", [16], None),
        ("lightning", "lightning_tiny.py --steps 24 --width 64", 16, "lightning-rich", [16], None),
    ],
)  # fmt: skip
def test_trainer_runs_unchanged_timed_by_the_hook(tmp_path, module, script, batch, fmt, epoch, planned):
    python = trainers(module)
    command = f"env KERAS_BACKEND=torch {python} {SCRIPTS / script} --batch-size {{batch_size}}"
    done = run_dlperf(["run", "--batch-size", str(batch), "--framework", module, "--command", command,
                       "--warmup-iters", "8", "--iters", "12", "--out", str(tmp_path)], timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    record = the_record(tmp_path)
    (steps,) = tmp_path.rglob("*.steps")  # the run's stream, merged from each process's file
    assert record["status"] == "ok" and record["format"] == "dlperf-steps"
    assert record["framework"].startswith(f"{module} ") and "unknown" not in record["framework"]
    rows = steps_rows(steps)
    assert_window(record, steps, 8, 12, batch, last_step=len(rows))
    assert [int(row[2]) for row in rows] == (epoch * len(rows))[: len(rows)]  # the samples each update trained
    check = record["cross_check"]  # the script's own figure, or why its rounding gives none (Keras' fast steps)
    assert (fmt in (check["reading"] or "") and check["second"] > 0) or "printed too coarsely" in check["note"]
    if check["second"] is not None:  # the script's figure is held to the hook's over the same stretch
        same = check["like_for_like"]
        assert same["script"] == pytest.approx(check["second"], rel=1e-12)  # summed in another order: last bits
        assert same["ratio"] == pytest.approx(same["hook"] / same["script"])
        if planned is None:
            assert abs(same["ratio"] - 1) <= 0.10 and check["agree"] == (abs(same["ratio"] - 1) <= 0.02)
        else:  # HF's figure: its planned samples over its train_runtime; the hook's count of what trained stands
            (runtime,) = [float(m[1]) for m in HF_RUNTIME.finditer(next(tmp_path.rglob("*.log")).read_text())]
            assert check["second"] == pytest.approx(len(rows) * planned / runtime, rel=2e-3)
            assert same["ratio"] == pytest.approx(sum(int(r[2]) for r in rows) / (len(rows) * planned), rel=2e-3)
            assert check["agree"] is False and "the samples its loop planned" in check["note"]
    assert planned is None or check["second"]


def test_a_run_its_own_log_calls_failed_stays_failed_however_well_timed(tmp_path):
    script = tmp_path / "diverges.py"
    script.write_text((SCRIPTS / "silent_torch_loop.py").read_text() + "\nprint('step 30 loss nan', flush=True)\n")
    command = f"{sys.executable} {script} --batch-size {{batch_size}} --steps 30"
    done = run_dlperf(["run", "--batch-size", "4", "--command", command, "--warmup-iters", "5", "--iters", "20",
                       "--out", str(tmp_path / "out")])  # fmt: skip
    record = the_record(tmp_path / "out")
    assert done.returncode == 1 and record["status"] == "failed" and "NaN loss" in record["error"]
    assert len(steps_rows(next((tmp_path / "out").rglob("*.steps.*")))) == 30  # it was timed


KERAS_ASYNC = """
import keras, numpy as np
from keras.src.callbacks import callback_list
configure = callback_list.CallbackList._configure_async_dispatch
def noted(self, callbacks):
    configure(self, callbacks)
    print("async_train", self._async_train)
callback_list.CallbackList._configure_async_dispatch = noted
import time
class Late(keras.callbacks.Callback):  # async-safe: batch 1's end call reaches the hook after batches 2's and 3's
    async_safe = True
    def on_train_batch_end(self, batch, logs=None):
        if batch == 1:
            time.sleep(0.5)
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
model.compile(optimizer="sgd", loss="mse")
x, y = np.zeros((100, 8), "float32"), np.zeros((100, 4), "float32")
model.fit(x, y, batch_size=32, epochs=2, verbose=0, callbacks=[Late()])
"""


@pytest.mark.slow
def test_keras_keeps_its_async_dispatch_and_counts_the_short_last_batch(tmp_path):
    """Keras 3 dispatches batch callbacks from a worker thread unless one is not async-safe: the hook's is, so
    the script runs as without it (it turned async_train off); 100 samples at batch 32 are 32, 32, 32 and 4, in
    Keras' batch order although batch 1's end call (held by the script's own async-safe callback) comes last, and
    stamped at times that never go back."""
    python = trainers("keras")
    base = {**os.environ, "KERAS_BACKEND": "torch"}
    plain = subprocess.run([python, "-c", KERAS_ASYNC], env=base, capture_output=True, text=True, timeout=300)
    env = {**base, "PYTHONPATH": str(STARTUP), STEPS_VARIABLE: str(tmp_path / "run.steps")}
    hooked = subprocess.run([python, "-c", KERAS_ASYNC], env=env, capture_output=True, text=True, timeout=300)
    assert plain.stdout == hooked.stdout == "async_train True\n", hooked.stderr[-2000:]
    (side,) = tmp_path.glob("run.steps.*")
    rows = [line.split() for line in side.read_text().splitlines()]
    assert [row[0] for row in rows] == [str(step) for step in range(1, 9)]
    assert [row[2] for row in rows] == ["32", "32", "32", "4"] * 2
    times = [float(row[1]) for row in rows]
    assert times == sorted(times)
