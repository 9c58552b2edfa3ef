"""Property tests: whatever a log holds, reading it ends in a record (ok or failed) or a DataError, nothing else."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlperf.errors import DataError
from dlperf.peers.base import RunShape
from dlperf.peers.extract import Options, read_run
from dlperf.peers.layout import parse_log_path
from dlperf.peers.measure import measure
from dlperf.peers.registry import FORMATS

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
