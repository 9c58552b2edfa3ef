"""The scaling prediction on cases worked by hand (numbers in the comments)."""

from __future__ import annotations

import pytest

from dlperf.errors import ConfigError
from dlperf.metrics.bandwidth import AlphaBetaFit
from dlperf.predict import (
    GptSingleDevice,
    Link,
    SingleDeviceRun,
    allreduce_s,
    ddp_buckets,
    predict_data_parallel,
    predict_gpt_layout,
    ring_allreduce_s,
    run_from_record,
)


def test_ring_allreduce():
    # 4 ranks, 1000 bytes, 1 ms per step, 1 us per byte: 6 steps (6 ms) + 1.5 x 1000 bytes (1.5 ms)
    assert ring_allreduce_s(1000, 4, Link(1e-3, 1e-6)) == pytest.approx(7.5e-3)
    assert ring_allreduce_s(1000, 1, Link(1e-3, 1e-6)) == 0.0


def test_hierarchical_allreduce():
    # 2 nodes x 2 devices, 100 bytes: inside 2(1)/2 x 100 x 0.001 = 0.1 s; across 2 x 0.01 + 1 x 100 x 0.01 = 1.02 s
    assert allreduce_s(100, 2, 2, Link(0.0, 1e-3), Link(1e-2, 1e-2)) == pytest.approx(1.12)


def test_link_from_a_commbench_fit():
    # all-reduce over 4 ranks fitted as 6 ms + 1.5 us/byte: the ring's 6 steps and bus factor 1.5 give 1 ms, 1 us/byte
    fit = AlphaBetaFit("all_reduce", 4, alpha_s=6e-3, beta_s_per_byte=1.5e-6, r2=1.0, max_rel_error=0.0, points=4)
    assert Link.from_fit(fit) == Link(pytest.approx(1e-3), pytest.approx(1e-6))
    # all-to-all over 4 ranks, 20 us + 0.75 ns per buffer byte: every peer posted at once (one latency), 3/4 of the
    # buffer leaves the rank: 1 ns per byte that crosses, what the MoE model's dispatch multiplies by
    fit = AlphaBetaFit("all_to_all", 4, alpha_s=2e-5, beta_s_per_byte=7.5e-10, r2=1.0, max_rel_error=0.0, points=4)
    assert Link.from_fit(fit) == Link(pytest.approx(2e-5), pytest.approx(1e-9))


def test_ddp_buckets():
    mib = 1024 * 1024
    assert ddp_buckets(60 * mib) == [(mib, 1), (25 * mib, 2), (9 * mib, 1)]
    assert ddp_buckets(100, bucket_bytes=50, first_bucket_bytes=0) == [(50, 2)]
    # 10^18 bytes are 4·10^10 buckets: runs of equal buckets, not one entry each (which never finished)
    assert ddp_buckets(10**18) == [(mib, 1), (25 * mib, (10**18 - mib) // (25 * mib)), ((10**18 - mib) % (25 * mib), 1)]


@pytest.mark.parametrize("beta", [1e-4, 4e-3, 1e-2, 0.05])
def test_closed_form_queue_matches_bucket_by_bucket(beta):
    """The run-length queue against a plain simulation of every bucket (the model's definition)."""
    from dlperf.predict.model import exposed_allreduce_s

    sizes = [7] + [20] * 9 + [3]
    cost = lambda size: 0.01 + beta * size  # noqa: E731
    done = busy = ready = 0.0
    for size in sizes:
        ready += size
        done = max(done, 0.6 * ready / sum(sizes)) + cost(size)
        busy += cost(size)
    got = exposed_allreduce_s(0.6, [(7, 1), (20, 9), (3, 1)], cost)
    assert got == (pytest.approx(max(0.0, done - 0.6)), pytest.approx(busy))


def test_allreduce_hidden_then_exposed():
    # step 1 s, backward 0.6 s, 100 gradient bytes in 2 buckets of 50, ready at 0.3 s and 0.6 s.
    # 2 devices, 10 ms per step, 4 ms per byte: each all-reduce 2 x 0.01 + 1 x 50 x 0.004 = 0.22 s.
    # Bucket 1: 0.30 -> 0.52; bucket 2: 0.60 -> 0.82, so 0.22 s exposed: step 1.22 s, speedup 2 / 1.22.
    run = SingleDeviceRun(1.0, 32, 0.6, 100, bucket_bytes=50, first_bucket_bytes=0)
    got = predict_data_parallel(run, devices_per_node=2, intra=Link(0.01, 0.004))
    assert got.exposed_s == pytest.approx(0.22)
    assert got.comm_s == pytest.approx(0.44)
    assert got.step_time_s == pytest.approx(1.22)
    assert got.throughput == pytest.approx(64 / 1.22)
    assert got.speedup == pytest.approx(2 / 1.22)
    assert got.efficiency == pytest.approx(1 / 1.22)


def test_slow_allreduces_queue():
    # the same with 10 ms per byte: 0.02 + 0.5 = 0.52 s each; bucket 1: 0.30 -> 0.82; bucket 2 waits: 0.82 -> 1.34,
    # so 0.74 s exposed
    run = SingleDeviceRun(1.0, 32, 0.6, 100, bucket_bytes=50, first_bucket_bytes=0)
    assert predict_data_parallel(run, 2, intra=Link(0.01, 0.01)).exposed_s == pytest.approx(0.74)


def test_only_the_last_bucket_is_exposed_on_fast_links():
    # 4 nodes x 8 devices; the last bucket (50 bytes) is ready when the backward pass ends, so its all-reduce is
    # exposed: 2 x 7/8 x 50 x 1e-9 + 2 x 3/4 x 50 x 1e-6 = 8.75e-8 + 7.5e-5 s; the first is hidden
    run = SingleDeviceRun(1.0, 32, 0.6, 100, bucket_bytes=50, first_bucket_bytes=0)
    got = predict_data_parallel(run, 8, 4, intra=Link(0.0, 1e-9), inter=Link(0.0, 1e-6))
    assert got.world_size == 32
    assert got.exposed_s == pytest.approx(8.75e-8 + 7.5e-5)
    assert got.speedup == pytest.approx(32 / (1 + 8.75e-8 + 7.5e-5))


def test_several_nodes_need_the_inter_link():
    with pytest.raises(ConfigError, match="inter-node link"):
        predict_data_parallel(SingleDeviceRun(1.0, 32, 0.6, 100), 8, 2, intra=Link(0.0, 1e-9))


def test_gpt_tp2_pp2():
    # 4 layers, micro batch 1 x seq 10 x hidden 50 x 2 bytes = 1000-byte messages; 1 device: 1 s per micro-batch.
    # tp=2, pp=2 in one 4-device node, 4 micro-batches; link 1 ms per step, 1 us per byte.
    # compute per slot 1 / 4 = 0.25 s; TP: 2 layers x 4 all-reduces x (2 x 1 ms + 1 x 1000 x 1 us = 3 ms) = 24 ms;
    # PP: 2 x (1 ms + 1 ms) = 4 ms; slot 0.278 s; step (4 + 2 - 1) x 0.278 = 1.39 s; speedup 4 / 1.39
    run = GptSingleDevice(1.0, 0.6, 10**6, layers=4, hidden=50, seq_length=10, micro_batch=1)
    got = predict_gpt_layout(run, dp=1, tp=2, pp=2, micro_batches=4, devices_per_node=4, intra=Link(1e-3, 1e-6))
    assert got.tp_comm_s == pytest.approx(0.024)
    assert got.p2p_s == pytest.approx(0.004)
    assert got.step_time_s == pytest.approx(1.39)
    assert got.speedup == pytest.approx(4 / 1.39)
    assert got.bubble_fraction == pytest.approx(0.2)


def test_gpt_dp_only_matches_ddp():
    run = GptSingleDevice(1.0, 0.6, 100 * 2**20, layers=4, hidden=64, seq_length=16, micro_batch=2)
    layout = predict_gpt_layout(run, dp=4, tp=1, pp=1, micro_batches=1, devices_per_node=4, intra=Link(1e-5, 1e-9))
    ddp = predict_data_parallel(SingleDeviceRun(1.0, 2, 0.6, 100 * 2**20), 4, intra=Link(1e-5, 1e-9))
    assert layout.step_time_s == pytest.approx(ddp.step_time_s)
    assert layout.speedup == pytest.approx(ddp.speedup)


def test_pipeline_must_divide_the_layers():
    run = GptSingleDevice(1.0, 0.6, 100, layers=3, hidden=64, seq_length=16, micro_batch=2)
    with pytest.raises(ConfigError, match="3 layers do not split into 2"):
        predict_gpt_layout(run, dp=1, tp=1, pp=2, micro_batches=4, devices_per_node=2, intra=Link(0, 1e-9))


def test_run_from_a_record():
    record = {"status": "ok", "world_size": 1, "global_batch_size": 128, "throughput": 383.76}
    run = run_from_record(record, gradient_bytes=4 * 25_557_032)
    assert run.step_time_s == pytest.approx(128 / 383.76) and run.backward_share == pytest.approx(2 / 3)
    with pytest.raises(ConfigError, match="1 device"):
        run_from_record({**record, "world_size": 8}, gradient_bytes=1)
    with pytest.raises(ConfigError, match="no gradient_bytes"):
        run_from_record(record)
    assert run_from_record({**record, "gradient_bytes": 8}).gradient_bytes == 8
