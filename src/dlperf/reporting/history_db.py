"""Where the history lives: an embedded SQLite file (a plain path) or a shared PostgreSQL server (a URL), one table
in the same shape on both, behind one small interface.

A `--db` is read as a URL whenever it starts with a scheme (`word:`), so `postgresql://host/db` can never become a
local folder named `postgresql:`; a scheme dlperf does not know is refused. Every add is one transaction, and a
record's identity (`run_key`, the hash of its content) is the table's key, stored with INSERT ... ON CONFLICT DO
NOTHING: several machines adding at once lose nothing and store nothing twice. The schema carries its version in
`dlperf_schema`; a history from an older dlperf (no version table, no `added_at`/`added_by`) is brought up to date by
the next `add`, under a lock, and read as it is by `show`; one from a newer dlperf is refused.

A record a store cannot hold is refused by name before the transaction (`unstorable`), the same on both dialects so
a history moves between them whole: PostgreSQL's jsonb refuses a NUL (`\\u0000`) and a lone surrogate, JSON has no
NaN, its index over label, model, group and case holds 2704 bytes a row, and a record's JSON is bounded well below
jsonb's 256 MiB. The URL is shown, and every server error quoted, through `dlperf.secrets`: no password in a message.
"""

from __future__ import annotations

import json
import math
import re
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf.errors import ConfigError, ResultsError, first_line
from dlperf.reporting.extras import require_extra
from dlperf.secrets import mask, mask_params, mask_url

SCHEMA_VERSION = 2  # 1: the `runs` table alone (dlperf before the shared history); 2: added_at, added_by, versioned
COLUMNS = ("run_key", "label", "model", "grp", "case_name", "repeat", "status", "throughput", "started_at", "record")
READ_COLUMNS = ("model", "grp", "case_name", "label", "started_at", "status", "throughput")
POSTGRES_SCHEMES = ("postgresql", "postgres")
SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")  # two letters at least: `C:\...` stays a path
LOCK_ID = 0x646C70  # pg_advisory_xact_lock's key for schema changes ("dlp")
# `host=... password=...`: libpq's keyword form, not a --db (it would become an SQLite file named by the password)
KEYWORD_DSN = re.compile(r"(?i)^\s*(host|hostaddr|port|dbname|user|password|service|sslmode)\s*=")
MAX_RECORD_BYTES = 64 * 2**20  # a record's JSON: records are kB to a few MB; jsonb holds 256 MiB at most
MAX_NAME_BYTES = 512  # each of label, model, group, case: PostgreSQL's index over the four holds 2704 bytes a row
UNHOLDABLE = re.compile("[\x00\ud800-\udfff]")  # NUL and lone surrogates: PostgreSQL's text and jsonb refuse them

# (type of the text, real, integer and JSON columns) per dialect: PostgreSQL keeps the record as jsonb, so a
# dashboard queries record->>'framework' directly
TYPES = {"sqlite": ("TEXT", "REAL", "INTEGER", "TEXT"), "postgresql": ("TEXT", "DOUBLE PRECISION", "INTEGER", "JSONB")}


def runs_table(dialect: str) -> str:
    text, real, integer, json_ = TYPES[dialect]
    return f"""CREATE TABLE IF NOT EXISTS runs (
    run_key     {text} PRIMARY KEY,  -- sha256 of the record's content: the same record is stored once
    label       {text} NOT NULL,     -- what is being compared: a version, a commit, a driver ...
    model       {text} NOT NULL,
    grp         {text} NOT NULL,
    case_name   {text} NOT NULL,
    repeat      {integer},
    status      {text} NOT NULL,
    throughput  {real},
    started_at  {real},
    record      {json_} NOT NULL,    -- the whole JSON record
    added_at    {real},              -- Unix time it was stored (null: stored by a dlperf before schema 2)
    added_by    {text}               -- the host that stored it
)"""


@dataclass(frozen=True)
class Target:
    """A parsed `--db`: the dialect, what to connect to, and how to name it in messages (no password)."""

    dialect: str
    where: str | Path
    shown: str


def parse_target(db: str | Path) -> Target:
    """A plain path is SQLite, `postgresql://` (or `postgres://`) PostgreSQL, `sqlite:///PATH` SQLite; any other
    `scheme:` is refused, so no URL is ever taken for a path."""
    text = str(db)
    match = SCHEME.match(text)
    if KEYWORD_DSN.match(text):
        raise ConfigError(
            f"history database {mask_params(text)} is a libpq keyword string: give the server as a URL, "
            "postgresql://USER@HOST:PORT/DB (a password in PGPASSWORD or ~/.pgpass)"
        )
    if not match:
        return Target("sqlite", Path(text), text)
    scheme = match.group(1).lower()
    if scheme in POSTGRES_SCHEMES:
        return Target("postgresql", text, mask_url(text))
    if scheme == "sqlite" and text.startswith("sqlite:///"):
        path = text[len("sqlite:///") :]
        return Target("sqlite", Path(path), path)
    raise ConfigError(
        f"history database {mask_url(text)}: unknown scheme {scheme}: — give a file path for SQLite, "
        "postgresql://USER@HOST/DB for PostgreSQL, or ./PATH for a file whose name has a colon"
    )


def unstorable(names: Sequence[str], record: dict[str, Any], text: str) -> str | None:
    """Why no history store can hold a record (its label, model, group and case `names`, its JSON and that JSON's
    `text`), naming the field; None where every store can."""
    for field, name in zip(("label", "model", "group", "case"), map(str, names)):
        problem = _character_problem(name, f"its {field}")
        if problem:
            return problem
        if len(name.encode()) > MAX_NAME_BYTES:
            return f"its {field} is {len(name.encode())} bytes long, over the {MAX_NAME_BYTES} a history holds"
    problem = _unholdable(record, "")
    if problem or len(text) <= MAX_RECORD_BYTES:
        return problem
    largest = max(record, key=lambda key: len(json.dumps(record[key], default=str)))
    return (
        f"its JSON is {len(text) / 2**20:.0f} MiB (field {largest} the largest), over the "
        f"{MAX_RECORD_BYTES // 2**20} MiB a history holds"
    )


def _unholdable(value: Any, where: str) -> str | None:
    """The first value in a record's JSON that no store holds, by where it is, and why."""
    if isinstance(value, dict):
        return _first(_entry_problem(str(key), item, where) for key, item in value.items())
    if isinstance(value, list):
        return _first(_unholdable(item, f"{where}[{i}]") for i, item in enumerate(value))
    if isinstance(value, float) and not math.isfinite(value):
        return f"field {where} is {value}, which JSON cannot hold"
    return _character_problem(value, f"field {where}") if isinstance(value, str) else None


def _entry_problem(key: str, item: Any, where: str) -> str | None:
    """A mapping's key, then its value; a key that is no printable text is named in its escaped form."""
    inner = (f"{where}.{key}" if where else key) if key.isprintable() else f"{where}[{ascii(key)}]"
    return _character_problem(key, f"key {ascii(key)} of {where or 'the record'}") or _unholdable(item, inner)


def _first(problems: Iterator[str | None]) -> str | None:
    return next(filter(None, problems), None)


def _character_problem(text: str, where: str) -> str | None:
    """A NUL or a lone surrogate in `text`, named: SQLite would keep them, but a history must move whole."""
    found = UNHOLDABLE.search(text)
    if found is None:
        return None
    what = "a NUL character (\\u0000)" if found[0] == "\x00" else f"a lone surrogate (\\u{ord(found[0]):04x})"
    return f"{where} holds {what} at character {found.start()}, which a PostgreSQL history cannot hold"


Execute = Callable[..., Any]  # a connection's or cursor's `execute(sql, params)`, returning what fetches its rows
# (tables, a table's columns) per dialect
SCHEMA_QUERIES = {
    "sqlite": ("SELECT name FROM sqlite_master WHERE type = 'table'", "SELECT name FROM pragma_table_info(?)"),
    "postgresql": (
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()",
        "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = %s",
    ),
}


class _Store:
    """What both dialects share: the reads, given a `_reading()` that yields the dialect's `execute`."""

    shown: str
    placeholder: str
    connection: Any

    def close(self) -> None:
        self.connection.close()

    def rows(self, case: str | None) -> list[tuple]:
        """The stored runs' READ_COLUMNS, of one case where given."""
        query = f"SELECT {', '.join(READ_COLUMNS)} FROM runs"
        where = (f" WHERE case_name = {self.placeholder}", [case]) if case else ("", [])
        with self._reading() as execute:
            return execute(query + where[0], where[1]).fetchall()

    def records(self, label: str) -> tuple[list[Any], list[str]]:
        """The records stored under `label` (JSON text, or the parsed JSON from a jsonb column), and every label."""
        with self._reading() as execute:
            found = execute(f"SELECT record FROM runs WHERE label = {self.placeholder}", (label,)).fetchall()
            labels = execute("SELECT DISTINCT label FROM runs ORDER BY label").fetchall()
            return [r[0] for r in found], [r[0] for r in labels]

    def _reading(self) -> AbstractContextManager[Execute]:
        raise NotImplementedError

    def _insert(self) -> str:
        columns = ", ".join((*COLUMNS, "added_at", "added_by"))
        values = ", ".join([self.placeholder] * (len(COLUMNS) + 2))
        return f"INSERT INTO runs ({columns}) VALUES ({values}) ON CONFLICT DO NOTHING"


@contextmanager
def open_store(db: str | Path, create: bool = True) -> Iterator[_SqliteStore | _PostgresStore]:
    target = parse_target(db)
    store = _SqliteStore(target, create) if target.dialect == "sqlite" else _PostgresStore(target)
    try:
        yield store
    finally:
        store.close()


def _stamp() -> tuple[float, str]:
    return time.time(), socket.gethostname()


class _SqliteStore(_Store):
    """The embedded default: one file, a writer at a time (SQLite's own lock)."""

    placeholder = "?"

    def __init__(self, target: Target, create: bool) -> None:
        self.shown = target.shown
        path = Path(target.where)
        if path.is_dir():
            raise ResultsError(
                f"history database {self.shown} is a folder, not a database file: give a file path (--db or "
                "DLPERF_HISTORY), such as ~/.dlperf/history.sqlite"
            )
        if not create and not path.is_file():
            raise ResultsError(
                f"history database {self.shown} does not exist: store results first with `dlperf history add DIR`"
            )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.connection = sqlite3.connect(path)
        except (OSError, sqlite3.Error) as error:
            raise ResultsError(f"cannot open history database {self.shown}: {error}; choose another --db") from None

    def add(self, rows: Sequence[tuple]) -> list[bool]:
        """Store the rows (COLUMNS order) in one transaction; whether each was new."""
        added = []
        try:
            with self.connection:
                self.connection.execute("BEGIN IMMEDIATE")  # the schema check and the rows, one writer at a time
                _bring_up_to_date(_Schema("sqlite", self.connection.execute), self.shown)
                stamp = _stamp()
                for row in rows:
                    before = self.connection.total_changes
                    self.connection.execute(self._insert(), (*row, *stamp))
                    added.append(self.connection.total_changes > before)
        except sqlite3.Error as error:  # locked by another writer, or a table of another shape: nothing stored
            raise ResultsError(
                f"cannot store into history database {self.shown}: {error}; try again, or another --db"
            ) from None
        return added

    @contextmanager
    def _reading(self) -> Iterator[Execute]:
        """A look at a history dlperf wrote (schema checked); SQLite's error is one line."""
        try:
            _check_version(_Schema("sqlite", self.connection.execute).version(), self.shown)
            yield self.connection.execute
        except sqlite3.Error as error:
            raise ResultsError(
                f"history database {self.shown} is not one dlperf wrote ({error}): choose another --db"
            ) from None


def _check_version(version: int | None, shown: str) -> None:
    if version is not None and version > SCHEMA_VERSION:
        raise ResultsError(
            f"history database {shown} has schema {version}, written by a newer dlperf (this one knows up to "
            f"{SCHEMA_VERSION}): upgrade dlperf to use it"
        )


@dataclass(frozen=True)
class _Schema:
    """The tables and their version as one dialect's `execute` sees them."""

    dialect: str
    run: Execute

    def tables(self) -> set[str]:
        return {r[0] for r in self.run(SCHEMA_QUERIES[self.dialect][0]).fetchall()}

    def columns(self, table: str) -> set[str]:
        return {r[0] for r in self.run(SCHEMA_QUERIES[self.dialect][1], (table,)).fetchall()}

    def version(self) -> int | None:
        if "dlperf_schema" not in self.tables():
            return None
        row = self.run("SELECT max(version) FROM dlperf_schema").fetchone()
        return row[0] if row else None

    def execute(self, sql: str) -> None:
        self.run(sql)


def _bring_up_to_date(schema: _Schema, shown: str) -> None:
    """Create the tables, or upgrade a schema-1 history (an older dlperf's) in place; the caller holds the lock."""
    version = schema.version()
    _check_version(version, shown)
    if version == SCHEMA_VERSION:
        return
    tables = schema.tables()
    if "runs" in tables:
        missing = set(COLUMNS) - schema.columns("runs")
        if missing:
            raise ResultsError(
                f"history database {shown} has a table `runs` that dlperf did not write (no "
                f"{', '.join(sorted(missing))}): choose another --db"
            )
        for column, kind in (("added_at", TYPES[schema.dialect][1]), ("added_by", "TEXT")):
            if column not in schema.columns("runs"):
                schema.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")
    else:
        schema.execute(runs_table(schema.dialect))
    schema.execute("CREATE INDEX IF NOT EXISTS runs_case ON runs (model, grp, case_name, label)")
    schema.execute("CREATE TABLE IF NOT EXISTS dlperf_schema (version INTEGER NOT NULL)")
    schema.execute("DELETE FROM dlperf_schema")
    schema.execute(f"INSERT INTO dlperf_schema (version) VALUES ({SCHEMA_VERSION})")


class _PostgresStore(_Store):
    """A shared server: any number of machines add at once; a schema change waits on an advisory lock."""

    placeholder = "%s"

    def __init__(self, target: Target) -> None:
        require_extra("psycopg", "postgres", f"a PostgreSQL history ({target.shown})")
        import psycopg

        self.shown = target.shown
        self.psycopg = psycopg
        try:
            self.connection = psycopg.connect(str(target.where), connect_timeout=10, application_name="dlperf")
        except psycopg.Error as error:
            raise ResultsError(f"cannot connect to history database {self.shown}: {mask(first_line(error))}") from None

    def add(self, rows: Sequence[tuple]) -> list[bool]:
        try:
            # the schema first, in its own transaction under a lock (one machine at a time); then the rows in one
            # transaction, side by side with other machines' adds
            with self.connection.transaction(), self.connection.cursor() as cursor:
                schema = _Schema("postgresql", cursor.execute)
                if schema.version() != SCHEMA_VERSION:
                    cursor.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_ID,))
                    _bring_up_to_date(schema, self.shown)
            with self.connection.transaction(), self.connection.cursor() as cursor:
                stamp = _stamp()
                added = {}
                # in key order: two adds that share records take their row locks in the same order, never deadlock
                for row in sorted(rows, key=lambda r: r[0]):
                    cursor.execute(self._insert() + " RETURNING run_key", (*row, *stamp))
                    added[row[0]] = cursor.fetchone() is not None
            return [added[row[0]] for row in rows]
        except self.psycopg.Error as error:  # the server stopped, a lost connection, a refused write: rolled back
            # a lost server may come back; a write it refused (a permission, say: records are checked first) will not
            lost = isinstance(error, self.psycopg.OperationalError)
            retry = (
                "try again" if lost else "the server refused it: fix what it says, trying again as it is will not help"
            )
            raise ResultsError(
                f"cannot store into history database {self.shown}: {mask(first_line(error))}; nothing was stored, "
                f"{retry}"
            ) from None

    @contextmanager
    def _reading(self) -> Iterator[Execute]:
        """A read-only look at a history dlperf wrote (schema checked); a server's error is one line."""
        try:
            with self.connection.transaction(), self.connection.cursor() as cursor:
                schema = _Schema("postgresql", cursor.execute)
                _check_version(schema.version(), self.shown)
                if "runs" not in schema.tables():
                    raise ResultsError(
                        f"history database {self.shown} holds no dlperf history: store results first with "
                        "`dlperf history add DIR`"
                    )
                yield cursor.execute
        except self.psycopg.Error as error:
            raise ResultsError(f"cannot read history database {self.shown}: {mask(first_line(error))}") from None
