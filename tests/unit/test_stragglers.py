"""Straggler summary against hand-computed medians."""

from __future__ import annotations

import pytest

from dlperf.metrics.stragglers import find_stragglers


def test_one_slow_rank_is_flagged_by_hand():
    steps = [
        [10.0, 11.0, 10.0, 50.0],  # one slow step: the median (10.5) ignores it
        [10.0, 10.2, 10.4],  # 10.2
        [12.0, 11.0, 11.5],  # 11.5: 11.5 / 10.35 = 1.111, more than 5 % above the median rank
        [10.2, 10.2, 10.2],  # 10.2
    ]
    result = find_stragglers(steps, ["a", "a", "b", "b"])
    assert result.rank_median_ms == [10.5, 10.2, 11.5, 10.2]
    assert result.median_rank_ms == pytest.approx(10.35)  # median of 10.2, 10.2, 10.5, 11.5
    assert (result.slowest_rank, result.slowest_host) == (2, "b")
    assert result.spread == pytest.approx((11.5 - 10.2) / 10.35)
    assert result.stragglers == [2] and result.flagged
    assert find_stragglers(steps, ["a", "a", "b", "b"], straggler_pct=0.12).stragglers == []


def test_even_ranks_and_bad_input():
    even = find_stragglers([[5.0, 5.0], [5.1, 5.1]], ["h", "h"])
    assert not even.flagged and even.slowest_rank == 1
    with pytest.raises(ValueError, match="hosts"):
        find_stragglers([[1.0]], ["a", "b"])
    with pytest.raises(ValueError, match="at least one"):
        find_stragglers([[1.0], []], ["a", "b"])


def _rank(rank: int, world: int, store: str, out: str) -> None:
    """One rank of a 2-process gloo run: its own work per step timed (rank 1 sleeps 40 ms more on purpose), then a
    barrier standing in for the gradient all-reduce; step times gathered at the two window edges only."""
    import json
    import socket
    import time

    import torch
    import torch.distributed as dist

    from dlperf.records.codec import dump

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    a = torch.randn(64, 64)
    gathered: list[list[float]] = [[] for _ in range(world)]
    for _window in range(2):
        steps = []
        for _ in range(3):
            start = time.perf_counter()
            a @ a
            time.sleep(0.005 + 0.04 * rank)
            steps.append((time.perf_counter() - start) * 1000)
            dist.barrier()
        window: list = [None] * world
        dist.all_gather_object(window, (steps, socket.gethostname() + f"-r{rank}"))
        for r, (times, _host) in enumerate(window):
            gathered[r].extend(times)
        hosts = [host for _, host in window]
    if rank == 0:
        result = find_stragglers(gathered, hosts)
        with open(out, "w") as f:
            json.dump(dump(result), f)
    dist.destroy_process_group()


@pytest.mark.slow
def test_real_two_rank_run_flags_the_slowed_rank(tmp_path):
    import json

    import torch.multiprocessing as mp

    out = tmp_path / "stragglers.json"
    mp.spawn(_rank, args=(2, str(tmp_path / "store"), str(out)), nprocs=2)
    result = json.loads(out.read_text())
    assert result["slowest_rank"] == 1 and result["stragglers"] == [1] and result["flagged"]
    assert result["slowest_host"].endswith("-r1")
    assert result["rank_median_ms"][1] >= 45.0  # at least its 45 ms of sleep
