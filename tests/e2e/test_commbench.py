"""Bus-bandwidth factors and the alpha-beta fit on constructed timings; one real 2-process commbench through the
CLI and the report."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest
from conftest import run_cli, run_dlperf

from dlperf.cli import commbench_cmd
from dlperf.cli.main import build_parser
from dlperf.errors import ConfigError
from dlperf.metrics.bandwidth import OPS, Timing, bus_factor, fit_alpha_beta, fit_timings, read_fit


@pytest.mark.parametrize(
    ("op", "n", "factor"),
    [("all_reduce", 4, 1.5), ("all_reduce", 8, 1.75), ("all_reduce", 1, 0.0), ("all_gather", 4, 0.75),
     ("reduce_scatter", 8, 0.875), ("send_recv", 8, 1.0), ("all_to_all", 4, 0.75)],
)  # fmt: skip
def test_bus_factors(op, n, factor):
    assert bus_factor(op, n) == factor


def test_bandwidths_of_one_timing():
    # 1 MB all-reduced over 4 ranks in 1 ms: 1 GB/s of buffer, 1.5 GB/s on the bus
    timing = Timing(op="all_reduce", size_bytes=1_000_000, world_size=4, seconds=1e-3)
    assert timing.algbw == pytest.approx(1e9)
    assert timing.busbw == pytest.approx(1.5e9)


def test_unknown_collective_is_refused():
    with pytest.raises(ConfigError, match="unknown collective 'broadcast'"):
        bus_factor("broadcast", 2)


def test_exact_line_is_recovered():
    # 5 us latency, 1 ns/byte (1 GB/s of buffer): the fit gives both back and a perfect r2
    sizes = [1_000, 10_000, 100_000, 1_000_000]
    timings = [Timing("all_gather", s, 4, 5e-6 + 1e-9 * s) for s in sizes]
    fit = fit_timings(timings)["all_gather"]
    assert fit.alpha_s == pytest.approx(5e-6)
    assert fit.beta_s_per_byte == pytest.approx(1e-9)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.busbw == pytest.approx(0.75e9)  # (n-1)/n of 1 GB/s
    assert fit.seconds(2_000_000) == pytest.approx(5e-6 + 2e-3)


def test_noisy_fit_by_hand():
    # x = 1, 2, 3 bytes, y = 1, 3, 2 s: slope 0.5, intercept 1.0; predicted 1.5, 2.0, 2.5;
    # residuals 0.5, -1, 0.5 (SSR 1.5), SST 2, so r2 = 0.25; worst relative error |1.5-1|/1 = 0.5
    fit = fit_alpha_beta("all_reduce", 2, [1, 2, 3], [1, 3, 2])
    assert (fit.beta_s_per_byte, fit.alpha_s) == pytest.approx((0.5, 1.0))
    assert fit.r2 == pytest.approx(0.25)
    assert fit.max_rel_error == pytest.approx(0.5)


def test_one_size_cannot_be_fitted():
    with pytest.raises(ConfigError, match="two sizes or more"):
        fit_alpha_beta("all_reduce", 2, [64, 64], [1.0, 1.1])


def test_cores_import_without_torch():
    """commbench's maths, predict and maxbatch run in the parent: only commbench.measure may load torch."""
    code = "import sys, dlperf.metrics.bandwidth, dlperf.predict, dlperf.maxbatch; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


@pytest.mark.slow
def test_two_process_commbench_through_the_cli_and_the_report(tmp_path):
    """`dlperf commbench` on 2 local CPU processes (torchrun's launcher, gloo), as a run is launched; its record
    feeds `dlperf report`'s table and plot."""
    sizes = (4096, 65536, 262144)
    done = run_dlperf(["commbench", "--devices-per-node", "2", "--device", "cpu", "--sizes", "4K,64K,256K",
                       "--warmup", "1", "--repeats", "3", "--out", str(tmp_path)], timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    path = tmp_path / "commbench" / "1n2g" / "commbench_fp32_1.json"
    assert f"record: {path}" in done.stdout and "| all_reduce | 256 KiB |" in done.stdout
    record = json.loads(path.read_text())
    assert record["schema"] == "dlperf.commbench/1" and record["status"] == "ok"
    assert record["world_size"] == 2 and record["backend"] == "gloo" and record["device_type"] == "cpu"
    assert (record["warmup"], record["repeats"]) == (1, 3)
    measured = {(r["op"], r["size_bytes"]) for r in record["results"]}
    assert measured == {(op, size) for op in OPS for size in sizes}
    for row in record["results"]:
        assert row["seconds"] > 0
        factor = {"all_reduce": 1.0, "all_gather": 0.5, "reduce_scatter": 0.5, "send_recv": 1.0,
                  "all_to_all": 0.5}[row["op"]]  # n = 2  # fmt: skip
        assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * factor)
    assert set(record["fits"]) == set(OPS)
    assert read_fit(record, "all_reduce").points == 3

    report = run_dlperf(["report", str(tmp_path)])
    assert report.returncode == 0, report.stderr
    text = (tmp_path / "report.md").read_text()
    assert "## Collective bandwidth (dlperf commbench)" in text and "1n2g (2 ranks), gloo on cpu, fp32" in text
    assert text.count("| all_reduce |") == 4  # three sizes and one fit
    assert (tmp_path / "plots" / "commbench_1n2g_fp32_1.png").stat().st_size > 0


def test_sbatch_job_script_runs_commbench_with_flags_it_accepts(tmp_path, capsys):
    """Outside an allocation Slurm runs the command inside a job script: `dlperf commbench`, not `dlperf run`."""
    args = ["commbench", "--launcher", "slurm", "--nodes", "2", "--sizes", "1M,4M", "--warmup", "2", "--dry-run",
            "--out", str(tmp_path)]  # fmt: skip
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    line = next(line for line in out.splitlines() if " -m dlperf commbench " in line)
    parsed = build_parser().parse_args(shlex.split(line)[3:])
    assert parsed.func is commbench_cmd.run
    assert (parsed.nodes, parsed.sizes, parsed.warmup, parsed.repeats, parsed.launcher) == (2, "1M,4M", 2, 20, "slurm")
