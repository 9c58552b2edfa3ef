"""Every bad input ends in one clear line, a non-zero exit, and no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import TINY, assert_one_line_error, run_cli


@pytest.mark.parametrize(
    ("flags", "needles"),
    [
        (["--model", "vgg"], ["unknown model 'vgg'", "resnet50"]),
        (["--precision", "fp8"], ["--precision: must be one of", "amp-bf16", "got 'fp8'"]),
        (["--batch-size", "abc"], ["--batch-size", "positive integer", "'abc'"]),
        (["--batch-size", "0"], ["--batch-size", "positive integer"]),
        (["--iters", "-3"], ["--iters", "positive integer"]),
        (["--iters", "2", "--print-every", "5"], ["shorter than one timing window"]),
        (["--precision", "amp-fp16"], ["amp-fp16 needs a CUDA device"]),
        (["--device", "cuda"], ["CUDA"]),
        (["--device", "tpu"], ["--device: must be one of auto, cuda, cpu, got 'tpu'"]),
        (["--nodes", "2"], ["--nodes 2"]),
        (["--bogus-flag"], ["unrecognized arguments: --bogus-flag"]),
    ],
)
def test_run_refuses_bad_flags(flags, needles, tmp_path, capsys):
    code, _, err = run_cli(["run", *TINY, "--out", str(tmp_path), *flags], capsys)
    assert_one_line_error(code, err, *needles)
    assert not list(tmp_path.rglob("*.json")), "nothing may be written for a refused run"


def test_missing_data_folder(tmp_path, capsys):
    code, _, err = run_cli(["run", *TINY, "--out", str(tmp_path), "--data", str(tmp_path / "nope")], capsys)
    assert_one_line_error(code, err, "does not exist", "--data synthetic")


def test_data_folder_without_images(tmp_path, capsys):
    (tmp_path / "data" / "class_a").mkdir(parents=True)
    (tmp_path / "data" / "class_a" / "readme.txt").write_text("not an image")
    code, _, err = run_cli(["run", *TINY, "--out", str(tmp_path / "out"), "--data", str(tmp_path / "data")], capsys)
    assert_one_line_error(code, err, "has no images")


def test_unwritable_results_folder(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, _, err = run_cli(["run", *TINY, "--out", str(blocker / "results")], capsys)
    assert_one_line_error(code, err, "cannot write results folder", "--out")


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_sweep_yaml_that_does_not_parse(tmp_path, capsys):
    bad = write(tmp_path / "bad.yaml", "model: resnet50\ntopology: [1n1g\n")
    code, _, err = run_cli(["sweep", str(bad), "--out", str(tmp_path / "out")], capsys)
    assert_one_line_error(code, err, "does not parse", "line")


def test_sweep_yaml_unknown_key(tmp_path, capsys):
    bad = write(tmp_path / "bad.yaml", "model: resnet50\nbatchsize: 8\n")
    code, _, err = run_cli(["sweep", str(bad), "--out", str(tmp_path / "out")], capsys)
    assert_one_line_error(code, err, "unknown key 'batchsize'", "batch_size")


def test_sweep_yaml_bad_topology_and_repeats(tmp_path, capsys):
    bad = write(tmp_path / "bad.yaml", "model: resnet50\ntopology: [one-node]\n")
    code, _, err = run_cli(["sweep", str(bad), "--out", str(tmp_path / "out")], capsys)
    assert_one_line_error(code, err, "'one-node'", "1n8g")
    bad = write(tmp_path / "bad2.yaml", "model: resnet50\nrepeats: 0\n")
    code, _, err = run_cli(["sweep", str(bad), "--out", str(tmp_path / "out")], capsys)
    assert_one_line_error(code, err, "repeats must be a positive integer")


def test_sweep_file_missing(tmp_path, capsys):
    code, _, err = run_cli(["sweep", str(tmp_path / "none.yaml")], capsys)
    assert_one_line_error(code, err, "cannot read sweep file")


def test_report_folder_without_records(tmp_path, capsys):
    code, _, err = run_cli(["report", str(tmp_path)], capsys)
    assert_one_line_error(code, err, "no dlperf run records")
    code, _, err = run_cli(["report", str(tmp_path / "missing")], capsys)
    assert_one_line_error(code, err, "does not exist")


def test_debug_shows_the_traceback(tmp_path, capsys):
    code, _, err = run_cli(["run", "--debug", *TINY, "--out", str(tmp_path), "--model", "vgg"], capsys)
    assert code == 2
    assert "Traceback" in err and "unknown model 'vgg'" in err


@pytest.mark.parametrize("command", ["run", "sweep", "report", "compare", "history", "env"])
def test_every_command_has_help(command, capsys):
    code, out, _ = run_cli([command, "--help"], capsys)
    assert code == 0
    assert "usage: dlperf " + command in out
