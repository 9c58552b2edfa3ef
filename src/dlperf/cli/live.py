"""Live view of a run: follow rank 0's log (records/runlog.py) while the run goes, one plain line per event.

Following the file, rather than a pipe from the workers, works the same for every launcher whose log is written
where this process can read it (local, Slurm on a shared file system); an ssh run's log comes back at its end.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from dlperf.records.runlog import WindowLine, parse_config, parse_warmup, parse_window

READ_MAX = 1 << 18  # what one poll reads at most: the follower's memory stays bounded whatever the log's size
BEHIND_MAX = 1 << 20  # an external command's log grown further than this: jump to its last READ_MAX
SHOWN_MAX = 20  # an external command's lines shown per poll; beyond, only the progress lines a reader knows

STARTING = "starting the ranks"
RUNNING = "running, no step seen yet"  # an external command's processes started, no step of theirs timed yet

# extra text for a window line (GPT: tokens/s, TFLOP/s, MFU), from the window's samples/s
WindowExtra = Callable[[float], str]


def window_text(line: WindowLine, extra: WindowExtra | None = None) -> str:
    loss = "nan" if line.loss is None else f"{line.loss:.4f}"
    text = f"iter {line.iteration}/{line.total}  loss {loss}  {line.samples_per_s:.2f} samples/s  "
    text += f"{line.ms_per_iter:.1f} ms/iter"
    return text + (f"  {extra(line.samples_per_s)}" if extra else "")


class LogFollower:
    """A thread that prints rank 0's log events as they reach the file, until `stop()`.

    While nothing new comes it says every `quiet_s` seconds how long the phase has lasted, so a long start-up or
    compile is not a silence. A log left from an earlier run (replaced at start with --overwrite) is skipped by
    following the file's inode and ignoring files older than this follower.
    """

    def __init__(
        self,
        path: Path | None,
        emit: Callable[[str], None],
        extra: WindowExtra | None = None,
        quiet_s: float = 30.0,
        poll_s: float = 0.5,
        plain: bool = False,
        locate: Callable[[], tuple[Path, str] | None] | None = None,
    ) -> None:
        """`plain`: lines as the script printed them (an external run's own output); `locate` (a sweep): which log
        to follow now and a line naming its run, asked at every poll; the follower moves to the new log when the
        sweep's next run starts."""
        self.path, self.emit, self.extra, self.plain, self.locate = path, emit, extra, plain, locate
        self.quiet_s, self.poll_s = quiet_s, poll_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="dlperf-log-follower", daemon=True)
        self._started = time.time()
        self._phase = STARTING
        self._phase_since = time.monotonic()
        self._ablating = False  # the run's config asks for the sync ablation after its timed window
        self._last_news = self._phase_since  # the last line shown: after quiet_s without one, the phase is said
        # the log followed now, and the start of its last line while that line is not yet complete
        self._handle: BinaryIO | None = None
        self._pending = b""

    def __enter__(self) -> LogFollower:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Read what is left, then end the thread."""
        self._stop.set()
        self._thread.join(timeout=5)

    def _open(self) -> BinaryIO | None:
        if self.path is None:
            return None
        try:
            if os.stat(self.path).st_mtime < self._started - 1:
                return None  # an earlier run's log, about to be replaced
            return open(self.path, "rb")  # noqa: SIM115 - closed in _close
        except OSError:
            return None

    def _follow(self) -> None:
        self._last_news = time.monotonic()
        try:
            while True:
                stopping = self._stop.is_set()  # read before the last read: what the run wrote is all shown
                self._switch_run()
                self._read_events()
                if stopping:
                    return
                self._first_step()
                if time.monotonic() - self._last_news >= self.quiet_s:
                    self.emit(f"... {self._phase}: {time.monotonic() - self._phase_since:.0f} s")
                    self._last_news = time.monotonic()
                self._stop.wait(self.poll_s)
        finally:
            self._close()

    def _first_step(self) -> None:
        """An external command's run (`plain`) is training once the start-up hook has written its first step
        (`<run>.steps.<host>.<pid>` beside the log)."""
        if not (self.plain and self.path is not None and self._phase in (STARTING, RUNNING)):
            return
        steps = self.path.with_suffix(".steps").name + "."
        try:
            seen = any(p.name.startswith(steps) and p.stat().st_size for p in self.path.parent.iterdir())
        except OSError:
            return
        if seen:
            self._phase, self._phase_since = "training", time.monotonic()
            self.emit("first step timed: training")
            self._last_news = time.monotonic()

    def _switch_run(self) -> None:
        """With `locate` (a sweep): move to the log of the run going now, or to none between runs."""
        if self.locate is None:
            return
        found = self.locate()
        if found is not None and found[0] != self.path:
            self._close()
            self.path = found[0]
            self._phase, self._phase_since = STARTING, time.monotonic()
            self.emit(found[1])
            self._last_news = time.monotonic()
        elif found is None and self.path is not None:  # that run ended
            self._close()
            self.path = None
            self._phase, self._phase_since = "between runs", time.monotonic()
            self._last_news = self._phase_since  # its record's line was shown now: no "between runs: 0 s" at once

    def _read_events(self) -> None:
        """Show the events of the lines written since the last read (the log opened, or opened again where the
        file was replaced)."""
        if self._handle is not None and self._replaced(self._handle):
            self._close()
        if self._handle is None and not self._reopen():
            return
        skipped = self._catch_up() if self.plain else 0
        self._pending += self._handle.read(READ_MAX)
        *lines, self._pending = self._pending.split(b"\n")
        if len(self._pending) > READ_MAX:  # a line too long to show
            self._pending = b""
        texts = [line.decode("utf-8", "replace") for line in lines]
        for line in self._thinned(texts, skipped) if self.plain else texts:
            if self._event(line):
                self._last_news = time.monotonic()

    def _reopen(self) -> bool:
        """Whether the log is open now. An external command's log (`plain`) is opened as its processes start
        (launch/external_node.py): from then on its ranks run, though a silent script shows no step until the hook
        times one."""
        self._handle = self._open()
        if self._handle is not None and self.plain and self._phase == STARTING:
            self._phase, self._phase_since = RUNNING, time.monotonic()
        return self._handle is not None

    def _catch_up(self) -> int:
        """Where the log grew faster than it can be shown (a script printing a gigabyte), the bytes jumped over to
        its last READ_MAX."""
        assert self._handle is not None
        size, at = os.fstat(self._handle.fileno()).st_size, self._handle.tell()
        if size - at <= BEHIND_MAX:
            return 0
        self._handle.seek(size - READ_MAX)
        self._handle.readline()  # the rest of a cut line
        self._pending = b""
        return self._handle.tell() - at

    def _thinned(self, lines: list[str], skipped: int) -> list[str]:
        """An external command's lines to show: all of them while few come; else the last SHOWN_MAX lines a reader
        knows (its progress), after a line saying what was left out."""
        if len(lines) <= SHOWN_MAX and not skipped:
            return lines
        from dlperf.framework_logs.registry import detect  # every format's patterns: only an external run needs them
        from dlperf.framework_logs.textlines import strip_prefixes

        progress = [line for line in lines if detect(strip_prefixes(line)) is not None]
        shown = progress[-SHOWN_MAX:] if progress else lines[-SHOWN_MAX:]
        left = len(lines) - len(shown)
        over = f"{skipped / 2**20:.1f} MiB and " if skipped else ""
        self.emit(f"... {over}{left:,} lines not shown here: {self.path} holds them")
        return shown

    def _close(self) -> None:
        if self._handle is not None:
            self._handle.close()
        self._handle, self._pending = None, b""

    def _replaced(self, handle: BinaryIO) -> bool:
        if self.path is None:
            return False
        try:
            return os.stat(self.path).st_ino != os.fstat(handle.fileno()).st_ino
        except OSError:
            return False

    def _event(self, line: str) -> bool:
        """Print one log line's event; False for lines that are not events. `plain` (an external command's log,
        which has no dlperf events): every line as the script printed it, after `| `."""
        if self.plain:
            if line.strip():
                self.emit(f"| {line.rstrip()}")
            return bool(line.strip())
        if (config := parse_config(line)) is not None:
            self._ranks_up(config)
            return True
        if (warmup := parse_warmup(line)) is not None:
            self._phase, self._phase_since = "timing", time.monotonic()
            ahead = f" after {warmup.compile_s:.1f} s of compiling" if warmup.compile_s is not None else ""
            first = "first step" if ahead else "first step, start-up and compile"
            self.emit(f"warm-up done in {warmup.elapsed_s:.1f} s{ahead} ({first}: {warmup.first_step_s:.1f} s); timing")
            return True
        if (window := parse_window(line)) is not None:
            self.emit(window_text(window, self.extra))
            if window.iteration == window.total:
                self._after_timing(window)
            return True
        return False

    def _ranks_up(self, config: dict) -> None:
        """The rank's config line: warming up, and whether the sync ablation follows the timed window."""
        self._phase, self._phase_since = "warming up", time.monotonic()
        compiled = " (with torch.compile: the first step compiles)" if config.get("compile") else ""
        self.emit(f"ranks up ({config.get('world_size')}): warming up {config.get('warmup_iters')} iterations"
                  f"{compiled}")  # fmt: skip
        self._ablating = config.get("ablate") == "sync" and (config.get("world_size") or 1) > 1

    def _after_timing(self, window: WindowLine) -> None:
        """Say what the run does after its last timed window, where it takes time: the sync ablation times as many
        steps again without gradient synchronisation and as many with (docs/scaling.md), about twice the window."""
        self._phase_since = time.monotonic()
        if not self._ablating:
            self._phase = "finishing (gathering the ranks' facts)"
            return
        about = 2 * window.total * window.ms_per_iter / 1000
        self._phase = "sync ablation"
        self.emit(f"timed window done; sync ablation: {window.total} steps without and {window.total} with gradient "
                  f"synchronisation, about {about:.0f} s (docs/scaling.md)")  # fmt: skip
