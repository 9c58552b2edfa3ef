"""What a newcomer tripped on in a fresh clone (issue 39): hints that name the right flag, refusals that leave no
folder behind and say what is wrong with a path that exists, plots and tables that say what they measured."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import run_cli
from source_records import record as gpt_record

from dlperf.records.lock import results_lock
from dlperf.records.store import write_json_atomic
from dlperf.reporting.aggregate import summarise

TINY = "model: resnet50\ndevice: cpu\nimage_size: 32\nnum_classes: 10\nbatch_size: 2\niters: 2\nprint_every: 1\n"


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["sweep", "configs/quick.yaml", "--iters", "3"], "--iters: not a flag of dlperf sweep: set `iters:` in"),
        (["run", "--resume"], "--resume: a flag of dlperf sweep, not of dlperf run"),
        (["run", "--batchsize", "3"], "--batchsize: did you mean --batch-size?"),
        (["run", "--warmup-iters", "atuo"], "must be a positive integer or auto, got 'atuo' (did you mean auto?)"),
    ],
)
def test_did_you_mean_names_the_right_thing(args, hint, capsys):
    code, _, err = run_cli(args, capsys)
    assert code == 2 and hint in one_line(err)
    assert "--version" not in err and "--repeat?" not in err


def test_unknown_sweep_key_names_the_near_one_first(tmp_path, capsys):
    config = tmp_path / "s.yaml"
    config.write_text(TINY.replace("batch_size", "batch_sise"))
    code, _, err = run_cli(["sweep", str(config), "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and "unknown key 'batch_sise': did you mean 'batch_size'?" in one_line(err)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_a_refused_run_leaves_no_results_folder(tmp_path, capsys, command):
    """amp-fp16 on the CPU is refused by the engine's checks, after the folder was checked writable: the folder
    that check made (and its parents made with it) is gone again."""
    out = tmp_path / "new" / "out"
    if command == "run":
        args = ["run", "--model", "resnet50", "--device", "cpu", "--precision", "amp-fp16", "--out", str(out)]
    else:
        config = tmp_path / "s.yaml"
        config.write_text(TINY + "precision: amp-fp16\n")
        args = ["sweep", str(config), "--out", str(out)]
    code, _, err = run_cli(args, capsys)
    assert code == 2 and "amp-fp16 needs a CUDA device" in one_line(err)
    assert not (tmp_path / "new").exists()


def test_a_too_long_out_name_is_one_line(tmp_path, capsys):
    code, out, err = run_cli(["run", "--command", "echo hi", "--out", str(tmp_path / ("x" * 300))], capsys)
    assert code == 2 and "File name too long; choose another --out" in one_line(err)


def test_existing_paths_are_not_said_to_be_missing(tmp_path, capsys):
    """A file given to report; a folder as the history database (--db, or DLPERF_HISTORY, its default)."""
    a_file = tmp_path / "a.txt"
    a_file.write_text("")
    code, _, err = run_cli(["report", str(a_file)], capsys)
    assert code == 2 and "is a file, not a results folder" in one_line(err) and "does not exist" not in err
    code, _, err = run_cli(["history", "show", "--db", str(tmp_path)], capsys)
    assert code == 2 and "is a folder, not a database file" in one_line(err)


def test_report_on_a_folder_being_written_names_its_writer(tmp_path, capsys):
    """A run has its lock and its log but no record yet: the report says who writes the folder, not `extract`."""
    folder = tmp_path / "running"
    (folder / "resnet50" / "1n2g").mkdir(parents=True)
    (folder / "resnet50" / "1n2g" / "resnet50_b16_fp32_1.log").write_text("[dlperf] config {}\n")
    with results_lock(folder):
        code, _, err = run_cli(["report", str(folder)], capsys)
    assert code == 2 and f"in use by dlperf pid {os.getpid()}" in one_line(err) and "extract" not in err


def planned_sweep(folder: Path, adaptive: bool = False) -> list[Path]:
    """A sweep's folder as it stands mid-way: four runs planned, 1n1g's first recorded, 1n2g's first begun (its
    log, no record yet), the second repeats not started."""
    from report_records import record

    from dlperf.records.paths import run_paths
    from dlperf.records.sweep_runs import save_planned

    runs = [run_paths(folder, "resnet50", case, "resnet50_b128_fp32", n) for n in (1, 2) for case in ("1n1g", "1n2g")]
    save_planned(folder, runs, adaptive)
    write_json_atomic(runs[0].record, record("1n1g", 1, 100.0))
    runs[1].folder.mkdir(parents=True)
    runs[1].log.write_text("[dlperf] config {}\n")
    return [paths.record for paths in runs]


def test_report_of_a_sweep_still_running_names_the_runs_to_come(tmp_path, capsys):
    """The sweep holds the folder: the command, report.md and report.html say which runs are under way and which
    are not run yet, and that the figures will change (a report said nothing of it before)."""
    folder = tmp_path / "running"
    planned_sweep(folder)
    with results_lock(folder):
        code, _, err = run_cli(["report", str(folder), "--format", "md"], capsys)
    assert code == 0, err
    said = (
        f"a sweep is still running in this folder (dlperf pid {os.getpid()} on host",
        "1 of 4 runs recorded; 1 run under way (resnet50/1n2g/resnet50_b128_fp32_1); 2 runs not run yet "
        "(resnet50/1n1g/resnet50_b128_fp32_2, resnet50/1n2g/resnet50_b128_fp32_2); the figures will change",
    )
    assert all(part in err for part in said) and "--resume" not in err
    head = (folder / "report.md").read_text().split("\n\n")[2]
    assert head.startswith("**Partial**: a sweep is still running") and all(part in head for part in said)


def test_report_of_an_interrupted_sweep_says_how_to_finish_it(tmp_path, capsys):
    """No live process holds the folder: the begun run was cut off, the others never ran; --resume finishes it.
    Once every planned run is recorded the report is whole again. (report.html: tests/e2e/test_html_report.py)"""
    from report_records import record

    from dlperf.records.sweep_runs import partial_note

    folder = tmp_path / "cut"
    records = planned_sweep(folder)
    code, _, err = run_cli(["report", str(folder), "--format", "md"], capsys)
    assert code == 0, err
    said = (
        "the sweep in this folder was interrupted (no dlperf process holds it): 1 of 4 runs recorded; 1 run cut off "
        "before a record (resnet50/1n2g/resnet50_b128_fp32_1); 2 runs not run yet",
        f"the figures may change: finish it with `dlperf sweep --resume --out {folder}`",
    )
    assert all(part in err for part in said)
    assert all(part in (folder / "report.md").read_text() for part in said)
    for path, (case, repeat) in zip(records[1:], [("1n2g", 1), ("1n1g", 2), ("1n2g", 2)]):
        write_json_atomic(path, record(case, repeat, 100.0 * int(case[2])))
    assert partial_note(folder, 4) is None


def test_an_adaptive_case_that_stopped_has_no_repeats_to_come(tmp_path):
    """`--repeats auto` plans the most repeats; a case whose record says it stopped runs no more of them."""
    from dlperf.records.sweep_runs import partial_note, sweep_runs

    folder = tmp_path / "auto"
    records = planned_sweep(folder, adaptive=True)
    records[1].with_suffix(".log").unlink()
    stop = {"repeats_stop": {"stop": True, "reason": "the interval is within the target"}}
    from report_records import record

    write_json_atomic(records[0], record("1n1g", 1, 100.0, **stop))
    write_json_atomic(records[1], record("1n2g", 1, 190.0))
    runs = sweep_runs(folder)
    assert (runs.recorded, runs.planned, [p.record for p in runs.waiting]) == (2, 3, [records[3]])
    write_json_atomic(records[3], record("1n2g", 2, 190.0, **stop))
    assert partial_note(folder, 3) is None


def test_a_single_run_writing_the_folder_is_named_with_the_records_so_far(tmp_path):
    """No sweep plan (a `dlperf run`, or a sweep of an older dlperf): who writes, and how many records are in."""
    from report_records import record

    from dlperf.records.sweep_runs import partial_note

    write_json_atomic(tmp_path / "resnet50" / "1n1g" / "resnet50_b128_fp32_1.json", record("1n1g", 1, 100.0))
    with results_lock(tmp_path):
        note = partial_note(tmp_path, 1)
    assert note.startswith(f"dlperf pid {os.getpid()}") and note.endswith("the 1 record written so far")
    assert partial_note(tmp_path, 1) is None


def test_ctrl_c_on_a_run_names_repeat_and_overwrite(tmp_path, capsys, monkeypatch):
    """The interrupted run's log stays; the same command again would be refused by it: the hint says what to pass."""
    from dlperf.cli import run_cmd
    from dlperf.orchestration.run import check_run, launcher_for, plan_jobs

    def interrupted(spec, launch, out, *, repeat, overwrite, force, hooks):
        launcher = launcher_for(launch)
        (job,) = plan_jobs(spec, check_run(spec, launcher), [repeat], out)
        job.paths.log.parent.mkdir(parents=True)
        job.paths.log.write_text("")
        with hooks.around(job, launcher, {}):
            raise KeyboardInterrupt

    monkeypatch.setattr(run_cmd, "run_one", interrupted)
    code, out, err = run_cli(["run", "--model", "resnet50", "--device", "cpu", "--out", str(tmp_path)], capsys)
    assert code == 130
    assert "run again with --repeat 2 to keep it beside the new run, or with --overwrite" in out + err


def test_counts_in_words():
    from dlperf.metrics.footprint import Footprint
    from dlperf.wording import count, magnitude

    assert (count(1, "device"), count(2, "device")) == ("1 device", "2 devices")
    assert [magnitude(n) for n in (950, 52_000, 410_000, 1_500_000, 25_600_000, 8.0e9)] == [
        "950",
        "52k",
        "410k",
        "1.5M",
        "26M",
        "8.0B",
    ]
    tiny = Footprint(params_total=410_000, params_per_rank=410_000, state_bytes=0, activation_bytes=0)
    assert tiny.describe().startswith("410k parameters")


def test_references_say_1_device(capsys):
    code, out, _ = run_cli(["references", "--model", "resnet50"], capsys)
    assert code == 0 and "1 device," in out and "1 devices" not in out


def test_sweep_out_defaults_to_results_and_the_file_name(tmp_path, capsys, monkeypatch):
    """Two sweep files without --out never share a folder (report refuses two sweeps in one)."""
    monkeypatch.chdir(tmp_path)
    Path("tiny.yaml").write_text(TINY)
    code, out, err = run_cli(["sweep", "tiny.yaml", "--dry-run"], capsys)
    assert code == 0, err
    assert str(Path("results") / "tiny" / "resnet50" / "1n1g") in out
    code, _, err = run_cli(["sweep", "--resume"], capsys)
    assert code == 2 and "--resume needs --out" in one_line(err)


def _layouts_record(engine: str, devices: int, speed: float) -> dict:
    """A tiny GPT data-parallel case as the engines' sweep writes it: each topology its own group."""
    group = f"DP_{devices}x1x1_{4 * devices}_64x2_fp32" + ("_jax" if engine == "jax" else "")
    return gpt_record(
        "gpt",
        f"1n{devices}g",
        4,
        "fp32",
        1,
        speed,
        group=group,
        engine=engine,
        table="layouts",
        global_batch_size=4 * devices,
        parallel={"dp": devices, "tp": 1, "pp": 1, "global_batch_size": 4 * devices},
        report_group="DP",
        work="s32_nh4_v512",
    )


def test_layouts_scaling_draws_each_engine_against_its_own_baseline():
    """torch 100 -> 180 samples/s (90 %), JAX 50 -> 95 (95 %): JAX's 1-device point is 100 % of its own line, not
    50 % of torch's (the issue's `203 %` and `2 %`)."""
    from dlperf.reporting.plots import layouts_figure

    speeds = {("torch", 1): 100.0, ("torch", 2): 180.0, ("jax", 1): 50.0, ("jax", 2): 95.0}
    records = [_layouts_record(engine, devices, speed) for (engine, devices), speed in speeds.items()]
    cases = [case for cases in summarise(records).values() for case in cases]
    fig = layouts_figure("gpt", "DP", cases)
    scaling = fig.axes[2]
    assert sorted(text.get_text() for text in scaling.texts) == ["100%", "100%", "90%", "95%"]
    assert {line.get_label() for line in scaling.get_lines()} >= {"jax: ideal from 1 dev", "torch: ideal from 1 dev"}


def test_by_engine_keeps_a_gpt_case_across_device_counts_in_one_series(tmp_path):
    """GPT's group names its layout and global batch: by engine, its 1n1g and 1n2g are still one series (the work
    of one replica), with a speedup against its own 1n1g."""
    from dlperf.reporting.sources import build_comparison, load_sources

    speeds = {("torch", 1): 100.0, ("torch", 2): 180.0, ("jax", 1): 50.0, ("jax", 2): 95.0}
    for (engine, devices), speed in speeds.items():
        rec = _layouts_record(engine, devices, speed)
        write_json_atomic(tmp_path / "gpt" / rec["case"] / f"{rec['group']}_1.json", rec)
    comparison = build_comparison(load_sources([tmp_path], by="engine"))
    (series,) = comparison.series
    assert series.key.variant == "tp1_pp1_64x2_fp32_s32_nh4_v512" and series.case_order == ["1n1g", "1n2g"]
    assert series.cell("torch", "1n2g").speedup == 1.8 and series.cell("jax", "1n2g").speedup == 1.9
    assert series.ratios("1n2g") == {"jax": round(95 / 180, 3)}


def test_keras_logs_name_their_device_and_framework(tmp_path, capsys):
    """DLPerf's TF2 Keras logs print TensorFlow's device lines (Tesla V100-SXM2-16GB): the records, report.md and
    the plot's subtitle name it, and the nodes where the logs name no host (not `?, 0 hosts`)."""
    from dlperf.records.load import load_records
    from dlperf.reporting.measured_on import where_measured

    out = tmp_path / "keras"
    code, _, err = run_cli(["extract", "tests/fixtures/peer-logs/tf2-keras-resnet50", "--out", str(out)], capsys)
    assert code == 0, err
    records = load_records(out)
    assert {r.accelerator.name for r in records if r.accelerator} == {"Tesla V100-SXM2-16GB"}
    assert {r.accelerator.model for r in records if r.accelerator} == {"V100 SXM2"}
    assert {r.framework for r in records} == {"TF2 Keras"}
    subtitle = where_measured(records)
    assert subtitle == "Tesla V100-SXM2-16GB, 1-16 devices, 1-2 nodes (hosts not recorded)"
    assert (
        "Measured on Tesla V100-SXM2-16GB, 1-16 devices, 1-2 nodes (hosts not recorded); TF2 Keras."
        in (out / "report.md").read_text()
    )


def test_waterfall_titles_stay_inside_the_figure():
    """A one-case waterfall's long title and heading wrap within the 5.5-inch figure instead of being cut."""
    from dlperf.reporting.waterfall import ScalingLoss
    from dlperf.reporting.waterfall_plot import waterfall_figure

    loss = ScalingLoss("1n2g", 2, 230.0, 150.0, 139.1, 213.3, {"communication": 80.0}, {"communication": 74.2})
    fig = waterfall_figure("resnet50", "b16_fp32_32px_100cls", [loss])
    fig.canvas.draw()
    width = fig.bbox.width
    for text in [fig._suptitle, fig.axes[0].title]:
        box = text.get_window_extent()
        assert box.x0 >= 0 and box.x1 <= width, text.get_text()
