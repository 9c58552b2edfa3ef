"""The like-for-like reading of an instrumented run (framework_logs/samestretch.py): the hook's figure over the
stretch a script's own figure covers, each against a hand computation of that stretch from a made-up side file."""

from __future__ import annotations

import pytest

from dlperf.errors import DataError
from dlperf.framework_logs.base import Point, RunShape
from dlperf.framework_logs.formats import hf_trainer, keras_fit, lightning_rich, nanogpt, timm
from dlperf.framework_logs.formats.dlperf_steps import trace
from dlperf.framework_logs.samestretch import hook_over_script_stretch
from dlperf.orchestration.external_run import like_for_like
from dlperf.records.parts import CrossCheck


def side_file(times: list[float], samples: int | None = 8, marks: tuple[str, ...] = ()) -> list[str]:
    rows = [f"{i} {t:.6f} {samples if samples else '-'}" for i, t in enumerate(times, 1)]
    return [*marks[:1], *rows, *marks[1:]]


def test_the_side_file_gives_steps_and_marks():
    hooked = trace(["epoch 9.500000", "1 10.000000 -", "2 10.500000 6", "# a note", "train 9.000000 11.000000"], 4)
    assert hooked.times == {1: 10.0, 2: 10.5} and hooked.samples == {1: 4, 2: 6}
    assert hooked.train == (9.0, 11.0) and hooked.epochs == (9.5,)


def test_transformers_span_holds_every_step_stamped_inside_it():
    hooked = trace(side_file([10.0, 10.5, 11.5, 12.0], 8, ("train 9.000000 12.500000",)), 8)
    figure, printed, what = hf_trainer.same_stretch(hooked, [], None)
    assert figure == pytest.approx(4 * 8 / 3.5) and printed is None and "steps 1-4" in what
    assert hf_trainer.same_stretch(trace(side_file([10.0, 11.0]), 8), [], None) is None  # no span marked


def test_rich_span_is_the_last_epoch_after_its_first_step_within_30_s():
    epoch_two = [100.0 + 2 * i for i in range(20)]  # steps 4..23 of the second epoch, 38 s in all
    lines = ["epoch 0.000000", *side_file([1.0, 2.0, 3.0])[0:3], "epoch 99.000000"]
    lines += [f"{i} {t:.6f} 16" for i, t in enumerate(epoch_two, 4)]
    figure, _, what = lightning_rich.same_stretch(trace(lines, 16), [], None)
    kept = [t for t in epoch_two if t >= epoch_two[-1] - 30]  # rich drops samples older than 30 s
    assert figure == pytest.approx((len(kept) - 1) * 16 / (kept[-1] - kept[0])) and "steps 8-23" in what


def test_nanogpt_pairs_each_iteration_with_the_hooks_interval_after_it(tmp_path):
    times = [0.0, 1.0, 1.2, 3.2, 3.5, 3.7, 4.0]  # hook step k+1 (times[k]) ends iteration k; 3 holds an evaluation
    log = tmp_path / "run.log"
    lines = ["tokens per iteration will be: 1,024"]
    for k in range(7):
        if k == 3:
            lines.append("step 3: train loss 4.0, val loss 4.1")
        seconds = times[k] - times[k - 1] if k else 0.5
        lines.append(f"iter {k}: loss 4.0, time {seconds * 1000 * 1.01:.2f}ms, mfu 0.00%")
    log.write_text("\n".join(lines) + "\n")
    steps = tmp_path / "run.steps.rank0"
    steps.write_text("\n".join(side_file(times, None)) + "\n")
    shape = RunShape(global_batch=16, world_size=1)
    figure, printed, what = hook_over_script_stretch(log, steps, nanogpt.FORMATS[0], shape, (1, 5))
    timed = [1, 2, 4, 5]  # iteration 3 has no time of its own
    assert figure == pytest.approx(16 * len(timed) / sum(times[k] - times[k - 1] for k in timed))
    assert printed == pytest.approx(figure * 64 / 1.01, rel=1e-3)  # 1,024 tokens per iteration, times 1 % longer
    assert "4 iterations 1-5" in what
    points = [Point(step=7, seconds=0.1)]
    assert nanogpt.same_stretch(trace(side_file(times, None), 16), points, (7, 7)) is None  # not in the trace


def test_keras_epochs_are_their_steps_after_the_first_or_all_where_the_epoch_time_was_read():
    times = [float(t) for t in range(1, 13)] + [13.5, 14.5, 15.5, 16.5]  # 4 epochs of 4 steps; epoch 4 slower
    hooked = trace(side_file(times, 32), 32)
    progbar = [Point(step=4 * e, start=4 * (e - 1), seconds=1.0, note="Keras' printed `ms/step`") for e in (1, 2, 3)]
    elapsed = Point(step=16, start=12, seconds=1.1, note=f"{keras_fit.EPOCH_TIME} (whole seconds) / ...")
    figure, printed, what = keras_fit.same_stretch(hooked, [*progbar, elapsed], (8, 16))
    # epochs 2, 3: steps 6-8 and 10-12 over 3 s each; epoch 4: steps 13-16 from step 12's stamp, 4.5 s
    assert figure == pytest.approx((3 + 3 + 4) * 32 / (3 + 3 + 4.5)) and "3 kept epochs" in what
    assert printed == pytest.approx((3 + 3 + 4) * 32 / (3 * 1.0 + 3 * 1.0 + 4 * 1.1))  # its batch: the hook's


@pytest.mark.parametrize(("hook", "agree", "said"), [(101.0, True, "agree (1.0100x)"), (105.0, False, "+5.0%")])
def test_a_like_for_like_pair_agrees_within_2_percent_and_is_noted_up_to_10(hook, agree, said):
    check = like_for_like(CrossCheck(ratio=1.2), hook, 100.0, "a span", "samples/s")
    assert check.agree is agree and said in check.note and check.like_for_like.ratio == hook / 100


def test_a_like_for_like_pair_beyond_10_percent_contradicts_itself():
    with pytest.raises(DataError, match="contradicts itself: over a span the script prints 100 samples/s"):
        like_for_like(CrossCheck(ratio=1.0), 115.0, 100.0, "a span", "samples/s")


def test_timm_leaves_a_later_epochs_first_interval_out_of_both():
    times = [float(t) for t in range(1, 5)] + [9.0, 10.0, 11.0, 12.0]  # validation between updates 4 and 5
    lines = [
        f"Train: {e} [{u:4d}/4 ( 50%)]  Loss: 0.7 (0.7)  Time: {t:.3f}s,   16.00/s  ({a:.3f}s,   16.00/s)"
        for e, u, t, a in [(0, 1, 1.0, 1.0), (0, 3, 1.0, 1.0), (1, 1, 1.0, 1.0), (1, 3, 1.0, 1.0)]
    ]
    points = list(timm.FORMATS[0].read(lines, RunShape(global_batch=16, world_size=1)))
    assert [(p.start, p.step, p.paused) for p in points] == [(0, 2, False), (2, 4, False), (4, 6, True), (6, 8, False)]
    figure, printed, what = timm.same_stretch(trace(side_file(times, 16), 16), points, (4, 8))
    assert figure == pytest.approx(2 * 16 / 2.0) and printed == pytest.approx(16.0) and "not a later epoch's" in what
