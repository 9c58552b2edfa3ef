"""The start-up hook's GPU side (instrument/startup/_dlperf_gpu_steps.py): step times as the GPU finishes the steps,
on a simulated CUDA stream whose host runs ahead (no GPU here); and GradScaler's skipped steps counted, through the
real hook on the CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from dlperf.instrument import STARTUP, STEPS_VARIABLE

sys.path.insert(0, str(STARTUP))
import _dlperf_gpu_steps as gpu_steps  # noqa: E402

DEVICE_EPOCH = 5000.0  # the GPU's timer counts from its own origin: only differences between events mean anything


class FakeCuda:
    """One CUDA stream: queued work runs in order after the host queues it; `now` is the host's monotonic clock."""

    def __init__(self) -> None:
        self.now = 0.0
        self.busy_until = 0.0
        self.capturing = False
        self.broken = False
        self.cuda = self  # torch.cuda
        self.waits = 0

    def queue(self, seconds: float) -> None:
        self.busy_until = max(self.now, self.busy_until) + seconds

    def Event(self, enable_timing: bool) -> FakeEvent:  # noqa: N802 - torch's name
        assert enable_timing
        return FakeEvent(self)

    def is_current_stream_capturing(self) -> bool:
        return self.capturing

    def current_stream(self) -> SimpleNamespace:
        return SimpleNamespace(query=lambda: self.now >= self.busy_until)


class FakeEvent:
    def __init__(self, gpu: FakeCuda) -> None:
        self.gpu, self.device_time = gpu, None

    def record(self) -> None:
        if self.gpu.broken:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        self.device_time = max(self.gpu.now, self.gpu.busy_until) + DEVICE_EPOCH  # after all queued work

    def query(self) -> bool:
        return self.gpu.now + DEVICE_EPOCH >= self.device_time

    def synchronize(self) -> None:
        self.gpu.waits += 1
        self.gpu.now = max(self.gpu.now, self.device_time - DEVICE_EPOCH)

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.query() and end.query(), "cudaEventElapsedTime needs both events completed"
        return (end.device_time - self.device_time) * 1000


def stamp(clock: gpu_steps.CudaStepClock, entry: int) -> bool:
    """As the hook does at an update's last step() call: an event now, the entry added with its host time."""
    event = clock.event()
    clock.add(entry, event, clock.clock())
    return event is not None


def test_gpu_steps_are_stamped_when_the_gpu_finishes_them_not_when_queued():
    gpu = FakeCuda()
    clock = gpu_steps.CudaStepClock(gpu, clock=lambda: gpu.now)
    queued = []
    for step in range(1, 6):  # 0.1 s of GPU work a step; the host queues the next 1 ms later
        gpu.queue(0.1)
        assert stamp(clock, step)
        queued.append(gpu.now)
        gpu.now += 0.001
    assert gpu.waits == 1  # the first step's anchor: the host waited for the GPU once (it idles 1 ms then)
    assert queued == pytest.approx([0.1, 0.101, 0.102, 0.103, 0.104])  # where step() returned
    assert clock.ready() == [(1, pytest.approx(0.1))]  # at 0.105 the GPU has finished step 1 only
    gpu.now = 0.35
    assert clock.ready() == [(2, pytest.approx(0.201)), (3, pytest.approx(0.301))]
    assert clock.ready(final=True) == [(4, pytest.approx(0.401)), (5, pytest.approx(0.501))]  # exit: waits
    # steps 2..5 by the GPU: 0.401 s for 4 steps, 10 steps/s; their enqueue times said 0.004 s, 1,000 steps/s
    assert gpu.now == pytest.approx(0.501) and not clock.pending


def test_the_anchor_is_taken_again_only_when_the_stream_is_idle():
    gpu = FakeCuda()
    clock = gpu_steps.CudaStepClock(gpu, clock=lambda: gpu.now)
    gpu.queue(0.1)
    stamp(clock, 1)
    first = clock.anchor
    gpu.queue(0.1)
    stamp(clock, 2)
    gpu.now = 0.15
    clock.ready()  # step 2 still running: the anchor stays (anchoring now would wait for the GPU)
    assert clock.anchor is first and gpu.waits == 1
    gpu.now = 0.3
    assert clock.ready() == [(2, pytest.approx(0.2))]
    assert clock.anchor is not first and clock.anchor[1] == pytest.approx(0.3) and gpu.waits == 2  # idle: no wait
    gpu.queue(0.05)
    stamp(clock, 3)
    gpu.now = 1.0
    assert clock.ready() == [(3, pytest.approx(0.35))]


def test_capture_and_cuda_failures_fall_back_to_host_time():
    gpu = FakeCuda()
    clock = gpu_steps.CudaStepClock(gpu, clock=lambda: gpu.now)
    gpu.capturing = True  # a CUDA graph being captured: no event may be recorded
    assert not stamp(clock, 1) and clock.problem is None  # host time, kept in order with the GPU's steps
    gpu.capturing = False
    gpu.queue(0.1)
    assert stamp(clock, 2)
    gpu.queue(0.1)
    assert stamp(clock, 3)
    gpu.now = 0.15
    gpu.broken = True  # CUDA fails at the next query: pending steps keep the host times they were queued at
    clock.pending[1][1].query = lambda: (_ for _ in ()).throw(RuntimeError("CUDA error: device lost"))
    assert clock.ready() == [(1, 0.0), (2, pytest.approx(0.1)), (3, pytest.approx(0.1))]
    assert "device lost" in clock.problem and not stamp(clock, 4)


def test_only_an_optimizer_on_a_cuda_device_gets_the_gpu_clock():
    import torch  # noqa: F401 - the script's, imported before its first step in a hooked run

    def optimizer(device: str):
        return SimpleNamespace(param_groups=[{"params": [SimpleNamespace(device=SimpleNamespace(type=device))]}])

    assert isinstance(gpu_steps.clock_for(optimizer("cuda")), gpu_steps.CudaStepClock)
    assert gpu_steps.clock_for(optimizer("cpu")) is None
    assert gpu_steps.clock_for(SimpleNamespace(param_groups=[])) is None


SCALED = """
import sys, torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, fused=sys.argv[1] == "fused")
scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
for i in range(6):
    loss = model(torch.randn(3, 4)).sum()
    scaler.scale(loss * (float("inf") if i < 2 else 1.0)).backward()  # inf gradients: the first two skipped
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
print(scaler.get_scale())
"""


@pytest.mark.slow
@pytest.mark.parametrize("impl", ["foreach", "fused"])
def test_steps_gradscaler_skips_are_counted_once_each(tmp_path: Path, impl: str):
    """GradScaler skips a plain optimizer's step() on inf/nan gradients (the hook saw 4 of 6 iterations); a fused
    optimizer is always stepped, skipping on the device, and is counted once, not twice."""
    env = {**os.environ, "PYTHONPATH": str(STARTUP), STEPS_VARIABLE: str(tmp_path / "run.steps")}
    done = subprocess.run([sys.executable, "-c", SCALED, impl], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == "", done.stderr[-2000:]
    assert float(done.stdout) == 2.0**14  # backed off twice: two steps were skipped
    (side,) = tmp_path.glob("run.steps.*")  # the process's own file: run.steps.<host>.<pid>
    lines = [line for line in side.read_text().splitlines() if line[:1] != "#"]  # a note: the model's input counted
    assert [line.split()[0] for line in lines] == ["1", "2", "3", "4", "5", "6"], lines


def test_an_updates_later_calls_move_its_one_event():
    """DeepSpeed steps each parameter group in turn: every call records the update's one event again (its time is
    the last call's), none is made per call."""
    gpu = FakeCuda()
    clock = gpu_steps.CudaStepClock(gpu, clock=lambda: gpu.now)
    gpu.queue(0.1)
    first = clock.event()
    gpu.queue(0.05)  # the next group's optimizer kernels
    assert clock.event(first) is first
    clock.add(1, first, gpu.now)
    gpu.now = 1.0
    assert clock.ready() == [(1, pytest.approx(0.15))]
