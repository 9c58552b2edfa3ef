"""How a `--command`'s processes are started and reported: OMP_NUM_THREADS as torchrun sets it, the line a
failure quotes, the command's own environment as its `env` words give it, and the console's unit (the version
asked in that environment: tests/e2e/test_frameworks.py)."""

from __future__ import annotations

import sys

from dlperf.cli.display import run_line
from dlperf.external.identity import command_line, interpreter
from dlperf.external.template import Rendezvous, node_processes
from dlperf.launch.external_node import last_words, thread_env, thread_setting

RDZV = Rendezvous(1, 2, "127.0.0.1", 29500, 8, "fp32", 1)

# What torch 2.14's torchrun printed here for `raise ValueError("bad shape 3 vs 4")` in its one worker (paths cut).
TORCHRUN_FAILURE = """step 1
Traceback (most recent call last):
  File "/tmp/h29/fail.py", line 3, in <module>
    raise ValueError("bad shape 3 vs 4")
ValueError: bad shape 3 vs 4
W1125 16:12:50.702000 7468 torch/distributed/elastic/multiprocessing/api.py:908] Sending process 7532 closing signal SIGTERM
E1125 16:12:50.783000 7468 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 0 (pid: 7531) of binary: /venv/bin/python
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "/venv/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 386, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
============================================================
fail.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-25_16:12:50
  exitcode  : 1 (pid: 7531)
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""  # noqa: E501, W291


def test_failure_quotes_the_error_above_torchruns_report():
    """The worker's error, not torchrun's SIGTERM warning to the other workers logged after it."""
    assert last_words(TORCHRUN_FAILURE.splitlines()) == "ValueError: bad shape 3 vs 4"
    assert last_words(["loading", "RuntimeError: no GPU", "=" * 40, "  ", "-" * 10]) == "RuntimeError: no GPU"
    assert last_words(["=" * 60, ""]) == "" and last_words([]) == ""


def test_threads_as_torchrun_sets_them_unless_set(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    ranks = node_processes("python t.py", RDZV, 0)
    threads = thread_setting(ranks, cores=7)
    assert (threads.value, threads.processes, thread_env(threads)) == ("3", 2, {"OMP_NUM_THREADS": "3"})
    assert thread_setting(ranks[:1], cores=1).value == "1"
    own = thread_setting(node_processes("env OMP_NUM_THREADS=5 python t.py", RDZV, 0), cores=8)
    assert (own.value, own.set_by, thread_env(own)) == ("5", "the environment", {})
    per_node = thread_setting(node_processes("torchrun t.py", RDZV, 0, per="node"), cores=8)
    assert per_node.value is None and thread_env(per_node) == {}  # torchrun decides for its own workers
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert thread_setting(ranks, cores=8).value == "2" and thread_env(thread_setting(ranks, cores=8)) == {}
    unset = thread_setting(node_processes("env -u OMP_NUM_THREADS python t.py", RDZV, 0), cores=8)
    assert unset.value is None and thread_env(unset) == {}
    monkeypatch.delenv("OMP_NUM_THREADS")
    # a sweep's share: the same threads per process in every topology (1n1g beside 1n2g on 2 cores: 1 each)
    shared = thread_setting(ranks[:1], cores=2, share=1)
    assert (shared.value, thread_env(shared)) == ("1", {"OMP_NUM_THREADS": "1"})


def test_command_line_reads_env_options_into_the_environment():
    line = command_line(["env", "-u", "RANK", "--unset=LOCAL_RANK", "A=1", "env", "-C", "sub", "B=2", "python3", "t"])
    assert line.words == ["python3", "t"] and line.chdir == "sub"
    assert line.environment({"RANK": "0", "LOCAL_RANK": "0", "C": "3"}) == {"C": "3", "A": "1", "B": "2"}
    assert command_line(["env", "-i", "PATH=/x", "python", "t"]).environment({"HOME": "/root"}) == {"PATH": "/x"}
    assert command_line(["/bin/sh", "-c", "X=1 python t.py | tee log"]).assigned == {"X": "1"}
    assert interpreter(["env", "-u", "RANK", sys.executable, "t.py"]) == sys.executable
    assert interpreter(["env", "-S", f"{sys.executable} -u", "t.py"]) == sys.executable


def test_console_names_the_records_unit():
    record = {"kind": "external", "model": "resnet50", "case": "1n1g",
              "group": "b8_fp32_external", "repeat": 1, "status": "ok", "throughput": 12.5,
              "unit": "images/s"}  # fmt: skip
    assert "12.50 images/s" in run_line(record)
    assert "12.50 samples/s" in run_line({**record, "unit": None})


def test_the_hook_goes_first_on_the_pythonpath_the_program_gets():
    from dlperf.instrument import STARTUP, place

    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": "/site"}
    plain = place([sys.executable, "t.py"], env, "/r/run.steps")
    assert plain.reason is None and plain.env["PYTHONPATH"] == f"{STARTUP}:/site"
    assert plain.env["DLPERF_STEPS"] == "/r/run.steps" and plain.argv == [sys.executable, "t.py"]
    own = place(["env", "-u", "RANK", "PYTHONPATH=/hf4", sys.executable, "t.py"], env, "/r/run.steps")
    assert own.argv == ["env", "-u", "RANK", f"PYTHONPATH={STARTUP}:/hf4", sys.executable, "t.py"]
    assert place(["/bin/true"], env, "p").reason == "its program is not Python (nor a script with a Python #! line)"
    assert place(["env", "-i", sys.executable, "t.py"], env, "p").reason == "it clears its environment (env -i)"
