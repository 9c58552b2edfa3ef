"""`dlperf export mlflow` against a real `mlflow server` the module starts (SQLite backend, loopback, a free port),
read back through its REST API; `dlperf export wandb` in W&B's offline mode, read back from the files W&B wrote
(issue 41)."""

from __future__ import annotations

import contextlib
import http.client
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_cli, run_dlperf
from report_records import record

from dlperf import install
from dlperf.records.store import write_json_atomic
from dlperf.reporting.history import record_key
from dlperf.reporting.to_wandb import MARKER, run_id
from dlperf.reporting.to_wandb import wandb_records as run_records
from dlperf.reporting.tracking import COMPLETE_TAG, RECORD_TAG

SWEEP = "20261127T000000Z-abcdef"
SPEEDS = {"1n1g": [100.0, 104.0, 98.0], "1n2g": [180.0, 176.0, None]}  # None: a failed repeat


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A sweep's folder: two cases of three repeats (one failed), each record with its timing windows."""
    root = tmp_path_factory.mktemp("sweep")
    for case, speeds in SPEEDS.items():
        for i, speed in enumerate(speeds, 1):
            extra = {"window_throughputs": [speed * 0.99, speed, speed * 1.01]} if speed else {}
            rec = record(case, i, speed, sweep_id=SWEEP, started_at=1.8e9 + i, finished_at=1.8e9 + i + 30,
                         mfu=0.25 if speed else None, framework="torch 2.9.1", **extra)  # fmt: skip
            write_json_atomic(root / "resnet50" / case / f"resnet50_b128_fp32_{i}.json", rec)
    return root


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_mlflow(root: Path, port: int) -> subprocess.Popen:
    """A `mlflow server` on `root`'s SQLite store and artifacts, in a session of its own (its workers die with it),
    once it answers."""
    mlflow = Path(sys.executable).parent / "mlflow"
    if not mlflow.exists():
        pytest.skip("mlflow is not installed: pip install 'dlperf[test]'")
    command = [
        str(mlflow), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
        "--backend-store-uri", f"sqlite:///{root}/mlflow.db", "--artifacts-destination", str(root / "artifacts"),
    ]  # fmt: skip
    # without MLflow's job runner (seven huey consumers the export never uses): start-up in a quarter of the CPU
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with (root / "server.log").open("a") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).read()
            return server
        except (urllib.error.URLError, OSError):
            if server.poll() is not None or time.monotonic() > deadline:
                stop_mlflow(server, signal.SIGKILL)
                pytest.fail(f"mlflow server did not start: {(root / 'server.log').read_text()[-2000:]}")
            time.sleep(0.3)


def stop_mlflow(server: subprocess.Popen, how: int = signal.SIGTERM) -> None:
    """The server and its workers (its session's processes), and no other."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, how)
    server.wait(timeout=30)


@dataclass
class MlflowServer:
    """The module's `mlflow server` on its own store and port; a test may kill it and start it again there."""

    root: Path
    port: int
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.process = start_mlflow(self.root, self.port)

    def kill(self) -> None:
        stop_mlflow(self.process, signal.SIGKILL)


@pytest.fixture(scope="module")
def mlflow_process(tmp_path_factory) -> Iterator[MlflowServer]:
    server = MlflowServer(tmp_path_factory.mktemp("mlflow"), _free_port())
    server.start()
    try:
        yield server
    finally:
        stop_mlflow(server.process)


@pytest.fixture(scope="module")
def mlflow_server(mlflow_process) -> str:
    return mlflow_process.url


def rest(url: str, path: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{url}/api/2.0/mlflow/{path}", data, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def all_runs(url: str, experiment: str) -> list[dict]:
    found = rest(url, f"experiments/get-by-name?experiment_name={experiment}")["experiment"]["experiment_id"]
    return rest(url, "runs/search", {"experiment_ids": [found], "max_results": 1000}).get("runs", [])


def tags(run: dict) -> dict[str, str]:
    return {t["key"]: t["value"] for t in run["data"].get("tags", [])}


@pytest.mark.slow
def test_mlflow_export_one_run_per_record_and_a_second_export_adds_nothing(mlflow_server, folder, capsys):
    code, out, err = run_cli(["export", "mlflow", str(folder), "--tracking-uri", mlflow_server], capsys)
    assert code == 0, err
    assert "6 new runs" in out, out
    experiment = rest(mlflow_server, "experiments/get-by-name?experiment_name=dlperf")["experiment"]
    assert {"key": "mlflow.experimentKind", "value": "custom_model_development"} in experiment["tags"]
    runs = all_runs(mlflow_server, "dlperf")
    parents = [r for r in runs if "mlflow.parentRunId" not in tags(r)]
    children = [r for r in runs if "mlflow.parentRunId" in tags(r)]
    assert len(parents) == 1 and len(children) == 6
    parent_id = parents[0]["info"]["run_id"]
    assert {tags(r)["mlflow.parentRunId"] for r in children} == {parent_id}
    by_key = {tags(r)[RECORD_TAG]: r for r in children}
    for path in sorted(folder.rglob("resnet50_*.json")):
        data = json.loads(path.read_text())
        run = by_key[record_key(data)]  # the record's identity is its run's tag
        params = {p["key"]: p["value"] for p in run["data"]["params"]}
        metrics = {m["key"]: m["value"] for m in run["data"].get("metrics", [])}
        assert (params["case"], params["repeat"], params["framework"]) == (data["case"], str(data["repeat"]),
                                                                           "torch 2.9.1")  # fmt: skip
        assert tags(run)["dlperf.status"] == data["status"] and tags(run)["dlperf.sweep_id"] == SWEEP
        assert tags(run)[COMPLETE_TAG] == "complete"
        if data["status"] != "ok":
            assert run["info"]["status"] == "FAILED" and "throughput" not in metrics
            continue
        assert run["info"]["status"] == "FINISHED" and metrics["throughput"] == data["throughput"]
        assert metrics["mfu"] == 0.25 and metrics["latency_ms.p50"] == data["latency_ms"]["p50"]
        history = rest(
            mlflow_server, f"metrics/get-history?run_id={run['info']['run_id']}&metric_key=window_throughput"
        )
        assert [(m["step"], m["value"]) for m in history["metrics"]] == list(enumerate(data["window_throughputs"]))
        files = rest(mlflow_server, f"artifacts/list?run_id={run['info']['run_id']}")["files"]
        assert path.name in {f["path"] for f in files}
    parent_metrics = {m["key"]: m["value"] for m in parents[0]["data"]["metrics"]}
    assert parent_metrics["resnet50/b128_fp32/1n1g/median_speed"] == 100.0
    assert parent_metrics["resnet50/b128_fp32/1n2g/median_speed"] == 178.0
    assert "resnet50/b128_fp32/1n2g/scaling_loss.measured_loss" in parent_metrics
    parent_files = rest(mlflow_server, f"artifacts/list?run_id={parent_id}")["files"]
    assert {"report.md", "summary.json", "plots"} <= {f["path"] for f in parent_files}
    # again: nothing new
    code, out, err = run_cli(["export", "mlflow", str(folder), "--tracking-uri", mlflow_server], capsys)
    assert code == 0 and "0 new runs" in out and "6 records were exported before" in out, out + err
    assert len(all_runs(mlflow_server, "dlperf")) == 7


@pytest.mark.slow
def test_mlflow_export_of_two_sweeps_replaces_a_run_an_interrupted_export_left(mlflow_server, folder, tmp_path, capsys):
    shutil.copytree(folder, tmp_path / "a")
    for i in (1, 2):  # another sweep beside it: a parent run of its own
        rec = record("1n1g", i, 90.0, sweep_id="20261128T000000Z-fedcba", started_at=1.9e9 + i)
        write_json_atomic(tmp_path / "b" / "resnet50" / "1n1g" / f"resnet50_b128_fp32_{i}.json", rec)
    experiment = rest(mlflow_server, "experiments/create", {"name": "interrupted"})["experiment_id"]
    first = json.loads(next(iter(sorted(folder.rglob("resnet50_*.json")))).read_text())
    left = [{"key": RECORD_TAG, "value": record_key(first)}]  # a run an interrupted export made, never finished
    rest(mlflow_server, "runs/create", {"experiment_id": experiment, "tags": left})
    code, out, err = run_cli(["export", "mlflow", str(tmp_path), "--tracking-uri", mlflow_server, "--experiment",
                              "interrupted"], capsys)  # fmt: skip
    assert code == 0 and "6 new runs" in out and "2 new runs" in out, out + err
    runs = all_runs(mlflow_server, "interrupted")
    assert len(runs) == 10 and all(tags(r).get(COMPLETE_TAG) == "complete" for r in runs)
    parents = {tags(r)["dlperf.sweep_id"]: r["info"]["run_id"] for r in runs if "mlflow.parentRunId" not in tags(r)}
    children = [tags(r)["mlflow.parentRunId"] for r in runs if "mlflow.parentRunId" in tags(r)]
    assert sorted(children.count(parents[s]) for s in (SWEEP, "20261128T000000Z-fedcba")) == [2, 6]
    assert sum(tags(r)[RECORD_TAG] == record_key(first) for r in runs if RECORD_TAG in tags(r)) == 1


@pytest.mark.slow  # MLflow's client takes seconds to import
def test_mlflow_unreachable_server_is_one_line(folder, capsys):
    uri = f"http://127.0.0.1:{_free_port()}"  # refused: MLflow's own 7 retries with backoff took 2 minutes
    code, _, err = run_cli(["export", "mlflow", str(folder), "--tracking-uri", uri], capsys)
    assert_one_line_error(code, err, "cannot reach MLflow at", uri, "Connection refused", "start the server")


@pytest.mark.parametrize("tracker, extra", [("mlflow", "mlflow"), ("wandb", "wandb")])
def test_missing_tracker_package_names_the_extra(tracker, extra, folder, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, tracker, None)
    args = ["--tracking-uri", "http://127.0.0.1:1"] if tracker == "mlflow" else ["--dir", str(tmp_path / "w")]
    code, _, err = run_cli(["export", tracker, str(folder), *args], capsys)
    assert_one_line_error(code, err, install.extra(extra))
    assert not (tmp_path / "w").exists()


def wandb_records(run_dir: Path) -> dict[str, list]:
    """The records of a run's .wandb file, by kind; the file must be whole."""
    found: dict[str, list] = {}
    records = run_records(next(run_dir.glob("*.wandb")))
    assert records, run_dir
    for pb in records:
        found.setdefault(pb.WhichOneof("record_type"), []).append(pb)
    return found


def _key(item) -> str:
    return item.key or ".".join(item.nested_key)


@pytest.mark.slow
def test_wandb_offline_export_reads_back_and_a_second_adds_nothing(folder, tmp_path, capsys, monkeypatch):
    pytest.importorskip("wandb", reason="wandb is not installed: pip install 'dlperf[test]'")
    for name in ("WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_CONFIG_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "home" / name))  # W&B's caches and staging, not the user's
    out = tmp_path / "w"
    code, stdout, err = run_cli(["export", "wandb", str(folder), "--dir", str(out)], capsys)
    assert code == 0 and "7 new W&B offline runs" in stdout, stdout + err
    run_dirs = sorted((out / "wandb").glob("offline-run-*"))
    assert len(run_dirs) == 7
    ok = json.loads((folder / "resnet50" / "1n2g" / "resnet50_b128_fp32_2.json").read_text())
    mine = [d for d in run_dirs if d.name.endswith(record_key(ok)[:32])]
    assert len(mine) == 1
    found = wandb_records(mine[0])
    run = found["run"][0].run
    assert run.run_group == SWEEP and run.job_type == "record" and "status:ok" in run.tags
    config = {item.key: json.loads(item.value_json) for item in run.config.update}
    assert (config["case"], config["repeat"], config["framework"]) == ("1n2g", "2", "torch 2.9.1")
    history = [{_key(i): json.loads(i.value_json) for i in r.history.item} for r in found["history"]]
    assert [(h["_step"], h["window_throughput"]) for h in history] == list(enumerate(ok["window_throughputs"]))
    summary = {_key(i): json.loads(i.value_json) for r in found["summary"] for i in r.summary.update}
    assert summary["throughput"] == 176.0 and summary[RECORD_TAG] == record_key(ok), summary
    assert any(r.artifact.type == "dlperf-record" for r in found.get("artifact", []))
    code, stdout, err = run_cli(["export", "wandb", str(folder), "--dir", str(out)], capsys)
    assert code == 0 and "0 new W&B offline runs" in stdout and "7 were written before" in stdout, stdout + err
    assert len(sorted((out / "wandb").glob("offline-run-*"))) == 7


def records_folder(root: Path, repeats: int) -> Path:
    """A sweep's folder of two cases with `repeats` records each."""
    for case in SPEEDS:
        for i in range(1, repeats + 1):
            rec = record(case, i, 100.0 + i, sweep_id=SWEEP, started_at=1.8e9 + i, finished_at=1.8e9 + i + 30)
            write_json_atomic(root / "resnet50" / case / f"resnet50_b128_fp32_{i}.json", rec)
    return root


def assert_exactly_once(url: str, experiment: str, folder: Path) -> None:
    """One parent, and one whole, ended run per record under it: no RUNNING leftover, no second copy."""
    runs = all_runs(url, experiment)
    parents = [r for r in runs if "mlflow.parentRunId" not in tags(r)]
    children = [r for r in runs if "mlflow.parentRunId" in tags(r)]
    assert len(parents) == 1 and tags(parents[0]).get(COMPLETE_TAG) == "complete", parents
    keys = sorted(record_key(json.loads(p.read_text())) for p in folder.rglob("resnet50_*.json"))
    assert sorted(tags(r)[RECORD_TAG] for r in children) == keys
    assert all(r["info"]["status"] == "FINISHED" and tags(r).get(COMPLETE_TAG) for r in children), children
    assert {tags(r)["mlflow.parentRunId"] for r in children} == {parents[0]["info"]["run_id"]}


@pytest.mark.slow
def test_mlflow_export_killed_with_its_server_is_resumed_exactly_once(mlflow_process, tmp_path):
    """The module's server, SIGKILLed under an export and started again on its store (an experiment of its own)."""
    folder = records_folder(tmp_path / "sweep", 20)
    url = mlflow_process.url
    # no retries: the export fails as the server goes, not after MLflow's two minutes of retries
    env = {**os.environ, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"}
    args = ["export", "mlflow", str(folder), "--tracking-uri", url, "--experiment", "killed"]
    try:
        export = subprocess.Popen([sys.executable, "-m", "dlperf", *args], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
        while export.poll() is None:  # killed once the export has made its first runs
            with contextlib.suppress(urllib.error.URLError, OSError, KeyError):
                if len(all_runs(url, "killed")) >= 3:
                    break
            time.sleep(0.05)
        mlflow_process.kill()
        _, err = export.communicate(timeout=300)
        assert_one_line_error(export.returncode, err, "cannot export", url, "rerun")
        mlflow_process.start()  # the same backend store
        left = all_runs(url, "killed")
        assert 3 <= len(left) < 41, left
        done = run_dlperf(args)
        assert done.returncode == 0 and "were exported before" in done.stdout, done.stdout + done.stderr
        assert_exactly_once(url, "killed", folder)
    finally:
        if mlflow_process.process.poll() is not None:  # the module's other tests still need it
            mlflow_process.start()


@pytest.mark.slow
def test_two_exports_of_one_folder_at_once_export_each_record_once(mlflow_server, tmp_path):
    folder = records_folder(tmp_path / "sweep", 5)
    command = ["export", "mlflow", str(folder), "--tracking-uri", mlflow_server, "--experiment", "twice"]
    both = [
        subprocess.Popen([sys.executable, "-m", "dlperf", *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
        for _ in range(2)
    ]  # fmt: skip
    outs = [p.communicate(timeout=300) for p in both]
    assert [p.returncode for p in both] == [0, 0], outs
    made = sorted(int(out.split(" new run")[0].split()[-1]) for out, _ in outs)
    assert made == [0, 10], outs  # the second waited for the first, then found its runs
    assert_exactly_once(mlflow_server, "twice", folder)


@pytest.mark.slow
def test_mlflow_rerun_keeps_one_whole_run_where_a_half_made_copy_runs_beside_it(mlflow_server, folder, capsys):
    args = ["export", "mlflow", str(folder), "--tracking-uri", mlflow_server, "--experiment", "beside"]
    assert run_cli(args, capsys)[0] == 0
    experiment = rest(mlflow_server, "experiments/get-by-name?experiment_name=beside")["experiment"]
    first = json.loads(next(iter(sorted(folder.rglob("resnet50_*.json")))).read_text())
    left = [{"key": RECORD_TAG, "value": record_key(first)}]  # RUNNING, without its completion tag
    rest(mlflow_server, "runs/create", {"experiment_id": experiment["experiment_id"], "tags": left})
    code, out, err = run_cli(args, capsys)
    assert code == 0 and "0 new runs" in out and "6 records were exported before" in out, out + err
    runs = all_runs(mlflow_server, "beside")
    assert len(runs) == 7 and not [r for r in runs if r["info"]["status"] == "RUNNING"]


@pytest.fixture
def wandb_home(tmp_path, monkeypatch):
    pytest.importorskip("wandb", reason="wandb is not installed: pip install 'dlperf[test]'")
    for name in ("WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_CONFIG_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "home" / name))  # W&B's caches and staging, not the user's


@pytest.fixture
def tmpfs(tmp_path):
    """A real, small file system (`mount -t tmpfs`, as root) that a test fills, resizes or makes read-only."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40k", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def remount(mount: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(mount)], check=True)


def marked_runs(out: Path) -> dict[str, Path]:
    """The run folders counted as written (with their marker), by run id; each must be whole."""
    found: dict[str, Path] = {}
    for run_dir in sorted((out / "wandb").glob("offline-run-*")):
        if (run_dir / MARKER).is_file():
            assert wandb_records(run_dir)["exit"], run_dir  # whole: W&B's exit record ends it
            found[run_dir.name.split("-", 3)[3]] = run_dir
    return found


@pytest.mark.slow
def test_wandb_export_into_a_full_disk_is_one_line_and_the_rerun_writes_the_rest(folder, wandb_home, tmpfs):
    full = run_dlperf(["export", "wandb", str(folder), "--dir", str(tmpfs)])
    assert_one_line_error(full.returncode, full.stderr, "cannot write W&B offline run", str(tmpfs), "free space",
                          "rerun")  # fmt: skip
    written = marked_runs(tmpfs)
    assert len(written) < 7
    remount(tmpfs, "size=4m")  # space freed
    done = run_dlperf(["export", "wandb", str(folder), "--dir", str(tmpfs)])
    assert done.returncode == 0, done.stderr
    assert f"{7 - len(written)} new W&B" in done.stdout and f"{len(written)} were written before" in done.stdout
    records = [json.loads(p.read_text()) for p in folder.rglob("resnet50_*.json")]
    ids = {run_id("run", record_key(r)) for r in records} | {run_id("sweep", SWEEP)}
    assert set(marked_runs(tmpfs)) == ids and len(list((tmpfs / "wandb").glob("offline-run-*"))) == 7
    assert {k: v for k, v in marked_runs(tmpfs).items() if k in written} == written  # kept, not written again


@pytest.mark.slow
@pytest.mark.parametrize("below", ["", "new"])  # the read-only folder itself, a folder to make in it
def test_wandb_export_to_a_read_only_dir_is_one_line(folder, wandb_home, tmpfs, below, tmp_path):
    remount(tmpfs, "ro")
    out = tmpfs / below
    scratch = tmp_path / "tmp"  # where W&B falls back to for a DIR it cannot write
    scratch.mkdir()
    failed = run_dlperf(["export", "wandb", str(folder), "--dir", str(out)], env={"TMPDIR": str(scratch)})
    assert_one_line_error(failed.returncode, failed.stderr, "cannot write W&B offline runs under", str(out))
    assert not (scratch / "wandb").exists(), "W&B wrote elsewhere instead"


class DropFirstCreate(http.server.BaseHTTPRequestHandler):
    """A proxy to the mlflow server that lets the first `runs/create` through but drops the connection before its
    answer, as a server that dies (or a network that fails) after doing the work: MLflow's client retries it."""

    upstream = ""
    dropped: list[str] = []

    def _forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        upstream = http.client.HTTPConnection(self.upstream, timeout=60)
        upstream.request(self.command, self.path, body, {k: v for k, v in self.headers.items() if k != "Host"})
        answer = upstream.getresponse()
        data = answer.read()
        if self.path.endswith("/runs/create") and not self.dropped:
            self.dropped.append(self.path)
            self.close_connection = True
            return
        self.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "content-length", "date", "server"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

    def log_message(self, *args) -> None:
        pass


@pytest.mark.slow
def test_mlflow_export_whose_create_run_is_retried_leaves_no_double(mlflow_server, tmp_path, capsys):
    folder = records_folder(tmp_path / "sweep", 2)
    DropFirstCreate.upstream = mlflow_server.removeprefix("http://")
    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), DropFirstCreate)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{proxy.server_address[1]}"
        args = ["export", "mlflow", str(folder), "--tracking-uri", url, "--experiment", "retried"]
        code, out, err = run_cli(args, capsys)
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert code == 0 and DropFirstCreate.dropped, out + err
    assert_exactly_once(mlflow_server, "retried", folder)
