"""The Llama on the JAX engine: FSDP x context (sequence) x tensor parallelism with selective remat gives the
one-device losses (fp32, XLA's CPU host platform split into 8 devices, one process; each layout compiles for
about 15 s, so the axes share one layout)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("jax", reason="the JAX engine needs jax, flax and optax: pip install 'dlperf[jax]'")

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parents[1] / "helpers" / "jax_layouts.py"
LAYOUTS = [{}, {"dp_shard": 2, "cp": 2, "tp": 2, "activation_checkpoint": "selective"}]


def test_jax_layouts_match_one_device(tmp_path):
    out = tmp_path / "losses.json"
    done = subprocess.run([sys.executable, str(SCRIPT), str(out), "llama", json.dumps(LAYOUTS)],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    single, *parallel = json.loads(out.read_text())
    assert not single["split"] and single["losses"][-1] < single["losses"][0] - 0.3  # it trains
    for layout, got in zip(LAYOUTS[1:], parallel):
        assert got["split"], f"{layout}: FSDP and TP split the weights"
        assert got["losses"] == pytest.approx(single["losses"], rel=1e-5), layout
