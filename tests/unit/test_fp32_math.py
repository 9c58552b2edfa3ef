"""`--fp32-math` on torch's two TF32 APIs: after `set_fp32_math`, every getter inductor reads gives a legal value,
the same choice, in both modes and when switching between them (the flags are process state: no GPU needed).
Each test puts back the process's flags as they were, checked against a snapshot of both APIs."""

from __future__ import annotations

import pytest
import torch

from dlperf.engines.torch.precision import set_fp32_math, tf32_state

B = torch.backends
NEW_API = [B.cuda.matmul, B.cudnn, B.cudnn.conv, B.cudnn.rnn, B.mkldnn, B.mkldnn.matmul, B.mkldnn.conv, B.mkldnn.rnn]


def _snapshot() -> tuple:
    return (
        torch._C._get_cublas_allow_tf32(),
        torch._C._get_cudnn_allow_tf32(),
        tuple(getattr(b, "fp32_precision", None) for b in [B, *NEW_API]),
    )


@pytest.fixture(autouse=True)
def restored_flags():
    """torch's TF32 flags as this process had them, written back in the legacy-then-new order."""
    before = _snapshot()
    matmul = torch.get_float32_matmul_precision()
    yield
    torch.set_float32_matmul_precision(matmul)
    torch.backends.cudnn.allow_tf32 = before[1]
    for backend, value in zip([B, *NEW_API], before[2], strict=True):
        if value is not None:
            backend.fp32_precision = value
    assert _snapshot() == before and torch.get_float32_matmul_precision() == matmul


def _getters() -> dict[str, object]:
    """Every TF32 getter of either API (the legacy ones raise where the two disagree)."""
    values: dict[str, object] = {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
    }
    if hasattr(B.cuda.matmul, "fp32_precision"):  # torch >= 2.9
        values["cuda.matmul.fp32_precision"] = B.cuda.matmul.fp32_precision
        values["cudnn.fp32_precision"] = B.cudnn.fp32_precision  # inductor's convolution templates
        values["cudnn.conv.fp32_precision"] = B.cudnn.conv.fp32_precision
    return values


@pytest.mark.parametrize("order", [("tf32", "ieee", "tf32"), ("ieee", "tf32", "ieee")])
def test_every_tf32_getter_reads_the_choice_in_both_modes(order):
    expected = {
        "tf32": {"float32_matmul_precision": "high", "cuda.matmul.allow_tf32": True, "cudnn.allow_tf32": True,
                 "cuda.matmul.fp32_precision": "tf32", "cudnn.fp32_precision": "tf32",
                 "cudnn.conv.fp32_precision": "tf32"},
        "ieee": {"float32_matmul_precision": "highest", "cuda.matmul.allow_tf32": False, "cudnn.allow_tf32": False,
                 "cuda.matmul.fp32_precision": "ieee", "cudnn.fp32_precision": "ieee",
                 "cudnn.conv.fp32_precision": "ieee"},
    }  # fmt: skip
    for mode in order:
        set_fp32_math(mode)
        got = _getters()  # raised "mix of the legacy and new APIs" before: tf32's matmul, ieee's cudnn getter
        assert got == {k: v for k, v in expected[mode].items() if k in got}, mode
        assert tf32_state() == {"matmul": mode == "tf32", "conv": mode == "tf32"}
