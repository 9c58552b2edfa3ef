"""Fused SGD under a loss scaler: a skipped first step leaves parameters and momentum as they were, and the next
step equals SGD's first (tests/e2e/test_cuda.py runs the same check on a GPU)."""

from __future__ import annotations

from fused_sgd import check_skipped_step_then_finite


def test_fused_sgd_survives_a_skipped_first_step_on_cpu():
    check_skipped_step_then_finite("cpu")
