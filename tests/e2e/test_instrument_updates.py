"""The start-up hook's updates, samples and ranks against the script's own count and clock: plain-torch loops that
make one update the ways real trainers do (tests/fixtures/scripts/update_shapes.py: DeepSpeed ZeRO's call per
group and sub-group, a GAN's two optimizers, accumulation with a short last batch and a short last accumulation,
Lightning's own launcher starting a second worker), run with the hook as dlperf places it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_dlperf
from test_instrument import trainers

from dlperf.framework_logs.hookranks import merge
from dlperf.instrument import STARTUP, STEPS_VARIABLE
from dlperf.orchestration.external_run import samples_check

SCRIPT = Path(__file__).parents[1] / "fixtures" / "scripts" / "update_shapes.py"


def hooked(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, python: str = sys.executable
) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "PYTHONPATH")}
    environment = {**base, "PYTHONPATH": str(STARTUP), STEPS_VARIABLE: str(tmp_path / "run.steps"), **(env or {})}
    return subprocess.run([python, str(SCRIPT), *args], env=environment, capture_output=True, text=True,
                          timeout=300)  # fmt: skip


def own_clock(stderr: str) -> dict[int, tuple[int, float, int]]:
    """The script's own clock: update -> (its samples, time.monotonic() after it, its real tokens)."""
    rows = [line.split() for line in stderr.splitlines() if line.startswith("update ")]
    return {int(n): (int(samples), float(t), int(tokens)) for _, n, samples, t, tokens in rows}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("shape", "updates", "sizes"),
    [
        ("zero", 30, [8] * 9 + [5]),  # 2 groups + 5 sub-groups: 7 step() calls an update
        ("gan", 30, [8] * 9 + [5]),  # the discriminator's and the generator's step: one update of one batch
        ("accum", 9, [32, 32, 13]),  # 4 micro-batches of 8; the epoch's last update holds 2, one of them short
        ("padded", 30, [8] * 9 + [5]),  # dicts with an attention mask: its ones are the tokens
        ("inbackward", 30, [8] * 9 + [5]),  # 4 optimizers, one per parameter, stepped during backward
        ("sliced", 9, [32, 32, 13]),  # accum's updates from sliced tensors: counted from the model's input
    ],
)
def test_one_stamp_per_update_with_its_counted_samples(tmp_path, shape, updates, sizes):
    # each batch 50 ms late, as from a loader: without it the 30 tiny updates spanned ~35 ms, and a few ms of the
    # busy machine's scheduling between the hook's stamp and the script's clock at the first or last update moved
    # the two figures 11 % apart (CI, gan); the stamps' own offsets are held below as they were
    done = hooked(tmp_path, "--shape", shape, "--own-clock", "--batch-ms", "50")
    assert done.returncode == 0, done.stderr[-2000:]
    clock = own_clock(done.stderr)
    stream = merge(tmp_path / "run.steps", world_size=1)
    assert stream is not None and stream.notes == (() if shape != "sliced" else (MODEL_INPUT,))
    assert len(clock) == len(stream.samples) == updates
    assert [stream.samples[k] for k in range(1, updates + 1)] == sizes * 3 == [clock[k][0] for k in clock]
    real = [clock[k][2] or None for k in clock]  # the script's own count of its attention masks' ones
    assert [stream.tokens[k] for k in range(1, updates + 1)] == real and (shape != "padded" or all(real))
    rows = [line.split() for line in stream.text.splitlines()]
    times = {int(r[0]): float(r[1]) for r in rows}
    # each stamp follows the update's last step() call, before the script's own clock after it
    assert all(0 <= clock[k][1] - times[k] < 0.05 for k in clock)
    by_hand = sum(sizes * 3) - sizes[0]  # updates 2..N over the time from update 1 to N, as the record reads
    figure = sum(stream.samples[k] for k in range(2, updates + 1)) / (times[updates] - times[1])
    own_figure = by_hand / (clock[updates][1] - clock[1][1])
    assert figure == pytest.approx(own_figure, rel=0.02)


MODEL_INPUT = (
    "the hook noted: samples counted from the model's input: the first dimension of what Sequential takes at each "
    "call with gradients on (no DataLoader or trainer batch was seen)"
)


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["prefetch", "timm", "stateful", "nodes"])
def test_a_loader_that_fetches_ahead_never_shifts_a_count_onto_the_declared_batch(tmp_path, shape):
    """A prefetcher takes batch k+1 from the DataLoader before batch k trains: the DataLoader's count is an update
    early (16 at an epoch's first update, none at its last). timm's PrefetchLoader is counted at what it yields, as
    accelerate's loaders: exact. Another prefetcher's uncounted update is 0 in the stream, never the declared batch
    (that made 16 + 8 x 7 + 5 + 8 = 85 of the epoch's 77), and the record says which updates. torchdata's
    StatefulDataLoader (2 workers) is a DataLoader: exact. torchdata.nodes' Prefetcher reads the DataLoader in a
    thread of its own, whose grad mode is not the loop's: it counted 24, 8 x 6, 5, -, - and then 101 (the evaluation
    pass's 77 and 3 batches ahead), shifting with the thread's timing; off the main thread the DataLoader is not
    counted, the model's input is: exact."""
    needs = {"prefetch": None, "timm": "timm"}.get(shape, "torchdata")
    python = trainers(needs) if needs else sys.executable
    done = hooked(tmp_path, "--shape", shape, "--own-clock", python=python)
    assert done.returncode == 0, done.stderr[-2000:]
    own = [samples for samples, _, _ in own_clock(done.stderr).values()]
    stream = merge(tmp_path / "run.steps", world_size=1)
    assert own == [8] * 9 + [5] + [8] * 9 + [5] + [8] * 9 + [5] and stream is not None
    assert stream.notes == ((MODEL_INPUT,) if shape == "nodes" else ())
    counted = list(stream.samples.values())
    if shape != "prefetch":
        assert counted == own
        return
    assert counted == [16, *[8] * 7, 5, None] * 3 and sum(n or 0 for n in counted) == sum(own)
    assert [row.split()[2] for row in stream.text.splitlines()][9::10] == ["0", "0", "0"]
    per_update, note = samples_check(stream, [5, 24], declared=8)
    assert per_update.counted == pytest.approx(sum(n or 0 for n in counted[4:24]) / 20)
    assert note is not None and "no samples counted at 2 of the window's 20 updates (10, 20)" in note
    assert "not the declared 8" in note


@pytest.mark.slow
def test_a_script_that_starts_its_own_worker_gives_one_stream_per_rank(tmp_path):
    """Lightning's launcher: RANK never set, both processes once took `rank0`; now each its own file, rank 1's
    told by its process group, and the global samples are both ranks' (66 samples = 16 batches of 4 and one of 2,
    each rank the whole set)."""
    port = str(29500 + os.getpid() % 2000)
    done = hooked(tmp_path, "--shape", "spawn", "--batch-size", "4", "--samples", "66", "--epochs", "1",
                  env={"MASTER_PORT": port, "WORLD_SIZE": "2"})  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    files = sorted(tmp_path.glob("run.steps.*"))
    assert len(files) == 2 and {f.read_text().split("\n")[0].split()[3] for f in files} == {"0", "1"}
    stream = merge(tmp_path / "run.steps", world_size=2)
    assert stream is not None and stream.notes == ()
    assert list(stream.samples.values()) == [8] * 16 + [4]


def test_a_worker_launched_per_rank_that_forms_a_bigger_group_exits_in_one_line(tmp_path):
    """What hung 120 s (Lightning waiting for a rank 1 nobody starts) is one line naming --command-per node."""
    done = hooked(tmp_path, "--shape", "spawn", env={"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"})
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "process group of 2 processes where 1 were launched" in line and "--command-per node" in line


def test_a_node_command_that_starts_fewer_processes_than_its_layout_is_refused(tmp_path):
    """`accelerate launch --cpu --num_processes 2`, once a node's command, starts one process, which read dlperf's
    WORLD_SIZE=2 and waited in gloo for a second rank until --timeout. A node's command now gets no WORLD_SIZE (it
    is no rank: tests/unit/test_external_command.py), and one process stepping where the layout puts two is
    refused in one line, the record kept."""
    command = f"{{python}} {SCRIPT} --shape gan --epochs 2"  # one process, as accelerate's on a CPU
    done = run_dlperf(["run", "--batch-size", "8", "--devices-per-node", "2", "--command-per", "node", "--command",
                       command, "--warmup-iters", "2", "--iters", "6", "--timeout", "120",
                       "--out", str(tmp_path)])  # fmt: skip
    assert done.returncode != 0
    (line,) = done.stderr.strip().splitlines()
    assert "1 process(es) stepped on this node (dlperf's hook, rank(s) 0) where --devices-per-node is 2" in line
    (record,) = tmp_path.rglob("*.json")
    assert json.loads(record.read_text())["status"] != "ok"


def test_a_launcher_started_per_rank_is_refused_before_anything_starts(tmp_path):
    command = "torchrun --nproc-per-node 2 t.py"
    done = run_dlperf(["run", "--batch-size", "4", "--devices-per-node", "2", "--command", command,
                       "--out", str(tmp_path)])  # fmt: skip
    assert done.returncode != 0 and not any(tmp_path.rglob("*.log"))
    (line,) = done.stderr.strip().splitlines()
    assert "starts `torchrun`, which starts its own workers" in line and "--command-per node" in line


NANOGPT_LIKE = """
import time
print("tokens per iteration will be: 1,024", flush=True)
t0 = time.time()
for k in range(40):
    time.sleep(0.02)
    t1 = time.time()
    print(f"iter {k}: loss 4.0000, time {(t1 - t0) * 1000:.2f}ms, mfu -100.00%", flush=True)
    t0 = t1
"""


def test_a_tokens_reading_gives_its_derived_fields_from_samples(tmp_path):
    """nanoGPT's `time` in tokens (1,024 an iteration = 16 sequences of 64): the record's throughput is tokens/s,
    tokens_per_s the same figure (was 64x it) and TFLOP/s from the samples/s it holds."""
    script = tmp_path / "nano.py"
    script.write_text(NANOGPT_LIKE)
    done = run_dlperf(["run", "--model", "gpt", "--seq-length", "64", "--global-batch-size", "16", "--instrument",
                       "off", "--command", f"{sys.executable} {script}", "--out", str(tmp_path / "out")])  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (path,) = [p for p in (tmp_path / "out").rglob("*.json") if p.parent != tmp_path / "out"]
    record = json.loads(path.read_text())
    assert record["unit"] == "tokens/s" and record["tokens_per_s"] == pytest.approx(record["throughput"])
    seconds = 16 / (record["throughput"] / 64)  # one iteration's time from the samples/s
    assert record["flops_per_iteration"] == pytest.approx(record["tflops_per_device"] * 1e12 * seconds)


COMPILED_STEP = """
import torch
model = torch.nn.Linear(8, 8)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
step = torch.compile(optimizer.step, backend="eager")  # dynamo traces the step and the hooks it calls
for _ in range(4):
    model(torch.randn(2, 8)).sum().backward()
    step()
print("done")
"""


@pytest.mark.slow
def test_a_compiled_step_prints_nothing_of_the_hook(tmp_path):
    """Dynamo traced the hook's clock call and warned about `time.monotonic` into the script's stderr."""
    script = tmp_path / "compiled.py"
    script.write_text(COMPILED_STEP)
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env = {**base, "PYTHONPATH": str(STARTUP), STEPS_VARIABLE: str(tmp_path / "run.steps")}
    hooked = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert hooked.stdout == "done\n" and "monotonic" not in hooked.stderr and "UserWarning" not in hooked.stderr
    (side,) = tmp_path.glob("run.steps.*")
    assert [line.split()[0] for line in side.read_text().splitlines() if line[:1] != "#"] == ["1", "2", "3", "4"]
