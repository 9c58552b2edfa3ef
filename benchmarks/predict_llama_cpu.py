"""`dlperf predict --model llama`'s model against Llama runs measured here, on the CPU (gloo, 1 thread per rank).

Runs a 2-rank commbench (the link: its all-reduce fit), then for each 2-rank layout a one-rank run just before it
(the calibration: its achieved FLOP rate becomes the device's rate, efficiency 1, the optimizer folded in; taken
beside each layout because this machine's load drifts), the layout with the model (step time, peak RSS), and the
layout with a minimal model (layers 2, hidden 64, vocabulary 256: the process's own memory — torch, gloo, the
interpreter — which the prediction does not count). Predicted against measured: the step time, and the peak memory
above the minimal model's (predicted likewise as the difference). A CPU's peak is the process's peak RSS, so glibc
is told to map every allocation above 64 KiB on its own and to return freed memory at once
(MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_): the RSS then follows the live tensors, as a GPU's allocated peak
does. Gloo runs its collectives on the cores that compute, so nothing is hidden (Training(overlap=False)).

    nice python benchmarks/predict_llama_cpu.py --out /tmp/llama_cpu   # ~20 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from dlperf.orchestration import llama_predict
from dlperf.predict import links_from_records
from dlperf.predict.llama import Device, Network, Training, predict_llama
from dlperf.reporting.commbench_table import read_commbench

MIB = 1024 * 1024
SHAPE = {"size": "debug", "num_layers": 4, "hidden_size": 512, "num_heads": 8, "num_kv_heads": 4,
         "ffn_hidden_size": 1536, "vocab_size": 16384, "seq_length": 256, "micro_batch_size": 2}  # fmt: skip
MINIMAL = {**SHAPE, "num_layers": 2, "hidden_size": 64, "ffn_hidden_size": 128, "vocab_size": 256}
LAYOUTS = {
    "single": {},
    "fsdp2": {"dp_shard": 2},
    "fsdp2 ac-full": {"dp_shard": 2, "activation_checkpoint": "full"},
    "ddp2": {"dp_replicate": 2, "dp_shard": 1},
    "tp2": {"tp": 2, "dp_shard": 1},
    "cp2": {"cp": 2, "dp_shard": 1},
    "pp2 1f1b": {"pp": 2, "dp_shard": 1, "global_batch_size": 4},
    "hsdp2x2 (4 ranks)": {"dp_replicate": 2, "dp_shard": 2},
}
RUN = ["--model", "llama", "--device", "cpu", "--cpu-threads", "1", "--precision", "fp32", "--warmup-iters", "1",
       "--iters", "4", "--print-every", "2", "--overwrite"]  # fmt: skip
ENV = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0"}


def flags(values: dict) -> list[str]:
    return [x for k, v in values.items() for x in (f"--{k.replace('_', '-')}", str(v))]


def dlperf_run(values: dict, devices: int, out: Path) -> dict:
    """The run's record; one already in `out` is read, not run again (--out of an earlier call: the predictions
    again from the same measurements)."""
    found = list(out.glob("llama/*/*.json"))
    if found:
        return json.loads(found[0].read_text())
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "dlperf", "run", *RUN, *flags(values), "--devices-per-node", str(devices),
                    "--out", str(out)], check=True, capture_output=True, env=ENV)  # fmt: skip
    (record,) = out.glob("llama/*/*.json")
    return json.loads(record.read_text())


def predicted(values: dict, devices: int, device: Device, net: Network) -> tuple[float, float]:
    spec, layout = llama_predict.llama_spec({**values, "nodes": 1, "devices_per_node": devices, "precision": "fp32"})
    config = spec.workload
    training = Training(
        precision="fp32", checkpointing=config.activation_checkpoint, overlap=False, fused_optimizer=False
    )  # AdamW is fused on CUDA only
    got = predict_llama(llama_predict.model_shape(config), layout, training, device, net)
    return got.step_s, got.memory_bytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    out = parser.parse_args().out
    bench = out / "commbench"
    if not list(bench.glob("commbench/*/*.json")):
        subprocess.run([sys.executable, "-m", "dlperf", "commbench", "--device", "cpu", "--cpu-threads", "1",
                        "--devices-per-node", "2", "--sizes", "256K,1M,4M,16M", "--ops", "all_reduce", "--out",
                        str(bench)], check=True, capture_output=True)  # fmt: skip
    (bench_record,) = bench.glob("commbench/*/*.json")
    intra, _ = links_from_records([read_commbench(str(bench_record))])
    print(f"link: {intra.alpha_s * 1e6:.0f} us + {1 / intra.beta_s_per_byte / 1e6:.0f} MB/s per ring step")
    print(
        "| layout | one rank (GFLOP/s) | measured step (s) | predicted | error | measured MiB above minimal | "
        "predicted | error |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, layout in LAYOUTS.items():
        values = {**SHAPE, **layout}
        slug = name.split(" (")[0].replace(" ", "_")
        rate = dlperf_run(SHAPE, 1, out / f"{slug}_single")["tflops_per_device"]  # the device's rate right now
        rate /= 2 if "4 ranks" in name else 1
        device = Device(peak_tflops=rate, efficiency=1.0, memory_bytes=1e12, memory_bytes_per_s=1e18)
        devices = 1 if name == "single" else 4 if "4 ranks" in name else 2  # 4 ranks share the 2 cores
        net = Network(devices, intra, intra)  # one machine
        run = dlperf_run(values, devices, out / slug)
        base = dlperf_run({**MINIMAL, **layout}, devices, out / f"{slug}_minimal")
        step = run["global_batch_size"] / run["throughput"]
        memory = (run["peak_memory_mib"]["rss"] - base["peak_memory_mib"]["rss"]) * MIB
        want_step, want_memory = predicted(values, devices, device, net)
        _, base_memory = predicted({**MINIMAL, **layout}, devices, device, net)
        want_memory -= base_memory
        print(
            f"| {name} | {rate * 1e3:.1f} | {step:.2f} | {want_step:.2f} | {want_step / step - 1:+.1%} | "
            f"{memory / MIB:.0f} | {want_memory / MIB:.0f} | {want_memory / memory - 1:+.1%} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
