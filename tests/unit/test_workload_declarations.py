"""What the workloads declare for the rest of dlperf (workloads/base.py), read through the registry: maxbatch's
batch, the report's titles, other frameworks' names, and extract's speed bounds, the same values as the tables
they replace."""

from __future__ import annotations

import pytest

from dlperf.errors import ConfigError
from dlperf.reporting.layouts_table import formula, title
from dlperf.workloads import get_workload, known_workload, model_aliases, plausible_work, searched_batch


def test_maxbatch_varies_each_models_batch_per_device():
    assert [searched_batch(m) for m in ("resnet50", "gpt", "llama")] == [
        "batch_size",
        "micro_batch_size",
        "micro_batch_size",
    ]
    with pytest.raises(ConfigError, match="searches the batch of resnet50 or gpt or llama, not commbench"):
        searched_batch("commbench")


def test_every_declared_batch_is_a_config_field():
    for name in ("resnet50", "gpt", "llama"):
        workload = get_workload(name)
        assert workload.batch_key in workload.config_type.__dataclass_fields__


def test_report_titles_and_formulas():
    assert (title("gpt"), title("llama"), title("resnet50"), title("nanogpt")) == (
        "GPT",
        "Llama",
        "ResNet-50",
        "nanogpt",
    )
    assert formula("llama") == "(6N + 12·L·H·Q·T) per token" and formula("resnet50") == "" and formula("x") == ""
    assert known_workload("nanogpt") is None


def test_aliases_name_a_registered_model():
    assert model_aliases() == {"rn50": "resnet50", "resnet50v15": "resnet50", "resnet50v1": "resnet50"}


def test_plausible_work_is_extracts_table():
    """The entries of extract's table (framework_logs/plausibility.py's flops_per_sample()) that are dlperf workloads,
    in the same `(what, name parts, FLOPs per sample)` shape."""
    assert plausible_work() == (
        ("a ResNet image", ("resnet", "rn50", "rn101"), 1e9),
        ("a 175B GPT-3 sequence (2048 tokens)", ("gpt3", "gpt-3"), 1e15),
        ("a Llama-2-70B sequence", ("llama2_70b", "llama2-70b", "llama-2-70b"), 5e14),
    )
