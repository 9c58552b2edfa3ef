"""The MoE on the JAX engine: FSDP x EP (experts split over the expert axis, tokens exchanged by all-to-all inside
shard_map, experts as ragged_dot) gives the one-device losses and picks per expert (fp32, XLA host devices, one process,
5 steps; the routing meter's figures over the last 4), with GQA and with MLA (sigmoid scores, DeepSeek's normalised
top-k), HSDP around it and selective remat."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("jax", reason="the JAX engine needs jax, flax and optax: pip install 'dlperf[jax]'")

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parents[1] / "helpers" / "jax_layouts.py"
MLA = dict(attention="mla", q_lora_rank=16, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8,
           score_func="sigmoid", route_norm=True, route_scale=2.5)  # fmt: skip
# one device with 2 micro-batches accumulated, then the same global batch over 4 devices; 4 experts
PAIRS = [
    ({"micro_batch_size": 4}, {"dp_shard": 4, "ep": 2, "micro_batch_size": 2, "activation_checkpoint": "selective"}),
    ({"micro_batch_size": 8, **MLA}, {"dp_replicate": 2, "dp_shard": 2, "ep": 2, "micro_batch_size": 2, **MLA}),
]
LAYOUTS = [layout for pair in PAIRS for layout in pair]


def test_fsdp_by_ep_matches_one_device(tmp_path):
    out = tmp_path / "losses.json"
    done = subprocess.run([sys.executable, str(SCRIPT), str(out), "moe", json.dumps(LAYOUTS)], capture_output=True,
                          text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(out.read_text())
    for (single_layout, parallel_layout), single, parallel in zip(PAIRS, results[::2], results[1::2]):
        assert single["losses"][-1] < single["losses"][0] - 0.3, single_layout  # it trains
        assert single["experts_held"] == 4 and parallel["experts_held"] == 4 // parallel_layout["ep"]
        assert parallel["losses"] == pytest.approx(single["losses"], rel=1e-5), parallel_layout
        assert parallel["counts"] == single["counts"] and sum(single["counts"]) == 5 * 256  # dropless: every pick
        assert single["dropped"] == parallel["dropped"] == 0
        measured, sharded = single["moe"], parallel["moe"]  # the meter's record over the 4 timed steps
        assert measured["routed_tokens"] == 2 * 4 * 256 and measured["dropped_tokens"] == 0  # 2 MoE blocks
        assert len(measured["windows"]) == len(sharded["windows"]) == 4
        for key in ("tokens_per_expert", "imbalance", "imbalance_worst_block"):
            assert sharded[key] == measured[key], key
        assert measured["imbalance"] > 1.0 and measured["tokens_per_ep_rank"] == [2048]
        per_rank = [sum(measured["tokens_per_expert"][i : i + 2]) for i in (0, 2)]
        assert sharded["tokens_per_ep_rank"] == per_rank  # 2 experts a rank
