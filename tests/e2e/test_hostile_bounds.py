"""Hostile input and faults, one test per failure class of issue 20 that is not about records: no recursion on
external data, bounds checked before work starts, validation that cannot be slipped past with a newline."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import run_dlperf


def _chain(root: Path, depth: int) -> Path:
    """A folder chain `depth` deep under `root` (os.makedirs itself recurses), with its deepest folder."""
    root.mkdir()
    folder = str(root)
    for _ in range(depth):
        folder = os.path.join(folder, "d")
        os.mkdir(folder)
    return Path(folder)


def _unchain(deepest: Path, root: Path) -> None:
    """Remove the chain bottom-up: pytest's own clean-up (shutil.rmtree) recurses and would die on it."""
    folder = deepest
    while folder != root.parent:
        for entry in folder.iterdir():
            entry.unlink()
        folder.rmdir()
        folder = folder.parent


def test_deep_folder_chains_are_named_not_a_recursion_error(tmp_path):
    deepest = _chain(tmp_path / "data", 1400)
    try:
        _check_deep(tmp_path, deepest)
    finally:
        _unchain(deepest, tmp_path / "data")


def _check_deep(tmp_path: Path, deepest: Path) -> None:
    (deepest / "rn50_b1_fp32_1.log").write_text("noise\n")
    (deepest / "x.json").write_text("{}")
    for args in (["report", str(tmp_path / "data")], ["extract", str(tmp_path / "data"), "--out", str(tmp_path / "o")]):
        done = run_dlperf(args)
        assert done.returncode == 2 and "Error" not in done.stderr and "internal error" not in done.stderr
        assert "folders below" in done.stderr and done.stderr.count("\n") <= 3, done.stderr[:2000]


# --- predict: bad records and flags are one line, exit 2; huge gradients are closed-form ------------------------

RUN = {"schema": "dlperf.run/2", "model": "resnet50", "case": "1n1g", "group": "b32_fp32", "repeat": 1, "nodes": 1,
       "devices_per_node": 1, "precision": "fp32", "status": "ok", "world_size": 1, "global_batch_size": 32,
       "throughput": 100.0, "gradient_bytes": 10**6}  # fmt: skip
FIT = {"op": "all_reduce", "world_size": 2, "alpha_s": 1e-5, "beta_s_per_byte": 1e-9, "r2": 0.99,
       "max_rel_error": 0.1, "points": 5}  # fmt: skip


def _predict(tmp_path: Path, run: dict, fit: dict, *flags: str, timeout: float = 300):
    (tmp_path / "run.json").write_text(json.dumps(run))
    bench = {"schema": "dlperf.commbench/1", "status": "ok", "fits": {"all_reduce": fit}}  # as commbench writes it
    (tmp_path / "cb.json").write_text(json.dumps(bench))
    return run_dlperf(
        ["predict", str(tmp_path / "run.json"), str(tmp_path / "cb.json"), "--devices", "2", *flags], timeout=timeout
    )


@pytest.mark.parametrize(
    ("run", "fit", "flags", "message"),
    [
        ({**RUN, "throughput": 0}, FIT, [], "throughput 0 is not a positive finite number"),
        ({k: v for k, v in RUN.items() if k != "global_batch_size"}, FIT, [], "global_batch_size is None"),
        ({**RUN, "gradient_bytes": "many"}, FIT, [], "gradient_bytes 'many' is not an integer"),
        (RUN, {"op": "all_reduce", "world_size": 2}, [], "fit has points = None"),
        (RUN, {**FIT, "beta_s_per_byte": "x"}, [], "beta_s_per_byte 'x' is not a finite number"),
        (RUN, FIT, ["--bucket-mb", "inf"], "must be a positive finite number"),
        (RUN, FIT, ["--bucket-mb", "1e-9"], "--bucket-mb 1e-09 is no bucket size"),
    ],
)
def test_predict_bad_records_and_flags_are_one_line(tmp_path, run, fit, flags, message):
    done = _predict(tmp_path, run, fit, *flags)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr


def test_predict_huge_gradients_finish(tmp_path):
    """10^18 gradient bytes: 1 MiB + 38,146,972,658 buckets of 25 MiB (the last one short)."""
    done = _predict(tmp_path, RUN, FIT, "--gradient-bytes", str(10**18), timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"{1 + -(-(10**18 - 2**20) // (25 * 2**20))} buckets" in done.stdout


# --- validation patterns end at the end of the text, not before a final newline -------------------------------


@pytest.mark.parametrize(
    "name", ["user\n@h1", "h1\n", "user@h1\n", "u\n@[::1]"], ids=["user-newline", "name-newline", "tail", "v6"]
)
def test_host_names_with_a_newline_are_refused(name):
    from dlperf.errors import ConfigError
    from dlperf.launch.hosts import check_host_name

    with pytest.raises(ConfigError):
        check_host_name(name)


def test_master_addr_and_launch_options_with_a_newline_are_refused(tmp_path):
    base = ["run", "--model", "resnet50", "--device", "cpu", "--hosts", "h1,h2", "--dry-run"]
    for flags in (["--master-addr", "h1\n"], ["--ifname", "eth0\n"], ["--hosts", "user\n@h1,h2"]):
        done = run_dlperf([*base, *flags])
        assert done.returncode == 2 and done.stderr.count("\n") == 1, (flags, done.stderr)


# --- every shown string escaped for its medium: terminal, markdown, HTML ---------------------------------------

EVIL = "evil\x1b[31mRED|x\nmore[/b]"


def _evil_sources(tmp_path: Path) -> tuple[Path, Path]:
    from source_records import write_source

    return write_source(tmp_path, "A", model=EVIL), write_source(tmp_path, "B", model=EVIL)


def test_record_fields_reach_the_terminal_escaped(tmp_path):
    a, b = _evil_sources(tmp_path)
    done = run_dlperf(["compare", str(a), str(b)])
    assert "\x1b" not in done.stdout + done.stderr and "evil\\x1b[31mRED|x\\nmore" in done.stdout
    assert not [line for line in done.stdout.splitlines() if line.startswith("more")], done.stdout


def test_a_rich_terminal_table_reads_no_markup_from_records(monkeypatch, capsys):
    from rich.console import Console

    from dlperf.cli import display

    monkeypatch.setattr(display, "console", Console(force_terminal=True, width=200))
    display.print_table("t", ["model"], [[EVIL]])  # `[/b]` closes no tag: rich's markup would raise
    out = capsys.readouterr().out
    assert "\\x1b[31mRED|x\\nmore[/b]" in out


def test_labels_and_fields_keep_markdown_tables_whole(tmp_path):
    a, b = _evil_sources(tmp_path)
    label = "la\nbel|x"
    one = ["report", str(a), "--format", "md", "--out", str(tmp_path / "one")]
    two = ["report", str(a), str(b), "--label", label, "--label", "B", "--out", str(tmp_path / "two")]
    for args in (one, two):
        done = run_dlperf(args)
        assert done.returncode == 0, done.stderr
    for md in (tmp_path / "one" / "report.md", tmp_path / "two" / "report.md"):
        text = md.read_text()
        assert "\x1b" not in text and not [line for line in text.splitlines() if line.startswith(("more", "bel"))]
        rows = [line for line in text.splitlines() if line.startswith("|")]
        assert rows and all(line.count("|") - line.count("\\|") == rows[0].count("|") - rows[0].count("\\|")
                            for line in rows[:2])  # fmt: skip
    html = (tmp_path / "two" / "report.html").read_text()
    assert "\x1b" not in html and "la\\nbel|x" in html and "[/b]" in html


# --- --command templates: checked whole before launch ----------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("echo {batch_size:>20000000000}", "width or precision over 1000"),
        ("echo {batch_size:.5000}", "width or precision over 1000"),
        ("echo {batch_size:{nnodes}}", "nests a placeholder"),
        ("echo 'unclosed", "close its quotes"),
        ("echo {precision:d}", "cannot be filled in"),
    ],
)
def test_command_templates_are_refused_before_launch(tmp_path, template, message):
    """Checked in the parent, before the dry run prints its plan: nothing reaches a node agent."""
    args = ["run", "--command", template, "--model", "resnet50", "--out", str(tmp_path), "--dry-run"]
    done = run_dlperf(args)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert not done.stdout


# --- counts, rates and memory bounded before anything is planned or started -------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("devices_per_node", 2**70, "at most 1024"),
        ("devices_per_node", 100000, "at most 1024"),
        ("nodes", 10**9, "at most 65536"),
        ("weight_decay", -1, "must be a non-negative finite number"),
        ("momentum", -0.5, "must be a non-negative finite number"),
    ],
)
def test_counts_and_rates_out_of_bounds_are_refused(tmp_path, key, value, message):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"model: resnet50\nimage_size: 32\ndevice: cpu\n{key}: {value}\n")
    done = run_dlperf(["sweep", str(sweep), "--out", str(tmp_path / "out"), "--dry-run"], timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr[:500]
    flag = ["run", "--model", "gpt" if key == "weight_decay" else "resnet50", "--device", "cpu", "--dry-run"]
    done = run_dlperf([*flag, f"--{key.replace('_', '-')}", str(value)], timeout=120)
    assert done.returncode == 2 and message in done.stderr, done.stderr[:500]


def test_more_cpu_ranks_than_cores_allow_are_refused_unless_forced():
    from dlperf.errors import ConfigError
    from dlperf.orchestration.preflight import preflight_warning
    from dlperf.workloads import check_spec, spec_from_mapping

    spec = spec_from_mapping({"model": "resnet50", "image_size": 32, "device": "cpu", "devices_per_node": 9})
    box = {"cpu_cores": 2, "memory_gib": 1024.0, "gpus": []}
    with pytest.raises(ConfigError, match="9 CPU ranks share 2 cores.*--force"):
        preflight_warning(spec, check_spec(spec), box)
    assert "9 CPU ranks share 2 cores" in preflight_warning(spec, check_spec(spec), box, force=True)


def test_a_run_far_over_the_machine_memory_is_refused(tmp_path):
    """A 175B-parameter GPT on one CPU rank: about 2.9 TB estimated, over any test machine's memory; exit 2
    before any process starts, nothing written."""
    args = ["run", "--model", "gpt", "--num-layers", "96", "--hidden-size", "12288", "--num-heads", "96"]
    done = run_dlperf([*args, "--device", "cpu", "--out", str(tmp_path / "out")], timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr[-2000:]
    assert "pass --force" in done.stderr and "GiB" in done.stderr
    assert not list((tmp_path / "out").rglob("*.json"))


# --- a FIFO or device named as a file is refused, never waited on ----------------------------------------------


def test_a_fifo_or_device_as_a_named_file_is_refused(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    good = tmp_path / "run.json"
    good.write_text(json.dumps(RUN))
    for args in (
        ["sweep", str(fifo), "--out", str(tmp_path / "o"), "--dry-run"],
        ["sweep", "/dev/zero", "--out", str(tmp_path / "o"), "--dry-run"],
        ["run", "--model", "resnet50", "--hostfile", str(fifo), "--dry-run"],
        ["predict", str(fifo), str(good), "--devices", "2"],
        ["predict", str(good), str(fifo), "--devices", "2"],
    ):
        done = run_dlperf(args, timeout=60)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, (args, done.stderr[-500:])
        assert "not a regular file" in done.stderr or "cannot read" in done.stderr, (args, done.stderr)


# --- found by an own probe of every command -------------------------------------------------------------------


def test_a_folder_named_as_a_file_is_one_line(tmp_path):
    for args in (["sweep", str(tmp_path), "--dry-run"], ["predict", str(tmp_path), str(tmp_path), "--devices", "2"]):
        done = run_dlperf(args)
        assert done.returncode == 2 and "not a regular file" in done.stderr and done.stderr.count("\n") == 1


@pytest.mark.parametrize("flag", ["--memory-cap", "--probe-timeout"])
def test_infinite_sizes_and_timeouts_are_refused(tmp_path, flag):
    done = run_dlperf(["maxbatch", "--model", "resnet50", "--device", "cpu", flag, "inf", "--out", str(tmp_path)])
    assert done.returncode == 2 and "positive finite number" in done.stderr and done.stderr.count("\n") == 1


def test_peak_checks_shapes_and_its_file_before_measuring(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    base = ["peak", "--device", "cpu", "--iters", "1", "--dtypes", "fp32"]
    huge = run_dlperf([*base, "--shapes", "99999999x99999999x99999999", "--out", str(tmp_path / "p.json")])
    assert huge.returncode == 2 and "sizes from 1 to 65536" in huge.stderr and huge.stderr.count("\n") == 1
    hang = run_dlperf([*base, "--shapes", "8x8x8", "--out", str(fifo)], timeout=60)
    assert hang.returncode == 2 and "not a regular file" in hang.stderr and hang.stderr.count("\n") == 1


def test_a_hostile_model_name_neither_escapes_the_plots_folder_nor_breaks_a_figure(tmp_path):
    """A record's model `../../x$\\frac$`: mathtext failed the whole report (an internal error), and the plot's
    file name was the model's text, `..` and all."""
    from source_records import record

    folder = tmp_path / "in"
    folder.mkdir()
    for i, (case, speed) in enumerate([("1n1g", 100.0), ("1n4g", 380.0)]):
        rec = record("../../escaped$\\frac$", case, 128, "fp32", 1, speed)
        (folder / f"r{i}.json").write_text(json.dumps(rec))
    done = run_dlperf(["report", str(folder), "--out", str(tmp_path / "out" / "deeper")])
    assert done.returncode == 0, done.stderr[-2000:]
    pngs = list(tmp_path.rglob("*.png"))
    assert pngs and all(p.parent == tmp_path / "out" / "deeper" / "plots" for p in pngs), pngs


def test_escape_functions():
    from dlperf import escape

    assert escape.terminal("a\x1b[31m\nb") == "a\\x1b[31m\\nb"
    assert escape.markdown("a|b\nc") == "a\\|b\\nc"
    assert escape.html("<b>\n") == "&lt;b&gt;\\n"
    assert escape.plot("$\\frac$") == "\\$\\frac\\$"
    assert escape.file_name("../../x y") == "_.._x_y" and escape.file_name("..") == "_"


def test_an_external_scripts_memory_estimate_warns_without_refusing():
    """Under --command the model is only the case's label: dlperf's estimate of it is no reason to refuse."""
    from dlperf.orchestration.preflight import preflight_warning
    from dlperf.workloads import check_spec, spec_from_mapping

    values = {"model": "gpt", "case": "DP_8x1x1_16_1536x16", "device": "cpu"}
    spec = spec_from_mapping({**values, "command": "python train.py"})
    box = {"cpu_cores": 2, "memory_gib": 24.0, "gpus": []}
    assert "the machine has 24 GiB" in preflight_warning(spec, check_spec(spec), box)
