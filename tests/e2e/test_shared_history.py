"""The history on a shared PostgreSQL server (issue 41), against a real server the module starts: machines adding at
once, a server that stops, a refused login, a schema from an older dlperf; and a URL never taken for a path."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_cli
from postgres_server import PASSWORD, postgres_server
from report_records import record

from dlperf import install
from dlperf.records.store import write_json_atomic
from dlperf.reporting.history import add_records, history, record_key
from dlperf.reporting.history_db import LOCK_ID, SCHEMA_VERSION, parse_target

# runs as dlperf wrote it before the shared history (schema 1, no version table): an older user's history file
OLD_SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_key TEXT PRIMARY KEY, label TEXT NOT NULL, model TEXT NOT NULL, grp TEXT NOT NULL, case_name TEXT NOT NULL,
    repeat INTEGER, status TEXT NOT NULL, throughput REAL, started_at REAL, record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_case ON runs (model, grp, case_name, label);
"""


@pytest.fixture(scope="module")
def pg():
    yield from postgres_server()


def results(root: Path, repeats: range, speed: float = 100.0, case: str = "1n1g") -> Path:
    for i in repeats:
        rec = record(case, i, speed + i % 3, started_at=1_700_000_000.0 + i, sweep_id="20261127T000000Z-aaaaaa")
        write_json_atomic(root / "resnet50" / case / f"resnet50_b128_fp32_{i}.json", rec)
    return root


@pytest.mark.parametrize(
    "db, dialect, where",
    [
        ("postgresql://ci@db.example/perf", "postgresql", "postgresql://ci@db.example/perf"),
        ("postgres://ci:pw@db.example:5433/perf", "postgresql", "postgres://ci:***@db.example:5433/perf"),
        ("results/history.sqlite", "sqlite", "results/history.sqlite"),
        ("./run:2/history.sqlite", "sqlite", "./run:2/history.sqlite"),
        ("sqlite:///results/h.sqlite", "sqlite", "results/h.sqlite"),
    ],
)
def test_a_url_is_never_a_path(db, dialect, where):
    target = parse_target(db)
    assert (target.dialect, target.shown) == (dialect, where)
    if dialect == "postgresql":
        assert target.where == db  # the URL as given, not folded by Path into `postgresql:/...`


@pytest.mark.parametrize("db", ["mysql://ci@db/perf", "postgresq://ci@db/perf", "s3://bucket/h.sqlite", "run:2/h"])
def test_unknown_scheme_is_refused_and_nothing_written(db, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = results(tmp_path / "res", range(1, 3))
    code, _, err = run_cli(["history", "add", str(folder), "--db", db], capsys)
    assert_one_line_error(code, err, "unknown scheme", db.split(":")[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res"], "no local folder may be made of a URL"


def test_dlperf_history_env_url_stays_a_url(monkeypatch):
    import importlib

    import dlperf.cli.history_cmd as history_cmd

    monkeypatch.setenv("DLPERF_HISTORY", "postgresql://ci@db.example/perf")
    assert importlib.reload(history_cmd).DEFAULT_DB == "postgresql://ci@db.example/perf"
    monkeypatch.delenv("DLPERF_HISTORY")
    importlib.reload(history_cmd)


def test_missing_driver_is_refused_naming_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg fails, as where it is not installed
    folder = results(tmp_path / "res", range(1, 3))
    code, _, err = run_cli(["history", "add", str(folder), "--db", "postgresql://ci@db.example/perf"], capsys)
    assert_one_line_error(code, err, "psycopg", install.extra("postgres"))


def test_older_sqlite_history_is_upgraded_and_kept(tmp_path):
    db = tmp_path / "h.sqlite"
    old = record("1n1g", 1, 90.0, started_at=1.0)
    with sqlite3.connect(db) as connection:
        connection.executescript(OLD_SQLITE_SCHEMA)
        connection.execute(
            "INSERT INTO runs VALUES (?, 'v0', 'resnet50', 'b128_fp32', '1n1g', 1, 'ok', 90.0, 1.0, '{}')",
            (record_key(old),),
        )
    assert [p.median for p in history(db)] == [90.0]  # read as it is, before any add
    outcome = add_records(db, [old, record("1n1g", 1, 100.0, started_at=2.0)], "v1")
    assert len(outcome.stored) == 1 and len(outcome.duplicates) == 1  # the old row's identity still holds
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT version FROM dlperf_schema").fetchall() == [(SCHEMA_VERSION,)]
        added = connection.execute("SELECT label, added_by IS NOT NULL FROM runs ORDER BY label").fetchall()
    assert added == [("v0", 0), ("v1", 1)]
    assert [(p.label, p.median) for p in history(db)] == [("v0", 90.0), ("v1", 100.0)]


def test_compare_reads_two_labels_of_a_history(tmp_path, capsys):
    db = tmp_path / "h.sqlite"
    add_records(db, [record("1n1g", i, 100.0 + i, started_at=float(i)) for i in range(1, 6)], "v1")
    add_records(db, [record("1n1g", i, 100.0 + i, started_at=10.0 + i) for i in range(1, 6)], "v2")
    code, out, err = run_cli(["compare", "v1", "v2", "--db", str(db), "--json"], capsys)
    assert code == 0, err
    (row,) = json.loads(out)
    assert (row["verdict"], row["base_speeds"], row["new_speeds"]) == ("same", [101.0, 102.0, 103.0, 104.0, 105.0],
                                                                       [101.0, 102.0, 103.0, 104.0, 105.0])  # fmt: skip
    code, _, err = run_cli(["compare", "v1", "v3", "--db", str(db)], capsys)
    assert_one_line_error(code, err, "no records labelled 'v3'", "its labels: v1, v2")


@pytest.mark.slow
def test_two_machines_add_at_once_nothing_lost_or_doubled(pg, tmp_path, capsys):
    import psycopg

    url = pg.new_database("fleet")
    first, second = results(tmp_path / "a", range(1, 41)), results(tmp_path / "b", range(21, 61))  # 20 alike
    command = [sys.executable, "-m", "dlperf", "history", "add"]
    with psycopg.connect(url, autocommit=True) as gate:  # both writers wait at the schema lock, then go at once
        gate.execute("SELECT pg_advisory_lock(%s)", (LOCK_ID,))
        writers = [subprocess.Popen([*command, str(folder), "--label", "v1", "--db", url], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True) for folder in (first, second)]  # fmt: skip
        waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        deadline = time.monotonic() + 120
        while gate.execute(waiting).fetchone()[0] < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gate.execute(waiting).fetchone()[0] == 2, "both writers wait at the gate"
        gate.execute("SELECT pg_advisory_unlock(%s)", (LOCK_ID,))
    outputs = [writer.communicate(timeout=120) for writer in writers]
    assert [w.returncode for w in writers] == [0, 0], outputs
    stored = [int(out.split(" new records stored")[0].split()[-1]) for out, _ in outputs]
    assert sum(stored) == 60, outputs  # each record stored by exactly one of the two
    assert pg.sql("SELECT count(*), count(DISTINCT run_key), count(added_by) FROM runs", "fleet") == [(60, 60, 60)]
    assert pg.sql("SELECT version FROM dlperf_schema", "fleet") == [(SCHEMA_VERSION,)]
    # a slower version added from a third machine: show and its verdict read across all of them
    code, _, err = run_cli(["history", "add", str(results(tmp_path / "c", range(1, 6), 50.0)), "--label", "v2",
                            "--db", url], capsys)  # fmt: skip
    assert code == 0, err
    code, out, err = run_cli(["history", "show", "--db", url], capsys)
    assert code == 0, err
    assert "history in " + url in out and " 60 " in out and "slower" in out, out
    assert [(p.label, p.runs) for p in history(url)] == [("v1", 60), ("v2", 5)]
    code, out, err = run_cli(["compare", "v1", "v2", "--db", url], capsys)  # a CI gate on the shared history
    assert code == 1 and "SLOWER" in out and "60/5" in out, out + err


@pytest.mark.slow
def test_refused_login_and_missing_database_are_one_line(pg, tmp_path, capsys):
    folder = results(tmp_path / "res", range(1, 3))
    for url, needle in (
        (pg.url("postgres", "alice", "wrong"), "password authentication failed"),
        (pg.url("no_such_db"), 'database "no_such_db" does not exist'),
    ):
        code, _, err = run_cli(["history", "add", str(folder), "--db", url], capsys)
        assert_one_line_error(code, err, "cannot connect to history database", needle)
        assert "wrong" not in err, "the password is never printed"
    good = pg.url("postgres", "alice", PASSWORD)
    assert run_cli(["history", "show", "--db", good], capsys)[0] == 2  # logged in: no history there yet


@pytest.mark.slow
def test_server_stopping_mid_write_leaves_nothing_half_written(pg, tmp_path, capsys):
    url = pg.new_database("midwrite")
    folder = results(tmp_path / "res", range(1, 6))
    assert run_cli(["history", "add", str(results(tmp_path / "first", range(1, 2))), "--db", url], capsys)[0] == 0
    # the server ends this session at the third row of the next add, as a fast shutdown ends every session
    pg.sql(
        """CREATE FUNCTION stop_here() RETURNS trigger AS $$ BEGIN
           IF (SELECT count(*) FROM runs) >= 3 THEN PERFORM pg_terminate_backend(pg_backend_pid()); END IF;
           RETURN NEW; END $$ LANGUAGE plpgsql;
           CREATE TRIGGER stop_here BEFORE INSERT ON runs FOR EACH ROW EXECUTE FUNCTION stop_here()""",
        "midwrite",
    )
    code, _, err = run_cli(["history", "add", str(folder), "--db", url], capsys)
    assert_one_line_error(code, err, "cannot store into history database", "nothing was stored")
    assert pg.sql("SELECT count(*) FROM runs", "midwrite") == [(1,)]  # the add before it, alone
    pg.sql("DROP TRIGGER stop_here ON runs", "midwrite")
    code, out, err = run_cli(["history", "add", str(folder), "--db", url], capsys)
    assert code == 0 and "4 new records stored" in out, err  # repeat 1 was there already


@pytest.mark.slow
def test_schema_from_older_and_newer_dlperf(pg, tmp_path, capsys):
    url = pg.new_database("older")
    old = record("1n1g", 1, 90.0, started_at=1.0)
    pg.sql(OLD_SQLITE_SCHEMA.replace("REAL", "DOUBLE PRECISION"), "older")
    pg.sql(f"INSERT INTO runs VALUES ('{record_key(old)}', 'v0', 'resnet50', 'b128_fp32', '1n1g', 1, 'ok', 90.0, 1.0,"
           " '{}')", "older")  # fmt: skip
    assert [p.median for p in history(url)] == [90.0]  # show reads it as it is, changing nothing
    assert pg.sql("SELECT count(*) FROM information_schema.tables WHERE table_name = 'dlperf_schema'", "older") == [
        (0,)
    ]
    outcome = add_records(url, [old, record("1n1g", 1, 100.0, started_at=2.0)], "v1")
    assert (len(outcome.stored), len(outcome.duplicates)) == (1, 1)
    assert pg.sql("SELECT version FROM dlperf_schema", "older") == [(SCHEMA_VERSION,)]
    assert [(p.label, p.median) for p in history(url)] == [("v0", 90.0), ("v1", 100.0)]
    pg.sql(f"UPDATE dlperf_schema SET version = {SCHEMA_VERSION + 1}", "older")
    for args in (["history", "show"], ["history", "add", str(results(tmp_path / "r", range(1, 2)))]):
        code, _, err = run_cli([*args, "--db", url], capsys)
        assert_one_line_error(code, err, "written by a newer dlperf")


@pytest.mark.slow
def test_stopped_server_is_one_line(pg, tmp_path, capsys):
    url = pg.new_database("stopped")
    pg.stop()
    try:
        for args in (["history", "add", str(results(tmp_path / "res", range(1, 3)))], ["history", "show"]):
            code, _, err = run_cli([*args, "--db", url], capsys)
            assert_one_line_error(code, err, "cannot connect to history database", str(pg.root))
    finally:
        pg.start()
    assert run_cli(["history", "add", str(tmp_path / "res"), "--db", url], capsys)[0] == 0
