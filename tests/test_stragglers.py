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
    assert result.stragglers == [2] and result.as_record()["flagged"]
    assert find_stragglers(steps, ["a", "a", "b", "b"], straggler_pct=0.12).stragglers == []


def test_even_ranks_and_bad_input():
    even = find_stragglers([[5.0, 5.0], [5.1, 5.1]], ["h", "h"])
    assert not even.flagged and even.slowest_rank == 1
    with pytest.raises(ValueError, match="hosts"):
        find_stragglers([[1.0]], ["a", "b"])
    with pytest.raises(ValueError, match="at least one"):
        find_stragglers([[1.0], []], ["a", "b"])
