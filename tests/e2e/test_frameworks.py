"""Frameworks side by side: framework identity and labels, per-framework launch variables, stop rules, the work
in the series key, and `report --by framework` with one row per framework and nothing pooled."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest
import yaml
from conftest import run_cli, run_dlperf
from source_records import record

from dlperf.external.identity import framework_version, interpreter
from dlperf.external.template import Rendezvous, framework_env, node_processes
from dlperf.records.store import write_json_atomic
from dlperf.reporting.sources import load_sources, series_of

SCRIPTS = Path(__file__).parents[1] / "fixtures" / "scripts"
REPO = Path(__file__).parents[2]


def rdzv(kind: str, nnodes: int = 2, per_node: int = 2) -> Rendezvous:
    return Rendezvous(nnodes, per_node, "10.0.0.1", 29500, 8, "fp32", 1, launch_env=kind,
                      node_addrs=("10.0.0.1", "10.0.0.2")[:nnodes])  # fmt: skip


def test_tf_config_lists_every_worker_and_this_index():
    env = framework_env(rdzv("tf"), node_rank=1, local_rank=1)
    config = json.loads(env["TF_CONFIG"])
    workers = ["10.0.0.1:29500", "10.0.0.1:29501", "10.0.0.2:29500", "10.0.0.2:29501"]
    assert config == {"cluster": {"worker": workers}, "task": {"type": "worker", "index": 3}}


def test_paddle_jax_mpi_variables():
    paddle = framework_env(rdzv("paddle"), node_rank=1, local_rank=0)
    assert paddle["PADDLE_TRAINER_ID"] == "2" and paddle["PADDLE_TRAINERS_NUM"] == "4"
    assert paddle["PADDLE_TRAINER_ENDPOINTS"] == "10.0.0.1:29500,10.0.0.1:29501,10.0.0.2:29500,10.0.0.2:29501"
    assert paddle["PADDLE_CURRENT_ENDPOINT"] == "10.0.0.2:29500" and paddle["FLAGS_selected_gpus"] == "0"
    jax = framework_env(rdzv("jax"), node_rank=0, local_rank=1)
    assert jax == {"JAX_COORDINATOR_ADDRESS": "10.0.0.1:29500", "JAX_NUM_PROCESSES": "4", "JAX_PROCESS_ID": "1",
                   "JAX_LOCAL_DEVICE_IDS": "1"}  # fmt: skip
    mpi = framework_env(rdzv("mpi"), node_rank=1, local_rank=1)
    assert mpi["OMPI_COMM_WORLD_RANK"] == mpi["PMI_RANK"] == "3" and mpi["OMPI_COMM_WORLD_SIZE"] == "4"
    assert mpi["OMPI_COMM_WORLD_LOCAL_RANK"] == "1" and mpi["OMPI_COMM_WORLD_NODE_RANK"] == "1"
    assert framework_env(rdzv("torch"), 0, 0) == {}


def test_per_node_process_is_one_worker_and_framework_launcher_splices():
    (process,) = node_processes("{framework_launcher} train.py", rdzv("paddle"), node_rank=1, per="node")
    assert json.loads(framework_env(rdzv("tf"), 1)["TF_CONFIG"])["task"]["index"] == 1
    assert process.env["PADDLE_TRAINER_ID"] == "1" and process.env["PADDLE_TRAINERS_NUM"] == "2"
    assert process.argv[1:3] == ["-m", "paddle.distributed.launch"] and process.argv[-1] == "train.py"
    assert process.argv[process.argv.index("--rank") : process.argv.index("--rank") + 2] == ["--rank", "1"]


@pytest.mark.parametrize("launcher", ["local", "ssh"])
def test_dry_run_shows_tf_config_and_paddle_variables_per_process(tmp_path, launcher):
    where = ["--hosts", "nodea,nodeb", "--nodes", "2", "--devices-per-node", "1"] if launcher == "ssh" else []
    where = where or ["--devices-per-node", "2"]
    for kind, names in (("tf", ["TF_CONFIG"]), ("paddle", ["PADDLE_TRAINER_ENDPOINTS", "PADDLE_TRAINER_ID",
                                                           "PADDLE_CURRENT_ENDPOINT"])):  # fmt: skip
        framework = "tensorflow" if kind == "tf" else "paddle"
        done = run_dlperf(["run", "--model", "resnet50", "--batch-size", "2", *where, "--launch-env", kind,
                           "--framework", framework, "--command", "{python} train.py", "--master-port", "29400",
                           "--dry-run", "--out", str(tmp_path)])  # fmt: skip
        assert done.returncode == 0, done.stderr
        lines = [line for line in done.stdout.splitlines() if line.startswith("# node ")]
        lines = [line for line in lines if "rank" in line or "its one process" in line]
        assert len(lines) == 2, done.stdout
        for index, line in enumerate(lines):
            env = dict(word.split("=", 1) for word in shlex.split(line.split(": ", 1)[1]) if "=" in word)
            assert all(name in env for name in names), line
            hosts = ["nodea", "nodeb"] if launcher == "ssh" else ["127.0.0.1", "127.0.0.1"]
            ports = [29400, 29400] if launcher == "ssh" else [29400, 29401]
            endpoints = [f"{h}:{p}" for h, p in zip(hosts, ports)]
            if kind == "tf":
                config = json.loads(env["TF_CONFIG"])
                assert config == {"cluster": {"worker": endpoints}, "task": {"type": "worker", "index": index}}
            else:
                assert env["PADDLE_TRAINER_ENDPOINTS"] == ",".join(endpoints)
                assert env["PADDLE_TRAINER_ID"] == str(index) and env["PADDLE_CURRENT_ENDPOINT"] == endpoints[index]
        assert not any(tmp_path.iterdir())


def test_interpreter_and_version_from_the_command_itself(tmp_path):
    assert interpreter([sys.executable, "train.py"]) == sys.executable
    assert interpreter(["env", "A=1", "python3.11", "t.py"]) == "python3.11"
    assert interpreter(["/bin/sh", "-c", f"{sys.executable} t.py | tee x"]) == sys.executable
    script = tmp_path / "launcher"
    script.write_text(f"#!{sys.executable}\nprint(1)\n")
    assert interpreter([str(script), "--x"]) == sys.executable
    assert interpreter(["/bin/true"]) is None
    from importlib.metadata import version

    assert framework_version("pytorch", [sys.executable, "t.py"]) == version("torch")
    assert framework_version("no-such-framework", [sys.executable, "t.py"]) is None


def _site(root: Path, version: str, metadata: bool = True) -> Path:
    """A folder holding a package `fakefw` at `version`, installed (dist-info) or as a bare source tree."""
    (root / "fakefw").mkdir(parents=True)
    (root / "fakefw" / "__init__.py").write_text(f"__version__ = '{version}'\n")
    if metadata:
        info = root / f"fakefw-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: fakefw\nVersion: {version}\n")
    return root


def test_version_is_the_one_the_commands_own_environment_loads(tmp_path):
    one, two = _site(tmp_path / "one", "4.57.1"), _site(tmp_path / "two", "5.2.0")
    source = _site(tmp_path / "src", "6.0.dev0", metadata=False)
    env = {**os.environ, "PYTHONPATH": str(one)}
    assert framework_version("fakefw", [sys.executable, "t.py"], str(tmp_path), env) == "4.57.1"
    assert framework_version("fakefw", ["env", f"PYTHONPATH={two}", sys.executable, "t.py"], None, env) == "5.2.0"
    assert framework_version("fakefw", ["env", "-u", "PYTHONPATH", sys.executable, "t.py"], None, env) is None
    assert framework_version("fakefw", ["env", f"PYTHONPATH={source}:{one}", sys.executable], None, env) == "6.0.dev0"


def test_image_size_and_command_label_split_series():
    small = record("resnet50", "1n1g", 4, "fp32", 1, 1.0, work="32px")
    full = record("resnet50", "1n1g", 4, "fp32", 1, 1.0, work="")
    old_small = record("resnet50", "1n1g", 4, "fp32", 1, 1.0, config={"image_size": 32})  # before `work`
    assert series_of(small)[0] != series_of(full)[0] and series_of(old_small)[0] == series_of(small)[0]
    tf = record("resnet50", "1n1g", 4, "fp32", 1, 1.0, kind="external", label="tf-official",
                group="b4_fp32_tf-official", work="")  # fmt: skip
    assert series_of(tf)[0] == series_of(full)[0]  # frameworks meet in the series of the same work


def test_runs_of_other_image_sizes_are_never_one_median(tmp_path):
    """Two folders, one engine, the same group: `--by engine` pools them, yet 32x32 and 224x224 stay apart."""
    for name, work, speed in (("small", "32px", 100.0), ("full", "", 10.0)):
        rec = record("resnet50", "1n1g", 4, "fp32", 1, speed, engine="torch", work=work)
        write_json_atomic(tmp_path / name / "resnet50" / "1n1g" / "resnet50_b4_fp32_1.json", rec)
    (source,) = load_sources([tmp_path / "small", tmp_path / "full"], by="engine")
    medians = {key.variant: cases[4][0].stats["median"] for key, cases in source.series.items()}
    assert medians == {"fp32": 10.0, "fp32_32px": 100.0}


def test_work_and_command_in_record_and_group():
    from dlperf.workloads import check_spec, spec_from_mapping

    def plan(**keys):
        return check_spec(spec_from_mapping({"model": "resnet50", "batch_size": 4, **keys}))

    assert plan().record_fields["work"] == "" and plan(image_size=32, num_classes=10).record_fields["work"] == (
        "32px_10cls"
    )
    assert plan(image_size=32).group == "b4_fp32"  # file names keep the group; reports key on the work too
    assert plan(command="x", framework="tensorflow").group == "b4_fp32_tensorflow"
    assert plan(command="x", framework="tensorflow", label="tf-official").group == "b4_fp32_tf-official"
    gpt = check_spec(spec_from_mapping({"model": "gpt", "seq_length": 128}))
    assert gpt.record_fields["work"] == "s128"


def test_one_folder_with_two_commands_is_never_one_median(tmp_path):
    folder = tmp_path / "mixed"
    for label, framework, speed in (("tf-official", "tensorflow 2.20.0", 10.0), ("examples", "torch 2.9.0", 30.0)):
        rec = record("resnet50", "1n1g", 4, "fp32", 1, speed, kind="external", label=label,
                     framework=framework, group=f"b4_fp32_{label}")  # fmt: skip
        write_json_atomic(folder / "resnet50" / "1n1g" / f"resnet50_b4_fp32_{label}_1.json", rec)
    for by in ("source", "engine", "framework"):
        sources = load_sources([folder], by=by)
        assert len(sources) == 2, by
        medians = sorted(c.stats["median"] for s in sources for cases in s.series.values() for c in cases[4])
        assert medians == [10.0, 30.0], by


@pytest.mark.slow
def test_sweep_native_torch_jax_and_two_commands_report_by_framework(tmp_path, capsys):
    """The issue's done-when: native torch, native jax and two `command:` frameworks in one sweep and one folder;
    `report --by framework` gives one row per framework. A 2-layer GPT names the case (the scripts train their
    own small models; the case's batch fills their --batch-size)."""
    common = "--batch-size {batch_size} --image-size 32"
    sweep = {
        "model": "gpt", "topology": "1n1g", "num_layers": 2, "hidden_size": 64, "num_heads": 2, "seq_length": 32,
        "vocab_size": 128, "micro_batch_size": 2,
        "device": "cpu", "warmup_iters": 1, "iters": 2, "print_every": 1, "repeats": 1,
        "matrix": [
            {"engine": "torch"},
            {"engine": "jax"},
            {"framework": "torch", "label": "examples-style", "log_format": "pytorch-imagenet", "log_warmup": 2,
             "command": f"{{python}} {SCRIPTS / 'pytorch_imagenet_style.py'} --arch resnet50 {common} --iters 6"},
            {"framework": "jax", "label": "keras-style", "log_format": "tf2-keras", "log_warmup": 2,
             "command": f"{{python}} {SCRIPTS / 'keras_timehistory_style.py'} --batch-size {{batch_size}} "
                        "--steps 8 --log-steps 2"},
        ],
    }  # fmt: skip
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep))
    out = tmp_path / "res"
    done = run_dlperf(["sweep", str(path), "--out", str(out)], timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(p.read_text()) for p in out.rglob("*.json") if p.parent.name == "1n1g"]
    records = [r for r in records if "model" in r]
    assert sorted(r["status"] for r in records) == ["ok"] * 4, [r.get("error") for r in records]
    from importlib.metadata import version

    import torch

    native = {r["engine"]: r["framework"] for r in records if r["kind"] != "external"}
    assert native == {"torch": f"torch {torch.__version__}", "jax": f"jax {version('jax')}"}
    command = {r["label"]: r["framework"] for r in records if r["kind"] == "external"}
    assert command == {"examples-style": f"torch {version('torch')}", "keras-style": f"jax {version('jax')}"}
    code, _out, err = run_cli(["report", str(out), "--by", "framework", "--format", "json"], capsys)
    assert code == 0, err
    summary = json.loads((out / "frameworks" / "summary.json").read_text())
    assert summary["sources"] == [  # one row per framework and command, torch first: the ratios are to it
        native["torch"],
        f"{command['examples-style']} (examples-style)",
        native["jax"],
        f"{command['keras-style']} (keras-style)",
    ]
    (series,) = summary["series"]
    by_label = {r["framework"] + (f" ({r['label']})" if r["kind"] == "external" else ""): r for r in records}
    for label, cell in series["cases"]["1n1g"]["sources"].items():
        assert cell["median_speed"] == round(by_label[label]["throughput"], 2)  # the summary rounds to 0.01


@pytest.mark.parametrize(
    ("flags", "reason"),
    [(["--stop-after-lines", "30"], "after 30 throughput lines"), (["--stop-after-seconds", "3"], "after 3 s")],
)
def test_stop_rules_end_a_script_that_never_stops(tmp_path, flags, reason):
    command = f"{{python}} {SCRIPTS / 'endless_lines.py'}"
    done = run_dlperf(["run", "--model", "resnet50", "--batch-size", "2", "--command", command, "--framework",
                       "torch", "--log-format", "pytorch-imagenet", "--log-warmup", "5", *flags, "--timeout", "120",
                       "--out", str(tmp_path)])  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (path,) = tmp_path.rglob("*.json")
    record = json.loads(path.read_text())
    assert record["status"] == "ok" and reason in record["ended_by"], record
    assert record["throughput"] == pytest.approx(2 / 0.010) and record["kept_lines"] >= 1
    if "--stop-after-lines" in flags:
        assert record["kept_lines"] >= 25  # 30 read, the first 5 iterations skipped; a few more may land
    assert "| Epoch: [0][" in done.stdout  # the live console follows the script's own lines
