"""A real PostgreSQL server for a test module: initdb and pg_ctl in a temporary folder, reached on a Unix socket
there only (no TCP port), fsync off; torn down with the module. Root runs it as the `postgres` user (initdb refuses
root). Skips, saying why, where Debian's postgresql is not installed."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PASSWORD = "s3cret"  # of the role `alice`, which logs in with scram-sha-256; every other role is trusted


@dataclass
class Postgres:
    bindir: Path
    root: Path
    as_user: list[str]

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, database: str, user: str = "postgres", password: str | None = None) -> str:
        login = f"{user}:{password}" if password else user
        return f"postgresql://{login}@/{database}?host={self.root}"

    def pg_ctl(self, *args: str) -> None:
        command = [*self.as_user, str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log")]
        subprocess.run([*command, *args], check=True, capture_output=True, timeout=60)

    def start(self) -> None:
        self.pg_ctl("-o", f"-k {self.root} -c listen_addresses='' -F", "-w", "start")

    def stop(self) -> None:
        self.pg_ctl("-m", "fast", "-w", "stop")

    def sql(self, statement: str, database: str = "postgres") -> list[tuple]:
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as connection:
            cursor = connection.execute(statement)
            return cursor.fetchall() if cursor.description else []

    def new_database(self, name: str) -> str:
        self.sql(f"CREATE DATABASE {name}")
        return self.url(name)


def _bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


def postgres_server() -> Iterator[Postgres]:
    """The module fixture's body: a running server, stopped and removed afterwards."""
    pytest.importorskip("psycopg", reason="psycopg is not installed: pip install 'dlperf[postgres]'")
    bindir = _bindir()
    if bindir is None or not (bindir / "pg_ctl").exists():
        pytest.skip("PostgreSQL's initdb and pg_ctl not found (/usr/lib/postgresql/*/bin): apt-get install postgresql")
    root = Path(tempfile.mkdtemp(prefix="dlpg"))  # short: a Unix socket's path is at most 107 bytes
    as_user: list[str] = []
    if os.getuid() == 0:
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser: initdb refuses root")
        shutil.chown(root, "postgres", "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    server = Postgres(bindir, root, as_user)
    initdb = [*as_user, str(bindir / "initdb"), "-D", str(server.data), "-U", "postgres", "-A", "trust", "--no-sync"]
    subprocess.run(initdb, check=True, capture_output=True, timeout=120)
    hba = server.data / "pg_hba.conf"
    hba.write_text(f"local all alice scram-sha-256\n{hba.read_text()}")
    server.start()
    try:
        server.sql(f"CREATE ROLE alice LOGIN SUPERUSER PASSWORD '{PASSWORD}'")
        yield server
    finally:
        subprocess.run([*server.as_user, str(bindir / "pg_ctl"), "-D", str(server.data), "-m", "immediate", "stop"],
                       capture_output=True, timeout=60)  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)
