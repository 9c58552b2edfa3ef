"""Secrets kept, nothing lost on the way to the team's stores (issue 50), against a real PostgreSQL listening on
127.0.0.1 as the issue's was: roles whose passwords hold '#', '?', '@', '%', '/', ':' and a space, given in URLs
percent-encoded, raw (libpq ends the userinfo at the first '@' or '/' only, so a raw '#' or '?' logs in) and as a
`password=` parameter. Every command that shows a store URL, and every error path (a wrong password, an invalid
percent-encoding, a refused port, a tracker's refused port), runs as a user runs it, a process with its own HOME:
no piece of a password is in its stdout, its stderr, any file it wrote or any row it stored.

And a record a store cannot hold (a NUL, a lone surrogate, a record over 64 MiB) is refused by its file and field
before the transaction, on PostgreSQL and SQLite alike, while the other records of the add are stored."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from postgres_server import postgres_server
from report_records import record

from dlperf.launch.local import free_port
from dlperf.records.store import write_json_atomic
from dlperf.reporting.history import add_records

# role -> password; every piece of 4 letters or digits is distinct, so a half-masked password still shows
ROLES = {
    "r_hostile": "Zq7x#Kp9w?Wm3r@Rt5v%2F/: Yv8u",
    "r_hash": "Ha4s#Hp8w-Qb31",  # the shape: a raw '#'
    "r_query": "Qu6e?Ry2p=Wd32",  # a raw '?'
    "r_param": "Pa5r#Am7p-Wd34",  # given as ?password=
    "r_reader": "Rd9r#Ea3d?Er5x",  # may read the history, not add to it
}
WRONG = ("Wr0n#Gp9w?Xy7z", "Bd4d@Pw6x/Qq2r?#", "Iv4l%zzTk8n", "Wr1p#Ar4m")  # never any role's
MLFLOW = "Ml5f#Lo7w?Pw3d"


def pieces(password: str) -> set[str]:
    return {password, quote(password, safe=""), quote(password), *re.findall(r"[A-Za-z0-9]{4,}", password)}


SECRETS = set().union(*(pieces(p) for p in (*ROLES.values(), *WRONG, MLFLOW)))


@pytest.fixture(scope="module")
def pg():
    """The module's server, restarted to listen on 127.0.0.1 (scram-sha-256 over TCP) as well as its socket."""
    server_gen = postgres_server()
    server = next(server_gen)
    try:
        for role, password in ROLES.items():
            power = "NOSUPERUSER" if role == "r_reader" else "SUPERUSER"
            server.sql(f"CREATE ROLE {role} LOGIN {power} PASSWORD '{password}'")
        server.sql("CREATE DATABASE store")
        hba = server.data / "pg_hba.conf"
        hba.write_text(f"host all all 127.0.0.1/32 scram-sha-256\n{hba.read_text()}")
        server.stop()
        server.port = free_port()
        server.pg_ctl("-o", f"-k {server.root} -c listen_addresses=127.0.0.1 -p {server.port} -F", "-w", "start")
        yield server
    finally:
        server_gen.close()


def url(pg, role: str, password: str, encode: bool = True, port: int | None = None) -> str:
    given = quote(password, safe="") if encode else password
    return f"postgresql://{role}:{given}@127.0.0.1:{port or pg.port}/store"


def sql(pg, statement: str) -> list[tuple]:
    import psycopg

    with psycopg.connect(f"postgresql://postgres@/store?host={pg.root}&port={pg.port}", autocommit=True) as c:
        cursor = c.execute(statement)
        return cursor.fetchall() if cursor.description else []


def dlperf(tmp: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The CLI as a user runs it, in `tmp/work` with `tmp/home` its HOME: every file it writes is under `tmp`."""
    for folder in ("work", "home"):
        (tmp / folder).mkdir(exist_ok=True)
    environment = {k: v for k, v in __import__("os").environ.items() if not k.startswith(("PG", "MLFLOW"))}
    environment.update(HOME=str(tmp / "home"), **(env or {}))
    command = [sys.executable, "-m", "dlperf", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, cwd=tmp / "work", env=environment)


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        leaked = sorted(s for s in SECRETS if s in text)
        assert not leaked, (leaked, text)


def assert_no_secret_in_files(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            leaked = sorted(s for s in SECRETS if s.encode() in data)
            assert not leaked, (leaked, path)
        assert_no_secret(str(path))


def results(root: Path, label_speed: float = 100.0) -> Path:
    for i in range(1, 4):
        write_json_atomic(root / "resnet50" / "1n1g" / f"r_{i}.json", record("1n1g", i, label_speed + i))
    return root


LOGINS = [  # (role, given percent-encoded)
    ("r_hostile", True),
    ("r_hash", False),
    ("r_query", False),
]


@pytest.mark.slow
@pytest.mark.parametrize("role, encoded", LOGINS)
def test_no_command_prints_or_writes_a_password(pg, tmp_path, role, encoded):
    """add (new records, then the same again), show, compare of two labels and of a missing one, show with the URL
    in DLPERF_HISTORY, --help with it there, and a URL given where an argument is not expected."""
    sql(pg, "DROP TABLE IF EXISTS runs, dlperf_schema")
    db = url(pg, role, ROLES[role], encoded)
    shown = f"postgresql://{role}:***@127.0.0.1:{pg.port}/store"
    v1, v2 = results(tmp_path / "v1"), results(tmp_path / "v2", 50.0)
    runs = {
        "add": dlperf(tmp_path, "history", "add", str(v1), "--label", "v1", "--db", db),
        "add again": dlperf(tmp_path, "history", "add", str(v1), "--label", "v1", "--db", db),
        "add v2": dlperf(tmp_path, "history", "add", str(v2), "--label", "v2", f"--db={db}"),
        "show": dlperf(tmp_path, "history", "show", "--db", db),
        "compare": dlperf(tmp_path, "compare", "v1", "v2", "--db", db),
        "compare missing": dlperf(tmp_path, "compare", "v1", "v9", "--db", db),
        "show from env": dlperf(tmp_path, "history", "show", env={"DLPERF_HISTORY": db}),
        "help from env": dlperf(tmp_path, "history", "--help", env={"DLPERF_HISTORY": db}),
        "stray argument": dlperf(tmp_path, "history", "add", str(v1), db),
    }
    for name, run in runs.items():
        assert_no_secret(run.stdout, run.stderr)
        assert "Traceback" not in run.stderr, (name, run.stderr)
    codes = {name: run.returncode for name, run in runs.items()}
    assert codes == {"add": 0, "add again": 0, "add v2": 0, "show": 0, "compare": 1, "compare missing": 2,
                     "show from env": 0, "help from env": 0, "stray argument": 2}, runs  # fmt: skip
    assert f"3 new records stored in {shown}" in runs["add"].stdout, runs["add"].stdout
    assert f"0 new records stored in {shown}" in runs["add again"].stdout
    assert f"history in {shown}" in runs["show"].stdout and "slower" in runs["show"].stdout
    assert f"history in {shown}" in runs["show from env"].stdout
    assert f"history database {shown} has no records labelled 'v9'" in runs["compare missing"].stderr
    assert "SLOWER" in runs["compare"].stdout
    assert "unrecognized arguments" in runs["stray argument"].stderr
    assert_no_secret_in_files(tmp_path)
    assert_no_secret(json.dumps(sql(pg, "SELECT record::text, added_by, label FROM runs")))
    assert sql(pg, "SELECT count(*) FROM runs") == [(6,)]


@pytest.mark.slow
def test_a_password_parameter_is_never_printed(pg, tmp_path):
    db = f"postgresql://r_param@127.0.0.1:{pg.port}/store?sslmode=disable&password={quote(ROLES['r_param'])}"
    for args in (["history", "add", str(results(tmp_path / "res")), "--label", "p"], ["history", "show"]):
        run = dlperf(tmp_path, *args, "--db", db)
        assert run.returncode == 0, run.stderr
        assert f"postgresql://r_param@127.0.0.1:{pg.port}/store?sslmode=disable&password=***" in run.stdout
        assert_no_secret(run.stdout, run.stderr)
    assert_no_secret_in_files(tmp_path)


@pytest.mark.slow
def test_refused_logins_and_ports_are_one_line_without_the_password(pg, tmp_path):
    """A wrong password (raw '#' and '?', percent-encoded '@' and '/', or a `password=` parameter), a password
    whose percent-encoding is invalid (libpq's error quotes it alone), a port nobody listens on, PGPASSWORD's
    wrong value, each with --debug's traceback too; and `dlperf export mlflow` to a refused port with the password
    in its URL."""
    folder = results(tmp_path / "res")
    refused = free_port()
    cases = [
        (url(pg, "r_hash", WRONG[0], encode=False), {}, "password authentication failed"),
        (url(pg, "r_hostile", WRONG[1]), {}, "password authentication failed"),
        (url(pg, "r_hash", WRONG[2], encode=False), {}, "invalid percent-encoded token"),
        (url(pg, "r_hostile", WRONG[1], encode=False), {}, ""),  # libpq takes the rest after '@' for the host
        (f"postgresql://r_param@127.0.0.1:{pg.port}/store?password={WRONG[3]}", {}, "password authentication"),
        (url(pg, "r_hostile", ROLES["r_hostile"], port=refused), {}, "Connection refused"),
        (f"postgresql://r_hash@127.0.0.1:{pg.port}/store", {"PGPASSWORD": WRONG[0]}, "password authentication"),
    ]
    # the three commands reach the server through one connect (history_db._PostgresStore), whose refusal each prints
    # as one line: each case is given to one command, and to another with --debug, every command meeting 4 or 5
    commands = (["history", "add", str(folder)], ["history", "show"], ["compare", "a", "b"])
    for i, (db, env, needle) in enumerate(cases):
        run = dlperf(tmp_path, *commands[i % 3], "--db", db, env=env)
        lines = run.stderr.strip().splitlines()
        assert run.returncode == 2 and len(lines) == 1 and needle in lines[0], (db, run.stderr)
        assert "cannot connect to history database postgresql://r_" in lines[0], lines
        assert_no_secret(run.stdout, run.stderr)
        run = dlperf(tmp_path, *commands[(i + 1) % 3], "--debug", "--db", db, env=env)  # the library's error, masked
        assert run.returncode == 2 and "Traceback" in run.stderr, run.stderr
        assert_no_secret(run.stdout, run.stderr)
    tracker = f"http://mluser:{MLFLOW}@127.0.0.1:{refused}"
    quiet = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "5"}
    for given in (tracker, tracker.replace(MLFLOW, quote(MLFLOW, safe=""))):
        run = dlperf(tmp_path, "export", "mlflow", str(folder), "--tracking-uri", given, env=quiet)
        assert run.returncode != 0 and run.stderr.startswith("dlperf: error"), run.stderr
        assert_no_secret(run.stdout, run.stderr)
    run = dlperf(tmp_path, "export", "mlflow", str(folder), env={**quiet, "MLFLOW_TRACKING_URI": tracker})
    assert run.returncode != 0 and run.stderr.startswith("dlperf: error"), run.stderr
    assert_no_secret(run.stdout, run.stderr)
    assert_no_secret_in_files(tmp_path)


def unholdable(root: Path) -> tuple[Path, dict[str, str]]:
    """A folder of four records, three of which no store holds; each bad one's file and the field named."""
    good = record("1n1g", 1, 100.0)
    bad = {
        "r_2.json": (record("1n1g", 2, 101.0, notes={"log": "step 3\x00garbage"}), "field notes.log holds a NUL"),
        "r_3.json": (record("1n1g", 3, 102.0, tags={"ga\x00te": "x"}), "key 'ga\\x00te' of tags holds a NUL"),
        "r_4.json": (record("1n1g", 4, 103.0, host="node\ud800"), "field host holds a lone surrogate"),
    }
    write_json_atomic(root / "resnet50" / "1n1g" / "r_1.json", good)
    for name, (data, _) in bad.items():
        write_json_atomic(root / "resnet50" / "1n1g" / name, data)
    return root, {str(root / "resnet50" / "1n1g" / name): why for name, (_, why) in bad.items()}


@pytest.mark.slow
@pytest.mark.parametrize("dialect", ["postgresql", "sqlite"])
def test_a_record_no_store_holds_is_refused_by_name_the_others_stored(pg, tmp_path, dialect):
    """The same on both dialects: a history moves between them whole. PostgreSQL itself refuses the NUL."""
    import psycopg

    with pytest.raises(psycopg.errors.UntranslatableCharacter):
        sql(pg, """SELECT '{"a": "\\u0000"}'::jsonb""")  # why the check is needed at all
    sql(pg, "DROP TABLE IF EXISTS runs, dlperf_schema")
    db = url(pg, "r_hostile", ROLES["r_hostile"]) if dialect == "postgresql" else str(tmp_path / "h.sqlite")
    folder, named = unholdable(tmp_path / "res")
    run = dlperf(tmp_path, "history", "add", str(folder), "--label", "v1", "--db", db)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "1 new records stored" in run.stdout and "3 records no history can hold" in run.stdout, run.stdout
    for path, why in named.items():
        assert f"  {path}: {why}" in run.stdout, run.stdout
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("dlperf: error: 3 records not stored in ") and "r_2.json" in line, line
    assert "try again" not in run.stdout + run.stderr
    again = dlperf(tmp_path, "history", "show", "--db", db)
    assert again.returncode == 0 and " 1 " in again.stdout, again.stdout + again.stderr
    assert_no_secret(run.stdout, run.stderr, again.stdout)


@pytest.mark.slow
def test_a_record_over_the_bound_is_refused_before_the_server(pg, tmp_path):
    """65 MiB of samples in one record: named with its largest field; the record beside it stored."""
    sql(pg, "DROP TABLE IF EXISTS runs, dlperf_schema")
    big = record("1n1g", 2, 101.0, samples="x" * (65 * 2**20))
    outcome = add_records(url(pg, "r_hostile", ROLES["r_hostile"]), [record("1n1g", 1, 100.0), big], "v1")
    assert len(outcome.stored) == 1 and not outcome.duplicates
    ((_, why),) = outcome.refused
    assert why == "its JSON is 65 MiB (field samples the largest), over the 64 MiB a history holds"
    assert sql(pg, "SELECT count(*) FROM runs") == [(1,)]


@pytest.mark.slow
def test_a_refused_write_is_not_called_worth_retrying(pg, tmp_path):
    """A role that may read but not add: the server's refusal, one line, no password, and no "try again"."""
    sql(pg, "DROP TABLE IF EXISTS runs, dlperf_schema")
    folder = results(tmp_path / "res")
    assert (
        dlperf(tmp_path, "history", "add", str(folder), "--db", url(pg, "r_hostile", ROLES["r_hostile"])).returncode
        == 0
    )
    sql(pg, "GRANT SELECT ON runs, dlperf_schema TO r_reader")
    db = url(pg, "r_reader", ROLES["r_reader"], encode=False)
    assert dlperf(tmp_path, "history", "show", "--db", db).returncode == 0  # it may read
    run = dlperf(tmp_path, "history", "add", str(results(tmp_path / "more", 70.0)), "--db", db)
    (line,) = run.stderr.strip().splitlines()
    assert run.returncode == 2 and "permission denied for table runs" in line, run.stderr
    assert "trying again as it is will not help" in line and "try again" not in line, line
    assert_no_secret(run.stdout, run.stderr)
    assert sql(pg, "SELECT count(*) FROM runs") == [(3,)]
