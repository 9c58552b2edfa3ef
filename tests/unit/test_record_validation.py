"""Records read by report, compare and history are checked: a bad one is skipped and named, never fatal."""

from __future__ import annotations

import json
import sqlite3

import pytest
from conftest import run_cli
from report_records import record

from dlperf.errors import ResultsError
from dlperf.records.load import find_records
from dlperf.records.store import write_json_atomic
from dlperf.reporting.history import add_records

BAD = {
    "truncated": '{"schema": "dlperf.run/2", "mod',
    "empty": "",
    "future-schema": json.dumps({**record("1n1g", 9, 500.0), "schema": "dlperf.run/9"}),
    "nan": json.dumps(record("1n1g", 9, float("nan"))),
    "world-size-0": json.dumps(record("1n1g", 9, 500.0, world_size=0)),
    "case-5": json.dumps({**record("1n1g", 9, 500.0), "case": 5}),
    "throughput-fast": json.dumps(record("1n1g", 9, "fast")),
    "negative": json.dumps(record("1n1g", 9, -300.0)),
    "status-odd": json.dumps(record("1n1g", 9, 500.0, status="great")),
    "failure-text": json.dumps(record("1n1g", 9, None, failure="rank 1 died")),
    "env-text": json.dumps(record("1n1g", 9, 500.0, env="linux")),
    "memory-text": json.dumps(record("1n1g", 9, 500.0, peak_memory_mib="lots")),
    "ranks-dict": json.dumps(record("1n1g", 9, 500.0, ranks={"0": "h1"})),
    "hosts-number": json.dumps(record("1n1g", 9, 500.0, hosts=7)),
    "machine-load-text": json.dumps(record("1n1g", 9, 500.0, machine_load="busy")),
    "stragglers-list": json.dumps(record("1n1g", 9, 500.0, stragglers=[1, 2])),
    "gpt1-parallel": json.dumps(
        {**record("1n1g", 9, 500.0), "schema": "dlperf.run/1", "model": "gpt", "parallel": {"dp": "two"}}
    ),
    "gpt1-no-global-batch": json.dumps(
        {**record("1n1g", 9, 500.0), "schema": "dlperf.run/1", "model": "gpt", "parallel": {"dp": 2}}
    ),
    "no-schema": json.dumps({k: v for k, v in record("1n1g", 9, 500.0).items() if k != "schema"}),
    "deep": '{"schema": "dlperf.run/2", "x": ' + "[" * 100000 + "]" * 100000 + "}",
    "tiny-throughput": json.dumps(record("1n1g", 9, 1e-300)),
    "huge-throughput": json.dumps(record("1n1g", 9, 1e300)),
    "started-text": json.dumps(record("1n1g", 9, 500.0, started_at="yesterday")),
}
REASONS = {
    "truncated": "not valid JSON",
    "empty": "is empty",
    "future-schema": "newer than this dlperf reads",
    "nan": "NaN is not a JSON number",
    "world-size-0": "world_size 0 is not a positive integer",
    "case-5": "case 5 is not a name",
    "throughput-fast": "throughput 'fast' is not a positive finite number",
    "negative": "throughput -300.0 is not a positive finite number",
    "status-odd": "status 'great' is not one of",
    "failure-text": "failure",
    "env-text": "env",
    "memory-text": "peak_memory_mib",
    "ranks-dict": "ranks",
    "hosts-number": "hosts",
    "machine-load-text": "machine_load",
    "stragglers-list": "stragglers",
    "gpt1-parallel": "parallel",
    "gpt1-no-global-batch": "parallel.global_batch_size None",
    "no-schema": "no schema",
    "deep": "nested",
    "tiny-throughput": "throughput",
    "huge-throughput": "throughput",
    "started-text": "started_at",
}


@pytest.fixture
def folder(tmp_path):
    for i, speed in enumerate([100.0, 110.0, 120.0], 1):
        write_json_atomic(tmp_path / "resnet50" / "1n1g" / f"resnet50_b128_fp32_{i}.json", record("1n1g", i, speed))
    (tmp_path / "summary.json").write_text("{}")  # not a record: passed over silently
    return tmp_path


@pytest.mark.parametrize("name", BAD)
def test_bad_record_is_skipped_and_named(folder, name):
    bad = folder / "resnet50" / "1n1g" / f"{name}.json"
    bad.write_text(BAD[name])
    skipped = []
    records = find_records(folder, on_skip=lambda path, reason: skipped.append((path, reason)))
    assert [r.throughput for r in records] == [100.0, 110.0, 120.0]
    assert len(skipped) == 1 and skipped[0][0] == bad and REASONS[name] in skipped[0][1], skipped


def test_report_and_compare_survive_every_bad_record(folder, capsys):
    for name, text in BAD.items():
        (folder / "resnet50" / "1n1g" / f"{name}.json").write_text(text)
    code, _, err = run_cli(["report", str(folder)], capsys)
    assert code == 0, err
    assert err.count("dlperf: skipped record") == len(BAD)
    assert json.loads((folder / "summary.json").read_text())["resnet50"]["b128_fp32"]["1n1g"]["median_speed"] == 110.0
    code, out, err = run_cli(["compare", str(folder), str(folder)], capsys)
    assert code == 0, err


def test_history_add_refuses_an_invalid_record(tmp_path):
    db = tmp_path / "h.sqlite"
    with pytest.raises(ResultsError, match="throughput 'fast'"):
        add_records(db, [record("1n1g", 1, 100.0), record("1n1g", 2, "fast")], "v1")
    assert not db.exists(), "nothing may be stored when one record is invalid"


@pytest.mark.parametrize("damage", ["not-a-database", "text-in-real-column", "foreign-table", "started-at-text"])
def test_malformed_history_database_is_one_line(tmp_path, capsys, damage):
    db = tmp_path / "h.sqlite"
    if damage == "started-at-text":
        add_records(db, [record("1n1g", 1, 100.0, started_at=1.0), record("1n1g", 2, 90.0, started_at=2.0)], "v1")
        with sqlite3.connect(db) as connection:
            connection.execute("UPDATE runs SET started_at = 'yesterday' WHERE repeat = 2")
    elif damage == "not-a-database":
        db.write_bytes(b"this is not sqlite at all" * 100)
    elif damage == "text-in-real-column":
        add_records(db, [record("1n1g", 1, 100.0, started_at=1.0)], "v1")
        with sqlite3.connect(db) as connection:
            connection.execute("UPDATE runs SET throughput = 'fast'")
    else:
        with sqlite3.connect(db) as connection:
            connection.execute("CREATE TABLE runs (x TEXT)")
    code, _, err = run_cli(["history", "show", "--db", str(db)], capsys)
    assert code == 2 and err.count("\n") == 1 and str(db) in err and "internal error" not in err, err


def test_record_in_another_cases_place_is_named(folder):
    source = folder / "resnet50" / "1n1g" / "resnet50_b128_fp32_1.json"
    moved = folder / "resnet50" / "1n4g" / "resnet50_b128_fp32_1.json"
    moved.parent.mkdir()
    moved.write_bytes(source.read_bytes())
    renumbered = folder / "resnet50" / "1n1g" / "resnet50_b128_fp32_7.json"
    renumbered.write_bytes(source.read_bytes())
    skipped = []
    records = find_records(folder, on_skip=lambda path, reason: skipped.append((path, reason)))
    assert [r.throughput for r in records] == [100.0, 110.0, 120.0]
    assert [p for p, _ in skipped] == [renumbered, moved]
    assert "holds the record of repeat 1, but its place says" in skipped[0][1]
    assert "holds the record of case '1n1g'" in skipped[1][1]


def test_copied_record_counts_once_and_is_named(folder):
    source = folder / "resnet50" / "1n1g" / "resnet50_b128_fp32_1.json"
    copy = folder / "resnet50" / "1n1g" / "resnet50_b128_fp32_1 (copy).json"
    copy.write_bytes(source.read_bytes())
    skipped = []
    records = find_records(folder, on_skip=lambda path, reason: skipped.append((path, reason)))
    assert [r.throughput for r in records] == [100.0, 110.0, 120.0]
    assert (
        len(skipped) == 1 and skipped[0][1] == f"is a copy of {({source, copy} - {skipped[0][0]}).pop()}: counted once"
    )


def test_resume_measures_a_run_whose_file_holds_another_runs_record(tmp_path, capsys):
    from dlperf.orchestration.run import plan_jobs
    from dlperf.orchestration.sweep_plan import record_is_complete
    from dlperf.workloads import check_spec, spec_from_mapping

    spec = spec_from_mapping({"model": "resnet50", "device": "cpu", "batch_size": 128, "iters": 2})
    first, second = plan_jobs(spec, check_spec(spec), [1, 2], tmp_path)
    write_json_atomic(first.paths.record, record("1n1g", 1, 100.0, group=first.plan.group))
    write_json_atomic(second.paths.record, record("1n1g", 1, 100.0, group=first.plan.group))  # repeat 1's, copied
    assert record_is_complete(first, retry_failed=False)
    assert not record_is_complete(second, retry_failed=False)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(second.paths.record) in err and "holds the record of repeat 1" in err, err


def test_locked_history_database_is_one_line(tmp_path, capsys, folder):
    db = tmp_path / "h.sqlite"
    add_records(db, [record("1n1g", 1, 100.0, started_at=1.0)], "v1")
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        for args in (["history", "add", str(folder), "--db", str(db)], ["history", "show", "--db", str(db)]):
            code, _, err = run_cli(args, capsys)
            assert code == 2 and err.count("\n") == 1 and "locked" in err and "internal error" not in err, err
    finally:
        holder.rollback()
        holder.close()


def test_bad_maxbatch_record_is_named_not_read(tmp_path):
    from dlperf.records.schema import MAXBATCH_SCHEMA

    good = {
        "schema": MAXBATCH_SCHEMA,
        "status": "ok",
        "max_batch": 64,
        "model": "resnet50",
        "case": "1n1g",
        "variant": "fp32",
    }
    write_json_atomic(tmp_path / "maxbatch" / "good.json", good)
    write_json_atomic(tmp_path / "maxbatch" / "bad.json", {**good, "max_batch": "big"})
    skipped = []
    records = find_records(tmp_path, (MAXBATCH_SCHEMA,), lambda path, reason: skipped.append((path.name, reason)))
    assert [r.max_batch for r in records] == [64]
    assert skipped == [("bad.json", "max_batch 'big' is not a positive integer")]
