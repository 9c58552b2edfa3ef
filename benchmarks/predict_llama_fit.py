"""The default efficiencies of `dlperf predict --model llama`, fitted to the published points marked `fit` (one per
stack, precision and device class), then every held-out point's error. Prints the constants for
predict/calibration.py and the table for docs/scaling.md.

    python benchmarks/predict_llama_fit.py
"""

from __future__ import annotations

from dlperf.predict import calibration
from dlperf.workloads.llama import predict as llama_predict
from dlperf.workloads.llama.predict import held_out_summary

# (point, what it fits), in order: each fit takes the ones before it as given
FITS = (
    ("tt-h100-t1-fsdp", ("torchtitan", 0)),
    ("tt-h100-t1-compile", ("torchtitan-compile", 0)),
    ("tt-h100-t1-float8", ("torchtitan-compile", 1)),
    ("trainy-h200-32", ("hopper", "scale")),
    ("tt-a100-8b", ("A100", "scale")),
    ("nemo-llama2-7b", ("megatron", 1)),
)


def _set(target: tuple, value: float) -> None:
    name, which = target
    if which == "scale":
        calibration.DEVICE_SCALE[name] = value
        return
    eff = list(calibration.STACK_EFFICIENCY[name])
    eff[which] = value
    if name == "megatron":  # no bf16-only Megatron point: its bf16 figure keeps compile's bf16-to-fp8 ratio
        compiled = calibration.STACK_EFFICIENCY["torchtitan-compile"]
        eff[0] = value * compiled[0] / compiled[1]
    calibration.STACK_EFFICIENCY[name] = tuple(eff)
    if name == "torchtitan-compile" and which == 1:  # eager float8 keeps compile's fp8-to-bf16 ratio
        base = calibration.STACK_EFFICIENCY["torchtitan"]
        calibration.STACK_EFFICIENCY["torchtitan"] = (base[0], value * base[0] / eff[0])


def fit() -> None:
    points = {p["id"]: p for p in llama_predict.published_points()}
    for pid, target in FITS:
        low, high = 0.05, 2.0
        for _ in range(60):  # tokens/s grows with the efficiency: bisect
            mid = (low + high) / 2
            _set(target, mid)
            got = llama_predict.predict_point(points[pid]).tokens_per_s_per_device
            low, high = (mid, high) if got < points[pid]["tokens_per_s_per_device"] else (low, mid)
        _set(target, round((low + high) / 2, 4))


def _cited(source: str) -> str:
    """A GitHub source as [repo file@commit](url), a paper's as [arXiv id](url)."""
    if "arxiv.org/abs/" in source:
        return f"[arXiv {source.rsplit('/', 1)[-1]}]({source})"
    repo, _, rest = source.removeprefix("https://github.com/").partition("/blob/")
    commit, _, path = rest.partition("/")
    return f"[{repo.split('/')[1]} {path.rsplit('/', 1)[-1]}@{commit[:7]}]({source})"


def main() -> None:
    fit()
    print("STACK_EFFICIENCY =", calibration.STACK_EFFICIENCY)
    print("DEVICE_SCALE =", calibration.DEVICE_SCALE)
    rows = llama_predict.published_errors(None)
    print(
        "| point | source, row | devices | published tok/s/dev | predicted | error | predicted MFU | published GiB "
        "| predicted GiB |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for point, got, error in rows:
        devices = point["nodes"] * point["devices_per_node"]
        mark = " (fit)" if point["role"] == "fit" else ""
        where = _cited(point["source"])
        print(
            f"| {point['id']}{mark} | {where}, {point['row']} | {devices} | {point['tokens_per_s_per_device']:g} "
            f"| {got.tokens_per_s_per_device:.0f} | {error:+.1%} | {got.mfu:.1%} | "
            f"{point.get('published_memory_gib', '')} | {got.memory_bytes / 2**30:.1f} |"
        )
    print(held_out_summary(rows))


if __name__ == "__main__":
    main()
