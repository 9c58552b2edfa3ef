"""Where the scaling went: each multi-device case's loss against the ideal (its devices x the 1-device figure), in
measured parts: summary.json's `scaling_loss`, report.md's section, the waterfall plots.

The 1-device figure is the group's 1n1g (a GPT layouts case: the 1-device run of the same work per replica). With X1
its median throughput and XN the case's, T1 = g1/X1 and TN = gN/XN their step times and the same batch per device
(gN = N·g1), the loss N·X1 - XN = N·g1·(TN - T1)/(T1·TN) is linear in the step's extra time TN - T1: a part that
adds d seconds to the step costs d·XN/T1 samples/s, so parts whose times add up to TN - T1 add up to the loss. The
parts, each the median over the case's repeats (`step_phases`, metrics/step_phases.py) less the same phase of the
1-device run:

- exposed communication: the slowest rank's time in collectives (communication no compute hid), less the 1-device
  step's host time at the same points;
- straggler wait: the fastest rank's wait in the collectives for the slowest;
- data-loader stall: the step's wait for its batch (device time on a GPU: only where the device ran dry);
- compute slowdown: forward and backward taking longer per device than on one device (cores, memory or links shared
  with the other ranks, the overlapped all-reduce's kernels beside them);
- host overhead: the rest of the step after backward (optimizer, the step's own host and launch work);
- unexplained: the loss less all of the above (window edges, barriers, run-to-run noise), never forced to zero.

Cases without step phases (compiled steps, TP/PP/FSDP layouts, JAX, other frameworks' logs) keep their whole loss
unexplained, with the reason.

Measured by ablation, where the case's runs carry one (`--ablate sync`: the same ranks, the same steps, DDP's
no_sync() every step, in windows alternating with synchronised ones; the record's `ablation`), the split does not
assume that overlapped communication is free: with TA = TN x the median over repeats of the ablation's `ratio`
(the unsynchronised windows' step over the paired synchronised windows', so a load that drifts cancels),
- machine sharing = TA - T1: compute slower on N ranks than on one with no communication at all (cores, memory
  bandwidth, caches, power shared by the ranks; a straggler's pace too, as nothing waits for it in a collective);
- communication = TN - TA, split where the step phases are timed into exposed communication (as above, at most the
  whole) and overlapped communication (the rest: the all-reduce running beside backward yet slowing it, as gloo's
  all-reduce on the cores that train, or NCCL's kernels taking SMs); without phases it stays one part;
- unexplained = the rest: none by construction, both step times being measured (their noise is in the parts).
The method is named in summary.json's `scaling_loss` (`method`).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from dlperf.escape import markdown as md
from dlperf.records.schema import RunRecord
from dlperf.reporting import markdown
from dlperf.reporting.aggregate import BASELINE_CASE, CaseSummary, GroupKey, like_devices, median_of

# part -> (its label, the step_phases figure of the case, the 1n1g phases it is measured against)
PARTS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "exposed_communication": ("exposed communication", ("exposed_ms",), ("sync_in", "sync_out")),
    "straggler_wait": ("straggler wait", ("straggler_wait_ms",), ()),
    "data_stall": ("data-loader stall", ("phases_ms", "data"), ("data",)),
    "compute_slowdown": ("compute slowdown", ("phases_ms", "compute"), ("compute",)),
    "host_overhead": ("host overhead", ("phases_ms", "update"), ("update",)),
}
UNEXPLAINED = "unexplained"
# the parts of a split measured by ablation (`--ablate sync`), in the order they are drawn
ABLATION_PARTS = {
    "exposed_communication": "exposed communication",
    "overlapped_communication": "overlapped communication (slowing compute)",
    "communication": "communication (exposed or overlapped)",
    "machine_sharing": "machine sharing, stragglers (no communication)",
}
LABELS = {**{name: label for name, (label, _, _) in PARTS.items()}, **ABLATION_PARTS, UNEXPLAINED: UNEXPLAINED}
PHASES_METHOD = "step phases (collective, data, compute and update times against the 1-device run)"
# a split no ablation measured: the phases see only what the step waited for, so communication that ran beside
# compute and slowed it is counted as compute (a 1n2g split 17 % to communication that side-by-side runs put at 103 %)
NOT_MEASURED = (
    "not measured: no ablation ran (`ablate: sync`), so the parts are the step phases' attribution, which counts "
    "communication that slowed compute as compute"
)
ABLATION_METHOD = "ablation: the same ranks without gradient synchronisation (--ablate sync), and the step phases"
NO_PHASES = (
    "not split: the runs carry no step phases (only eager torch runs of one whole model replica per rank time them:"
    " not compiled steps, TP/PP/FSDP layouts, JAX or other frameworks' logs)"
)


@dataclass(frozen=True)
class ScalingLoss:
    """One case's loss against its ideal, in samples/s, and its parts (samples/s and milliseconds per step)."""

    case: str
    devices: int
    ideal: float
    measured: float
    one_device_step_ms: float
    step_ms: float
    components: dict[str, float] = field(default_factory=dict)
    components_ms: dict[str, float] = field(default_factory=dict)
    note: str | None = None
    predicted_exposed_ms: float | None = None  # `dlperf predict`'s model from commbench records, where given
    method: str = PHASES_METHOD
    # part -> (low, high) share of the loss, the 95 % interval the ablation's window pairs give (ablation only)
    share_intervals: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def communication_share(self) -> float | None:
        """The share of the loss its communication parts take (exposed, overlapped), where measured."""
        names = ("exposed_communication", "overlapped_communication", "communication")
        if self.measured_loss <= 0 or not any(n in self.components for n in names):
            return None
        return sum(self.components.get(n, 0.0) for n in names) / self.measured_loss

    @property
    def measured_loss(self) -> float:
        return self.ideal - self.measured

    @property
    def split_measured(self) -> bool:
        """Whether an ablation measured the split (else it is the step phases' attribution: `NOT_MEASURED`)."""
        return self.method == ABLATION_METHOD

    def as_summary(self) -> dict[str, Any]:
        """summary.json's `scaling_loss` of the case."""
        out: dict[str, Any] = {
            "unit": "samples/s",
            "ideal": round(self.ideal, 2),
            "measured": round(self.measured, 2),
            "measured_loss": round(self.measured_loss, 2),
            "components": {k: round(v, 2) for k, v in self.components.items()},
            "components_ms": {k: round(v, 3) for k, v in self.components_ms.items()},
            "step_ms": {"one_device": round(self.one_device_step_ms, 3), "this_case": round(self.step_ms, 3)},
            "method": self.method,
            "split_measured": self.split_measured,
        }
        if self.share_intervals:
            out["share_intervals"] = {k: [round(lo, 4), round(hi, 4)] for k, (lo, hi) in self.share_intervals.items()}
        if self.predicted_exposed_ms is not None:
            out["predicted_exposed_communication_ms"] = round(self.predicted_exposed_ms, 3)
        if self.note:
            out["note"] = self.note
        return out


def _phase(records: list[RunRecord], keys: tuple[str, ...]) -> float | None:
    """Median over repeats of a `step_phases` figure (`keys` into it), in milliseconds."""
    return median_of(_inside(r.step_phases, keys) for r in records)


def _inside(value: Any, keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = getattr(value, key, None)
    return value


def _baseline_ms(records: list[RunRecord], phases: tuple[str, ...]) -> float | None:
    values = [_phase(records, ("phases_ms", name)) for name in phases]
    return None if None in values else sum(values)


def _global_batch(case: CaseSummary) -> float:
    """Samples per step: the records' global batch, else (a log that does not say) the batch per device x devices."""
    return case.median(lambda r: r.global_batch_size) or case.batch_size * case.world_size


def _parts_ms(case: CaseSummary, base: CaseSummary) -> dict[str, float] | None:
    """Each part's extra milliseconds per step over the 1n1g run, or None where either lacks its phases."""
    parts = {}
    for name, (_, keys, base_phases) in PARTS.items():
        value, against = _phase(case.records, keys), _baseline_ms(base.records, base_phases)
        if value is None or against is None:
            return None
        parts[name] = value - against
    return parts


def ablation_parts_ms(
    one_device_ms: float, step_ms: float, ablated_ms: float, exposed_ms: float | None
) -> dict[str, float]:
    """The split by ablation (module docstring), in ms per step: machine sharing = ablated - one device;
    communication = step - ablated, as exposed (the phases' figure, at most the whole, at least 0) and overlapped
    (the rest), or one part where the phases are not timed."""
    communication = step_ms - ablated_ms
    if exposed_ms is None:
        parts = {"communication": communication}
    else:
        exposed = min(max(exposed_ms, 0.0), max(communication, 0.0))
        parts = {"exposed_communication": exposed, "overlapped_communication": communication - exposed}
    return {**parts, "machine_sharing": ablated_ms - one_device_ms}


def ablation_contradicts(ratio: float) -> str:
    """Why an ablation whose unsynchronised steps were no faster is not used."""
    return (
        f"its ablation (--ablate sync) is not used: the steps without gradient synchronisation took {ratio:.2f} x "
        "the synchronised ones beside them, no faster, so it did not isolate communication (a noisy machine: rerun "
        "on a quiet one, or with more --iters)"
    )


def ablation_ratio(case: CaseSummary) -> float | None:
    """The median over the case's repeats of its ablation's step time without gradient synchronisation over the
    paired synchronised windows' (`--ablate sync`), where measured."""
    return median_of(r.ablation.ratio for r in case.records if r.ablation)


def pair_ratios(case: CaseSummary) -> list[float]:
    """Each ablation window pair's step without synchronisation over the synchronised one beside it (the synced
    window's throughput over the unsynchronised one's), over the case's repeats."""
    pairs = []
    for record in case.records:
        ablation = record.ablation
        if ablation is None or not ablation.window_throughputs or not ablation.synced_window_throughputs:
            continue
        pairs += [s / u for u, s in zip(ablation.window_throughputs, ablation.synced_window_throughputs) if u > 0 < s]
    return pairs


def ratio_interval(ratios: list[float]) -> tuple[float, float] | None:
    """The 95 % interval of the mean pair ratio (Student's t over the pairs), None under two pairs. The pairs
    alternate which mode goes first, so a machine that drifts widens the interval rather than moving the ratio."""
    if len(ratios) < 2:
        return None
    from scipy.special import stdtrit  # Student's t quantile (as verdict.py)

    half = float(stdtrit(len(ratios) - 1, 0.975)) * statistics.stdev(ratios) / math.sqrt(len(ratios))
    mean = statistics.fmean(ratios)
    return mean - half, mean + half


def _share_intervals(
    interval: tuple[float, float] | None, t1: float, tn: float, per_ms: float, loss: float
) -> dict[str, tuple[float, float]]:
    """The communication and machine-sharing shares of the loss at the pair ratio's interval ends (a higher ratio:
    less communication, more sharing)."""
    if interval is None or loss <= 0:
        return {}
    low, high = interval
    comm = sorted(tn * (1 - r) * per_ms / loss for r in (low, high))
    sharing = sorted((tn * r - t1) * per_ms / loss for r in (low, high))
    return {"communication": (comm[0], comm[1]), "machine_sharing": (sharing[0], sharing[1])}


def scaling_loss(case: CaseSummary, base: CaseSummary, predicted_exposed_ms: float | None = None) -> ScalingLoss:
    """The case's loss against `base` (its group's 1n1g), both with successful repeats."""
    x1, xn = base.stats["median"], case.stats["median"]
    g1, gn = _global_batch(base), _global_batch(case)
    t1, tn = g1 / x1 * 1000, gn / xn * 1000  # ms per step
    extra_ms = tn - t1
    parts = _parts_ms(case, base)
    note = None if parts is not None else NO_PHASES
    method = PHASES_METHOD
    if (ratio := ablation_ratio(case)) is not None and ratio >= 1:
        # the steps without communication were not faster: the ablation measured noise (or a machine that runs
        # two ranks slower while neither waits), not communication; the phases' split stands, and says why
        method = f"{PHASES_METHOD}; {ablation_contradicts(ratio)}"
    elif ratio is not None:
        exposed = parts.get("exposed_communication") if parts is not None else None
        parts, note, method = ablation_parts_ms(t1, tn, tn * ratio, exposed), None, ABLATION_METHOD
    if gn != g1 * case.world_size:
        parts, note = None, f"not split: its global batch {gn:g} is not {case.world_size} x the 1-device run's {g1:g}"
    parts_ms = {**(parts or {}), UNEXPLAINED: extra_ms - sum((parts or {}).values())}
    per_ms = xn / t1  # samples/s lost per millisecond added to the step
    measured = method == ABLATION_METHOD and parts is not None
    intervals = _share_intervals(ratio_interval(pair_ratios(case)), t1, tn, per_ms, case.world_size * x1 - xn)
    return ScalingLoss(
        case=case.case,
        devices=case.world_size,
        ideal=case.world_size * x1,
        measured=xn,
        one_device_step_ms=t1,
        step_ms=tn,
        components={name: ms * per_ms for name, ms in parts_ms.items()},
        components_ms=parts_ms,
        note=note,
        predicted_exposed_ms=predicted_exposed_ms,
        method=method,
        share_intervals=intervals if measured else {},
    )


# A run's keys that place its work on devices (or time it), not the work itself: a GPT case's 1-device run may differ
# in these and nothing else.
PLACEMENT_KEYS = frozenset(
    ("nodes", "devices_per_node", "dp", "tp", "pp", "global_batch_size", "dp_mode", "pp_schedule", "case")
    + ("warmup_iters", "max_warmup_iters", "iters", "print_every", "timeout", "seed", "straggler_pct")
    + (
        "cpu_threads",
        "instrument",
        "ablate",
    )  # the threads asked for: the ranks' own count is what the speedup compares
)


def _work(case: CaseSummary) -> str | None:
    """What a layouts-table case computes per data-parallel replica (its config less placement and timing keys, the
    replica's batch, precision); None for records without a config (another framework's log) or that disagree."""
    keys = set()
    for record in case.records:
        if not record.config:
            return None
        work = {k: v for k, v in record.config.items() if k not in PLACEMENT_KEYS}
        keys.add(repr(sorted({**work, "_batch": record.batch_size, "_precision": case.precision}.items())))
    return keys.pop() if len(keys) == 1 else None


def baselines(summary: dict[GroupKey, list[CaseSummary]]) -> dict[GroupKey, CaseSummary]:
    """Each group's 1-device case: a scaling table's own 1n1g; for a GPT layouts case (each its own group), the
    measured 1-device layouts case of the same work per replica."""
    single = _single_device_layouts(summary)
    found = {key: _baseline(cases, single) for key, cases in summary.items()}
    return {key: base for key, base in found.items() if base is not None}


def _single_device_layouts(summary: dict[GroupKey, list[CaseSummary]]) -> dict[tuple[str, str], CaseSummary]:
    """(model, work per replica) -> the first measured 1-device layouts case of it."""
    single: dict[tuple[str, str], CaseSummary] = {}
    for case in (case for cases in summary.values() for case in cases):
        if case.table == "layouts" and case.world_size == 1 and case.speeds and (work := _work(case)):
            single.setdefault((case.model, work), case)
    return single


def _baseline(cases: list[CaseSummary], single: dict[tuple[str, str], CaseSummary]) -> CaseSummary | None:
    if cases[0].table == "scaling":
        return next((c for c in cases if c.case == BASELINE_CASE and c.speeds), None)
    return next((single.get((c.model, work)) for c in cases if (work := _work(c))), None)


def scaling_losses(
    summary: dict[GroupKey, list[CaseSummary]], predicted_ms: dict[tuple[str, str, str], float] | None = None
) -> dict[GroupKey, list[ScalingLoss]]:
    """Every measured multi-device case whose group has a measured 1-device run (`baselines`); `predicted_ms` gives
    `dlperf predict`'s exposed communication per (model, group, case) where commbench records were given."""
    out: dict[GroupKey, list[ScalingLoss]] = {}
    for key, base in baselines(summary).items():
        losses = [
            scaling_loss(c, base, (predicted_ms or {}).get((*key, c.case)))
            for c in summary[key]
            if c.world_size > 1 and c.speeds and like_devices(c, base)  # unlike CPU devices: no speedup to split
        ]
        if losses:
            out[key] = losses
    return out


def _cell(loss: ScalingLoss, name: str) -> str:
    if name not in loss.components:
        return ""
    value, total = loss.components[name], loss.measured_loss
    share = f" ({value / total:.0%}{_interval(loss, name)})" if total > 0 else ""
    return f"{value:.2f}{share}"


def _interval(loss: ScalingLoss, name: str) -> str:
    """`, 95 %: lo-hi %` after a share the ablation's window pairs bound; "" for the others."""
    found = loss.share_intervals.get(name)
    return "" if found is None else f", 95 %: {found[0]:.0%}-{found[1]:.0%}"


def measured_groups(losses: dict[GroupKey, list[ScalingLoss]]) -> dict[GroupKey, list[ScalingLoss]]:
    """The groups with a case split into measured parts: the ones worth a table and a plot."""
    return {key: group for key, group in losses.items() if any(loss.note is None for loss in group)}


WATERFALL_INTRO = (
    "Ideal = devices x the 1-device median (the group's 1n1g; for GPT the 1-device run of the same work); each "
    "part is the case's measured extra time per step over that run (median over repeats, `step_phases`), in "
    "samples/s: a part adding d ms to the step costs d x measured / the 1-device step time. Unexplained is the "
    "loss less the measured parts, never forced to zero. Cases run with `--ablate sync` are split by that "
    "ablation: machine sharing = the step without gradient synchronisation less the 1-device step; "
    "communication = the step less the one without, exposed (step phases) and overlapped (the rest: "
    "communication that slows compute), each share with the 95 % interval its window pairs give; a split without "
    "that ablation is marked not measured (docs/scaling.md)."
)
PREDICTED_HEADER = ["predicted exposed comm (ms/step)", "measured exposed comm (ms/step)"]


def waterfall_lines(losses: dict[GroupKey, list[ScalingLoss]]) -> list[str]:
    """report.md's section "Where the scaling went": per group with measured parts, each case's ideal, measured, loss
    and its parts in samples/s (share of the loss), and the predicted exposed communication beside the measured
    where given; the groups without measured parts named in one line."""
    if not losses:
        return []
    measured = measured_groups(losses)
    with_predicted = any(loss.predicted_exposed_ms is not None for group in measured.values() for loss in group)
    lines = ["## Where the scaling went", "", WATERFALL_INTRO, ""]
    for (model, group), group_losses in measured.items():
        lines += [f"### {md(model)} {md(group)}", "", *_loss_table(group_losses, with_predicted), ""]
        notes = [note for loss in group_losses if (note := _loss_note(loss))]
        lines += notes + [""] if notes else []
    return lines + _unsplit_lines([key for key in losses if key not in measured])


def _unsplit_lines(groups: list[GroupKey]) -> list[str]:
    """One line naming the groups without measured parts, where there are any."""
    if not groups:
        return []
    names = ", ".join(f"{model} {group}" for model, group in groups)
    return [f"Losses {NO_PHASES}: {md(names)} (their `scaling_loss` in summary.json).", ""]


def _loss_table(losses: list[ScalingLoss], with_predicted: bool) -> list[str]:
    """One group's cases: ideal, measured, loss, the parts any case has, and the predicted exposed communication
    beside the measured."""
    names = [n for n in LABELS if any(n in loss.components for loss in losses)]
    header = ["case", "devices", "ideal", "measured", "measured loss", *(LABELS[n] for n in names)]
    rows = []
    for loss in losses:
        row = [loss.case, loss.devices, f"{loss.ideal:.2f}", f"{loss.measured:.2f}", f"{loss.measured_loss:.2f}"]
        row += [_cell(loss, name) for name in names]
        predicted = [_ms(loss.predicted_exposed_ms), _ms(loss.components_ms.get("exposed_communication"))]
        rows.append(row + predicted if with_predicted else row)
    header += PREDICTED_HEADER if with_predicted else []
    return markdown.table(header, rows, "l" + "r" * (len(header) - 1))


def _loss_note(loss: ScalingLoss) -> str | None:
    """A case's footnote: why it has no measured parts, or how it was split."""
    if loss.note:
        return f"- {md(loss.case)}: {md(loss.note)}"
    if loss.method.startswith(f"{PHASES_METHOD}; "):
        return f"- {md(loss.case)}: {md(NOT_MEASURED)}; {md(loss.method.split('; ', 1)[1])}"
    if loss.method == ABLATION_METHOD:
        share = loss.communication_share
        share_text = (
            "" if share is None else f", communication {share:.0%}{_interval(loss, 'communication')} of the loss"
        )
        return f"- {md(loss.case)}: split by {md(loss.method)}{share_text}"
    return f"- {md(loss.case)}: {md(NOT_MEASURED)}"


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"
