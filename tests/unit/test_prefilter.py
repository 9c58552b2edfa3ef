"""The lines a reading passes over are lines no reader acts on: every fixture reads as with every line read, a
long log's chatter is passed over, and records cut by the blocks it is read in, or wrapped by a terminal in the
middle of the string looked for, are read all the same (prefilter.py, textlines.LogLines)."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

from dlperf.framework_logs import extract, prefilter
from dlperf.framework_logs.arrivals import stamped_lines
from dlperf.framework_logs.base import AnyCase
from dlperf.framework_logs.extract import Options, extract_dir, read_run
from dlperf.framework_logs.published_names import LogInfo
from dlperf.framework_logs.registry import FORMATS, get_format
from dlperf.framework_logs.textlines import BLOCK, MARGIN, LogLines, holding

FIXTURES = Path(__file__).parents[1] / "fixtures" / "peer-logs"
CHATTER = "W1201 12:00:00.000000 4242 chatter.py:42] a framework's warning, printed again and again{}: {:>12d}\n"


def _every_line(monkeypatch) -> None:
    monkeypatch.setattr(extract, "_needed", lambda fmt: None)


def test_every_fixture_reads_as_with_every_line_read(monkeypatch):
    monkeypatch.setattr(prefilter, "DENSE", 1)  # a short log's records are dense: read each by its finds
    passed_over = extract_dir(FIXTURES, Options())
    _every_line(monkeypatch)
    assert extract_dir(FIXTURES, Options()) == passed_over


def test_every_format_says_what_its_lines_hold():
    """Without a clue every line of a log is read: each detected format needs one for a long log to be fast."""
    assert all(f.clue for f in FORMATS)


def _iteration(i: int, ms: float) -> str:
    return (
        f" iteration {i:8d}/     100 | consumed samples: {i * 64:12d} | elapsed time per iteration (ms): {ms:.1f} "
        "| learning rate: 1.500000E-05 | global batch size:    64 | lm loss: 8.123456E+00 | loss scale: 1.0 |"
    )


def _chatter(out: list[str], until: int) -> None:
    """Chatter lines (of 8 lengths, none a wrapped record's) until the text is `until` bytes long."""
    size, n = sum(map(len, out)), 0
    while size < until - 120:
        out.append(CHATTER.format("!" * (n % 8), n))
        size, n = size + len(out[-1]), n + 1
    out.append("#" * (until - size - 1) + "\n")


def _megatron_log(path: Path) -> int:
    """A 2.5 MB log of chatter and 30 iteration lines, the records cut where the reading's blocks are: one wrapped
    at 80 characters across the first block's last handled line, one whose clue spans the first block's end, one
    wrapped in the middle of its clue; the number of its lines."""
    out: list[str] = []
    cuts = {5: BLOCK - MARGIN - 100, 6: BLOCK - 30, 7: BLOCK + 50_000}
    for i in range(1, 31):
        _chatter(out, cuts.get(i, 85_000 * i))
        record = _iteration(i, 800 + i)
        if i == 5:
            out += [record[k : k + 80] + "\n" for k in range(0, len(record), 80)]
        elif i == 7:
            width = record.index("elapsed time per iteration (") + 10
            out += [record[k : k + width] + "\n" for k in range(0, len(record), width)]
        else:
            out.append(record + "\n")
    _chatter(out, 2_500_000)
    path.write_text("".join(out))
    return len(out)


def test_a_long_log_reads_as_with_every_line_read(tmp_path, monkeypatch):
    log = tmp_path / "1n1g" / "gpt_b64_bf16_1.log"
    log.parent.mkdir()
    lines = _megatron_log(log)
    info = LogInfo(log, "gpt", 1, 1, 64, "bf16", 1)
    passed_over = read_run(info, Options(warmup=0))
    assert passed_over["format"] == "megatron"
    assert passed_over["kept_lines"] == 30  # the wrapped records too
    with closing(LogLines(log, extract._needed(get_format("megatron")))) as given:
        assert sum(1 for _ in given) < lines / 10  # the chatter is passed over
    _every_line(monkeypatch)
    assert read_run(info, Options(warmup=0)) == passed_over


def test_a_word_is_found_in_any_case_where_its_reader_ignores_case(tmp_path):
    log = tmp_path / "deepspeed.log"
    log.write_text("chatter\n" * 1000 + "[INFO] SAVING CHECKPOINT to /ckpt\n" + "chatter\n" * 1000)
    with closing(LogLines(log, holding([AnyCase("saving checkpoint"), "SamplesPerSec="]))) as given:
        assert list(given) == ["chatter"] * 12 + ["[INFO] SAVING CHECKPOINT to /ckpt"] + ["chatter"] * 12


def test_the_lines_passed_over_take_no_stamp_from_those_read(tmp_path):
    log, arrivals = tmp_path / "run.log", tmp_path / "run.arrivals"
    text = "".join(f"chatter {i}\n" if i % 300 else f"[dlperf] iter {i}/3000 loss 1.0\n" for i in range(1, 3001))
    log.write_text(text)
    ends = [i for i, c in enumerate(text, 1) if c == "\n"]
    arrivals.write_text("".join(f"{end} {k * 0.5:.6f}\n" for k, end in enumerate(ends[3::7] + ends[-1:])))
    every = list(stamped_lines(log, arrivals))
    given = list(stamped_lines(log, arrivals, holding(["[dlperf] iter "])))
    assert [s for s in given if "iter" in s[1]] == [s for s in every if "iter" in s[1]]
    assert set(given) < set(every)  # the lines around them, each with its own stamp
