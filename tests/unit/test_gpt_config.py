"""GPT cases by name, layout refusals before any process starts, the FLOPs formula, MFU, data and the table."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_cli

from dlperf.engines.torch.pipeline import stage_layers
from dlperf.errors import ConfigError, DataError
from dlperf.metrics.flops import gpt_flops_per_iteration, mfu, peak_tflops
from dlperf.reporting.layouts_table import group_by_case, layouts_table
from dlperf.workloads import check_spec, spec_from_mapping
from dlperf.workloads.gpt.cases import REPORT_CASES, case_values
from dlperf.workloads.gpt.layout import layout_of, padded_vocab
from dlperf.workloads.language_model.tokens import open_token_file

TINY = ["run", "--model", "gpt", "--num-layers", "2", "--hidden-size", "64", "--num-heads", "4", "--seq-length",
        "32", "--vocab-size", "512", "--device", "cpu", "--iters", "2", "--print-every", "1"]  # fmt: skip


def test_report_cases_table():
    assert len(REPORT_CASES) == 18
    assert [c.group for c in REPORT_CASES.values()].count("PP") == 4
    case = REPORT_CASES["MP_1x16x1_16_3072x16"]
    assert (case.nodes, case.devices_per_node, case.tp, case.num_heads, case.micro_batch_size) == (2, 8, 16, 32, 16)
    for c in REPORT_CASES.values():  # every case is a consistent layout
        layout = layout_of(spec_from_mapping({"model": "gpt", "case": c.name}))
        assert layout.world_size == c.nodes * c.devices_per_node
        assert layout.accumulation_steps == (32 if c.pp > 1 else 1)


def test_short_name_and_log_name_resolve_to_the_same_config():
    short = spec_from_mapping({"model": "gpt", "case": "DP_8x1x1_16_1536x16"})
    log = spec_from_mapping({"model": "gpt", "case": "pretrain_gpt_1n8d_dp8_mp1_pp1_mbz2_gbz16_s2048_l16_h1536_nh16"})
    fields = ("model", "nodes", "devices_per_node", "dp", "tp", "pp", "micro_batch_size", "global_batch_size",
              "hidden_size", "num_layers", "num_heads", "seq_length")  # fmt: skip
    assert [short.to_dict()[f] for f in fields] == [log.to_dict()[f] for f in fields]
    assert [short.to_dict()[f] for f in fields] == ["gpt", 1, 8, 8, 1, 1, 2, 16, 1536, 16, 16, 2048]
    assert check_spec(short).group == "DP_8x1x1_16_1536x16_fp32"
    assert check_spec(log).stem.startswith(
        "DP_8x1x1_16_1536x16_fp32_pretrain_gpt_1n8d_dp8_mp1_pp1_mbz2_gbz16_s2048_l16_h1536_nh16"
    )


def test_explicit_values_override_the_case():
    config = spec_from_mapping(
        {"model": "gpt", "case": "MP_1x32x1_16_3072x32", "num_heads": 48, "num_layers": 4}
    ).workload
    assert (config.num_heads, config.num_layers, config.hidden_size, config.tp) == (48, 4, 3072, 32)
    unlisted = spec_from_mapping({"model": "gpt", "case": "2D_2x2x1_8_256x2"})  # a short name not in the table
    values = unlisted.workload
    assert (values.dp, values.tp, values.micro_batch_size, unlisted.devices_per_node) == (2, 2, 4, 4)


def test_unknown_case_is_one_line():
    with pytest.raises(ConfigError, match="unknown GPT case 'DP_8x1_16'"):
        case_values("DP_8x1_16")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--devices-per-node", "2", "--dp", "2", "--tp", "2"],
         "world size 2 (1n2g) does not equal dp x tp x pp = 2 x 2 x 1 = 4"),
        (["--devices-per-node", "3", "--tp", "2"], "world size 3 (1n3g) is not divisible by tp x pp = 2 x 1"),
        (["--devices-per-node", "3", "--tp", "3"], "--num-heads 4 is not divisible by --tp 3"),
        (["--devices-per-node", "4", "--pp", "4"], "--num-layers 2 is fewer than the --pp 4 pipeline stages"),
        (["--devices-per-node", "2", "--global-batch-size", "6", "--micro-batch-size", "2"],
         "--global-batch-size 6 is not divisible by micro batch x dp = 2 x 2 = 4"),
        (["--hidden-size", "66"], "--hidden-size 66 is not divisible by --num-heads 4"),
    ],
)  # fmt: skip
def test_layouts_that_do_not_divide_are_refused_before_launch(tmp_path, capsys, extra, message):
    code, _, err = run_cli([*TINY, *extra, "--out", str(tmp_path / "out")], capsys)
    assert code == 2
    assert err.strip() == f"dlperf: error: {message}" or message in err.strip().splitlines()[-1]
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()  # nothing started, nothing written


def test_flops_formula_by_hand():
    # B=2, s=2048, l=16, h=1536, V=50304: 72*2*2048*16*1536^2 * (1 + 2048/9216 + 50304/294912)
    expected = 72 * 2 * 2048 * 16 * 1536**2 * (1 + 2048 / (6 * 1536) + 50304 / (12 * 16 * 1536))
    assert gpt_flops_per_iteration(2, 2048, 16, 1536, 50304) == pytest.approx(expected, rel=1e-12)
    assert gpt_flops_per_iteration(1, 1, 1, 1, 1) == 72 + 12 + 6
    # by hand: 11132555231232 (72Bslh^2) + 2473901162496 (12Bs^2lh) + 1898912415744 (6BshV)
    assert gpt_flops_per_iteration(2, 2048, 16, 1536, 50304) == 15_505_368_809_472


def test_peaks_and_mfu():
    assert peak_tflops("NVIDIA H100 80GB HBM3", "amp-bf16") == 989.4
    assert peak_tflops("NVIDIA H100 PCIe", "amp-bf16") == 756.0
    assert peak_tflops("Tesla V100-SXM2-16GB", "amp-bf16") is None
    assert mfu(494.7, "NVIDIA H100 80GB HBM3", "amp-bf16", None) == (pytest.approx(0.5), None)
    assert mfu(1.0, "cpu", "fp32", 4.0) == (0.25, None)
    value, note = mfu(1.0, "cpu", "fp32", None)
    assert value is None and "pass --peak-tflops" in note


def test_vocab_padding_and_stage_split():
    assert padded_vocab(50257, 1) == 50304 and padded_vocab(50257, 8) == 51200 and padded_vocab(512, 2) == 512
    assert [list(stage_layers(10, 4, s)) for s in range(4)] == [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]


def test_token_file(tmp_path):
    path = tmp_path / "tokens.bin"
    np.arange(100, dtype="<u2").tofile(path)
    assert open_token_file(str(path), 512, 32)[:3].tolist() == [0, 1, 2]
    with pytest.raises(DataError, match="holds id 99, not below --vocab-size 50"):
        open_token_file(str(path), 50, 32)
    with pytest.raises(DataError, match="fewer than --seq-length \\+ 1 = 129 tokens"):
        open_token_file(str(path), 512, 128)
    path.write_bytes(b"\x00" * 7)
    with pytest.raises(DataError, match="not a whole number of uint16 ids"):
        open_token_file(str(path), 512, 2)


def test_gpt_table():
    base = {"model": "gpt", "table": "layouts", "world_size": 1, "status": "ok", "latency_ms": {"mean": 400.0},
            "throughput": 5.0,
            "peak_memory_mib": {"allocated": 11000.0}, "tokens_per_s": 10240.0, "tflops_per_device": 68.0,
            "mfu": None, "mfu_note": None}  # fmt: skip
    records = [
        {**base, "group": "PP_x_fp32", "report_group": "PP"},
        {**base, "group": "DP_1x1x1_2_1536x16_fp32", "report_group": "DP", "mfu": 0.5},
        {**base, "group": "DP_1x1x1_2_1536x16_fp32", "report_group": "DP", "throughput": 7.0, "mfu": 0.5},
        {"model": "gpt", "table": "layouts", "status": "failed", "group": "DP_1x1x1_2_1536x16_fp32"},
        {"model": "resnet50", "table": "scaling", "status": "ok", "group": "b128_fp32"},
    ]
    lines = layouts_table(group_by_case(records))
    rows = [line for line in lines if line.startswith("| DP") or line.startswith("| PP")]
    assert rows[0] == (
        "| DP | DP_1x1x1_2_1536x16_fp32 |  |  | 1 | 400.00 | 11000 | 6.00 | 10240 | 68.00 | 50.0% | 2 (+1 failed) "
        "| CV, n=2 |"
    )
    assert rows[1].startswith("| PP | PP_x_fp32 |")
    assert layouts_table({}) == []
