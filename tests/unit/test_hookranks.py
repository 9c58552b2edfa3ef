"""The hook's per-process side files made the run's stream (framework_logs/hookranks.py) and the counted samples held
against the declared batch (orchestration/external_run.samples_check): made-up files, hand sums."""

from __future__ import annotations

import pytest

from dlperf.errors import DataError
from dlperf.framework_logs.hookranks import counted_tokens_per_s, merge
from dlperf.orchestration.external_run import own_launcher, samples_check
from dlperf.records.parts import SamplesPerStep


def write(tmp, name: str, rows: list[str]) -> None:
    (tmp / f"run.steps.{name}").write_text("".join(f"{r}\n" for r in rows))


def test_ranks_are_summed_step_by_step_and_two_processes_of_one_rank_never_merged(tmp_path):
    write(tmp_path, "a.10", ["epoch 0.500000", "1 1.000000 8 0 -", "2 2.000000 5 0 -", "# dlperf hook for x: E"])
    write(tmp_path, "a.11", ["1 1.100000 8 1 -", "2 2.100000 5 1 -"])
    write(tmp_path, "a.12", ["1 9.000000 8 0 -"])  # a stray process also calling itself rank 0: fewer steps
    write(tmp_path, "a.13", ["# a data-loader worker's note only"])
    stream = merge(tmp_path / "run.steps", world_size=2)
    assert stream.samples == {1: 16, 2: 10} and stream.tokens == {1: None, 2: None}
    assert stream.text == "epoch 0.500000\n1 1.000000 16 0 -\n2 2.000000 10 0 -\n"
    assert any("2 processes stamped updates as rank 0" in n and "run.steps.a.10's 2 were read" in n
               for n in stream.notes)  # fmt: skip
    assert "the hook noted: dlperf hook for x: E" in stream.notes


def test_a_rank_that_counted_nothing_leaves_the_step_uncounted_and_missing_ranks_are_scaled(tmp_path):
    write(tmp_path, "a.1", ["1 1.000000 8 0 100", "2 2.000000 8 0 90", "3 3.000000 - 0 -"])
    write(tmp_path, "a.2", ["1 1.000000 8 1 50", "2 2.000000 8 1 70"])  # its last step cut by a stop rule
    stream = merge(tmp_path / "run.steps", world_size=4)  # two ranks' files on another node
    assert stream.samples == {1: 32, 2: 32, 3: None} and stream.tokens == {1: 300, 2: 320, 3: None}
    assert any("side files of 2 of the 4 ranks" in n for n in stream.notes)
    assert merge(tmp_path / "none.steps", 1) is None
    assert merge(tmp_path / "run.steps", world_size=4, per_node=2).samples == stream.samples  # this node's 2 found


def test_fewer_ranks_on_this_node_than_its_layout_is_refused(tmp_path):
    """`accelerate launch --cpu --num_processes 2` starts one process: one rank stepped where the node has two."""
    write(tmp_path, "a.1", ["1 1.000000 8 0 -", "2 2.000000 8 0 -"])
    with pytest.raises(DataError, match=r"1 process\(es\) stepped on this node .* --devices-per-node is 2"):
        merge(tmp_path / "run.steps", world_size=2, per_node=2)


def test_counted_samples_make_the_figure_and_the_declared_batch_is_a_check(tmp_path):
    write(tmp_path, "a.1", [f"{k} {k}.000000 {8 if k % 3 else 5} 0 -" for k in range(1, 10)])
    stream = merge(tmp_path / "run.steps", 1)
    counted, note = samples_check(stream, [4, 9], declared=8)
    assert counted == SamplesPerStep(counted=pytest.approx((8 * 4 + 5 * 2) / 6), declared=8)
    assert "each 5-8" in note and "the samples of one optimizer update" in note
    assert samples_check(stream, [4, 5], declared=8)[1] is None  # 8 and 8: they agree
    write(tmp_path, "a.1", ["1 1.000000 - 0 -", "2 2.000000 - 0 -"])
    counted, note = samples_check(merge(tmp_path / "run.steps", 1), [2, 2], declared=8)
    assert counted.counted is None and "on trust" in note


@pytest.mark.parametrize(
    ("argv", "launcher"),
    [
        (["torchrun", "--nproc-per-node", "2", "t.py"], "`torchrun`"),
        (["env", "A=1", "/v/bin/accelerate", "launch", "t.py"], "`accelerate launch`"),
        (["python", "-m", "torch.distributed.run", "t.py"], "`python -m torch.distributed.run`"),
        (["deepspeed", "t.py"], "`deepspeed`"),
        (["python", "t.py"], None),
        (["accelerate", "env"], None),
    ],
)
def test_launchers_that_start_their_own_workers_are_named(argv, launcher):
    assert own_launcher(argv) == launcher


def test_counted_tokens_over_the_kept_updates_or_none_where_one_was_not_counted(tmp_path):
    write(tmp_path, "a.1", ["1 1.000000 8 0 100", "2 1.500000 8 0 90", "3 3.000000 8 0 70", "4 4.000000 8 0 -"])
    stream = merge(tmp_path / "run.steps", 1)
    assert counted_tokens_per_s(stream, (2, 3)) == pytest.approx((90 + 70) / 2.0)
    assert counted_tokens_per_s(stream, (3, 4)) is None and counted_tokens_per_s(stream, (1, 2)) is None


def test_an_update_counted_nothing_where_the_others_were_counts_none_never_the_declared(tmp_path):
    """A loader that fetches ahead counts each batch an update early: an epoch's first update 16, its last none
    (for 8, 8, 8, 8). Filled with the declared 8, each epoch read 40 samples of its 32; counted as none, 32, and
    the note names the updates."""
    from dlperf.framework_logs.base import RunShape
    from dlperf.framework_logs.formats import dlperf_steps

    counts = ["16", "8", "8", "-"] * 2
    write(tmp_path, "a.1", [f"{k} {k}.000000 {n} 0 -" for k, n in enumerate(counts, start=1)])
    stream = merge(tmp_path / "run.steps", 1)
    assert stream.samples[4] is None and stream.text.splitlines()[3] == "4 4.000000 0 0 -"
    points = list(dlperf_steps.read(stream.text.splitlines(), RunShape(global_batch=8, world_size=1)))
    assert points[-1].samples == 64  # two epochs of 32
    counted, note = samples_check(stream, [2, 8], declared=8)
    assert counted.counted == pytest.approx((8 + 8 + 0 + 16 + 8 + 8 + 0) / 7)
    assert "no samples counted at 2 of the window's 7 updates (4, 8)" in note and "not the declared 8" in note


@pytest.mark.parametrize(
    ("counts", "cause"),
    [
        (SamplesPerStep(None, 8), "took the declared 8 an update on trust: check --batch-size"),
        (SamplesPerStep(8, 8), "as declared, so not the batch flags"),
        (SamplesPerStep(6.5, 8), "counted 6.5 samples an update where 8 is declared"),
    ],
)
def test_a_contradiction_names_what_the_hook_counted_and_blames_the_flags_only_where_it_trusted_them(counts, cause):
    """The hook's figure and the script's over one stretch 1.15x apart: the refusal said "check --batch-size/
    --global-batch-size" whatever the hook counted; it says what the hook counted, the flags only where it took them
    on trust."""
    from dlperf.orchestration.external_run import counted_cause

    said = counted_cause(counts)
    assert cause in said and ("--batch-size" in said) == (counts.counted is None)
