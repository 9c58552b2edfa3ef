"""Collective bandwidth: torch-free maths and records here, the rank-side measurement in `measure`."""

from dlperf.commbench.bandwidth import (
    OPS,
    AlphaBetaFit,
    Timing,
    algorithm_bandwidth,
    build_commbench_record,
    bus_bandwidth,
    bus_factor,
    fit_alpha_beta,
    fit_timings,
    read_fit,
)

__all__ = [
    "OPS",
    "AlphaBetaFit",
    "Timing",
    "algorithm_bandwidth",
    "build_commbench_record",
    "bus_bandwidth",
    "bus_factor",
    "fit_alpha_beta",
    "fit_timings",
    "read_fit",
]
