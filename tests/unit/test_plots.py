"""Plots checked without a screenshot: axis limits, titles, labels, and no text box over another (renderer extents)."""

from __future__ import annotations

import itertools

import matplotlib.pyplot as plt
import pytest
from conftest import run_cli
from report_records import record

from dlperf.records.store import write_json_atomic
from dlperf.reporting.aggregate import summarise
from dlperf.reporting.plots import describe_group, layouts_figure, scaling_figure, scaling_title

ENV = {"env": {"host": "gpu01"}, "device_type": "cuda", "hosts": ["gpu01"]}


def assert_no_overlaps(fig: plt.Figure) -> None:
    """No two visible text boxes (titles, axis labels, tick labels, annotations, notes) cover each other."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = [*fig.texts]
    for axis in fig.axes:
        texts += [axis.title, axis.xaxis.label, axis.yaxis.label, *axis.texts]
        texts += axis.get_legend().get_texts() if axis.get_legend() else []
        low, high = sorted(axis.get_xlim())
        texts += [t for t in axis.get_xticklabels() if low <= t.get_position()[0] <= high]
        low, high = sorted(axis.get_ylim())
        texts += [t for t in axis.get_yticklabels() if low <= t.get_position()[1] <= high]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts if t.get_visible() and t.get_text().strip()]
    for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2):
        assert not box_a.overlaps(box_b), f"{a!r} overlaps {b!r}"


def scaling_records(speeds: dict[str, list[float]], group: str = "b128_fp32") -> list[dict]:
    return [record(case, i, s, group=group, **ENV) for case, values in speeds.items() for i, s in enumerate(values, 1)]


def test_scaling_plot_starts_at_zero_names_the_machine_and_labels_efficiency():
    # 1n4g is superlinear (efficiency 4.4 / 4 = 110 %), 2n8g noisy (CV well above 5 %)
    records = scaling_records({"1n1g": [100.0, 100.0], "1n4g": [440.0, 440.0], "2n8g": [1000.0, 1500.0]})
    [(key, cases)] = summarise(records).items()
    title = scaling_title("resnet50", "b128_fp32", cases)
    assert title == "resnet50 batch 128 per device, fp32\ncuda, 1-16 devices, host gpu01"
    fig = scaling_figure(cases, title)
    left, right = fig.axes[:2]
    assert left.get_ylim()[0] == 0 and right.get_ylim()[0] == 0
    assert left.get_ylim()[1] >= 1500.0  # the largest repeat is inside the axis
    labels = {t.get_text() for t in right.texts}
    assert {"100%", "110%"} <= labels and any(t.endswith("%") for t in labels - {"100%", "110%"})
    legend = [t.get_text() for t in left.get_legend().get_texts()]
    # the tables' flags mark the points: 2n8g's repeats spread (CV), and every case has only 2 repeats
    assert "superlinear (>100 %)" in legend and "flagged: CV, n=2 (see report.md)" in legend
    assert fig._suptitle.get_text() == title
    assert_no_overlaps(fig)
    plt.close(fig)


def test_no_baseline_note_stays_clear_of_the_axis_label():
    [(key, cases)] = summarise(scaling_records({"1n2g": [700.0, 720.0], "1n8g": [2500.0]}, "b256_amp-fp16")).items()
    fig = scaling_figure(cases, scaling_title("resnet50", "b256_amp-fp16", cases))
    right = fig.axes[1]
    [note] = right.texts
    assert "no 1n1g baseline" in note.get_text()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    note_box = note.get_window_extent(renderer)
    assert not note_box.overlaps(right.yaxis.label.get_window_extent(renderer))
    assert right.get_window_extent(renderer).contains(note_box.x0, note_box.y0)
    assert right.get_window_extent(renderer).contains(note_box.x1, note_box.y1)
    assert_no_overlaps(fig)
    plt.close(fig)


def gpt_record(group: str, prefix: str, devices: int, repeat: int, speed: float, mfu: float | None) -> dict:
    return {
        **record(f"1n{devices}g", repeat, speed),
        "group": group,
        "model": "gpt",
        "table": "layouts",
        "report_group": prefix,
        "precision": "fp32",
        "tflops_per_device": speed * 0.1,
        "mfu": mfu,
        **ENV,
    }


def test_gpt_layouts_plot_throughput_tflops_and_scaling():
    records = [
        gpt_record("DP_1x1x1_2_1536x16_fp32", "DP", 1, 1, 10.0, 0.4),
        gpt_record("DP_1x1x1_2_1536x16_fp32", "DP", 1, 2, 10.0, 0.4),
        gpt_record("DP_8x1x1_16_1536x16_fp32", "DP", 8, 1, 72.0, None),
    ]
    cases = [c for cs in summarise(records).values() for c in cs]
    fig = layouts_figure("gpt", "DP", cases)
    throughput, tflops, scaling = fig.axes
    assert all(axis.get_ylim()[0] == 0 for axis in fig.axes)
    assert {t.get_text() for t in tflops.texts} == {"MFU 40.0%", "MFU n/a"}
    assert {t.get_text() for t in scaling.texts} == {"100%", "90%"}  # 72 / (8 x 10)
    assert fig._suptitle.get_text() == "gpt DP layouts\ncuda, 1-8 devices, host gpu01"
    assert_no_overlaps(fig)
    plt.close(fig)


def test_report_png_writes_gpt_plots(tmp_path, capsys):
    for i, rec in enumerate([gpt_record("DP_PP_1x1x2_8_64x2_fp32_1f1b", "DP_PP", 2, 1, 6.0, None)], 1):
        write_json_atomic(tmp_path / "gpt" / "1n2g" / f"g_{i}.json", rec)
    code, out, err = run_cli(["report", str(tmp_path), "--format", "png"], capsys)
    assert code == 0, err
    assert out.split() == [str(tmp_path / "plots" / "gpt_PP_layouts.png")]


@pytest.mark.parametrize(
    ("group", "words"),
    [
        ("b16_fp32", "batch 16 per device, fp32"),
        ("b256_amp-bf16_compile_channels-last", "batch 256 per device, amp-bf16, torch.compile, channels-last"),
        (
            "DP_PP_1x1x2_8_64x2_fp32_1f1b",
            "DP_PP: dp 1 x tp 1 x pp 2, global batch 8, hidden 64 x 2 layers, fp32, 1f1b pipeline",
        ),  # fmt: skip
    ],
)
def test_group_codes_spelled_out(group, words):
    assert describe_group(group) == words
