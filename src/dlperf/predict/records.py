"""Prediction inputs from records (read by the caller): the 1-device run and the links' fits."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from dlperf.errors import ConfigError, clip
from dlperf.metrics.bandwidth import read_fit
from dlperf.predict.model import DDP_BUCKET_BYTES, Link, SingleDeviceRun
from dlperf.records.load import RecordLike, as_record
from dlperf.records.schema import RunRecord

DEFAULT_BACKWARD_SHARE = 2 / 3  # backward costs about twice the forward's FLOPs


def run_from_record(
    record: RecordLike,
    gradient_bytes: int | None = None,
    backward_share: float = DEFAULT_BACKWARD_SHARE,
    bucket_bytes: int = DDP_BUCKET_BYTES,
    throughput: float | None = None,
) -> SingleDeviceRun:
    """A successful 1-device run record as prediction input; its `gradient_bytes` unless given, its throughput
    unless given (a report passes the median over repeats)."""
    record = as_record(record)
    if not isinstance(record, RunRecord) or record.status != "ok" or record.world_size != 1:
        raise ConfigError("dlperf predict needs a successful run on 1 device (1n1g): give that run's JSON record")
    gradient_bytes = gradient_bytes if gradient_bytes is not None else record.gradient_bytes
    if gradient_bytes is None:
        raise ConfigError("the run record has no gradient_bytes (written before dlperf counted them): --gradient-bytes")
    gradient_bytes = _number(gradient_bytes, "gradient_bytes", whole=True, positive=False)
    batch = _number(record.global_batch_size, "global_batch_size", whole=True)
    speed = _number(throughput if throughput is not None else record.throughput, "throughput")
    return SingleDeviceRun(batch / speed, batch, backward_share, gradient_bytes, bucket_bytes)


def _number(value: Any, name: str, whole: bool = False, positive: bool = True) -> Any:
    """A record's figure as the model needs it: a finite number (whole for counts), above 0 unless `positive` is
    False; a record edited or written by hand names the wrong field instead of crashing."""
    if not _usable(value, whole, positive):
        kind = "a whole number" if whole else "a finite number"
        raise ConfigError(
            f"{name} is {clip(repr(value), 80)}, not {kind} {'above' if positive else 'of at least'} 0: "
            "give the record of a successful 1n1g `dlperf run`"
        )
    return value


def _usable(value: Any, whole: bool, positive: bool) -> bool:
    if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return value > 0 or (not positive and value == 0)


def links_from_records(
    records: Sequence[RecordLike], inter_records: Sequence[RecordLike] = ()
) -> tuple[Link | None, Link | None]:
    """(intra-node, inter-node) links from commbench records' all-reduce fits (`_links_by_side`)."""
    intra, inter = _links_by_side(records, inter_records, "all_reduce")
    return intra.get("all_reduce"), inter.get("all_reduce")


def op_links_from_records(
    records: Sequence[RecordLike], inter_records: Sequence[RecordLike] = ()
) -> tuple[dict[str, Link], dict[str, Link]]:
    """(intra-node, inter-node) links per collective, from every fit the commbench records hold: a prediction
    times each collective on its own measured fit, not on the all-reduce's."""
    return _links_by_side(records, inter_records, None)


def _links_by_side(
    records: Sequence[RecordLike], inter_records: Sequence[RecordLike], op: str | None
) -> tuple[dict[str, Link], dict[str, Link]]:
    """(intra-node, inter-node) links by collective, from each record's `op` fit (None: all its fits): a record
    measured on one node is the intra-node link, one measured across nodes (one rank per node: the node's link) or
    given in `inter_records` the inter-node link. read_fit refuses any other kind than commbench, and a fit the
    record lacks (one without any: its all-reduce's)."""
    intra: dict[str, Link] = {}
    inter: dict[str, Link] = {}
    for given, forced in [(r, False) for r in records] + [(r, True) for r in inter_records]:
        record = as_record(given)
        ops = (op,) if op else tuple(getattr(record, "fits", None) or ("all_reduce",))
        links = {name: Link.from_fit(read_fit(record, name)) for name in ops}
        (inter if forced or _across_nodes(record.run) else intra).update(links)
    return intra, inter


def _across_nodes(run: RunRecord) -> bool:
    """Whether a commbench record measured the inter-node link: across nodes, one rank per node."""
    if (run.nodes or 1) <= 1:
        return False
    if (run.devices_per_node or 1) > 1:
        raise ConfigError(
            "a commbench record across nodes with several ranks per node mixes both links: measure the "
            "inter-node link with --devices-per-node 1"
        )
    return True
