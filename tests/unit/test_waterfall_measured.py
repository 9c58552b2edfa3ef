"""The waterfall measures or says it did not (issue 53): a split no ablation measured is labelled "not measured",
an ablation's shares carry the 95 % interval its window pairs give, and a sweep times the ablation by default for
its data-parallel cases of 2+ devices (`ablate: off` opts out)."""

from __future__ import annotations

import json
import statistics

import pytest
from conftest import run_cli
from test_waterfall import _waterfall_records

from dlperf.launch import LaunchOptions, launcher_for
from dlperf.orchestration.sweep_plan import plan_sweep
from dlperf.reporting.aggregate import summarise
from dlperf.reporting.waterfall import NOT_MEASURED, pair_ratios, ratio_interval, scaling_losses

# Four window pairs: (unsynchronised, synchronised) throughputs; the step ratios unsynced/synced are 0.78, 0.8,
# 0.82, 0.8 (mean 0.8, the record's median ratio as in test_waterfall's by-hand case).
UNSYNCED = [100 / 0.78, 100 / 0.8, 100 / 0.82, 100 / 0.8]
SYNCED = [100.0, 100.0, 100.0, 100.0]


def _loss(tmp_path, ablation: dict | None):
    root = _waterfall_records(tmp_path, True, ablation)
    (loss,) = scaling_losses(summarise([json.loads(p.read_text()) for p in root.rglob("*.json")]))[
        ("resnet50", "b10_fp32")
    ]
    return root, loss


def test_a_split_without_an_ablation_is_labelled_not_measured(tmp_path, capsys):
    """The step phases' split (test_waterfall's by-hand case) is an attribution, not a measurement: the report,
    summary.json and the plot title say so."""
    root, loss = _loss(tmp_path, None)
    assert not loss.split_measured and not loss.share_intervals
    code, _, err = run_cli(["report", str(root)], capsys)
    assert code == 0, err
    summary = json.loads((root / "summary.json").read_text())["resnet50"]["b10_fp32"]["1n2g"]["scaling_loss"]
    assert summary["split_measured"] is False and "share_intervals" not in summary
    assert "- 1n2g: not measured: no ablation ran" in (root / "report.md").read_text()
    assert "not measured" in NOT_MEASURED


def test_an_ablations_shares_carry_the_interval_of_its_window_pairs(tmp_path, capsys):
    """Pair ratios 0.78, 0.8, 0.82, 0.8: mean 0.8, 95 % t interval 0.8 +- 3.182 x 0.01633 / 2 = [0.774, 0.826].
    Communication = TN (1 - r) x 1.6 / 40 = 125 (1 - r) / 200: 100 % at r = 0.8, [87 %, 113 %] at the ends;
    machine sharing (125 r - 100) / 200 x 1.6 ... the opposite way, [-13 %, 13 %]."""
    ablation = {"method": "no_sync", "ratio": 0.8, "step_ms": 80.0, "synced_step_ms": 100.0, "iters": 20,
                "window_throughputs": UNSYNCED, "synced_window_throughputs": SYNCED}  # fmt: skip
    root, loss = _loss(tmp_path, ablation)
    ratios = [s / u for u, s in zip(UNSYNCED, SYNCED)]
    assert pair_ratios(summarise([json.loads(p.read_text()) for p in root.rglob("*.json")])[
        ("resnet50", "b10_fp32")][1]) == pytest.approx(ratios)  # fmt: skip
    half = 3.182446305284263 * statistics.stdev(ratios) / 2
    assert ratio_interval(ratios) == pytest.approx((0.8 - half, 0.8 + half))
    assert loss.split_measured and loss.communication_share == pytest.approx(1.0)
    low, high = loss.share_intervals["communication"]
    assert (low, high) == pytest.approx((125 * (0.2 - half) * 1.6 / 40, 125 * (0.2 + half) * 1.6 / 40))
    assert low < loss.communication_share < high
    sharing = loss.share_intervals["machine_sharing"]
    assert sharing == pytest.approx(((125 * (0.8 - half) - 100) * 1.6 / 40, (125 * (0.8 + half) - 100) * 1.6 / 40))
    code, _, err = run_cli(["report", str(root)], capsys)
    assert code == 0, err
    text = (root / "report.md").read_text()
    assert f"communication 100%, 95 %: {low:.0%}-{high:.0%} of the loss" in text
    summary = json.loads((root / "summary.json").read_text())["resnet50"]["b10_fp32"]["1n2g"]["scaling_loss"]
    assert summary["split_measured"] is True and summary["share_intervals"]["communication"][0] == round(low, 4)


def test_one_window_pair_gives_no_interval(tmp_path):
    assert ratio_interval([0.8]) is None and ratio_interval([]) is None


def test_a_sweep_ablates_its_data_parallel_cases_of_two_devices_unless_told_off():
    launcher = launcher_for(LaunchOptions())
    sweep = {"model": "resnet50", "device": "cpu", "image_size": 32, "repeats": 1, "topology": ["1n1g", "1n2g"]}
    by_case = {spec.topology: spec.ablate for spec, _ in plan_sweep(dict(sweep), launcher).cases}
    assert by_case == {"1n1g": "off", "1n2g": "sync"}
    off = {spec.topology: spec.ablate for spec, _ in plan_sweep({**sweep, "ablate": "off"}, launcher).cases}
    assert off == {"1n1g": "off", "1n2g": "off"}


@pytest.mark.parametrize(("layout", "ablate"), [({}, "sync"), ({"tp": 2}, "off"), ({"dp_mode": "fsdp"}, "off")])
def test_only_a_gpt_case_of_data_parallel_ddp_ablates_by_default(layout, ablate):
    """GPT on 2 devices: data-parallel DDP ablates; tensor parallelism or FSDP (no no_sync() to time) do not."""
    sweep = {"model": "gpt", "device": "cpu", "repeats": 1, "topology": "1n2g", **layout}
    [(spec, _)] = plan_sweep(sweep, launcher_for(LaunchOptions())).cases
    assert spec.ablate == ablate
