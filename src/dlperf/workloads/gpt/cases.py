"""The published GPT report's cases by name, and the two name forms it uses.

Short name: `<group>_<dp>x<tp>x<pp>_<global batch>_<hidden>x<layers>`, e.g. `DP_8x1x1_16_1536x16`; the
heads and micro-batch size are not in it and come from the report's table (REPORT_CASES).
Log name: `pretrain_gpt_<N>n<G>d_dp<dp>_mp<tp>_pp<pp>_mbz<micro>_gbz<global>_s<seq>_l<layers>_h<hidden>_nh<heads>`,
which holds everything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields

from dlperf.errors import ConfigError
from dlperf.spec import RunSpec
from dlperf.workloads.gpt.config import GPTConfig

SHORT_RE = re.compile(
    r"^(?P<group>DP|MP|2D|DP_PP|MP_PP|2D_PP)_(?P<dp>\d+)x(?P<tp>\d+)x(?P<pp>\d+)_(?P<gbs>\d+)_(?P<h>\d+)x(?P<l>\d+)$"
)
LOG_RE = re.compile(
    r"^pretrain_gpt_(?P<nodes>\d+)n(?P<devices>\d+)[dg]_dp(?P<dp>\d+)_mp(?P<tp>\d+)_pp(?P<pp>\d+)_mbz(?P<mbz>\d+)"
    r"_gbz(?P<gbs>\d+)_s(?P<seq>\d+)_l(?P<l>\d+)_h(?P<h>\d+)_nh(?P<nh>\d+)$"
)


@dataclass(frozen=True)
class ReportCase:
    """One row of the report's case table (V100 16 GB servers of 8 devices)."""

    name: str
    nodes: int
    devices_per_node: int
    dp: int
    tp: int
    pp: int
    micro_batch_size: int
    global_batch_size: int
    hidden_size: int
    num_heads: int
    num_layers: int
    seq_length: int = 2048

    @property
    def group(self) -> str:
        """The report's table group: PP for every pipelined case, else the name's prefix."""
        return "PP" if self.pp > 1 else self.name.split("_")[0]

    def config_values(self) -> dict[str, int | str]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "name"} | {
            "case": self.name,
            "model": "gpt",
        }


def _case(name: str, nodes: int, devices: int, mbz: int, heads: int) -> ReportCase:
    m = SHORT_RE.match(name)
    assert m, name
    dp, tp, pp, gbs, h, layers = (int(m[key]) for key in ("dp", "tp", "pp", "gbs", "h", "l"))
    return ReportCase(name, nodes, devices, dp, tp, pp, mbz, gbs, h, heads, layers)


REPORT_CASES: dict[str, ReportCase] = {
    c.name: c
    for c in (
        _case("DP_1x1x1_2_1536x16", 1, 1, 2, 16),
        _case("DP_8x1x1_16_1536x16", 1, 8, 2, 16),
        _case("DP_16x1x1_32_1536x16", 2, 8, 2, 16),
        _case("DP_32x1x1_64_1536x16", 4, 8, 2, 16),
        _case("MP_1x1x1_8_768x12", 1, 1, 8, 12),
        _case("MP_1x8x1_16_1536x16", 1, 8, 16, 16),
        _case("MP_1x16x1_16_3072x16", 2, 8, 16, 32),
        _case("MP_1x32x1_16_3072x32", 4, 8, 16, 32),
        _case("2D_8x1x1_16_1536x16", 1, 8, 2, 16),
        _case("2D_1x8x1_16_1536x16", 1, 8, 16, 16),
        _case("2D_2x4x1_16_1536x16", 1, 8, 8, 16),
        _case("2D_4x2x1_16_1536x16", 1, 8, 4, 16),
        _case("2D_2x8x1_16_2304x24", 2, 8, 8, 24),
        _case("2D_4x8x1_32_2304x24", 4, 8, 8, 24),
        _case("DP_PP_8x1x4_512_1536x16", 4, 8, 2, 16),
        _case("MP_PP_1x8x4_512_2304x24", 4, 8, 16, 24),
        _case("2D_PP_2x4x4_512_2304x24", 4, 8, 8, 24),
        _case("2D_PP_2x8x2_512_2304x24", 4, 8, 8, 24),
    )
}


def case_values(name: str) -> dict[str, int | str]:
    """Run values (shared and GPT keys) for a report case name or log name; ConfigError for anything else."""
    name = name.strip()
    if name in REPORT_CASES:
        return REPORT_CASES[name].config_values()
    if m := LOG_RE.match(name):
        values = {k: int(m[g]) for k, g in (("nodes", "nodes"), ("devices_per_node", "devices"), ("dp", "dp"),
                  ("tp", "tp"), ("pp", "pp"), ("micro_batch_size", "mbz"), ("global_batch_size", "gbs"),
                  ("seq_length", "seq"), ("num_layers", "l"), ("hidden_size", "h"), ("num_heads", "nh"))}  # fmt: skip
        return {**values, "case": name, "model": "gpt"}
    if m := SHORT_RE.match(name):
        dp, tp, pp, gbs = (int(m[k]) for k in ("dp", "tp", "pp", "gbs"))
        return {"dp": dp, "tp": tp, "pp": pp, "global_batch_size": gbs, "hidden_size": int(m["h"]),
                "num_layers": int(m["l"]), "micro_batch_size": gbs // dp if pp == 1 else 1,
                "devices_per_node": dp * tp * pp, "nodes": 1, "case": name, "model": "gpt"}  # fmt: skip
    raise ConfigError(
        f"unknown GPT case {name!r}: use a report name such as DP_8x1x1_16_1536x16 (one of "
        f"{', '.join(REPORT_CASES)}), <group>_<dp>x<tp>x<pp>_<global batch>_<hidden>x<layers>, or a log name "
        f"such as pretrain_gpt_1n8d_dp8_mp1_pp1_mbz2_gbz16_s2048_l16_h1536_nh16"
    )


def name_prefix(spec: RunSpec, dp: int) -> str:
    """DP, MP, 2D, DP_PP, MP_PP or 2D_PP: a named case keeps its own prefix, else what the layout is.

    It starts the short name, the record's group and the file stem alike, so the console, the report and the
    file name spell a case one way; the report's table puts every `*_PP` prefix in its PP section.
    """
    config: GPTConfig = spec.workload
    if config.case and (m := SHORT_RE.match(config.case)):
        return m["group"]
    kinds = [k for k, n in (("DP", dp), ("MP", config.tp)) if n > 1]
    return ("2D" if len(kinds) == 2 else (kinds or ["DP"])[0]) + ("_PP" if config.pp > 1 else "")


def short_name(spec: RunSpec, dp: int, global_batch: int) -> str:
    """The report's short name of this run, e.g. 2D_4x2x1_16_1536x16 (a named case keeps its own prefix)."""
    config: GPTConfig = spec.workload
    prefix = name_prefix(spec, dp)
    return f"{prefix}_{dp}x{config.tp}x{config.pp}_{global_batch}_{config.hidden_size}x{config.num_layers}"


def log_name(spec: RunSpec, dp: int, global_batch: int) -> str:
    """The report's log name form of this run."""
    config: GPTConfig = spec.workload
    return (
        f"pretrain_gpt_{spec.nodes}n{spec.devices_per_node}d_dp{dp}_mp{config.tp}_pp{config.pp}"
        f"_mbz{config.micro_batch_size}_gbz{global_batch}_s{config.seq_length}_l{config.num_layers}"
        f"_h{config.hidden_size}_nh{config.num_heads}"
    )
