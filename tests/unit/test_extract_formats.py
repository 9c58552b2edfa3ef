"""Framework-log readers against known figures.

tf2-keras uses real logs (tests/fixtures/peer-logs/tf2-keras-resnet50, copied unchanged from the published
benchmark). Every other format's fixture under tests/fixtures/peer-logs/handwritten/ was WRITTEN BY HAND: the
line shapes follow the frameworks' print formats (see shared/peer-logs/README.md), the values are made up so the
expected figures below can be worked out on paper.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from dlperf.errors import ConfigError, DataError
from dlperf.framework_logs.base import RunShape
from dlperf.framework_logs.extract import Options, extract_dir, read_run
from dlperf.framework_logs.published_names import parse_log_path
from dlperf.framework_logs.registry import BY_NAME, FORMATS

FIXTURES = Path(__file__).parents[1] / "fixtures" / "peer-logs"
KERAS = FIXTURES / "tf2-keras-resnet50"
HANDWRITTEN = FIXTURES / "handwritten"
# tests/unit/test_logs_trainers.py; dlperf-steps: tests/e2e/test_instrument.py
TRAINERS = {"keras", "lightning-rich", "timm", "nanogpt", "tqdm", "dlperf-steps"}

# format -> {rule: throughput} with the first printed line as the warm-up and every later line kept.
EXPECTED = {
    "dllogger-tf": {"printed": (142 + 144) / 2, "timestamp": (30 - 10) * 32 / 4.5},
    "dllogger-pytorch": {"printed": (4294.91 + 4100 + 4200) / 3, "timestamp": (4 - 1) * 2048 / 1.5},
    "dllogger-pytorch-bert": {"timestamp": (4 - 1) * 32 / 0.8},
    # each iteration is the median over the two ranks; the time stamp is the later rank's
    "mxnet": {"printed": (405 + 400) / 2, "timestamp": (60 - 20) * 128 / (14.1 - 0.01)},
    "pytorch-imagenet": {"printed": 64 / ((0.21 + 0.19) / 2)},  # global batch / mean of the per-step medians
    "paddle": {"printed": 3 * 32 / (0.1 + 0.125 + 0.1)},  # samples over the summed step time
    "hf-trainer": {"printed": 45.678},
    "hugectr": {"printed": 1024 / ((0.3 + 0.5) / 200)},
    "mlperf": {"printed": (2800 + 2900) / 2, "timestamp": 200 * 256 / 20},
    "megatron": {"printed": 128 / 0.8, "timestamp": (3840 - 1280) / 16},  # the line's global batch (128) wins
    # steps 1-10 and 10-20 at their tps per device (tokens over time), x 8 devices
    "torchtitan": {"printed": 19 / (9 / 6213 + 10 / 6187) * 8},
    "oneflow-resnet": {"printed": (390 + 400) / 2, "timestamp": 40 * 128 / 13},
    "oneflow-bert": {"printed": (128.5 + 127.5) / 2, "timestamp": 2 * 32 / 0.5},
    "oneflow-gpt": {"printed": (39.02016 + 38.97984) / 2},
    "dlperf": {"printed": (10 + 12 + 14) / 3, "timestamp": (6 - 2) * 8 / 2.5},
    # NeoX's own samples/sec, each line's 10 iterations at its rate (the path's b1 is a placeholder it ignores)
    "gpt-neox": {"printed": 20 / (10 / 6.5 + 10 / 7.0)},
    "nanochat": {"printed": 2 * 524288 / (1.0 + 1.2)},  # the Total batch size line's tokens over steps 2-3's dt
}
# warm-ups are iterations: the one that makes each fixture's first printed line the warm-up
WARMUP = {"pytorch-imagenet": 0, "paddle": 0, "oneflow-bert": 19, "dlperf": 0}


def handwritten(name: str) -> Path:
    return next((HANDWRITTEN / name).rglob("*.log"))


def test_every_format_has_a_fixture_and_expected_figures():
    # read from real logs only: test_logs_real.py, test_logs_llm.py, test_logs_stacks.py, and the trainers' own
    # (test_logs_trainers.py)
    real_only = {
        "tf2-keras",
        "oneflow-models",
        "maxtext",
        "nemo",
        "deepspeed",
        "nanotron",
        "torchtune",
        "litgpt",
        "llmc",  # tests/unit/test_readers_unread_lines.py, as the next four
        "deepspeed-chat",
        "aws-fsdp",
        "modded-nanogpt",
        "hf-trainer-steps",
        "deepspeed-pipe",  # a real BigScience log: tests/unit/test_readers_unread_lines.py
        *TRAINERS,
    }
    assert set(EXPECTED) | real_only == set(BY_NAME)
    for name, rules in EXPECTED.items():
        assert set(rules) == set(BY_NAME[name].rules), name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_auto_detection_and_both_rules(name):
    info = parse_log_path(handwritten(name))
    warmup = WARMUP.get(name, 1)
    for rule, expected in EXPECTED[name].items():
        record = read_run(info, Options(rule=rule, warmup=warmup, window=0))
        assert record["format"] == name
        assert record["rule"] == rule
        assert record["throughput"] == pytest.approx(expected, rel=1e-6)


def test_extra_figures_latency_and_metrics():
    megatron = read_run(parse_log_path(handwritten("megatron")), Options(warmup=1, window=0))
    assert megatron["latency_ms"] == {"mean": pytest.approx(800.0)}
    assert megatron["peer_metrics"] == {"tflops_per_device": pytest.approx(150.0)}
    titan = read_run(parse_log_path(handwritten("torchtitan")), Options(warmup=1, window=0))
    assert titan["unit"] == "tokens/s"
    assert titan["peer_metrics"]["mfu_percent"] == pytest.approx((36.38 + 36.23) / 2)  # the kept steps' mean
    assert titan["peak_memory_mib"] == {"reserved": pytest.approx(30.12 * 1024)}
    hugectr = read_run(parse_log_path(handwritten("hugectr")), Options(warmup=1, window=0))
    assert hugectr["latency_ms"]["mean"] == pytest.approx(4.0)


def test_window_limits_the_kept_lines():
    record = read_run(parse_log_path(handwritten("dlperf")), Options(window=4))  # iterations 2 and 4 (of 2, 4, 6)
    assert record["kept_lines"] == 2
    assert record["throughput"] == pytest.approx(11.0)


def test_forced_format_that_does_not_match_is_a_data_error():
    with pytest.raises(DataError, match="no mxnet progress lines"):
        read_run(parse_log_path(handwritten("paddle")), Options(format="mxnet"))


def test_options_refuse_a_rule_the_format_cannot_apply():
    with pytest.raises(ConfigError, match="supports only the printed rule"):
        Options(format="pytorch-imagenet", rule="timestamp").check()
    with pytest.raises(ConfigError, match="unknown log format"):
        Options(format="caffe").check()


def _medians(records: list[dict]) -> dict[str, tuple[float, float]]:
    speeds: dict[str, list[float]] = {}
    for record in records:
        speeds.setdefault(record["case"], []).append(record["throughput"])
    return {case: (round(statistics.median(v), 2), round(statistics.fmean(v), 2)) for case, v in speeds.items()}


def test_real_keras_logs_give_the_published_per_run_figures():
    printed, skipped = extract_dir(KERAS, Options())
    assert skipped == []
    assert {r["format"] for r in printed} == {"tf2-keras"}
    assert _medians(printed) == {"1n1g": (321.80, 321.87), "1n4g": (1143.46, 1141.43), "2n8g": (4849.68, 4850.50)}
    stamped, _ = extract_dir(KERAS, Options(rule="timestamp"))
    medians = {case: m for case, (m, _) in _medians(stamped).items()}
    assert medians == {"1n1g": 321.74, "1n4g": 1143.29, "2n8g": 4848.89}


@pytest.mark.parametrize(
    ("relative", "shape"),
    [
        ("12n8g/rn50_b128_fp32_3.log", ("rn50", 12, 8, 128, "fp32", "b128_fp32", 3)),
        ("bz64/1n16g/rn50_b64_amp_2.log", ("rn50", 1, 16, 64, "amp", "b64_amp", 2)),
        ("resnet50/2n8d/resnet50_b32_fp32_compile_channels-last_10.log",
         ("resnet50", 2, 8, 32, "fp32", "b32_fp32_compile_channels-last", 10)),
        ("1n1g/bert_base_b32_fp16_1.log", ("bert_base", 1, 1, 32, "fp16", "b32_fp16", 1)),
    ],
)  # fmt: skip
def test_published_layout_parses(tmp_path, relative, shape):
    info = parse_log_path(tmp_path / relative)
    assert (
        info.model,
        info.nodes,
        info.devices_per_node,
        info.batch_size,
        info.precision,
        info.group,
        info.repeat,
    ) == (shape)


@pytest.mark.parametrize(
    ("relative", "reason"),
    [("logs/rn50_b128_fp32_1.log", "not a topology"), ("1n1g/rn50_fp32_1.log", "its name is not"),
     ("0n8g/rn50_b128_fp32_1.log", "must be positive")],
)  # fmt: skip
def test_paths_outside_the_layout_are_refused(tmp_path, relative, reason):
    with pytest.raises(DataError, match=reason):
        parse_log_path(tmp_path / relative)


# GPT-NeoX's line is Megatron's with its samples/sec in front (the registry tries gpt-neox first), and its runs
# print DeepSpeed's engine lines, which yield to it
SHARED = {"gpt-neox": {"megatron", "deepspeed"}}


def test_signatures_pick_their_own_format_only():
    """Each fixture's first throughput line is recognised by exactly its own format."""
    for name in EXPECTED:
        lines = handwritten(name).read_text(encoding="utf-8").splitlines()
        owners = {f.name for line in lines for f in FORMATS if f.recognises(line)}
        assert owners == {name} | SHARED.get(name, set()), name


def test_glog_stamps_without_a_year_cross_new_year_and_read_feb_29():
    keras = BY_NAME["tf2-keras"]
    line = "I{} {} 1 keras_utils.py:133] TimeHistory: 60.00 seconds, 213.33 examples/second between steps {} and {}"
    lines = [line.format("1231", "23:59:00.000000", 0, 100), line.format("0101", "00:01:00.000000", 100, 200)]
    stamps = [p.timestamp for p in keras.read(lines, RunShape(128, 1))]
    assert stamps[1] - stamps[0] == pytest.approx(120.0)
    leap = [line.format("0228", "23:59:00.000000", 0, 100), line.format("0229", "00:00:30.000000", 100, 200)]
    stamps = [p.timestamp for p in keras.read(leap, RunShape(128, 1))]
    assert stamps[1] - stamps[0] == pytest.approx(90.0)


def test_oneflow_lines_without_a_trailing_stamp_read_printed_only(tmp_path):
    log = tmp_path / "1n1g" / "rn50_b128_fp32_1.log"
    log.parent.mkdir()
    row = "train: epoch 0, iter {}, loss: 7.0, top_1: 0.0, top_k: 0.0, samples/s: {}\n"
    log.write_text("".join(row.format(i * 20, speed) for i, speed in enumerate((300.0, 390.0, 410.0), 1)))
    record = read_run(parse_log_path(log), Options())
    assert (record["format"], record["throughput"]) == ("oneflow-resnet", pytest.approx(400.0))
    with pytest.raises(DataError, match="carry no time stamps"):
        read_run(parse_log_path(log), Options(rule="timestamp"))


def test_records_merged_on_one_line_are_each_read(tmp_path):
    """Two ranks sharing one pipe: rank 1's record lands on rank 0's line, its line end on the next (the real shape
    from a per-node torchrun run). Both records count; the median over the ranks is taken per iteration."""
    folder = tmp_path / "1n2g"
    folder.mkdir()
    lines = []
    for i in range(1, 5):
        a = f"Epoch: [0][{i}/4]\tTime  0.{10 + i:03d} ( 0.100)\tData  0.000 ( 0.000)\tLoss 5.3267e-01 (1.1441e+00)"
        b = f"Epoch: [0][{i}/4]\tTime  0.{30 + i:03d} ( 0.100)\tData  0.000 ( 0.000)\tLoss 5.3267e-01 (1.1441e+00)"
        lines += [a + b, ""] if i % 2 else [a, b]
    log = folder / "resnet50_b2_fp32_1.log"
    log.write_text("\n".join(lines) + "\n")
    record = read_run(parse_log_path(log), Options(warmup=0))
    medians = [statistics.median([(10 + i) / 1000, (30 + i) / 1000]) for i in range(1, 5)]
    assert record["kept_lines"] == 4 and record["throughput"] == pytest.approx(4 / statistics.fmean(medians))
