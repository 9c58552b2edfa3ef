"""Property tests: whatever a log holds, reading it ends in a record (ok or failed) or a DataError, nothing else."""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlperf.errors import DataError
from dlperf.framework_logs.base import RunShape
from dlperf.framework_logs.extract import Options, read_run
from dlperf.framework_logs.measure import measure
from dlperf.framework_logs.published_names import parse_log_path
from dlperf.framework_logs.registry import FORMATS

FIXTURES = Path(__file__).parents[1] / "fixtures" / "peer-logs"
REAL_LINES = sorted(
    {
        line
        for path in FIXTURES.rglob("*.log")
        if path.stat().st_size < 200_000  # the small files hold every format's lines; the large add only time
        for line in path.read_text(encoding="utf-8").splitlines()
    }
    - {""},
)
SAMPLE_LINES = [line for line in REAL_LINES if "TimeHistory" in line or len(line) < 400]
NOISE = st.text(alphabet=st.characters(max_codepoint=0x2FF) | st.sampled_from("0123456789.:,|[]-e "), max_size=40)


@st.composite
def mutated_line(draw) -> str:
    """A real log line with a random slice replaced, so the signatures match but the figures are garbage."""
    line = draw(st.sampled_from(SAMPLE_LINES))
    start = draw(st.integers(0, len(line)))
    end = draw(st.integers(start, min(len(line), start + 12)))
    return line[:start] + draw(NOISE) + line[end:]


LINES = st.lists(
    mutated_line() | st.sampled_from(SAMPLE_LINES) | NOISE.map(lambda s: s.replace("\n", " ")), max_size=30
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=LINES, fmt=st.sampled_from(FORMATS), rule=st.sampled_from(["printed", "timestamp"]),
       warmup=st.integers(0, 3), window=st.none() | st.integers(1, 5),
       shape=st.builds(RunShape, st.integers(1, 10**6), st.integers(1, 4096)))  # fmt: skip
def test_readers_raise_only_their_own_error(lines, fmt, rule, warmup, window, shape):
    try:
        result = measure(fmt.read(iter(lines), shape), fmt, rule, warmup, window, shape)
    except DataError:
        return
    assert result.throughput > 0 and result.kept >= 1


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.binary(max_size=600) | LINES.map(lambda ls: "\n".join(ls).encode("utf-8", "surrogatepass")),
       rule=st.sampled_from([None, "printed", "timestamp"]))  # fmt: skip
def test_any_file_content_is_a_result_or_a_data_error(tmp_path_factory, content, rule):
    path = tmp_path_factory.mktemp("fuzz") / "2n8g" / "rn50_b128_fp32_1.log"
    path.parent.mkdir()
    path.write_bytes(content)
    try:
        record = read_run(parse_log_path(path), Options(rule=rule, warmup=1))
    except DataError as error:
        assert str(error) and "\n" not in str(error)
        return
    if record["status"] == "failed":  # a crash, OOM, signal or NaN loss in the content: a failed run, with why
        assert record["error"] and record["throughput"] is None
    else:
        assert record["throughput"] > 0


# --- absurd numbers in every format's own lines: a record or a one-line refusal, never an internal error ----------

ABSURD = ("1" + "0" * 400, "1e400", "-1e400", "inf", "nan", "NaN", "Infinity", "-7", "0", "1e-400", "9" * 5000)
NUMBER = re.compile(r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
OWN_LINES = {fmt.name: [line for line in REAL_LINES if fmt.recognises(line)][:60] for fmt in FORMATS}


@st.composite
def absurd_lines(draw, name: str) -> list[str]:
    """A format's own lines, some with numbers (counters, times, figures) replaced by ones no run prints."""
    own = OWN_LINES[name] or SAMPLE_LINES
    lines = draw(st.lists(st.sampled_from(own), min_size=1, max_size=25))
    out = []
    for line in lines:
        spots = list(NUMBER.finditer(line))
        if spots and draw(st.booleans()):
            spot = draw(st.sampled_from(spots))
            line = line[: spot.start()] + draw(st.sampled_from(ABSURD)) + line[spot.end() :]
        out.append(line)
    return out


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), warmup=st.integers(0, 20), rule=st.sampled_from(["printed", "timestamp"]))
def test_absurd_numbers_in_any_format_are_refused_never_an_internal_error(fmt, data, warmup, rule):
    lines = data.draw(absurd_lines(fmt.name))
    shape = RunShape(64, 8, "resnet50")
    try:
        result = measure(fmt.read(iter(lines), shape), fmt, rule, warmup, None, shape)
    except DataError as error:
        assert str(error) and "\n" not in str(error)
        return
    assert math.isfinite(result.throughput) and result.throughput > 0
    assert result.latency_ms is None or math.isfinite(result.latency_ms)
    assert result.second is None or math.isfinite(result.second)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_iteration_counters_of_ten_to_the_400_are_refused_in_one_line(tmp_path, fmt):
    """Every integer n of the format's own lines made 10**400 + n (the probe's counters, still in order), read end
    to end from a file."""
    own = OWN_LINES[fmt.name]
    assert own, f"no fixture line of {fmt.name}"
    lines = [re.sub(r"(?<![\d.])\d+(?![\d.])", lambda m: str(10**400 + int(m[0])), line) for line in own]
    path = tmp_path / "2n8g" / "rn50_b128_fp32_1.log"
    path.parent.mkdir()
    path.write_text("\n".join(lines) + "\n")
    for rule, warmup in itertools.product(fmt.rules, (0, None)):
        try:
            record = read_run(parse_log_path(path), Options(format=fmt.name, rule=rule, warmup=warmup))
        except DataError as error:
            assert str(error) and "\n" not in str(error)
            continue
        assert record["status"] == "failed" or math.isfinite(record["throughput"])
