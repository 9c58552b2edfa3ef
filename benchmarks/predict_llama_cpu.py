"""`dlperf predict --model llama`'s model against Llama runs measured here, on the CPU (gloo, 1 thread per rank).

Runs a 2-rank commbench (the links: each collective's own fit) and measures one core's copy rate (the memory
bandwidth: the optimizer and FSDP's copies), then for each layout a one-rank run just before it (the calibration:
its FLOPs over its step less the optimizer become the device's rate, efficiency 1; taken beside each layout because
this machine's load drifts; a layout of 4 ranks shares the 2 cores, so half of each rate), the layout with the model
(step time), the layout again for its peak RSS, and the layout with a minimal model (layers 2, hidden 64, vocabulary
256: the process's own memory — torch, gloo, the interpreter — which the prediction does not count). Predicted
against measured: the step time, and the peak memory above the minimal model's (predicted likewise as the
difference). A CPU's peak is the process's peak RSS, so glibc is told to map every allocation above 64 KiB on its
own and to return freed memory at once (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_): the RSS then follows the
live tensors, as a GPU's allocated peak does. Gloo runs its collectives on the cores that compute, so nothing is
hidden (Training(overlap=False)).

    nice python benchmarks/predict_llama_cpu.py --out /tmp/llama_cpu [--shape held-out]   # ~12 min, 2 quiet cores
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from dlperf.predict import links_from_records, op_links_from_records
from dlperf.predict.model import Link
from dlperf.predict.setting import Device, Network, Training
from dlperf.reporting.commbench_table import read_commbench
from dlperf.workloads.llama import predict as llama_predict
from dlperf.workloads.llama.predict_model import OPTIMIZER_BYTES_PER_PARAM, model_shape, predict_llama

MIB = 1024 * 1024
SHAPES = {
    "check": {"size": "debug", "num_layers": 4, "hidden_size": 512, "num_heads": 8, "num_kv_heads": 4,
              "ffn_hidden_size": 1536, "vocab_size": 16384, "seq_length": 256, "micro_batch_size": 2},
    # held out: a shape no change to the model was made for (every layout divides its 8 blocks)
    "held-out": {"size": "debug", "num_layers": 8, "hidden_size": 384, "num_heads": 8, "num_kv_heads": 2,
                 "ffn_hidden_size": 1024, "vocab_size": 8192, "seq_length": 512, "micro_batch_size": 1},
}  # fmt: skip
MINIMAL = {"num_layers": 2, "hidden_size": 64, "ffn_hidden_size": 128, "vocab_size": 256}
LAYOUTS = {
    "single": {},
    "fsdp2": {"dp_shard": 2},
    "fsdp2 ac-full": {"dp_shard": 2, "activation_checkpoint": "full"},
    "ddp2": {"dp_replicate": 2, "dp_shard": 1},
    "tp2": {"tp": 2, "dp_shard": 1},
    "cp2": {"cp": 2, "dp_shard": 1},
    "fsdp2 ac-selective": {"dp_shard": 2, "activation_checkpoint": "selective"},
    "pp2 1f1b": {"pp": 2, "dp_shard": 1, "global_batch_size": 4},
    "pp2 gpipe": {"pp": 2, "dp_shard": 1, "global_batch_size": 4, "pp_schedule": "gpipe"},
    "pp2 interleaved-1f1b": {"pp": 2, "dp_shard": 1, "global_batch_size": 4, "pp_schedule": "interleaved-1f1b"},
    "pp2 zbv": {"pp": 2, "dp_shard": 1, "global_batch_size": 4, "pp_schedule": "zbv"},
    "hsdp2x2 (4 ranks)": {"dp_replicate": 2, "dp_shard": 2},
    "tp2 fsdp2 (4 ranks)": {"tp": 2, "dp_shard": 2},
    "pp2 fsdp2 (4 ranks)": {"pp": 2, "dp_shard": 2, "global_batch_size": 8},
}
RUN = ["--device", "cpu", "--cpu-threads", "1", "--precision", "fp32", "--warmup-iters", "1", "--print-every", "2",
       "--overwrite"]  # fmt: skip
QUIET = 0.5  # cores other processes may keep busy before a run is flagged noisy (dlperf's machine-load limit)
ENV = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0"}


def flags(values: dict) -> list[str]:
    return [x for k, v in values.items() for x in (f"--{k.replace('_', '-')}", str(v))]


def dlperf_run(values: dict, devices: int, out: Path, rss: bool = False, model: str = "llama", iters: int = 4) -> dict:
    """The run's record; one already in `out` is read, not run again (--out of an earlier call: the predictions
    again from the same measurements). `rss`: glibc set so that the RSS follows the live tensors (ENV), for the
    memory; each large allocation then faults its pages in afresh, which slows a step (HSDP 2 x 1: 1.86 s against
    1.28-1.35 s), so step times come from runs without it."""
    found = list(out.glob(f"{model}/*/*.json"))
    if found:
        return json.loads(found[0].read_text())
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "dlperf", "run", "--model", model, "--iters", str(iters), *RUN,
                    *flags(values), "--devices-per-node", str(devices), "--out", str(out)], check=True,
                   capture_output=True, env=ENV if rss else None)  # fmt: skip
    (record,) = out.glob(f"{model}/*/*.json")
    return json.loads(record.read_text())


def copy_bandwidth() -> float:
    """Bytes read and written per second by one thread copying 256 MiB (the best of 5), in a process of its own
    on one core: the rate of memory-bound work (the optimizer, FSDP's copies) for a rank with a core of its own."""
    code = (
        "import os, time, torch; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); torch.set_num_threads(1)\n"
        "a = torch.ones(64 * 2**20); b = torch.empty_like(a); best = 1e9\n"
        "for _ in range(5):\n t = time.perf_counter(); b.copy_(a); best = min(best, time.perf_counter() - t)\n"
        "print(2 * a.numel() * 4 / best)"
    )
    return float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)


def predicted(values: dict, devices: int, device: Device, net: Network, _: dict, host_s: float) -> tuple[float, float]:
    """(step s, bytes); `host_s`, the host work a floor measured, follows the device's (one thread on a CPU)."""
    spec, layout = llama_predict.llama_spec({**values, "nodes": 1, "devices_per_node": devices, "precision": "fp32"})
    config = spec.workload
    got = predict_llama(model_shape(config), layout, cpu_training(config.activation_checkpoint), device, net)
    return got.step_s + host_s, got.memory_bytes


def cpu_training(checkpointing: str) -> Training:
    """How a CPU run trains: fp32, gloo's collectives on the computing cores (nothing hidden), AdamW unfused
    (fused on CUDA only)."""
    return Training(precision="fp32", checkpointing=checkpointing, overlap=False, fused_optimizer=False)


def optimizer_s(bandwidth: float, shape: dict) -> float:
    """The one-rank step's optimizer as the model times it (the calibration takes it out of the rate)."""
    spec, _ = llama_predict.llama_spec({**shape, "nodes": 1, "devices_per_node": 1, "precision": "fp32"})
    return OPTIMIZER_BYTES_PER_PARAM * model_shape(spec.workload).params / bandwidth


def measured_links(out: Path, ranks: int = 2) -> tuple[Link, dict[str, Link]]:
    """(the all-reduce's link, each collective's own) from a commbench of `ranks` ranks made once in `out`,
    printed."""
    bench = out / ("commbench" if ranks == 2 else f"commbench{ranks}")
    if not list(bench.glob("commbench/*/*.json")):
        subprocess.run([sys.executable, "-m", "dlperf", "commbench", "--device", "cpu", "--cpu-threads", "1",
                        "--devices-per-node", str(ranks), "--sizes", "256K,1M,4M,16M,32M", "--out", str(bench)],
                       check=True, capture_output=True)  # fmt: skip
    (bench_record,) = bench.glob("commbench/*/*.json")
    bench_read = read_commbench(str(bench_record))
    intra, _ = links_from_records([bench_read])
    ops, _ = op_links_from_records([bench_read])
    for op, link in ops.items():
        print(f"{op} ({ranks} ranks): {link.alpha_s * 1e6:.0f} us + {1 / link.beta_s_per_byte / 1e6:.0f} MB/s "
              "per ring step")  # fmt: skip
    return intra, ops


class Check(NamedTuple):
    """What differs between the models checked: the dlperf model, its shape and layouts, the minimal model of a
    layout (the process's own memory), the prediction of (values, devices, device, links, the timed run's record,
    host seconds per step) -> (step s, bytes), the one-rank step's optimizer seconds at a copy rate, and the timed
    steps per run with whether a step is its run's fastest window (on a machine others load: the least disturbed)
    or the median."""

    model: str
    shape: dict
    layouts: dict[str, dict]
    minimal: Callable[[dict], dict]
    predict: Callable[[dict, int, Device, Network, dict, float], tuple[float, float]]
    optimizer_s: Callable[[float], float]
    iters: int = 4
    best_window: bool = False
    attempts: int = 1  # (one-rank, timed) pairs tried while other jobs kept more than QUIET cores busy
    # whether a layout of 4 ranks takes its links from a 4-rank commbench: 4 ranks sharing the 2 cores wait for
    # each other's turn on a core at every step of a collective (the all-to-all 1.5-1.8 ms per ring step on 4 ranks,
    # 0.45-0.72 ms on 2), as they get half a core's compute and copy rates
    links_by_ranks: bool = False
    # the layout at its host's floor (its blocks and experts at tiny widths), whose measured step less the
    # predicted one is host work no rate holds (host_beyond_one); None: no floor measured, no host term
    floor: Callable[[dict], dict] | None = None

    def step_s(self, record: dict) -> float:
        throughput = max(record["window_throughputs"]) if self.best_window else record["throughput"]
        return record["global_batch_size"] / throughput


def others_cores(record: dict) -> float:
    """Cores other processes kept busy over the run's timed window (its record's machine_load), the busiest node."""
    return max(node["other_cores"] for node in record["machine_load"])


def timed_pair(check: Check, values: dict, devices: int, out: Path, slug: str) -> tuple[dict, dict]:
    """(the one-rank run, the layout's timed run) just after it: the first pair in which other jobs kept at most
    QUIET cores busy in both (dlperf's own noise limit), else the least loaded of `attempts`."""
    pairs = []
    for attempt in range(check.attempts):
        tag = f"_{attempt}" if attempt else ""
        one = dlperf_run(check.shape, 1, out / f"{slug}_single{tag}", model=check.model, iters=check.iters)
        timed = dlperf_run(values, devices, out / f"{slug}_time{tag}", model=check.model, iters=check.iters)
        pairs.append((max(others_cores(one), others_cores(timed)), attempt, one, timed))
        if pairs[-1][0] <= QUIET:
            break
    _, _, one, timed = min(pairs)
    return one, timed


def floor_residual(check: Check, values: dict, devices: int, device: Device, net: Network, out: Path) -> float:
    """The layout's floor timed in `out`, its step less the model's for it: the work the model does not count."""
    floor = check.floor(values)
    run = dlperf_run(floor, devices, out, model=check.model, iters=check.iters)
    return check.step_s(run) - check.predict(floor, devices, device, net, run, 0.0)[0]


def host_beyond_one(check: Check, layout: tuple[dict, int, Device, Network], one: tuple[Device, Network], out: Path,
                    slug: str) -> float:  # fmt: skip
    """The layout's host work per step beyond the one-rank run's, which its rate holds: the layout's floor
    residual less the one rank's (twice that where 4 ranks share the 2 cores at half its rates); none below zero."""
    values, devices, device, net = layout
    share = one[0].rate / device.rate
    own = floor_residual(check, values, devices, device, net, out / f"{slug}_floor")
    return max(0.0, own - share * floor_residual(check, check.shape, 1, *one, out / "single_floor"))


def run_check(check: Check, out: Path) -> None:
    """Each layout against its prediction, the table printed row by row."""
    links = {2: measured_links(out)} | ({4: measured_links(out, 4)} if check.links_by_ranks else {})
    bandwidth = copy_bandwidth()
    print(f"memory: {bandwidth / 1e9:.1f} GB/s read and written by one core")
    one_net = Network(1, links[2][0], links[2][0], links[2][1], links[2][1])  # the one-rank floor's (no collective)
    host_column = ("host (ms) | ", "---:|") if check.floor else ("", "")
    print(
        "| layout | others' cores | one rank (GFLOP/s) | measured step (s) | "
        f"{host_column[0]}predicted | error | measured MiB above minimal | predicted | error |"
    )
    print(f"|---|---:|---:|---:|{host_column[1]}---:|---:|---:|---:|---:|")
    for name, layout in check.layouts.items():
        values = {**check.shape, **layout}
        slug = name.split(" (")[0].replace(" ", "_")
        devices = 1 if name.endswith("single") else 4 if "4 ranks" in name else 2  # 4 ranks share the 2 cores
        one, timed = timed_pair(check, values, devices, out, slug)
        # the device's rate then: the one-rank run's FLOPs over its step less its optimizer (memory-bound: at the
        # copy rate, as the model times it)
        one_step = check.step_s(one)
        rate = one["flops_per_iteration"] / 1e12 / (one_step - check.optimizer_s(bandwidth))
        whole = Device(peak_tflops=rate, efficiency=1.0, memory_bytes=1e12, memory_bytes_per_s=bandwidth)
        half = Device(peak_tflops=rate / 2, efficiency=1.0, memory_bytes=1e12, memory_bytes_per_s=bandwidth / 2)
        device = half if "4 ranks" in name else whole
        intra, ops = links.get(devices, links[2])
        net = Network(devices, intra, intra, ops, ops)  # one machine, each collective on its own fit
        host = host_beyond_one(check, (values, devices, device, net), (whole, one_net), out, slug) if check.floor else 0
        run = dlperf_run(values, devices, out / slug, rss=True, model=check.model)
        minimal = check.minimal(values)
        base = dlperf_run(minimal, devices, out / f"{slug}_minimal", rss=True, model=check.model)
        step = check.step_s(timed)
        memory = (run["peak_memory_mib"]["rss"] - base["peak_memory_mib"]["rss"]) * MIB
        want_step, want_memory = check.predict(values, devices, device, net, timed, host)
        want_memory -= check.predict(minimal, devices, device, net, base, 0.0)[1]
        load = max(others_cores(one), others_cores(timed))
        hosted = f"{host * 1e3:.0f} | " if check.floor else ""
        print(
            f"| {name} | {load:.2f} | {device.peak_tflops * 1e3:.1f} | {step:.2f} | {hosted}{want_step:.2f} | "
            f"{want_step / step - 1:+.1%} | {memory / MIB:.0f} | {want_memory / MIB:.0f} | "
            f"{want_memory / memory - 1:+.1%} |",
            flush=True,
        )


def minimal_llama(values: dict) -> dict:
    """The layout with 2 blocks of hidden 64 and a vocabulary of 256 (a block per stage at least)."""
    stages = 2 * values.get("pp", 1) if values.get("pp_schedule") in ("interleaved-1f1b", "zbv") else 2
    return {**values, **MINIMAL, "num_layers": stages}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--shape", choices=SHAPES, default="check", help="the model's shape (default check)")
    args = parser.parse_args()
    shape = SHAPES[args.shape]
    run_check(Check("llama", shape, LAYOUTS, minimal_llama, predicted, lambda bw: optimizer_s(bw, shape)), args.out)


if __name__ == "__main__":
    main()
