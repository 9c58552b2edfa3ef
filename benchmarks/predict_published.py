"""Predict the published V100 ResNet-50 FP32 data-parallel speedups from their 1n1g figure alone.

Published (DLPerf, PyTorch, ResNet-50 v1.5 FP32, batch 128 per device): 1n1g 383.76 img/s; speedup 7.67 at 1n8g,
15.22 at 2n8g, 30.09 at 4n8g. Those multi-device runs are not used by the prediction; only the 1n1g figure is.

Assumed figures (none measured by us; change them with the flags):
- gradient bytes: ResNet-50 v1.5 has 25,557,032 parameters, fp32 gradients -> 102,228,128 bytes;
- backward share of the step: 2/3 (the backward pass costs about twice the forward's FLOPs; the SGD update and
  the data pipeline are small or overlapped);
- inside a node (8 x V100-SXM2 on NVLink): 120 GB/s of all-reduce bus bandwidth, 5 us per ring step;
- between nodes (one 100 Gb/s InfiniBand port per node): 90 % of line rate, 11.25 GB/s, 10 us per ring step;
- DDP defaults: 25 MiB buckets, the first capped at 1 MiB.

    python benchmarks/predict_published.py [--backward-share 0.667 --nvlink-gbs 120 --ib-gbit 100 --ib-efficiency 0.9]
"""

from __future__ import annotations

import argparse

from dlperf.predict import Link, SingleDeviceRun, predict_data_parallel

PUBLISHED_1N1G = 383.76  # img/s at batch 128
PUBLISHED_SPEEDUP = {(1, 8): 7.67, (2, 8): 15.22, (4, 8): 30.09}  # (nodes, devices per node)
RESNET50_PARAMETERS = 25_557_032


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backward-share", type=float, default=2 / 3)
    parser.add_argument("--nvlink-gbs", type=float, default=120.0, help="intra-node all-reduce bus bandwidth, GB/s")
    parser.add_argument("--nvlink-latency-us", type=float, default=5.0)
    parser.add_argument("--ib-gbit", type=float, default=100.0, help="inter-node link per node, Gbit/s")
    parser.add_argument("--ib-efficiency", type=float, default=0.9, help="fraction of line rate NCCL reaches")
    parser.add_argument("--ib-latency-us", type=float, default=10.0)
    args = parser.parse_args()

    batch = 128
    run = SingleDeviceRun(
        step_time_s=batch / PUBLISHED_1N1G,
        batch_size=batch,
        backward_share=args.backward_share,
        gradient_bytes=RESNET50_PARAMETERS * 4,
    )
    intra = Link.from_bandwidth(args.nvlink_gbs * 1e9, args.nvlink_latency_us * 1e-6)
    inter = Link.from_bandwidth(args.ib_gbit / 8 * 1e9 * args.ib_efficiency, args.ib_latency_us * 1e-6)
    print(
        f"1n1g step {run.step_time_s * 1e3:.2f} ms, backward {args.backward_share:.3f} of it, "
        f"gradients {run.gradient_bytes:,} bytes"
    )
    print("| case | predicted img/s | predicted speedup | published speedup | error | all-reduce ms | exposed ms |")
    print("|---|---|---|---|---|---|---|")
    for (nodes, devices), published in PUBLISHED_SPEEDUP.items():
        got = predict_data_parallel(run, devices, nodes, intra, inter)
        error = (got.speedup - published) / published
        print(
            f"| {nodes}n{devices}g | {got.throughput:.1f} | {got.speedup:.2f} | {published:.2f} | {error:+.1%} "
            f"| {got.comm_s * 1e3:.2f} | {got.exposed_s * 1e3:.2f} |"
        )


if __name__ == "__main__":
    main()
