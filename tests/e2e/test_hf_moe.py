"""Hugging Face transformers' own mixture-of-experts classes (Qwen3-MoE, Mixtral, DeepSeek-V3 at a tiny config,
tests/fixtures/scripts/trainers/hf_moe_tiny.py) trained unchanged through `dlperf run --command` on a CPU and
timed by the start-up hook: the record's figure is held to the script's own per-update clock over the record's
window. The router's aux loss the model returns is the script's to print: the hook times optimizer updates and
counts batches, it never sees a forward's outputs, so the loss stays in the run's log, not in the record.

Needs an interpreter with transformers: DLPERF_TEST_TRAINERS_PYTHON (tests/e2e/test_instrument.py), else skipped.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_dlperf
from test_instrument import trainers

SCRIPT = Path(__file__).parents[1] / "fixtures" / "scripts" / "trainers" / "hf_moe_tiny.py"
BATCH, WARMUP, ITERS = 4, 5, 20


def own_clock(text: str) -> dict[int, tuple[float, str]]:
    """The script's lines `update <n> <monotonic> <aux>`: update -> (its time, its printed aux loss)."""
    rows = [line.split() for line in text.splitlines() if line.startswith("update ")]
    return {int(n): (float(t), aux) for _, n, t, aux in rows}


@pytest.mark.slow
@pytest.mark.parametrize(("model", "has_aux"), [("qwen3-moe", True), ("mixtral", True), ("deepseek-v3", False)])
def test_hf_moe_classes_through_command_match_their_own_clock(tmp_path, model, has_aux):
    python = trainers("transformers")
    # each batch 50 ms late, as from a loader: a few ms of the shared machine's scheduling between the hook's stamp
    # and the script's clock would otherwise move two windows of ~10 ms steps (Mixtral's) apart by more than 2 %
    command = f"{python} {SCRIPT} --model {model} --batch-size {BATCH} --steps 30 --seq-len 32 --batch-ms 50"
    done = run_dlperf(["run", "--model", "llama", "--micro-batch-size", str(BATCH), "--seq-length", "32",
                       "--command", command, "--warmup-iters", str(WARMUP), "--iters", str(ITERS),
                       "--out", str(tmp_path)], timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (path,) = [p for p in tmp_path.rglob("*.json") if p.parent != tmp_path]
    record = json.loads(path.read_text())
    assert record["status"] == "ok" and record["format"] == "dlperf-steps"
    first, last = record["kept_steps"]  # from where the steps settle (the steady-state test), at or past WARMUP
    assert first > WARMUP and last == min(first + ITERS - 1, 30)
    assert record["samples_per_step"]["counted"] == BATCH  # the DataLoader's batches, counted by the hook
    (log,) = [p for p in tmp_path.rglob("*.log") if "update 1 " in p.read_text()]
    clock = own_clock(log.read_text())
    assert sorted(clock) == list(range(1, 31))
    own = BATCH * (last - first + 1) / (clock[last][0] - clock[first - 1][0])
    assert record["throughput"] == pytest.approx(own, rel=0.02)
    assert record["tokens_per_s"] == pytest.approx(32 * record["throughput"], rel=1e-6)  # attention_mask's ones
    auxes = [aux for _, aux in clock.values()]
    assert all(aux != "-" for aux in auxes) if has_aux else all(aux == "-" for aux in auxes)
    assert not any("aux" in name for name in record.get("peer_metrics") or {})  # the hook cannot see it
