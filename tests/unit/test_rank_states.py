"""A timed-out run names each of its ranks by state, read from the markers the ranks keep (launch.elastic)."""

from __future__ import annotations

from dlperf.launch.elastic import running_marker
from dlperf.launch.local import rank_states, timed_out


def test_ranks_running_finished_and_not_started_are_told_apart(tmp_path):
    for rank in (0, 1, 2):
        running_marker(tmp_path, rank, "started").touch()
    for rank in (0, 2):
        running_marker(tmp_path, rank).touch()  # rank 1 finished: started, no longer running; rank 3 never began
    running, starting = rank_states(tmp_path, 4)
    assert (running, starting) == ([0, 2], [3])
    error = timed_out(30, running, starting).failure.error
    said = "ranks 0, 2 still running and rank 3 not yet started"
    assert error == f"timed out after 30 s with {said}: raise --timeout or lower --iters"


def test_a_commands_own_processes_keep_no_markers_and_are_not_called_unstarted(tmp_path):
    assert rank_states(tmp_path, None) == ([], [])
    assert timed_out(30).failure.error == "timed out after 30 s: raise --timeout or lower --iters"
