"""Pre-flight estimates against published parameter counts, and the one-line warning before a run that cannot fit."""

from __future__ import annotations

import pytest

from dlperf.errors import ConfigError
from dlperf.metrics.footprint import GIB, Machine, fit_problems, state_bytes
from dlperf.orchestration.preflight import preflight_warning
from dlperf.workloads import check_spec, get_workload, spec_from_mapping

BOX = {"cpu_cores": 2, "cpu_threads": 2, "memory_gib": 24.0, "gpus": []}  # the 2-core, 24 GiB test machine


def footprint(**values):
    spec = spec_from_mapping(values)
    return spec, check_spec(spec), get_workload(spec.model).footprint(spec, check_spec(spec))


def test_parameter_counts_match_published_figures():
    # torchvision's ResNet-50: 25,557,032 parameters
    assert footprint(model="resnet50")[2].params_total == 25_557_032
    # GPT-2 small (12 x 768, 1024 positions): 124,439,808 with its 50,257-token vocabulary; the model pads the
    # vocabulary to a multiple of 128 (50,304), 47 rows of 768 more
    _, _, gpt2 = footprint(model="gpt", num_layers=12, hidden_size=768, num_heads=12, seq_length=1024)
    assert gpt2.params_total == 124_439_808 + 47 * 768
    # tensor parallelism splits the layers and the vocabulary (padded to a multiple of 128 x 2: 50,432), not the
    # position table
    _, _, tp2 = footprint(model="gpt", num_layers=12, hidden_size=768, num_heads=12, seq_length=1024, tp=2,
                          devices_per_node=2)  # fmt: skip
    layers = 12 * (12 * 768**2 + 13 * 768)
    assert tp2.params_per_rank == layers // 2 + 50432 * 768 // 2 + 1024 * 768 + 2 * 768


def test_state_bytes_per_parameter():
    assert state_bytes(1000, "adamw", "fp32") == 16_000  # weights, gradients, two Adam moments
    assert state_bytes(1000, "sgd-momentum", "fp32") == 12_000
    assert state_bytes(1000, "adamw", "amp-bf16") == 18_000  # plus autocast's 16-bit weight copies


def test_eight_cpu_ranks_of_a_big_gpt_on_a_small_box_are_refused_unless_forced():
    spec, plan, _ = footprint(model="gpt", case="DP_8x1x1_16_1536x16", device="cpu")
    with pytest.raises(ConfigError, match=r"the machine has 24 GiB.*pass --force"):
        preflight_warning(spec, plan, BOX)
    warning = preflight_warning(spec, plan, BOX, force=True)
    assert warning is not None and "\n" not in warning
    assert "8 CPU ranks share 2 cores" in warning and "the machine has 24 GiB" in warning
    assert "534M parameters" in warning


def test_a_tiny_case_fits_without_a_word():
    spec, plan, _ = footprint(model="gpt", num_layers=2, hidden_size=64, num_heads=2, seq_length=32, device="cpu")
    assert preflight_warning(spec, plan, BOX) is None


def test_gpu_memory_and_device_count():
    _, _, big = footprint(model="gpt", case="DP_1x1x1_2_1536x16")
    small_gpu = Machine(cpu_cores=64, memory_bytes=512 * GIB, gpu_memory_bytes=(8 * GIB,))
    assert fit_problems(big, 1, True, small_gpu) == ["a rank needs more than the 8 GiB of its GPU"]
    assert "2 ranks per node for 1 GPU" in fit_problems(big, 2, True, small_gpu)
    assert fit_problems(big, 1, True, Machine(64, 512 * GIB, (80 * GIB,))) == []
