"""A timed-out run names each of its ranks by state, read from the markers the ranks keep (launch.one_process)."""

from __future__ import annotations

import gc
import os
from dataclasses import replace

from dlperf.launch import one_process
from dlperf.launch.local import rank_states, timed_out
from dlperf.launch.messages import AgentSpec, NodeLaunch
from dlperf.launch.one_process import one_rank_env, running_marker


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


def test_a_lone_rank_runs_in_its_agent_and_its_failure_is_the_result(tmp_path, monkeypatch, capsys):
    """One process on one node: no launcher, the rank in the agent's own process, with the variables torchrun gives
    one worker; a rank that raises is a failed result with its cause's line (its traceback on the console), and it
    leaves the markers a timeout reads: started, no longer running; the garbage collector, off for the rank's
    start-up, is back on."""
    for name in one_rank_env(""):
        monkeypatch.setenv(name, "stale")  # restored after the test: the rank sets them in this process
    launch = NodeLaunch(nnodes=1, nproc_per_node=1, run_id="r", rdzv_endpoint="127.0.0.1:29511", log_dir=str(tmp_path))
    assert launch.one_process and not replace(launch, nproc_per_node=2).one_process
    result = one_process.launch(AgentSpec(run={"model": "no-such-model"}, log_path=str(tmp_path / "r.log"),
                                          launch=launch, kind="native"))  # fmt: skip
    assert result.failure.error.startswith("ConfigError: unknown model 'no-such-model'"), result.failure.error
    assert (result.failure.rank, result.failure.exitcode) == (0, 1)
    assert "Traceback" in capsys.readouterr().err
    assert rank_states(tmp_path, 1) == ([], [])
    assert gc.isenabled()
    assert (os.environ["RANK"], os.environ["WORLD_SIZE"], os.environ["MASTER_PORT"]) == ("0", "1", "29511")
