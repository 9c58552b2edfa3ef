"""The instrumentation hook's side files of one run made its one stream. Each process the command starts writes
its own file, `<run>.steps.<host>.<pid>` (instrument/startup/sitecustomize.py), each update with the rank the
process had then (torch.distributed's once a process group exists) and the samples and real tokens that rank
counted. The run's stream, `<run>.steps`, is rank 0's updates, each with what every rank counted at that update
summed: the global samples of the step. Two processes' steps are never merged into one stream: where several
processes stamped the same rank (no process group told them apart), the one with most steps is that rank's and
the record says so.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from dlperf.errors import DataError

ROW = re.compile(r"^(\d+) (\d+\.\d+) (\d+|-)(?: (\d+) (\d+|-))?$")


@dataclass
class Process:
    """One process's side file."""

    name: str
    rank: int  # the rank of its last update: a process group exists by then, where there is one
    times: dict[int, float]
    samples: dict[int, int | None]  # None: nothing counted
    tokens: dict[int, int | None]
    marks: list[str]
    notes: list[str]


@dataclass(frozen=True)
class Stream:
    """The run's stream and what merging found."""

    text: str  # `<step> <time> <global samples|-> 0 <global tokens|->` per update, rank 0's marks
    times: dict[int, float]  # per step: rank 0's stamp
    samples: dict[int, int | None]  # per step: the global samples counted (None: not counted)
    tokens: dict[int, int | None]
    notes: tuple[str, ...]


def _number(text: str | None) -> int | None:
    return None if text in (None, "-") else int(text)


def read_process(path: Path) -> Process | None:
    """A side file's updates, marks and the hook's own notes; None where it holds no update."""
    process = Process(path.name, 0, {}, {}, {}, [], [])
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if m := ROW.match(line):
                step = int(m[1])
                process.times[step] = float(m[2])
                process.samples[step], process.tokens[step] = _number(m[3]), _number(m[5])
                process.rank = int(m[4] or 0)
            elif line.startswith("# "):
                process.notes.append(line[2:])
            elif line:
                process.marks.append(line)
    return process if process.times else None


def merge(prefix: Path, world_size: int, per_node: int | None = None) -> Stream | None:
    """The run's stream from the side files `<prefix>.*`; None where no process stamped an update. `per_node`:
    the processes the layout puts on this node, whose files all lie here; fewer ranks stamped here is a run
    that did not start its layout (a launcher that started one process where two were asked), refused."""
    processes = [p for path in sorted(prefix.parent.glob(f"{prefix.name}.*")) if (p := read_process(path))]
    if not processes:
        return None
    ranks, notes = _ranks(processes)
    if per_node is not None and len(ranks) < per_node:
        raise DataError(
            f"the run contradicts its layout: {len(ranks)} process(es) stepped on this node (dlperf's hook, rank(s) "
            f"{', '.join(map(str, sorted(ranks)))}) where --devices-per-node is {per_node}: make the command start "
            "that many (`accelerate launch --cpu` starts one whatever --num_processes says; torchrun "
            "--nproc-per-node starts them), or give --devices-per-node the count it starts"
        )
    notes += [f"the hook noted: {n}" for n in dict.fromkeys(n for p in processes for n in p.notes)]
    notes += _coverage(ranks, world_size)
    lead = ranks.get(0) or ranks[min(ranks)]
    samples = _global(lead, ranks, world_size, "samples", notes)
    tokens = _global(lead, ranks, world_size, "tokens", notes)
    return Stream(_stream_text(lead, samples, tokens), dict(lead.times), samples, tokens, tuple(notes))


def _coverage(ranks: dict[int, Process], world_size: int) -> list[str]:
    """What the side files found leave out: rank 0, or some ranks (their counts are scaled)."""
    notes = []
    if 0 not in ranks:
        notes.append(f"no process stamped rank 0: rank {min(ranks)}'s updates are the run's")
    if len(ranks) < world_size:
        notes.append(
            f"side files of {len(ranks)} of the {world_size} ranks found (each node writes its own beside its log): "
            f"their counts x {world_size}/{len(ranks)}"
        )
    return notes


def _stream_text(lead: Process, samples: dict[int, int | None], tokens: dict[int, int | None]) -> str:
    """The stream's file: the lead's marks, then `<step> <time> <global samples|-> 0 <global tokens|->` rows. Where
    the run counted some updates, one it counted nothing for is 0, never the declared batch (`-`, which only a run
    that counted nothing gets): a loader that fetches ahead counted its batch at the update before."""
    uncounted = "0" if any(n is not None for n in samples.values()) else "-"
    rows = [f"{s} {t:.6f} {samples[s] or uncounted} 0 {tokens[s] or '-'}" for s, t in lead.times.items()]
    return "\n".join([*lead.marks, *rows]) + "\n"


def _ranks(processes: list[Process]) -> tuple[dict[int, Process], list[str]]:
    """Each rank's process (the one with most steps where several stamped it), and a note for each such rank."""
    notes: list[str] = []
    ranks: dict[int, Process] = {}
    for rank in sorted({p.rank for p in processes}):
        claim = sorted((p for p in processes if p.rank == rank), key=lambda p: len(p.times), reverse=True)
        ranks[rank] = claim[0]
        if len(claim) > 1:
            notes.append(
                f"{len(claim)} processes stamped updates as rank {rank} (no process group told them apart): "
                f"{claim[0].name}'s {len(claim[0].times)} were read, never merged with "
                f"{', '.join(f'{p.name} ({len(p.times)})' for p in claim[1:])}"
            )
    return ranks, notes


def _global(lead: Process, ranks: dict[int, Process], world_size: int, what: str, notes: list[str]) -> dict:
    """Per step of the lead: the sum over ranks of what each counted (None where the lead counted nothing); ranks
    without the step (a stop rule's SIGTERM cut their last half second) scaled from those with it."""
    out: dict[int, int | None] = {}
    scaled = 0
    for step in lead.times:
        counts = [getattr(p, what).get(step) for p in ranks.values() if step in p.times]
        out[step] = _step_total(getattr(lead, what)[step], counts, max(world_size, len(ranks)))
        scaled += out[step] is not None and len(counts) < len(ranks)
    if scaled and what == "samples":
        notes.append(f"{scaled} updates of rank 0 are missing on another rank (cut by a stop rule): scaled")
    return out


def _step_total(lead_count: int | None, counts: list[int | None], ranks: int) -> int | None:
    """One step's count over `ranks` ranks from the counts of those that have the step (None: one counted
    nothing)."""
    if lead_count is None or None in counts:
        return None
    return round(sum(c for c in counts if c is not None) * ranks / len(counts))


def counted_tokens_per_s(stream: Stream, kept: tuple[int, int]) -> float | None:
    """The real tokens of the kept updates over their time (from the update before the first), where every one
    of them was counted; None otherwise."""
    first, last = kept
    steps = range(first, last + 1)
    if first - 1 not in stream.times or any(stream.tokens.get(s) is None for s in steps):
        return None
    return sum(stream.tokens[s] or 0 for s in steps) / (stream.times[last] - stream.times[first - 1])


def write_stream(prefix: Path, stream: Stream) -> None:
    """`<prefix>` holds the run's stream (written whole, then renamed into place)."""
    part = prefix.with_name(f".{prefix.name}.part")  # not one of the processes' `<prefix>.*`
    part.write_text(stream.text)
    os.replace(part, prefix)
