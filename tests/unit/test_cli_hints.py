"""Honest hints and early refusals: stored sweep options for --resume, refusals before anything slow, live lines,
estimates, and the small wording and exit-status items of issue 23."""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from pathlib import Path

import pytest
from conftest import run_cli
from report_records import record
from test_maxbatch import fake
from test_maxbatch_cli import CASE
from test_predict_cli import commbench_record, single_run, write

from dlperf import install
from dlperf.cli.live import LogFollower
from dlperf.orchestration import maxbatch as maxbatch_search
from dlperf.records.lock import results_lock
from dlperf.records.store import write_json_atomic

ROOT = Path(__file__).resolve().parents[2]
SWEEP = "model: resnet50\ndevice: cpu\nimage_size: 32\nnum_classes: 10\nbatch_size: 2\niters: 2\nprint_every: 1\n"


def no_environment(monkeypatch):
    """Collecting the environment is the slow step every refusal must come before: here it fails loudly."""

    def collect():
        raise AssertionError("the environment was collected before the refusal")

    for module in ("dlperf.orchestration.sweep_plan", "dlperf.orchestration.run"):
        monkeypatch.setattr(f"{module}.collect_environment", collect)


def test_resume_alone_reuses_the_stored_options(tmp_path, capsys):
    """The folder keeps the file and --repeats: `--resume --out` plans the same runs (3, not the default 5)."""
    config, out = tmp_path / "s.yaml", tmp_path / "out"
    config.write_text(SWEEP)
    from dlperf.orchestration.sweep_state import save_sweep_options

    options = {"repeats": 3, "target_ci": None, "max_repeats": None, "connect_timeout": 10, "ssh_option": []}
    save_sweep_options(out, str(config), SWEEP, options)
    config.unlink()  # the copy in the folder is what a resumed sweep plans from
    code, stdout, err = run_cli(["sweep", "--resume", "--out", str(out), "--dry-run"], capsys)
    assert code == 0, err
    assert "resnet50_b2_fp32_3" in stdout and "resnet50_b2_fp32_4" not in stdout
    # a flag given now that would change the sweep half-way is refused by name
    code, _, err = run_cli(["sweep", "--resume", "--out", str(out), "--repeats", "5", "--dry-run"], capsys)
    assert code == 2 and "--repeats 5 differs from this sweep's stored 3" in err and len(err.splitlines()) == 1
    code, _, err = run_cli(["sweep", "--out", str(tmp_path / "none"), "--dry-run"], capsys)
    assert code == 2 and "give the sweep file" in err


def test_sweep_on_a_locked_folder_is_refused_before_the_environment(tmp_path, capsys, monkeypatch):
    config, out = tmp_path / "s.yaml", tmp_path / "out"
    config.write_text(SWEEP + "repeats: 1\n")
    no_environment(monkeypatch)
    import fcntl
    import os

    out.mkdir()
    fd = os.open(out / ".dlperf.lock", os.O_RDWR | os.O_CREAT)  # another writer's lock (another open file)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        code, _, err = run_cli(["sweep", str(config), "--out", str(out)], capsys)
    finally:
        os.close(fd)
    assert code == 2 and "is in use by" in err


def test_run_into_an_existing_record_is_refused_before_the_environment(tmp_path, capsys, monkeypatch):
    no_environment(monkeypatch)
    args = ["run", *CASE, "--batch-size", "2", "--iters", "2", "--out", str(tmp_path)]
    existing = tmp_path / "resnet50" / "1n1g" / "resnet50_b2_fp32_1.json"
    write_json_atomic(existing, {"schema": "x"})
    code, _, err = run_cli(args, capsys)
    assert code == 2 and f"{existing} already exists: pass --overwrite" in err
    with results_lock(tmp_path):  # our own lock is re-entrant: the refusal is by the existing record alone
        pass


def test_jax_without_its_packages_is_refused_before_launch(tmp_path, capsys, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "flax" else real(name, *a))
    code, _, err = run_cli(["run", *CASE, "--engine", "jax", "--dry-run", "--out", str(tmp_path)], capsys)
    assert code == 2 and "flax not installed" in err and f"pip install -e '.[jax]' in {ROOT}" in err


def test_an_extra_is_installed_as_dlperf_was(tmp_path):
    """From a checkout (the README's editable install) an extra is `pip install -e` there, where the index's
    `dlperf[NAME]` would bring a second dlperf; an installed copy (its file outside a checkout) names the index."""
    assert install.extra("mlflow") == f"pip install -e '.[mlflow]' in {ROOT}"
    copy = tmp_path / "site-packages" / "dlperf" / "install.py"
    copy.parent.mkdir(parents=True)
    copy.write_text(Path(install.__file__).read_text())
    spec = importlib.util.spec_from_file_location("installed_copy", copy)
    installed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(installed)
    assert installed.extra("mlflow") == "pip install 'dlperf[mlflow]'"


def test_defaults_on_a_cpu_say_how_long_in_hours():
    """`dlperf run` with no flags on a CPU: ResNet-50 at 224 px, batch 128, 20 + 100 iterations."""
    from dlperf.cli.estimate import single_run_estimate
    from dlperf.workloads import check_spec, spec_from_mapping

    spec = spec_from_mapping({"device": "cpu"})
    line = single_run_estimate(spec, check_spec(spec), {"cpu_cores": 2, "gpus": []})
    # 3 x 8.2 GFLOP x 128 images x 120 iterations / (2 x 50 GFLOP/s) = 3778 s = 1 h 02 min 58 s
    assert line is not None and "takes about 1h02m per run on 2 CPU cores" in line and "--image-size 32" in line
    small = spec_from_mapping({"device": "cpu", "image_size": 32, "batch_size": 8})
    assert single_run_estimate(small, check_spec(small), {"cpu_cores": 2}) is None


def test_sweep_follower_moves_to_each_run_and_beats(tmp_path):
    """The live view of a sweep: it names the run going now, prints its warm-up and windows, and says it is alive
    while nothing comes (here every 0.05 s)."""
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    records = [tmp_path / "a.json", tmp_path / "b.json"]
    lines: list[str] = []
    seen = threading.Event()

    def emit(text: str) -> None:
        lines.append(text)
        if "iter 2/2" in text:
            seen.set()

    def locate():
        for log, rec in zip(logs, records):
            if log.exists() and not rec.exists():
                return log, f"now {log.stem}:"
        return None

    with LogFollower(None, emit, quiet_s=0.05, poll_s=0.01, locate=locate):
        logs[0].write_text("")
        deadline = time.monotonic() + 60
        while not any(line.startswith("... starting the ranks") for line in lines) and time.monotonic() < deadline:
            time.sleep(0.01)
        records[0].write_text("{}")
        window = "[dlperf] iter 2/2 loss 1.0 samples/s 10.0 ms/iter 100.0 time 1.0"  # records/runlog.py's line
        logs[1].write_text(f"{window}\n")
        assert seen.wait(60), lines
    assert lines[0] == "now a:" and any(line.startswith("... starting the ranks") for line in lines)
    assert "now b:" in lines and lines[-1].startswith("iter 2/2")


def test_maxbatch_prints_each_probe_as_it_ends(tmp_path, capsys, monkeypatch):
    before_probe: list[str] = []

    def probe(batch):
        before_probe.append(capsys.readouterr().out)
        return fake(batch)

    monkeypatch.setattr(maxbatch_search, "make_probe", lambda *a: probe)
    code, out, err = run_cli(["maxbatch", *CASE, "--start", "8", "--max-batch", "64", "--out", str(tmp_path)], capsys)
    assert code == 0, err
    assert "| 8 | yes | ok |" in before_probe[1]  # batch 8's row was out before batch 16 started
    assert "the largest that fits is not known; raise --max-batch" in out  # 64 fits: a ceiling, not the answer
    assert "largest batch that fits: 64" not in out


def test_compare_with_no_common_case_fails(tmp_path, capsys):
    base, new = tmp_path / "base", tmp_path / "new"
    for i in (1, 2, 3):
        write_json_atomic(base / "resnet50" / "1n1g" / f"r_{i}.json", record("1n1g", i, 100.0))
        write_json_atomic(new / "resnet50" / "1n2g" / f"r_{i}.json", record("1n2g", i, 100.0))
    code, out, err = run_cli(["compare", str(base), str(new)], capsys)
    assert code == 2 and "share no case" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args", [["report", "X", "--out", ""], ["report", "X", "Y", "--label", "", "--label", "b", "--out", "o"]]
)
def test_empty_out_or_label_is_refused(args, capsys):
    code, _, err = run_cli(args, capsys)
    assert code == 2 and "must not be empty" in err


def test_history_meets_rn50_and_resnet50(tmp_path, capsys):
    db = str(tmp_path / "h.sqlite")
    for label, model, t0 in (("v1", "rn50", 1000.0), ("v2", "resnet50", 2000.0)):
        folder = tmp_path / label
        for i in (1, 2, 3):
            rec = record("1n1g", i, 100.0, model=model, started_at=t0 + i)
            write_json_atomic(folder / model / "1n1g" / f"r_{i}.json", rec)
        assert run_cli(["history", "add", str(folder), "--label", label, "--db", db], capsys)[0] == 0
    from dlperf.reporting.history import history

    points = history(db, model="rn50")
    assert [(p.model, p.label) for p in points] == [("resnet50", "v1"), ("resnet50", "v2")]
    assert points[1].change == 1.0


def test_commbench_fit_never_shows_a_negative_latency():
    from scipy.stats import linregress

    from dlperf.metrics.bandwidth import fit_alpha_beta
    from dlperf.records.parts import CollectiveFit
    from dlperf.reporting.commbench_table import _alpha

    sizes = [1e3, 1e5, 1e6, 1e7]
    seconds = [2e-6, 2e-5, 3e-4, 4e-3]  # steeper at large sizes: least squares puts the intercept below 0
    assert linregress(sizes, seconds).intercept < 0
    fit = fit_alpha_beta("all_reduce", 2, sizes, seconds)
    assert fit.alpha_s == 0 and fit.alpha_clamped
    assert fit.beta_s_per_byte == pytest.approx(sum(x * y for x, y in zip(sizes, seconds)) / sum(x * x for x in sizes))
    assert _alpha(CollectiveFit(alpha_s=0.0, alpha_clamped=True)).startswith("0 (fit below 0: clamped")


def test_report_predict_without_overlap(tmp_path, capsys):
    from dlperf.predict import links_from_records, predict_data_parallel, run_from_record

    mib = 1024 * 1024
    results = tmp_path / "results"
    write(results / "resnet50" / "1n1g" / "a_1.json", single_run(gradient_bytes=2 * mib))
    from source_records import record as source_record

    two = source_record("resnet50", "2n1g", 32, "fp32", 1, 57.6, global_batch_size=64)
    write(results / "resnet50" / "2n1g" / "a_1.json", two)
    bench_record = commbench_record(nodes=2, devices_per_node=1)
    bench = write(tmp_path / "bench.json", bench_record)
    args = ["report", str(results), "--format", "md", "--predict", bench, "--no-overlap"]
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    rows = [line for line in (results / "report.md").read_text().splitlines() if line.startswith("| 2 | 2 |")]
    intra, inter = links_from_records([bench_record])
    single = run_from_record(json.loads(Path(results / "resnet50" / "1n1g" / "a_1.json").read_text()), throughput=32.0)
    expected = predict_data_parallel(single, 1, 2, intra, inter, False).speedup
    assert expected < 1.78 and rows[0].split("|")[-3].strip() == f"{expected:.2f}"  # 1.78 with overlap
    code, _, err = run_cli(["report", str(results), "--format", "md", "--no-overlap", "--out", "x"], capsys)
    assert code == 2 and "add --predict" in err


def test_help_has_no_doubled_percent(capsys):
    code, out, _ = run_cli(["compare", "--help"], capsys)
    assert code == 0 and "95 % interval" in out and "%%" not in out


def test_a_sweep_speaks_before_the_environment_is_collected(tmp_path, capsys, monkeypatch):
    """Into a file, the first line comes at once: before the environment (a minute on some machines) and runs."""
    config = tmp_path / "s.yaml"
    config.write_text(SWEEP + "repeats: 1\n")
    no_environment(monkeypatch)
    with pytest.raises(AssertionError, match="environment was collected"):
        from dlperf.cli.main import build_parser

        args = build_parser().parse_args(["sweep", str(config), "--out", str(tmp_path / "out")])
        args.func(args)
    out = capsys.readouterr().out
    assert out.startswith("sweep ") and ": 1 case planned" in out
    stored = json.loads((tmp_path / "out" / "sweep_options.json").read_text())
    assert stored["options"]["repeats"] is None and stored["config"] == str(config)
    planned = json.loads((tmp_path / "out" / "sweep_runs.json").read_text())  # for a report made before the end
    assert planned == {"records": ["resnet50/1n1g/resnet50_b2_fp32_1.json"], "adaptive": False}
    code, _, err = run_cli(["report", str(tmp_path / "out")], capsys)  # stopped before its first record
    assert code == 2 and "interrupted before its first record; finish it with `dlperf sweep --resume --out" in err
