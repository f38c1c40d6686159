"""Open, create and version the warehouse file.

DuckDB allows one writing process per file. Writers wait for a lock up to a
deadline and then fail with a message that says who holds it; readers open
read-only so any number of them can share the file.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from pathlib import Path

import duckdb

from bufferhouse.errors import SchemaVersionError, WarehouseError, WarehouseLockedError
from bufferhouse.schema.tables import SCHEMA_VERSION

ENV_DB = "BUFFERHOUSE_DB"
DEFAULT_DB = "bufferhouse.duckdb"
#: Storage format the DuckDB 1.x shells (duckdb-cli 1.5) can read.
STORAGE_VERSION = "v1.0.0"

_LOCK_PID = re.compile(r"Conflicting lock is held in (.*?) \(PID (\d+)\)")


def default_db() -> str:
    return os.environ.get(ENV_DB) or DEFAULT_DB


def _is_empty_file(path: str) -> bool:
    try:
        return os.path.getsize(path) == 0 and not os.path.getsize(path + ".wal")
    except OSError:  # no file, or no WAL beside it
        return os.path.isfile(path) and os.path.getsize(path) == 0


def _remove_if_unused(path: str) -> None:
    """Remove an empty warehouse file unless another process holds it (it may be
    creating it this very moment; DuckDB locks the file with fcntl)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return
    try:
        if os.name == "posix":
            import fcntl

            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.fstat(fd).st_size == 0:
            os.remove(path)
    except OSError:
        pass  # held by someone: connect below waits for it like for any writer
    finally:
        os.close(fd)


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc)
    return "Could not set lock" in text or "Conflicting lock" in text


def _lock_message(path: str, exc: Exception, waited: float, read_only: bool = False) -> str:
    m = _LOCK_PID.search(str(exc))
    who = f"{m.group(1)} (PID {m.group(2)})" if m else "another process"
    if read_only:
        return (
            f"warehouse {path} is open for writing by {who}; readers cannot share it with a "
            "writer. Let that ingest finish, or close that program (a duckdb shell opened "
            "without -readonly, a notebook), then retry."
        )
    return (
        f"warehouse {path} is in use by {who}; waited {waited:.0f}s. Close that program "
        "(a duckdb shell, a notebook, another bufferhouse ingest) or pass a longer --wait."
    )


def open_connection(
    db: str | os.PathLike[str] | None = None,
    *,
    read_only: bool = True,
    wait: float = 0.0,
) -> duckdb.DuckDBPyConnection:
    """Open the warehouse, waiting up to `wait` seconds for a conflicting lock."""
    path = os.fspath(db) if db is not None else default_db()
    if read_only and not os.path.exists(path):
        raise WarehouseError(
            f"no warehouse at {path}: run 'bufferhouse ingest DUMPS --db {path}' first"
        )
    if _is_empty_file(path):
        # Created but never written (the disk was full, or the process was killed
        # at that instant): it holds nothing, and DuckDB refuses to open it.
        if read_only:
            raise WarehouseError(
                f"{path} is empty (0 bytes): no ingest ever wrote to it; "
                f"run 'bufferhouse ingest DUMPS --db {path}'"
            )
        _remove_if_unused(path)
    config = {} if read_only else {"storage_compatibility_version": STORAGE_VERSION}
    deadline = time.monotonic() + max(wait, 0.0)
    started = time.monotonic()
    delay = 0.05
    while True:
        try:
            con = duckdb.connect(path, read_only=read_only, config=config)
            break
        except duckdb.Error as exc:
            if not _is_lock_error(exc):
                raise WarehouseError(f"cannot open warehouse {path}: {exc}") from None
            if time.monotonic() >= deadline:
                raise WarehouseLockedError(
                    _lock_message(path, exc, time.monotonic() - started, read_only)
                ) from None
            time.sleep(min(delay, max(deadline - time.monotonic(), 0.01)))
            delay = min(delay * 2, 1.0)
    return con


def schema_version(con: duckdb.DuckDBPyConnection) -> int | None:
    exists = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'schema_info' AND schema_name = 'main'"
    ).fetchone()[0]
    if not exists:
        return None
    row = con.execute("SELECT value FROM schema_info WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else None


def check_version(con: duckdb.DuckDBPyConnection, path: str) -> None:
    version = schema_version(con)
    if version is None:
        raise WarehouseError(
            f"{path} is a DuckDB file but not a bufferhouse warehouse (no schema_info)"
        )
    if version != SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{path} has warehouse schema version {version}; this bufferhouse reads version "
            f"{SCHEMA_VERSION}. Re-ingest the dumps into a new file, or use the bufferhouse release "
            "that wrote it (see CHANGELOG.md)."
        )


def connect(
    db: str | os.PathLike[str] | None = None, *, read_only: bool = True, wait: float = 0.0
) -> duckdb.DuckDBPyConnection:
    """A connection to an existing warehouse whose schema version this release reads."""
    path = os.fspath(db) if db is not None else default_db()
    con = open_connection(path, read_only=read_only, wait=wait)
    try:
        check_version(con, path)
    except Exception:
        con.close()
        raise
    return con


def database_path(db: str | os.PathLike[str] | None) -> str:
    return str(Path(os.fspath(db) if db is not None else default_db()))


def ensure_schema(con: duckdb.DuckDBPyConnection, path: str) -> None:
    """Create the tables in a new warehouse (idempotent); refuse another version."""
    from bufferhouse.schema import comment_statements, create_statements
    from bufferhouse.schema.tables import MEMORY_SPACE_NAMES

    version = schema_version(con)
    if version is not None:
        check_version(con, path)
        return
    existing = con.execute("SELECT count(*) FROM duckdb_tables()").fetchone()[0]
    if existing:
        raise WarehouseError(f"{path} already holds tables that are not a bufferhouse warehouse")
    con.execute("BEGIN TRANSACTION")
    try:
        for statement in create_statements():
            con.execute(statement)
        for statement in comment_statements():
            con.execute(statement)
        con.executemany("INSERT INTO memory_spaces VALUES (?, ?, ?, ?)", list(MEMORY_SPACE_NAMES))
        con.execute("INSERT INTO schema_info VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
        con.execute("COMMIT")
    except Exception as exc:
        with contextlib.suppress(duckdb.Error):  # a failed COMMIT has ended it already
            con.execute("ROLLBACK")
        if isinstance(exc, duckdb.Error):
            raise WarehouseError(f"cannot create the warehouse tables in {path}: {exc}") from None
        raise
