"""Mixture-of-experts lines of torchtitan, Megatron-LM and MaxText logs (tests/fixtures/peer-logs/moe/, copied
unchanged from the sources in its SOURCES.md; two MoE logs already under real/ and llm/): the throughput is read
as on a dense model's log, and the MoE figures each framework prints in its step line (Megatron's router aux
losses, MaxText's moe_lb_loss) are carried into the record's `peer_metrics`, the mean over the kept lines. A
figure a framework does not print (torchtitan's aux loss and tokens per expert, which go to TensorBoard / W&B;
every framework's tokens per expert) is not invented.

The expected figures are naive readings written here (a regex and a mean), apart from the readers.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest

from dlperf.framework_logs.extract import Options, read_run
from dlperf.framework_logs.published_names import parse_log_path

PEER_LOGS = Path(__file__).parents[1] / "fixtures" / "peer-logs"
MOE = PEER_LOGS / "moe"
MEGATRON = "megatron/1n8g/moe64e-top1-ep4_b8_bf16_1.log"
TITAN = "torchtitan/1n2g/pr3934-deepseek-v3-debug-ep2_b8_mxfp8_1.log"
MAXTEXT = "maxtext/1n4g/pr761-moe-default_b24_bf16_1.log"
MIXTRAL = PEER_LOGS / "real" / "megatron" / "2n8g" / "issue756-mixtral8x7b_b8_bf16_1.log"
DEEPSEEK2 = PEER_LOGS / "llm" / "maxtext" / "1n4g" / "guide-v5p8-deepseek2-16b_b24_bf16_1.log"


def record(path: Path) -> dict:
    done = read_run(parse_log_path(path), Options())
    assert done["status"] == "ok", done.get("error")
    return done


def column(path: Path, pattern: str, first: int = 0) -> list[float]:
    """The pattern's second group on each line whose first group (the step) is >= `first`."""
    found = (re.search(pattern, line) for line in path.read_text(encoding="utf-8").splitlines())
    return [float(m[2].replace(",", "")) for m in found if m and int(m[1]) >= first]


def test_every_moe_log_is_a_case():
    assert {str(p.relative_to(MOE)) for p in MOE.rglob("*.log")} == {MEGATRON, TITAN, MAXTEXT}


@pytest.mark.parametrize("path", [MOE / MEGATRON, MIXTRAL], ids=["ep4-64-experts", "mixtral-8x7b"])
def test_megatron_moe_lines_keep_their_throughput_and_carry_the_load_balancing_loss(path):
    """Megatron's rule (first 20 iterations dropped): global batch over the mean elapsed time of the rest; the
    routers' load_balancing_loss (1.0 = balanced) the mean of the same lines."""
    done = record(path)
    iteration = r"iteration +(\d+)/"
    ms = column(path, iteration + r".*?per iteration \(ms\): ([\d.]+)", first=21)
    (batch,) = set(column(path, iteration + r".*?global batch size: +(\d+)"))
    assert (done["format"], done["unit"]) == ("megatron", "sequences/s")
    assert done["throughput"] == pytest.approx(batch / (statistics.fmean(ms) / 1000), rel=1e-9)
    balance = column(path, iteration + r".*?\| load_balancing_loss: ([\d.E+-]+) \|", first=21)
    assert len(balance) == len(ms) and done["peer_metrics"]["load_balancing_loss"] == pytest.approx(
        statistics.fmean(balance), rel=1e-12
    )


def test_torchtitan_moe_lines_keep_their_throughput_and_print_no_moe_figure():
    """deepseek_v3_debugmodel with EP 2: steps 2-5 (one step a line) as tokens over time, x 2 devices; its `mfu: N/A`
    is no figure, and its aux loss and tokens per expert are not in the line."""
    path = MOE / TITAN
    done = record(path)
    tps = column(path, r"step:\s+(\d+)\s.*?tps: ([\d,]+)", first=2)
    assert (done["format"], done["unit"], done["kept_steps"]) == ("torchtitan", "tokens/s", [2, 5])
    assert done["throughput"] == pytest.approx(len(tps) / sum(1 / t for t in tps) * 2, rel=1e-9)
    assert set(done["peer_metrics"]) == {"tflops_per_device"}


@pytest.mark.parametrize("path", [MOE / MAXTEXT, DEEPSEEK2], ids=["pr761-moe", "deepseek2-16b"])
def test_maxtext_moe_lines_before_moe_lb_loss_keep_their_throughput(path):
    """Steps after 1 as tokens over time (each step the same tokens, at its printed rate), x 4 devices; MaxText
    printed no moe_lb_loss before April 2026, and none is made up."""
    done = record(path)
    tokens = column(path, r"completed step: (\d+), .*?Tokens/s/device: ([\d.]+)", first=2)
    assert (done["format"], done["unit"]) == ("maxtext", "tokens/s")
    assert done["throughput"] == pytest.approx(len(tokens) / sum(1 / t for t in tokens) * 4, rel=1e-9)
    assert "moe_lb_loss" not in done["peer_metrics"]


# No real log with these fields was found (tests/fixtures/peer-logs/moe/SOURCES.md): the lines below are WRITTEN
# HERE from the frameworks' own print statements, values made up: MaxText metric_logger.py (commit e591f30, April
# 2026 on: `moe_lb_loss: {x:.6f}` where num_experts > 1) and Megatron-LM training.py `training_log` with
# moe_logging.py (commit d98e8a6: each tracked aux loss `| {name}: {value:.6E} |`).
MAXTEXT_NEW = (
    "completed step: {step}, seconds: 2.000, TFLOP/s/device: 100.000, Tokens/s/device: 4096.000, "
    "total_weights: 16384, loss: 9.000, lm_loss: 9.000, perplexity: 8103.084, moe_lb_loss: {lb:.6f}\n"
)
MEGATRON_Z = (
    " iteration {step:8d}/      40 | consumed samples:  {samples:11d} | elapsed time per iteration (ms): 500.0 | "
    "learning rate: 1.000000E-04 | global batch size:    32 | lm loss: 7.000000E+00 | "
    "seq_load_balancing_loss: {lb:.6E} | z_loss: {z:.6E} | loss scale: 1.0 | grad norm: 1.000 | "
    "number of skipped iterations:   0 | number of nan iterations:   0 |\n"
)


def test_maxtext_moe_lb_loss_is_carried(tmp_path):
    path = tmp_path / "1n4g" / "written-moe_b4_bf16_1.log"
    path.parent.mkdir()
    path.write_text("".join(MAXTEXT_NEW.format(step=s, lb=0.01 * (s + 1)) for s in range(6)))
    done = record(path)
    assert done["throughput"] == pytest.approx(4096 * 4) and done["kept_steps"] == [2, 5]
    assert done["peer_metrics"]["moe_lb_loss"] == pytest.approx(statistics.fmean([0.03, 0.04, 0.05, 0.06]))


def test_megatron_seq_load_balancing_and_z_losses_are_carried(tmp_path):
    path = tmp_path / "1n8g" / "written-moe_b4_bf16_1.log"
    path.parent.mkdir()
    rows = [MEGATRON_Z.format(step=s, samples=32 * s, lb=1 + 0.001 * s, z=0.01 * s) for s in range(1, 31)]
    path.write_text("".join(rows))
    done = record(path)
    assert done["throughput"] == pytest.approx(32 / 0.5)
    kept = range(21, 31)  # the first 20 iterations dropped
    metrics = done["peer_metrics"]
    assert metrics["seq_load_balancing_loss"] == pytest.approx(statistics.fmean(1 + 0.001 * s for s in kept))
    assert metrics["z_loss"] == pytest.approx(statistics.fmean(0.01 * s for s in kept))
