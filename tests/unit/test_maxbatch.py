"""The max-batch search against a fake probe with a known boundary, and one real probe pair under a memory cap."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlperf.errors import ConfigError
from dlperf.maxbatch import ProbeOutcome, RunProbe, classify, dlperf_run_argv, find_max_batch

LIMIT_MIB = 1000.0


def fake(batch: int, error_at: int | None = None) -> ProbeOutcome:
    """Peak 100 + 10 MiB per sample against 1000 MiB: batch 90 is the largest that fits. Throughput
    b / (1 + b^2 / 2025) peaks at b = 45, so the fastest batch is not the largest."""
    if batch == error_at:
        return ProbeOutcome("error", reason="exit status 1: bad flag")
    peak = 100 + 10 * batch
    if peak > LIMIT_MIB:
        return ProbeOutcome("oom", reason="CUDA out of memory")
    return ProbeOutcome("ok", batch / (1 + batch**2 / 2025), peak, LIMIT_MIB)


def test_grows_then_bisects_to_the_boundary():
    got = find_max_batch(fake, start=1, max_batch=1024)
    # x2 up to the first OOM at 128, then bisect (64, 128): 96 oom, 80 ok, 88 ok, 92 oom, 90 ok, 91 oom
    assert [p.batch for p in got.probes] == [1, 2, 4, 8, 16, 32, 64, 128, 96, 80, 88, 92, 90, 91]
    assert [p.fits for p in got.probes][7:] == [False, False, True, True, False, True, False]
    assert got.max_batch == 90
    # of the fitting batches, 32 is the fastest: 32 / (1 + 1024/2025) = 21.25 > 64 / (1 + 4096/2025) = 21.17
    assert got.best_batch == 32
    assert got.best_throughput == pytest.approx(32 / (1 + 1024 / 2025))
    assert got.probes[7].reason == "CUDA out of memory" and got.error is None


def test_coarse_step_stops_within_one_step_of_the_boundary():
    got = find_max_batch(fake, start=8, max_batch=1024, step=8)
    # 8..64 fit, 128 oom; 96 oom, 80 ok, 88 ok: 88 and 96 are one step apart
    assert [p.batch for p in got.probes] == [8, 16, 32, 64, 128, 96, 80, 88]
    assert got.max_batch == 88 and 90 - got.max_batch < 8


def test_headroom_counts_a_run_near_the_limit_as_not_fitting():
    got = find_max_batch(fake, start=1, max_batch=1024, headroom_pct=20)
    assert got.max_batch == 70  # 100 + 10 x 70 = 800 MiB = 80 % of 1000
    near = [p for p in got.probes if p.status == "ok" and not p.fits]
    assert near and all(p.batch > 70 and "over 800 MiB" in p.reason for p in near)


def test_start_that_does_not_fit_halves_first():
    got = find_max_batch(fake, start=256, max_batch=1024)
    assert [p.batch for p in got.probes][:3] == [256, 128, 64]
    assert got.max_batch == 90


def test_ceiling_without_oom():
    got = find_max_batch(fake, start=1, max_batch=50)
    assert [p.batch for p in got.probes] == [1, 2, 4, 8, 16, 32, 50]
    assert got.max_batch == 50


def test_other_failure_stops_the_search():
    got = find_max_batch(lambda b: fake(b, error_at=16), start=1, max_batch=1024)
    assert got.max_batch == 8
    assert got.error == "batch 16: exit status 1: bad flag"
    assert [p.batch for p in got.probes] == [1, 2, 4, 8, 16]


def test_bad_arguments():
    with pytest.raises(ConfigError, match="headroom"):
        find_max_batch(fake, headroom_pct=100)
    with pytest.raises(ConfigError, match="start <= max batch"):
        find_max_batch(fake, start=8, max_batch=4)


@pytest.mark.parametrize(
    ("code", "record", "console", "status"),
    [
        (0, {"status": "ok", "throughput": 5.0, "peak_memory_mib": {"rss": 900.0}}, "", "ok"),
        (1, {"status": "failed", "error": "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"}, "", "oom"),
        (1, {"status": "failed", "error": "worker rank 0 was killed by SIGKILL", "failure": {"signal": "SIGKILL"}}, "",
         "oom"),
        (1, None, "RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes", "oom"),
        (-9, None, "", "oom"),
        (2, None, "dlperf: error: unknown model 'x'", "error"),
    ],
)  # fmt: skip
def test_classify(code, record, console, status):
    assert classify(code, record, console).status == status


def test_onednn_primitive_failure_is_oom_only_under_a_cap():
    record = {"status": "failed", "error": "RuntimeError: could not create a primitive"}
    assert classify(1, record, "", capped=True).status == "oom"
    assert classify(1, record, "").status == "error"


def test_cuda_peak_is_judged_against_the_device():
    record = {"status": "ok", "throughput": 9.0, "peak_memory_mib": {"allocated": 70000.0, "reserved": 76000.0},
              "env": {"gpus": [{"memory_mib": 81559}]}}  # fmt: skip
    assert classify(0, record, "") == ProbeOutcome("ok", 9.0, 76000.0, 81559)


@pytest.mark.slow
def test_real_probe_under_a_memory_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """`dlperf run` as fresh processes under a 4.5 GiB address-space cap (torch's import alone maps about 3.4 GiB):
    ResNet-50 at 128x128 runs out of memory at batch 32 (about 1.1 GB of activations), and the next probe, at 16,
    still trains. With a start that does not fit and a step as wide as the start, those are the only two probes
    on this machine; a machine whose processes map more memory halves further, which the asserts allow."""
    monkeypatch.setenv("MALLOC_ARENA_MAX", "2")  # fewer glibc arenas: the mapped size varies less with threads
    args = ["--model", "resnet50", "--image-size", "128", "--num-classes", "10", "--device", "cpu",
            "--warmup-iters", "1", "--iters", "1", "--print-every", "1"]  # fmt: skip
    probe = RunProbe(dlperf_run_argv(args), tmp_path, memory_cap_bytes=int(4.5 * 2**30), timeout_s=300)
    got = find_max_batch(probe, start=32, max_batch=32, step=32)
    assert got.probes[0].status == "oom" and not got.probes[0].fits, got.probes[0]
    assert got.probes[0].reason  # the allocator's message (CPU allocator or oneDNN, whichever failed first)
    last = got.probes[-1]
    assert last.fits and last.throughput > 0 and last.peak_memory_mib > 0, last
    assert got.max_batch == got.best_batch == last.batch < 32
    assert (tmp_path / f"b{last.batch}").is_dir()
