"""`--command` pieces: placeholders, argument lists, rendezvous environments, and the two fixture scripts' logs."""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from dlperf.errors import ConfigError
from dlperf.external.template import (
    PLACEHOLDERS,
    Rendezvous,
    check_template,
    node_processes,
    rendezvous_env,
    template_argv,
)
from dlperf.framework_logs.extract import Options, extract_dir

SCRIPTS = Path(__file__).parents[1] / "fixtures" / "scripts"
RDZV = Rendezvous(nnodes=2, nproc_per_node=4, master_addr="10.0.0.1", master_port=29500, batch_size=128,
                  precision="amp-fp16", repeat=3, python="/venv/bin/python")  # fmt: skip


def test_every_placeholder_expands_in_its_own_word():
    template = "python 'my train.py' " + " ".join(f"--{name}={{{name}}}" for name in PLACEHOLDERS)
    argv = template_argv(template, RDZV, node_rank=1, rank=6, local_rank=2)
    assert argv == [
        "python", "my train.py", "--nnodes=2", "--nproc_per_node=4", "--node_rank=1", "--master_addr=10.0.0.1",
        "--master_port=29500", "--world_size=8", "--batch_size=128", "--precision=amp-fp16", "--repeat=3",
        "--amp=1", "--python=/venv/bin/python",
        "--framework_launcher=/venv/bin/python -m torch.distributed.run --nnodes 2 --nproc-per-node 4 "
        "--node-rank 1 --master-addr 10.0.0.1 --master-port 29500",
        "--rank=6", "--local_rank=2",
    ]  # fmt: skip


def test_values_never_split_words_and_braces_escape():
    rdzv = Rendezvous(1, 1, "host with space", 1, 8, "fp32", 1)
    assert template_argv("run --addr {master_addr} {{literal}} --amp {amp}", rdzv, 0) == [
        "run", "--addr", "host with space", "{literal}", "--amp", "0",
    ]  # fmt: skip


def test_shell_only_when_asked_and_values_quoted():
    rdzv = Rendezvous(1, 1, "a;b", 1, 8, "fp32", 1)
    argv = template_argv("echo {master_addr} | tee out.txt", rdzv, 0, shell=True)
    assert argv == ["/bin/sh", "-c", "echo 'a;b' | tee out.txt"]
    assert template_argv("echo {master_addr} | tee out.txt", rdzv, 0) == ["echo", "a;b", "|", "tee", "out.txt"]


@pytest.mark.parametrize(
    ("template", "per", "message"),
    [
        ("python t.py --bs {batch}", "rank", "unknown placeholder {batch} in --command; known: {nnodes}"),
        ("python t.py --r {rank}", "node", "unknown placeholder {rank} in --command (one process per node has no"),
        ("python t.py {rank.x}", "rank", "unknown placeholder {rank.x}"),
        ("python t.py {}", "rank", "unknown placeholder {}"),
        ("python t.py {batch_size", "rank", "unbalanced braces"),
        ("   ", "rank", "--command is empty"),
        ("python t.py", "host", "unknown --command-per 'host'"),
    ],
)
def test_refused_before_launch_with_one_line(template, per, message):
    with pytest.raises(ConfigError) as error:
        check_template(template, per)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_unclosed_quote_refused():
    with pytest.raises(ConfigError, match="close its quotes"):
        template_argv("python 'train.py", RDZV, 0, 0, 0)


def test_per_rank_processes_and_environment():
    processes = node_processes("python t.py --lr {local_rank}", RDZV, node_rank=1, per="rank")
    assert [(p.rank, p.local_rank) for p in processes] == [(4, 0), (5, 1), (6, 2), (7, 3)]
    assert processes[2].argv == ["python", "t.py", "--lr", "2"]
    assert processes[2].env == {
        "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "WORLD_SIZE": "8", "NODE_RANK": "1",
        "LOCAL_WORLD_SIZE": "4", "RANK": "6", "LOCAL_RANK": "2",
    }  # fmt: skip


def test_per_node_one_process_without_rank():
    template = "torchrun --nnodes {nnodes} --nproc-per-node {nproc_per_node} --node-rank {node_rank} t.py"
    (process,) = node_processes(template, RDZV, node_rank=0, per="node")
    assert process.argv[:7] == ["torchrun", "--nnodes", "2", "--nproc-per-node", "4", "--node-rank", "0"]
    assert process.rank is None and "RANK" not in process.env and "LOCAL_RANK" not in process.env
    # no WORLD_SIZE: the command is no rank (accelerate on a CPU reads WORLD_SIZE 8 as 8 ranks to wait for)
    assert "WORLD_SIZE" not in process.env and process.env["NODE_RANK"] == "0"
    assert process.env["LOCAL_WORLD_SIZE"] == "4" and process.env["MASTER_PORT"] == "29500"
    assert rendezvous_env(RDZV, 0) == process.env
    with pytest.raises(ConfigError, match="node rank 2 is outside 0..1"):
        node_processes("t", RDZV, node_rank=2)


def _imagenet_expected(stdout: str, batch: int, after: int) -> float:
    """Global batch over the mean printed batch time of the iterations after `after` (the record's warm-up: the 2
    asked for, or where the steady-state test found the lines settled; a line per iteration)."""
    times = [float(t) for t in re.findall(r"\tTime\s+([\d.]+) \(", stdout)]
    return batch / statistics.fmean(times[after:])


def _keras_expected(stdout: str, batch: int, after: int) -> float:
    """The mean printed examples/second of the windows from step `after` (steps 0-10 the warm-up asked for, or
    where the steady-state test found the lines settled)."""
    lines = re.findall(r"([\d.]+) examples/second between steps (\d+) and", stdout)
    return statistics.fmean(float(speed) for speed, start in lines if int(start) >= after)


@pytest.mark.parametrize(
    ("script", "args", "fmt", "batch", "warmup", "expected"),
    [
        ("pytorch_imagenet_style.py", ["--batch-size", "{batch_size}", "--iters", "12"], "pytorch-imagenet", 8, 2,
         _imagenet_expected),
        ("keras_timehistory_style.py", ["--batch-size", "{batch_size}", "--steps", "40"], "tf2-keras", 32, 10,
         _keras_expected),
    ],
)  # fmt: skip
def test_fixture_script_output_is_read_by_its_peer_reader(tmp_path, script, args, fmt, batch, warmup, expected):
    """Run once as 1 process with the argv and environment dlperf would give it; the reader finds a throughput."""
    rdzv = Rendezvous(1, 1, "127.0.0.1", 29500, batch, "fp32", 1)
    template = " ".join([sys.executable, str(SCRIPTS / script), *args])
    (process,) = node_processes(template, rdzv, node_rank=0, per="rank")
    done = subprocess.run(process.argv, env={**_base_env(), **process.env}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    log = tmp_path / "logs" / "1n1g" / f"tiny_b{batch}_fp32_1.log"
    log.parent.mkdir(parents=True)
    log.write_text(done.stdout)
    (record,), skipped = extract_dir(tmp_path / "logs", Options(warmup=warmup, window=0))  # warm-up in iterations
    assert skipped == []
    assert record["format"] == fmt and record["kept_lines"] >= 2
    assert record["throughput"] > 0
    assert record["warmup_iterations"] >= warmup
    assert record["throughput"] == pytest.approx(expected(done.stdout, batch, record["warmup_iterations"]), rel=1e-9)


def _base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
