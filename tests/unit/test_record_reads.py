"""The readers' mirror of the strict writer: outside `records/` and the log readers, no code reads a record field by
a string key (`x["throughput"]`, `x.get("mfu")`); it reads the loaded record's attribute (`records.load`), so a
misspelled field fails where it is read, as the strict writer fails where one is written.

The scan is by name: every `x["name"]` and `x.get("name", ...)` whose key is a field some record kind declares
(`records/schema.py`), in every module under src/dlperf but `records/` and `framework_logs/`. Mappings that are no
record but share a field's name (the published figures, a run's keys, the messages' codecs) and the writers that
build a record are listed below, each with its reason; a listed key that no longer occurs fails too, so the lists
only shrink.
`python tests/unit/test_record_reads.py` prints the count per module.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

from dlperf.records.schema import KINDS, declared_keys

SRC = Path(__file__).resolve().parents[2] / "src" / "dlperf"
SKIPPED = ("records/", "framework_logs/")  # the declaration and loader, and the readers of other frameworks' logs
FIELDS = frozenset().union(*(declared_keys(kind) for kind in KINDS))
MOST = 14  # fewer than this: 59 under #30, 13 once the parts were typed and the messages decoded (#40)

FIGURES = "published.json's figures (dlperf.references/1): their own keys"
RUN_KEYS = "a run's keys (flags, YAML, RunSpec.to_dict)"
FLAG = "a flag declaration's --help group (its metadata)"
PEAKS = "the measured peaks file's own schema key"
# Mappings that are no record but share a field's name: module -> (what the mapping is, the keys it reads).
NOT_RECORDS: dict[str, tuple[str, str]] = {
    "cli/declared_flags.py": (FLAG, "group"),
    "cli/live.py": ("the log's config event (the run's keys)", "world_size"),
    "cli/run_flags.py": (FLAG, "group"),
    "cli/references_cmd.py": (FIGURES, "accelerator framework model precision source"),
    "orchestration/sweep_state.py": ("sweep_options.json", "config"),
    "external/template.py": ("a --command template's placeholders", "batch_size precision repeat"),
    "engines/torch/peak.py": (PEAKS, "schema"),
    "instrument/startup/sitecustomize.py": ("a hooked training call's keyword arguments", "batch_size world_size"),
    "launch/agent.py": (RUN_KEYS, "engine"),
    "machine/env_diff.py": ("an environment's `nodes` (dlperf env)", "nodes"),
    "metrics/peaks.py": (PEAKS, "schema"),
    "references/__init__.py": (
        FIGURES + "; an accelerator's own `model`",
        "accelerator framework model precision schema source",
    ),
    "orchestration/maxbatch.py": (RUN_KEYS, "model"),
    "workloads/llama/predict.py": (
        RUN_KEYS + "; a published Llama run's point (workloads/llama/llama_published.json)",
        "accelerator devices_per_node micro_batch_size nodes tokens_per_s_per_device",
    ),
    "workloads/llama/predict_model.py": ("a predicted step's memory parts (bytes by name)", "parameters"),
    "workloads/moe/predict.py": (
        RUN_KEYS + "; a published MoE run's point (workloads/moe/moe_published.json)",
        "accelerator devices_per_node micro_batch_size nodes tokens_per_s_per_device",
    ),
    "reporting/published.py": (FIGURES, "accelerator framework model precision source"),
    "workloads/__init__.py": (RUN_KEYS, "command engine model"),
    "workloads/commbench/__init__.py": ("the commbench rank task's output", "backend"),
    "workloads/gpt/__init__.py": (RUN_KEYS, "case"),
    "workloads/gpt/cases.py": ("a regex match's named group", "group"),
}
WRITER = "a writer: fields of the record it is building"
# Reads of a record's fields by string key still left, each with why: what the count below (#40: under 14) counts.
RECORD_READS: dict[str, tuple[str, str]] = {
    "orchestration/evidence_fields.py": (
        WRITER + "; a window's figures, derived as a record's are",
        "flops_per_iteration_formula mfu mfu_peak_tflops tflops_per_device tokens_per_s",
    ),
    "orchestration/record.py": (
        WRITER + ": the figures its derived fields start from",
        "env flops_per_iteration_causal flops_per_iteration_formula global_batch_size ranks throughput",
    ),
    "reporting/sources.py": (
        "`max_batch`, which no run record declares: kept aside by the loader (`origin`), read only from records"
        " written by hand",
        "max_batch",
    ),
}


def string_key_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, key) of every `x["key"]` read and `x.get("key", ...)` whose key names a declared record field."""
    found = []
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            key = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
        if isinstance(key, str) and key in FIELDS:
            found.append((node.lineno, key))
    return found


def reads() -> dict[str, list[tuple[int, str]]]:
    """Module (relative to src/dlperf) -> its string-key reads of record fields, for every module scanned."""
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        module = path.relative_to(SRC).as_posix()
        if not module.startswith(SKIPPED) and (found := string_key_reads(ast.parse(path.read_text()))):
            out[module] = sorted(found)
    return out


def listed(table: dict[str, tuple[str, str]], module: str) -> list[str]:
    return table[module][1].split() if module in table else []


def record_reads(found: dict[str, list[tuple[int, str]]]) -> int:
    """The reads of a record's field by string key: those of RECORD_READS."""
    return sum(1 for m, hits in found.items() for _, key in hits if key in listed(RECORD_READS, m))


def test_no_record_field_is_read_by_string_key():
    found = reads()
    wrong = [
        f"{m}:{line} [{key!r}]"
        for m, hits in found.items()
        for line, key in hits
        if key not in listed(NOT_RECORDS, m) + listed(RECORD_READS, m)
    ]
    assert wrong == [], "read the loaded record's attribute (dlperf.records.load.as_record), not its key: " + ", ".join(
        wrong
    )
    stale = [
        f"{m} {key!r}"
        for table in (NOT_RECORDS, RECORD_READS)
        for m in table
        for key in listed(table, m)
        if key not in {k for _, k in found.get(m, [])}
    ]
    assert stale == [], "these are no longer read by string key: take them off the lists: " + ", ".join(stale)
    assert record_reads(found) < MOST


def test_the_scan_sees_both_forms():
    """The scan finds a subscript and a .get of a field, and neither a write, another key nor a variable key."""
    code = 'r["throughput"]; r.get("mfu", 0); r["cv"]; r["status"] = "ok"; r.get(key); d.get("nodes")'
    assert string_key_reads(ast.parse(code)) == [(1, "throughput"), (1, "mfu"), (1, "nodes")]


if __name__ == "__main__":
    found = reads()
    for module, n in Counter({module: len(hits) for module, hits in found.items()}).most_common():
        print(f"{n:4d}  {module}")
    every = sum(map(len, found.values()))
    print(f"{every:4d}  string keys naming a declared record field outside {', '.join(SKIPPED)}")
    print(f"{record_reads(found):4d}  of them reads of a record (RECORD_READS; the rest: NOT_RECORDS)")
    sys.exit(0)
