"""Where a table's runs were measured, in one line for its plot's subtitle and report.md: the devices, their counts,
the hosts (or the nodes, where the records name no host: another framework's logs) and the frameworks."""

from __future__ import annotations

from dlperf.records.schema import RunRecord
from dlperf.wording import count


def device_name(record: RunRecord) -> str | None:
    """The first rank's device name, else the accelerator the record names (a framework log's device lines), else the
    record's device type; None where nothing says."""
    name = (record.ranks[0].device if record.ranks else None) or (record.accelerator and record.accelerator.name)
    name = name or record.device_type
    return str(name) if name else None


def hosts(record: RunRecord) -> list[str]:
    """The hosts a record ran on, else the host its environment names; none for a log that names none."""
    return [h for h in record.hosts or [(record.env or {}).get("host")] if h]


def where_measured(records: list[RunRecord]) -> str:
    """`NVIDIA H100 80GB HBM3, 1-8 devices, host gpu01`; `Tesla V100-SXM2-16GB, 1-16 devices, 1-2 nodes (hosts not
    recorded)` for logs; `device not recorded` where no record names its device."""
    devices = sorted({name for r in records if (name := device_name(r))})
    return f"{' / '.join(devices) or 'device not recorded'}, {_device_span(records)}, {_hosts_text(records)}"


def _device_span(records: list[RunRecord]) -> str:
    """`1 device`, `8 devices`, `1-8 devices`."""
    counts = sorted({int(r.world_size or 0) for r in records})
    if len(counts) > 1:
        return f"{counts[0]}-{counts[-1]} devices"
    return f"{counts[0]} device{'' if counts[0] == 1 else 's'}"


def _hosts_text(records: list[RunRecord]) -> str:
    """`host gpu01`, `3 hosts (a, b, c)`, the first three named; the nodes where no record names a host."""
    known = sorted({h for r in records for h in hosts(r)})
    if len(known) == 1:
        return f"host {known[0]}"
    if known:
        return f"{len(known)} hosts ({', '.join(known[:3])}{'...' if len(known) > 3 else ''})"
    nodes = sorted({int(r.nodes or 1) for r in records})
    spread = count(nodes[0], "node") if len(nodes) == 1 else f"{nodes[0]}-{nodes[-1]} nodes"
    return f"{spread} (hosts not recorded)"


def frameworks(records: list[RunRecord]) -> str | None:
    """The frameworks the records name (`torch 2.9.1`, `TF2 Keras`), or None."""
    return ", ".join(sorted({str(r.framework) for r in records if r.framework})) or None
