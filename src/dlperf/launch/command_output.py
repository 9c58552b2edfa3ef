"""One command process's output, streamed: read from its pipe in blocks, written once to the run's log (node 0),
shown on the node's console only as a bounded view, its last lines kept for the failure message, and, where the
pipe closed while the process ran on, where its output went instead.

A script can print a gigabyte (a framework's warnings, debug output): line-by-line copying with a flush per line
ran at ~1.6 MB/s, and the console held every line a second time. Here each block costs a few calls whatever its
lines, the console shows a process's lines at a bounded rate (the log holds all of them), and the arrival stamps
(framework_logs/arrivals.py) are coalesced to one per millisecond, the resolution the arrival reading uses.
"""

from __future__ import annotations

import collections
import contextlib
import os
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Protocol

from dlperf.wording import count

READ_BYTES = 1 << 16  # a pipe's capacity: one read takes what the process has written
MAX_LINE = 1 << 20  # a "line" longer than this is cut into lines of this length (the readers refuse it anyway)
TAIL_LINES = 100  # a failed process's last lines, where its error is looked for (torchrun's report alone is ~35)
TAIL_CHARS = 4096  # of each of them
STAMP_S = 1e-3  # lines closer than this to the last stamp share the next one (arrivals.BURST_S: a burst anyway)
CONSOLE_BURST = 200  # lines a process shows on the console at once before the rate holds it
CONSOLE_RATE = 20.0  # lines per second shown after that
CONSOLE_LINE = 1000  # bytes of a line the view shows
LAST_SHOWN = 5  # where lines were held back: its last lines, shown when it ends
EXIT_GRACE_S = 0.2  # a pipe that closes this close to the process's exit closed because it exited


def _cut(line: bytes) -> bytes:
    return line if len(line) <= CONSOLE_LINE else line[:CONSOLE_LINE] + b" ..."


class Rule(Protocol):
    """The stop rule's side the output needs (external_node.StopRule)."""

    lines: int | None
    reached: threading.Event

    def count(self, line: str) -> None: ...


class RunLog:
    """Node 0's log of the command's lines and, beside it, when they reached it: `<end offset> <monotonic s>`
    (`<run>.arrivals`, the arrival-time second reading). A stamp is written when the next block comes at least
    STAMP_S after the last stamp written, so a block's lines carry its own time, or one under STAMP_S later."""

    def __init__(self, log: IO[bytes], arrivals: IO[bytes]) -> None:
        self.log, self.arrivals = log, arrivals
        self._pending: tuple[int, float] | None = None
        self._stamped = float("-inf")

    def write(self, lines: bytes) -> None:
        self.log.write(lines)
        self.log.flush()  # the CLI follows the file as it grows
        now = time.monotonic()
        if self._pending is not None and now - self._stamped >= STAMP_S:
            self._stamp()
        self._pending = (self.log.tell(), now)

    def _stamp(self) -> None:
        assert self._pending is not None
        end, when = self._pending
        self.arrivals.write(f"{end} {when:.6f}\n".encode())
        self._stamped, self._pending = when, None

    @property
    def name(self) -> str:
        return str(self.log.name)

    def close(self) -> None:
        if self._pending is not None:
            self._stamp()
        self.log.close()
        self.arrivals.close()


@dataclass
class ConsoleView:
    """What the node's console (the agent's stdout) shows of one process: every line where no log on this node
    holds them (`full`: another node's processes), else its lines at CONSOLE_RATE after a burst of CONSOLE_BURST,
    with a note of what was held back."""

    prefix: bytes
    full: bool
    log_name: str = "the run's log"
    tokens: float = CONSOLE_BURST
    at: float = field(default_factory=time.monotonic)
    held: int = 0
    held_bytes: int = 0

    def show(self, lines: bytes, count: int) -> bytes:
        """The console's text for these `count` whole lines."""
        if self.full:
            return self._prefixed(lines)
        now = time.monotonic()
        self.tokens = min(CONSOLE_BURST, self.tokens + (now - self.at) * CONSOLE_RATE)
        self.at = now
        # once lines are held back, they come again a second's worth at a time, after the note of what was held
        ready = int(self.tokens) if not self.held or self.tokens >= CONSOLE_RATE else 0
        shown = min(count, ready)
        self.tokens -= shown
        head = lines.split(b"\n", shown)[:shown]
        note = self._note() if shown and self.held else b""
        self.held += count - shown
        self.held_bytes += len(lines) - sum(len(line) + 1 for line in head)
        return note + self._prefixed(b"".join(_cut(line) + b"\n" for line in head))

    def end(self, tail: collections.deque[str]) -> bytes:
        """Where lines were held back: the note, then the process's last lines."""
        if not self.held:
            return b""
        last = list(tail)[-min(LAST_SHOWN, self.held) :]
        return self._note() + self._prefixed("".join(f"{line}\n" for line in last).encode())

    def _note(self) -> bytes:
        held = f"{self.held:,} lines ({self.held_bytes / 2**20:.1f} MiB)"
        note = f"... {held} not shown here: {self.log_name} holds them\n"
        self.held = self.held_bytes = 0
        return self.prefix + note.encode()

    def _prefixed(self, lines: bytes) -> bytes:
        return self.prefix + lines[:-1].replace(b"\n", b"\n" + self.prefix) + b"\n" if lines else b""


@dataclass
class ProcessOutput:
    """One process's lines as they come: to the log (where this node has one and dlperf has not ended the run),
    to the console view, into the tail, and counted for the stop rule where this is the process it follows."""

    view: ConsoleView
    log: RunLog | None
    lock: threading.Lock
    rule: Rule
    counted: bool
    console: IO[bytes]
    tail: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=TAIL_LINES))
    lines: int = 0
    carry: bytes = b""

    def feed(self, block: bytes) -> None:
        """A block read from the pipe: its whole lines go on, a cut last line waits for the next block."""
        data = self.carry + block
        cut = data.rfind(b"\n") + 1
        if not cut and len(data) < MAX_LINE:
            self.carry = data
            return
        cut = cut or len(data)
        self.carry = data[cut:]
        whole = data[:cut]
        self._lines(whole if whole.endswith(b"\n") else whole + b"\n")

    def end(self) -> None:
        """The pipe closed: a last line without a line end gets one; held-back lines are said."""
        if self.carry:
            self._lines(self.carry + b"\n")
            self.carry = b""
        with self.lock:
            self.console.write(self.view.end(self.tail))
            self.console.flush()

    def _lines(self, whole: bytes) -> None:
        logged = self._until_stopped(whole)
        count = whole.count(b"\n")
        self.lines += count
        with self.lock:
            if self.log is not None and logged:
                self.log.write(logged)
            self.console.write(self.view.show(whole, count))
            self.console.flush()
        last = whole[:-1].rsplit(b"\n", TAIL_LINES)[-TAIL_LINES:]
        self.tail.extend(line[:TAIL_CHARS].decode("utf-8", "replace").rstrip() for line in last)

    def _until_stopped(self, whole: bytes) -> bytes:
        """The lines the log keeps: all of them until dlperf ends the run, up to the throughput line that ends it
        where this process is counted (`--stop-after-lines`); what the processes print while dlperf stops them
        (a framework's own `Termination signal` report) is no part of the run."""
        if self.rule.reached.is_set():
            return b""
        if not self.counted or self.rule.lines is None:
            return whole
        lines = whole.split(b"\n")[:-1]
        for i, line in enumerate(lines):
            self.rule.count(line.decode("utf-8", "replace").rstrip())
            if self.rule.reached.is_set():
                return b"\n".join(lines[: i + 1]) + b"\n"
        return whole


def pump(pipe: IO[bytes], output: ProcessOutput, watch: OutputWatch) -> None:
    """Copy the pipe until it closes; where it closed while the process ran on, note where its output went."""
    with pipe:
        while block := pipe.read1(READ_BYTES):  # type: ignore[attr-defined] - a BufferedReader's: what is there
            output.feed(block)
    watch.closed(output.lines)
    output.end()


@dataclass
class OutputWatch:
    """Where a process's output goes that its pipe does not carry: a process of it whose stdout or stderr is not
    the pipe (a `--shell` line's `> file 2>&1`), the files its processes hold open for writing, and a pipe that
    closed while the process ran on (a script that closes both, a launcher that detaches). `look()` is called
    while it runs; the record's note says it only where the log gives no figure."""

    pid: int
    pipe: str  # `pipe:[inode]`, as /proc names the process's end of it
    own: tuple[str, ...]  # dlperf's files (the run's log, the hook's side files): not the command's output
    redirected: dict[str, None] = field(default_factory=dict)
    written: dict[str, None] = field(default_factory=dict)
    closed_after: int | None = None

    def look(self) -> None:
        for target, is_std in output_targets(self.pid):
            if target.startswith(self.own) or target == self.pipe:
                continue
            (self.redirected if is_std else self.written)[_named(target)] = None

    def closed(self, lines: int) -> None:
        if not _exits_within(self.pid, EXIT_GRACE_S):
            self.closed_after = lines
            self.look()

    def said(self, label: str) -> str | None:
        """One clause for the record; None where all its output came through the pipe."""
        parts = []
        if self.closed_after is not None:
            parts.append(f"{label} closed its standard output and error after {count(self.closed_after, 'line')}"
                         " and ran on")  # fmt: skip
        if self.redirected:
            parts.append(f"{label}'s output went to {', '.join(self.redirected)}, not to dlperf")
        written = [path for path in self.written if path not in self.redirected]
        if parts and written:
            parts.append(f"it wrote to {', '.join(written)}")
        return ": ".join(parts) or None


def _exits_within(pid: int, seconds: float) -> bool:
    """Whether the process ends (a zombie, or reaped already) within `seconds`: watched, never waited for, so the
    agent's own wait still gets its exit code."""
    import psutil

    deadline = time.monotonic() + seconds
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.Error:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


def output_targets(pid: int) -> list[tuple[str, bool]]:
    """What a process tree writes to: each process's stdout and stderr (True: a file, /dev/null, a terminal, a
    pipe) and the regular files it holds open for writing (False)."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return []
    found = []
    for proc in procs:
        for fd in (1, 2):
            with contextlib.suppress(OSError):
                found.append((os.readlink(f"/proc/{proc.pid}/fd/{fd}"), True))
        with contextlib.suppress(psutil.Error):
            found.extend((f.path, False) for f in proc.open_files() if getattr(f, "mode", "r") != "r")
    return found


def _named(target: str) -> str:
    return "another pipe" if target.startswith("pipe:") else "a socket" if target.startswith("socket:") else target
