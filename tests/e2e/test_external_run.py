"""Another framework's own script as a dlperf workload (`--command`): real PyTorch and JAX scripts run under
dlperf's launchers, their logs read by the log readers, records written, reported; failures become records."""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest
from conftest import run_dlperf
from tiny import failing_rank_script

from dlperf.external.template import node_processes, rendezvous_for
from dlperf.launch.external_node import DLPERF_SETS
from dlperf.launch.sbatch import spec_flags
from dlperf.orchestration.run import plan_jobs
from dlperf.workloads import check_spec, spec_from_mapping

SCRIPTS = Path(__file__).parents[1] / "fixtures" / "scripts"
IMAGENET = (
    f"{sys.executable} {SCRIPTS / 'pytorch_imagenet_style.py'} --batch-size {{batch_size}} --iters 24 --amp {{amp}}"
)
KERAS = (
    f"{sys.executable} {SCRIPTS / 'keras_timehistory_style.py'} --batch-size {{batch_size}} --steps 300 --log-steps 100"
)


@pytest.fixture(autouse=True)
def one_thread(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # several CPU ranks share two cores


def records(out: Path) -> list[dict]:
    """The run records under `out` (not the folder's own summary.json and sweep_options.json)."""
    return [json.loads(p.read_text()) for p in sorted(out.rglob("*.json")) if p.parent != out]


def imagenet_expected(log: str, global_batch: int, after: int = 20) -> float:
    """By hand: per iteration the median printed time over the ranks, the iterations after `after` (the record's
    warm-up: 20, or where the steady-state test found the lines settled), global batch / mean."""
    times: dict[int, list[float]] = {}
    for step, seconds in re.findall(r"Epoch: \[0\]\[\s*(\d+)/\d+\]\tTime\s+([\d.]+) \(", log):
        times.setdefault(int(step), []).append(float(seconds))
    kept = [statistics.median(times[s]) for s in sorted(times) if s > after]
    return global_batch / statistics.fmean(kept)


def keras_expected(log: str, after: int = 100) -> float:
    """By hand: the mean printed examples/second of the lines from step `after` (the published start-up skip of
    100, or where the steady-state test found the lines settled)."""
    lines = re.findall(r"([\d.]+) examples/second between steps (\d+) and", log)
    return statistics.fmean(float(speed) for speed, start in lines if int(start) >= after)


def stray(marker: str) -> list[int]:
    """Processes still running whose command line holds `marker`."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if marker in " ".join(proc.info["cmdline"] or []):
            found.append(proc.info["pid"])
    return found


@pytest.mark.slow
def test_pytorch_script_sweep_on_one_and_two_ranks_is_reported(tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        f"model: resnet50\nbatch_size: 4\ndevices_per_node: [1, 2]\nrepeats: 1\ncommand: {json.dumps(IMAGENET)}\n"
        "instrument: off\n"  # the script's own lines are the figure here (YAML's off, a boolean, is read as `off`)
    )
    out = tmp_path / "out"
    done = run_dlperf(["sweep", str(sweep), "--out", str(out)])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = {r["world_size"]: r for r in records(out)}
    assert sorted(found) == [1, 2]
    for world, record in found.items():
        assert (
            record["status"] == "ok"
            and record["kind"] == "external"
            and record["engine"] is None
            and record["format"] == "pytorch-imagenet"
        )
        assert record["command"] == IMAGENET and record["config"]["command_per"] == "rank"
        assert record["global_batch_size"] == 4 * world and record["group"] == "b4_fp32_external"
        log = (out / "resnet50" / f"1n{world}g" / "resnet50_b4_fp32_external_1.log").read_text()
        assert len(re.findall(r"Epoch: \[0\]", log)) == 24 * world  # every rank's lines in the run's log
        assert record["throughput"] == pytest.approx(
            imagenet_expected(log, 4 * world, record["warmup_iterations"]), rel=1e-9
        )
        assert record["latency_ms"]["mean"] == pytest.approx(4 * world / record["throughput"] * 1000, rel=1e-9)
    console = (out / "resnet50" / "1n2g" / "resnet50_b4_fp32_external_1.console.txt").read_text()
    assert "[rank 0] Epoch" in console and "[rank 1] Epoch" in console
    summary = json.loads((out / "summary.json").read_text())
    (group,) = summary["resnet50"].values()
    one, two = group["1n1g"], group["1n2g"]
    assert one["median_speed"] == pytest.approx(found[1]["throughput"], abs=0.01)  # rounded to 2 places
    assert two["speedup"] == pytest.approx(found[2]["throughput"] / found[1]["throughput"], abs=0.01)


@pytest.mark.slow
@pytest.mark.parametrize("devices", [1, 2])
def test_jax_keras_style_script(tmp_path, devices):
    args = ["run", "--model", "resnet50", "--batch-size", "8", "--devices-per-node", str(devices)]
    done = run_dlperf([*args, "--command", KERAS, "--log-format", "tf2-keras", "--out", str(tmp_path)])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (record,) = records(tmp_path)
    log = (tmp_path / "resnet50" / f"1n{devices}g" / "resnet50_b8_fp32_external_1.log").read_text()
    assert record["status"] == "ok" and record["format"] == "tf2-keras" and record["world_size"] == devices
    assert record["throughput"] == pytest.approx(keras_expected(log, record["warmup_iterations"]), rel=1e-9)
    assert len(re.findall("TimeHistory", log)) == 3  # JAX process 0 prints for the whole job
    report = run_dlperf(["report", str(tmp_path)])
    assert report.returncode == 0, report.stderr
    assert f"| 1 | {devices} | {record['throughput']:.2f} |" in (tmp_path / "report.md").read_text()


@pytest.mark.slow
def test_per_node_command_starts_its_own_workers(tmp_path):
    """`--command-per node`: torchrun, started once, launches the ranks itself."""
    torchrun = Path(sys.executable).parent / "torchrun"
    template = (
        f"{torchrun} --nnodes {{nnodes}} --nproc-per-node {{nproc_per_node}} --node-rank {{node_rank}} "
        f"--master-addr {{master_addr}} --master-port {{master_port}} {SCRIPTS / 'pytorch_imagenet_style.py'} "
        "--batch-size {batch_size} --iters 22"
    )
    args = ["run", "--batch-size", "2", "--devices-per-node", "2", "--command", template, "--command-per", "node",
            "--instrument", "off"]  # fmt: skip
    done = run_dlperf([*args, "--out", str(tmp_path)])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (record,) = records(tmp_path)
    log = (tmp_path / "resnet50" / "1n2g" / "resnet50_b2_fp32_external_1.log").read_text()
    assert record["status"] == "ok" and record["throughput"] == pytest.approx(
        imagenet_expected(log, 4, record["warmup_iterations"]), rel=1e-9
    )


def test_failing_rank_stops_the_others_and_is_a_failed_record(tmp_path):
    marker = f"dlperf-test-{uuid.uuid4().hex[:8]}"
    script = failing_rank_script(tmp_path / "train.py", "loading", "boom: bad data")
    command = f"{sys.executable} {script} {marker}"
    started = time.monotonic()
    done = run_dlperf(["run", "--devices-per-node", "2", "--command", command, "--out", str(tmp_path)])
    assert time.monotonic() - started < 120  # rank 0 was stopped, not waited for
    assert done.returncode == 1 and "Traceback" not in done.stderr
    (record,) = records(tmp_path)
    assert record["status"] == "failed" and record["failure"] == {"rank": 1, "host": record["failure"]["host"],
                                                                  "exitcode": 1, "signal": None}  # fmt: skip
    assert record["error"].startswith("command rank 1 on ") and record["error"].endswith(
        "exited with code 1: boom: bad data"
    )
    assert record["error"] in done.stderr
    assert sorted(line for line in record["log_tail"] if "loading" in line) == ["rank 0 loading", "rank 1 loading"]
    assert stray(marker) == []


def test_hanging_command_times_out_with_its_tail_and_leaves_nothing(tmp_path):
    marker = f"dlperf-test-{uuid.uuid4().hex[:8]}"
    command = f"{sys.executable} -c \"print('step 1 done', flush=True); import time; time.sleep(600)\" {marker}"
    done = run_dlperf(["run", "--command", command, "--timeout", "4", "--out", str(tmp_path)])
    assert done.returncode == 1
    (record,) = records(tmp_path)
    assert record["status"] == "failed" and record["error"].startswith("timed out after 4 s")
    assert record["log_tail"] == ["step 1 done"]
    assert stray(marker) == []


def test_output_no_reader_knows_is_a_failed_record(tmp_path, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS")  # dlperf sets it as torchrun does: the usable cores / the processes
    command = f"{sys.executable} -c \"import os; print('hello, no throughput here', os.environ['OMP_NUM_THREADS'])\""
    done = run_dlperf(["run", "--command", command, "--out", str(tmp_path)])
    assert done.returncode == 1
    (record,) = records(tmp_path)
    assert record["status"] == "failed" and record["error"].startswith("its output gives no throughput: no line of")
    assert record["error"].endswith("pass --log-format NAME")  # `dlperf run`'s flag, not extract's --format
    cores = len(os.sched_getaffinity(0))
    assert record["log_tail"] == [f"hello, no throughput here {cores}"]
    assert record["threads"] == [{"value": str(cores), "set_by": DLPERF_SETS, "cores": cores, "processes": 1}]


def test_missing_program_is_a_failed_record(tmp_path):
    done = run_dlperf(["run", "--command", "/nonexistent/train --bs {batch_size}", "--out", str(tmp_path)])
    assert done.returncode == 1
    (record,) = records(tmp_path)
    assert record["error"].startswith("cannot start `/nonexistent/train --bs 128` on ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--command", "python t.py --bs {batch}"], "unknown placeholder {batch} in --command"),
        (["--command", "python t.py {rank}", "--command-per", "node"], "one process per node has no rank"),
        (["--command", "python t.py", "--log-format", "nope"], "unknown log format 'nope'"),
        (["--command", "python t.py", "--engine", "torch"], "--command runs another framework's script"),
        (["--engine", "external"], "give it as --command"),
    ],
)
def test_refused_before_launch(tmp_path, args, message):
    done = run_dlperf(["run", *args, "--out", str(tmp_path)])
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not list(tmp_path.rglob("*.json"))


def test_engine_external_is_a_deprecated_alias(capsys):
    """`engine: external`, how a command run was asked for before its kind said it, still runs, said once."""
    for _ in range(2):
        spec = spec_from_mapping({"engine": "external", "command": "python t.py"})
        assert spec.engine is None and spec.command == "python t.py"
    (line,) = capsys.readouterr().err.splitlines()
    assert "--engine external is deprecated: --command alone" in line


def test_case_keys_fill_placeholders_and_slurm_jobs_rebuild_the_command(tmp_path):
    template = "t --arch {model} --it {iters} -b {batch_size} -g {global_batch_size} --r {repeat} --amp {amp} {rank}"
    spec = spec_from_mapping({"model": "resnet50", "batch_size": 16, "devices_per_node": 2, "command": template})
    assert spec.engine is None  # a command is the external kind: it runs no engine
    (job,) = plan_jobs(spec, check_spec(spec), [3], tmp_path)
    launch = job.command
    rdzv = rendezvous_for(1, 2, "127.0.0.1", 29500, launch.values)
    argv = [p.argv for p in node_processes(launch.template, rdzv, 0)]
    assert argv[1] == ["t", "--arch", "resnet50", "--it", "100", "-b", "16", "-g", "32", "--r", "3", "--amp", "0", "1"]
    assert launch.workdir == os.getcwd() and launch.per == "rank" and not launch.shell
    flags = spec_flags(spec)
    assert flags[flags.index("--command") + 1] == template and "--engine" not in flags


def test_a_nan_loss_in_dlperf_format_fails_the_external_run(tmp_path):
    """A `--command` printing dlperf's own window lines with `loss nan` is failed with the reason, not ok."""
    from dlperf.launch.messages import RunResult
    from dlperf.orchestration.kinds import build_record

    spec = spec_from_mapping({"model": "resnet50", "batch_size": 8, "command": "train.py", "log_format": "dlperf"})
    (job,) = plan_jobs(spec, check_spec(spec), [1], tmp_path)
    job.paths.log.parent.mkdir(parents=True)
    job.paths.log.write_text(
        "".join(
            f"[dlperf] iter {i}/6 loss {loss} samples/s 100.0 ms/iter 80.000 time {1763830000 + i}.000000\n"
            for i, loss in ((2, "2.302585"), (4, "nan"), (6, "nan"))
        )
    )
    record = build_record(job, RunResult(), {}, 0.0, 1.0)
    assert record.status == "failed" and "NaN loss: [dlperf] iter 4/6" in record.error, record
