"""A command process's output as the agent streams it: whole lines to the log however the pipe cuts them, the
arrival stamps on line ends and coalesced, the console a bounded view that says what it left out."""

from __future__ import annotations

import io
import threading
import time

from dlperf.framework_logs.arrivals import stamped_lines
from dlperf.launch.command_output import CONSOLE_BURST, ConsoleView, ProcessOutput, RunLog
from dlperf.launch.external_node import StopRule


def output(tmp_path, rule: StopRule | None = None) -> tuple[ProcessOutput, io.BytesIO]:
    log = RunLog(open(tmp_path / "run.log", "ab"), open(tmp_path / "run.arrivals", "ab"))  # noqa: SIM115
    console = io.BytesIO()
    view = ConsoleView(b"[rank 0] ", full=False, log_name="run.log")
    return ProcessOutput(view, log, threading.Lock(), rule or StopRule(), True, console), console


def test_blocks_cut_anywhere_give_whole_lines_and_stamps_on_their_ends(tmp_path):
    out, _ = output(tmp_path)
    text = b"".join(b"line %d\n" % i for i in range(1000)) + b"no line end"
    for start in range(0, len(text), 777):  # pipe reads that end mid-line
        out.feed(text[start : start + 777])
        time.sleep(0.002)
    out.end()
    assert out.log is not None
    out.log.close()
    assert (tmp_path / "run.log").read_bytes() == text + b"\n"
    stamped = list(stamped_lines(tmp_path / "run.log", tmp_path / "run.arrivals"))
    assert [line for _, line in stamped] == [f"line {i}" for i in range(1000)] + ["no line end"]
    assert [when for when, _ in stamped] == sorted(when for when, _ in stamped)
    assert len((tmp_path / "run.arrivals").read_text().splitlines()) <= len(range(0, len(text), 777)) + 1
    assert list(out.tail)[-2:] == ["line 999", "no line end"]


def test_the_console_shows_a_burst_then_says_what_it_held_back(tmp_path):
    out, console = output(tmp_path)
    out.feed(b"".join(b"chatter %d\n" % i for i in range(100_000)))
    out.end()
    shown = console.getvalue().decode().splitlines()
    assert shown[:CONSOLE_BURST] == [f"[rank 0] chatter {i}" for i in range(CONSOLE_BURST)]
    assert shown[CONSOLE_BURST].startswith(f"[rank 0] ... {100_000 - CONSOLE_BURST:,} lines (")
    assert shown[CONSOLE_BURST].endswith("not shown here: run.log holds them")
    assert shown[-5:] == [f"[rank 0] chatter {i}" for i in range(99_995, 100_000)]  # its last words
    assert (tmp_path / "run.log").read_bytes().count(b"\n") == 100_000  # the log holds every line


def test_the_log_ends_at_the_throughput_line_that_stops_the_run(tmp_path):
    import re

    rule = StopRule(lines=2, patterns=[re.compile(r"^speed \d+")])
    out, console = output(tmp_path, rule)
    out.feed(b"start\nspeed 1\nnoise\nspeed 2\nTermination signal\n")
    out.end()
    assert rule.reached.is_set()
    assert (tmp_path / "run.log").read_bytes() == b"start\nspeed 1\nnoise\nspeed 2\n"
    assert b"[rank 0] Termination signal" in console.getvalue()  # the console still shows it
