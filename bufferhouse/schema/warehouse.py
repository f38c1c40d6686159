"""Open, create and version the warehouse file.

DuckDB allows one writing process per file. Writers wait for a lock up to a
deadline and then fail with a message that says who holds it; readers open
read-only so any number of them can share the file. A writer that opens a
warehouse of an older schema version upgrades it in place (schema/upgrade.py).
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import re
import time
from pathlib import Path

import duckdb

from bufferhouse.errors import (
    QueryError,
    SchemaVersionError,
    WarehouseError,
    WarehouseLockedError,
)
from bufferhouse.schema.tables import SCHEMA_VERSION
from bufferhouse.schema.upgrade import UPGRADES, first_row, schema_version, upgrade

ENV_DB = "BUFFERHOUSE_DB"
DEFAULT_DB = "bufferhouse.duckdb"
#: Storage format the DuckDB 1.x shells (duckdb-cli 1.5) can read; 1.2 is the
#: first with zstd for strings (instructions.text).
STORAGE_VERSION = "v1.2.0"
#: Block size of new warehouse files. DuckDB packs a checkpoint's small column
#: segments into shared blocks and leaves each block's tail empty; 64 KiB tails
#: waste a quarter of what 256 KiB ones do (a warehouse ~12% smaller). 32 KiB and
#: below split segments so finely that the file grows. Shells from 1.2 on read it.
BLOCK_SIZE = 64 * 1024

#: Where a waiting writer says whom it waits for (INFO; the CLI shows it on stderr,
#: library callers see it if they configure logging: the library itself never prints).
log = logging.getLogger("bufferhouse.warehouse")

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


def discard_new_warehouse(path: str) -> None:
    """Remove a warehouse this process created and closed with nothing in it, unless
    another process has opened it since (DuckDB holds an fcntl lock on an open file)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return
    try:
        if os.name == "posix":
            import fcntl

            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        for leftover in (path, path + ".wal"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(leftover)
    except OSError:
        pass  # opened by someone since: theirs now
    finally:
        os.close(fd)


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc)
    return "Could not set lock" in text or "Conflicting lock" in text


def _holder(exc: Exception) -> str:
    """Who holds the file, from DuckDB's lock error: 'PROGRAM (PID N)'."""
    m = _LOCK_PID.search(str(exc))
    return f"{m.group(1)} (PID {m.group(2)})" if m else "another process"


def _lock_message(path: str, exc: Exception, waited: float, read_only: bool = False) -> str:
    who = _holder(exc)
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


def _check_openable(path: str, read_only: bool) -> None:
    """Refuse a missing file (to read) or an empty one; remove an empty, unused one (to write)."""
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


def open_connection(
    db: str | os.PathLike[str] | None = None,
    *,
    read_only: bool = True,
    wait: float = 0.0,
    own_instance: bool = False,
) -> duckdb.DuckDBPyConnection:
    """Open the warehouse, waiting up to `wait` seconds for a conflicting lock.

    `own_instance` (read-only): a DuckDB instance of this connection's own (see
    _attach_own_instance), whose settings no other connection shares.
    """
    path = os.fspath(db) if db is not None else default_db()
    _check_openable(path, read_only)
    config = (
        {}
        if read_only
        else {"storage_compatibility_version": STORAGE_VERSION, "default_block_size": BLOCK_SIZE}
    )
    deadline = time.monotonic() + max(wait, 0.0)
    started = time.monotonic()
    delay = 0.05
    told = False
    while True:
        try:
            if own_instance:
                con = _attach_own_instance(path)
            else:
                con = duckdb.connect(path, read_only=read_only, config=config)
            break
        except duckdb.Error as exc:
            if not _is_lock_error(exc):
                raise WarehouseError(f"cannot open warehouse {path}: {exc}") from None
            if not told and wait > 0:
                told = True
                log.info(
                    "warehouse %s is in use by %s; waiting up to %.0fs for it (--wait)",
                    path,
                    _holder(exc),
                    wait,
                )
            if time.monotonic() >= deadline:
                raise WarehouseLockedError(
                    _lock_message(path, exc, time.monotonic() - started, read_only)
                ) from None
            time.sleep(min(delay, max(deadline - time.monotonic(), 0.01)))
            delay = min(delay * 2, 1.0)
    # No progress bar: DuckDB draws it on stdout, into the data a query writes there.
    with contextlib.suppress(duckdb.InvalidInputException):
        con.execute("SET enable_progress_bar = false")
    return con


def _attach_own_instance(path: str) -> duckdb.DuckDBPyConnection:
    """The warehouse attached read-only to a new in-memory DuckDB instance.

    duckdb.connect(path) shares one instance, and its settings, between every
    connection to that file in the process: a sealed connection's locked
    configuration would lock the user's own connection (bufferhouse.connect in a
    notebook) and fail the next sealed one. A private instance is sealed alone
    and goes when its connection closes. DuckDB still refuses to attach a file
    this process holds open for writing.
    """
    con = duckdb.connect(":memory:")
    try:
        name = _catalog_name(path)
        con.execute(f"ATTACH {_quoted(path)} AS {name} (READ_ONLY)")
        con.execute(f"USE {name}")
    except BaseException:
        con.close()
        raise
    return con


def check_version(con: duckdb.DuckDBPyConnection, path: str) -> None:
    version = schema_version(con)
    if version is None:
        raise WarehouseError(
            f"{path} is a DuckDB file but not a bufferhouse warehouse (no schema_info)"
        )
    if version in UPGRADES:
        raise SchemaVersionError(
            f"{path} has warehouse schema version {version}; this bufferhouse reads version "
            f"{SCHEMA_VERSION}. Open it for writing once to upgrade it in place "
            f"('bufferhouse ingest DUMPS --db {path}', with any dumps, or "
            "bufferhouse.connect(PATH, read_only=False)); see CHANGELOG.md."
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
        if not read_only:
            upgrade(con, path)
        check_version(con, path)
    except Exception:
        con.close()
        raise
    return con


#: DuckDB settings that keep SQL inside the warehouse (issue 21): no files read or
#: written outside it (COPY TO, read_text, ATTACH, glob), no network, no extensions
#: installed or loaded; then the configuration is locked so SQL cannot undo it.
SEALED_SETTINGS = (
    ("enable_external_access", "false"),
    ("autoinstall_known_extensions", "false"),
    ("autoload_known_extensions", "false"),
    ("enable_progress_bar", "false"),
    ("lock_configuration", "true"),
)
#: schema_info key of a warehouse of views over a Parquet dataset (export.attach).
ATTACHED_KEY = "attached_from"
#: What SQL on a sealed connection may be (issue 31): a query. Anything else may write
#: (COPY, EXPORT, ATTACH, INSTALL) or change settings, and the folders a views
#: warehouse reads are readable and writable to DuckDB alike.
READ_STATEMENTS = ("SELECT",)


def connect_sealed(
    db: str | os.PathLike[str] | None = None, *, allow_files: bool = False, wait: float = 0.0
) -> duckdb.DuckDBPyConnection:
    """A read-only connection for SQL someone types (`sql`, `query`, the report).

    The seal is decided here, by the command, never by the file (issue 31): a fresh
    in-memory DuckDB attaches the warehouse read-only and is sealed (SEALED_SETTINGS)
    before any of its SQL runs, so `COPY ... TO`, `read_text`, `INSTALL` and the like
    fail with DuckDB's Permission Error, whatever the file says. A warehouse of views
    over a Parquet dataset (`attached_from`) may read the dataset's table folders and
    nothing else; `require_query` keeps the SQL from writing there. Each call is an
    instance of its own, so no configuration of another connection is changed.
    `allow_files` leaves DuckDB's defaults: the SQL may then read and write any file the
    user can, as the duckdb shell does. `wait` seconds it waits for a writer to let go
    of the file, as ingest does.
    """
    path = os.fspath(db) if db is not None else default_db()
    if allow_files:
        return connect(path, read_only=True, wait=wait)
    con = open_connection(path, read_only=True, wait=wait, own_instance=True)
    try:
        check_version(con, path)
        _seal(con, path, _attached_from(con))
    except BaseException:
        con.close()
        raise
    return con


def _seal(con: duckdb.DuckDBPyConnection, path: str, attached_from: str | None) -> None:
    """Configure and lock `con` (the one place the seal is set). A views warehouse's
    stored source is not trusted: only folders named after the warehouse's tables,
    under it, are readable."""
    if attached_from is not None:
        folders = _dataset_folders(attached_from)
        if not folders:
            raise WarehouseError(
                f"{path} holds views over {attached_from!r}, which is not a bufferhouse "
                "Parquet dataset (none of its table folders is there); attach the dataset "
                "again with 'bufferhouse attach DATASET --db FILE'"
            )
        if "://" in attached_from:
            with contextlib.suppress(duckdb.Error):  # reads the URL; not autoloaded once sealed
                con.execute("LOAD httpfs")
        con.execute("SET allowed_directories = ?", [folders])
    for name, value in SEALED_SETTINGS:
        con.execute(f"SET {name} = {value}")


def _dataset_folders(source: str) -> list[str]:
    """The table folders (`DATASET/modules/`, ...) of every dataset `source` names: a
    directory, a glob of several, or a URL (taken as given: it cannot be listed)."""
    from bufferhouse.schema.tables import TABLES

    if "://" in source:
        roots = [source.rstrip("/")]
    else:
        roots = [r.rstrip("/") for r in sorted(glob.glob(source)) if os.path.isdir(r)]
    folders = [
        f"{root}/{t.name}/"
        for root in roots
        for t in TABLES
        if "://" in root or os.path.isdir(f"{root}/{t.name}")
    ]
    base = _glob_base(source)
    if folders and base is not None:
        # DuckDB lists the folder a glob starts in to expand it: that folder is
        # readable too, when every folder the glob names is a dataset.
        datasets = {f.rsplit("/", 2)[0] for f in folders}
        if datasets == set(roots):
            folders.append(base)
    return folders


def _glob_base(source: str) -> str | None:
    """The folder a local glob (`exports/*`) starts in, `exports/`; None for a plain
    path, a URL, or a glob at the file system's root."""
    if "://" in source or not glob.has_magic(source):
        return None
    head = source[: min(source.index(c) for c in "*?[" if c in source)]
    base = os.path.dirname(head)
    if not base or os.path.dirname(os.path.abspath(base)) == os.path.abspath(base):
        return None
    return base.rstrip("/") + "/"


def _attached_from(con: duckdb.DuckDBPyConnection) -> str | None:
    row = first_row(con, "SELECT value FROM schema_info WHERE key = ?", [ATTACHED_KEY])
    return None if row is None else row[0]


def _catalog_name(path: str) -> str:
    """The name DuckDB gives a file it opens (its stem), quoted; a reserved one
    (memory, temp, system) becomes `warehouse`."""
    from bufferhouse.schema import quote_identifier

    stem = Path(path).stem or "warehouse"
    if stem.lower() in ("memory", "temp", "system", "main"):
        stem = "warehouse"
    return quote_identifier(stem)


def _quoted(text: str) -> str:
    from bufferhouse.schema import sql_string

    return sql_string(text)


def require_query(con: duckdb.DuckDBPyConnection, statement) -> None:
    """Refuse a statement that is not a query on a sealed connection (`statement`:
    one of `con.extract_statements`). EXPLAIN ANALYZE runs what it explains, so an
    EXPLAIN is judged by the statement inside it."""
    if first_row(con, "SELECT current_setting('enable_external_access')")[0]:
        return  # not sealed (allow_files)
    if statement.type.name in READ_STATEMENTS:
        return
    what = f"{statement.type.name} statements are"
    if statement.type.name == "EXPLAIN":
        inner = _EXPLAINED.sub("", statement.query, count=1)
        try:
            inside = con.extract_statements(inner) if inner != statement.query else []
        except duckdb.Error:
            inside = []
        if len(inside) == 1 and inside[0].type.name in READ_STATEMENTS:
            return
        what = "EXPLAIN of a statement that is not a query is"
    raise QueryError(
        f"Permission Error: {what} refused: the warehouse is sealed, and its SQL may only "
        "query (SELECT, FROM, WITH, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN), not write files "
        "or change settings. To read or write your own files, allow it: "
        "`bufferhouse sql --allow-files`, or bufferhouse.sql(..., allow_files=True)."
    )


_EXPLAINED = re.compile(
    r"^(?:\s|--[^\n]*\n|/\*.*?\*/)*EXPLAIN\s+(?:\([^)]*\)\s*)?(?:ANALY[SZ]E\b\s*)?",
    re.IGNORECASE | re.DOTALL,
)


def database_path(db: str | os.PathLike[str] | None) -> str:
    return str(Path(os.fspath(db) if db is not None else default_db()))


def ensure_schema(con: duckdb.DuckDBPyConnection, path: str) -> None:
    """Create the tables in a new warehouse (idempotent), upgrade an older version,
    refuse any other."""
    from bufferhouse.schema import comment_statements, create_statements
    from bufferhouse.schema.tables import MEMORY_SPACE_NAMES

    version = schema_version(con)
    if version is not None:
        upgrade(con, path)
        check_version(con, path)
        return
    (existing,) = first_row(con, "SELECT count(*) FROM duckdb_tables()")
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
