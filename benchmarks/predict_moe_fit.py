"""The three fitted figures of `dlperf predict --model moe`, fitted on the published points marked `fit` (5 of 19):
the grouped GEMMs' share of the dense matmul rate and the time per kernel an MoE block launches (on the four that
are not GB300s), then Blackwell Ultra's scale on the stacks' efficiencies (on the GB300 one); then every point's
error. Prints the constants for workloads/moe/predict.py and predict/calibration.py and the table for
docs/scaling.md.

    python benchmarks/predict_moe_fit.py
"""

from __future__ import annotations

import itertools
import statistics

from dlperf.predict import calibration
from dlperf.workloads.llama.predict import held_out_summary
from dlperf.workloads.moe import predict as moe_predict

SHARES = [round(0.5 + 0.025 * i, 3) for i in range(29)]  # 0.5 to 1.2
LAUNCHES_US = [float(u) for u in range(0, 81, 2)]


def fit() -> tuple[float, float]:
    """The pair with the least median |error| on the fit points but the GB300's (a grid: two figures, four points),
    then the GB300 scale that meets its point (bisected: tokens/s grow with it)."""
    points = [p for p in moe_predict.published_points() if p["role"] == "fit"]
    ultra = [p for p in points if p["accelerator"] in ("GB300", "B300")]

    def score(pair: tuple[float, float]) -> float:
        errors = [abs(_error(p, (pair[0], pair[1] * 1e-6))) for p in points if p not in ultra]
        return statistics.median(errors) + max(errors) / 100

    share, launch_us = min(itertools.product(SHARES, LAUNCHES_US), key=score)
    low, high = 0.5, 3.0
    for _ in range(40):
        calibration.DEVICE_SCALE["blackwell-ultra"] = mid = (low + high) / 2
        low, high = (mid, high) if _error(ultra[0], (share, launch_us * 1e-6)) < 0 else (low, mid)
    calibration.DEVICE_SCALE["blackwell-ultra"] = round((low + high) / 2, 4)
    return share, launch_us * 1e-6


def _error(point: dict, fit: tuple[float, float]) -> float:
    return moe_predict.predict_point(point, fit).tokens_per_s_per_device / point["tokens_per_s_per_device"] - 1


def main() -> None:
    share, launch_s = fit()
    print(f"GROUPED_GEMM_SHARE = {share}")
    print(f"LAUNCH_S = {launch_s * 1e6:g}e-6")
    print(f'DEVICE_SCALE["blackwell-ultra"] = {calibration.DEVICE_SCALE["blackwell-ultra"]}')
    rows = moe_predict.published_errors(None, (share, launch_s))
    print("| point | source, row | published tok/s/GPU | predicted | error | MFU (causal) | GiB | fits |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for point, got, error in rows:
        mark = " (fit)" if point["role"] == "fit" else ""
        source = point["source"]
        where = source.get("paper") or f"{source['repository']} {source['path']}@{source['commit'][:7]}"
        where += f", {source['row']}"
        print(
            f"| {point['name']}{mark} | {where} | {point['tokens_per_s_per_device']:g} | "
            f"{got.tokens_per_s_per_device:.0f} | {error:+.1%} | {got.mfu_causal:.1%} | "
            f"{got.memory_bytes / 2**30:.0f} | {'yes' if got.fits else 'NO'} |"
        )
    print(held_out_summary(rows))


if __name__ == "__main__":
    main()
