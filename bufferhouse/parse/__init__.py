"""Parse stage: one module's files -> warehouse tables (Arrow), nothing written.

`parse_files` is the unit of work a parser process (or a Spark task) runs:
hash the module's files, skip it if the warehouse already has it, parse it,
and return its tables without module ids. `parse_module` does the parsing.

Text dumps have one grammar (`text.grammar`) and one set of invariants
(`text.rules`), executed by two readers: the line reader (`text.scan`), the
reference, which reads every era and words every grammar error, and, for
dumps of the common layouts above VECTOR_MIN_BYTES, the column reader
(`text.vector`) that reads the bulky sections as whole Arrow columns with the
compiled kernels of `text.native` and hands anything unusual to the line reader
(which reads everything where the kernels are not built).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import traceback
from collections import Counter
from collections.abc import Callable, Container, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import pyarrow as pa

from bufferhouse.errors import DumpError
from bufferhouse.parse import memory, proto
from bufferhouse.parse.derive import Derived, Origin, derive
from bufferhouse.parse.discover import LogFile, ModuleFiles, ProfileFile, stem_parts, text_path
from bufferhouse.parse.model import Reading
from bufferhouse.parse.oom import read_log
from bufferhouse.parse.pprof import NotMemoryProfile, read_file, snapshot_tables
from bufferhouse.parse.reader import Identity, file_name, module_identity, read_lines
from bufferhouse.parse.results import (
    Failed,
    ParsedEvents,
    ParsedModule,
    ParsedSnapshot,
    ParseResult,
    Present,
    Quiet,
    Skipped,
)
from bufferhouse.parse.text import scan, vector
from bufferhouse.parse.text.finish import finish
from bufferhouse.schema import MODULE_TABLES, TABLES_BY_NAME, Table, arrow_schema

__all__ = [
    "VECTOR_MIN_BYTES",
    "ParseResult",
    "Reading",
    "module_tables",
    "parse_files",
    "parse_log",
    "parse_module",
    "parse_profile",
    "parsed_schema",
    "with_programs",
]

#: Dumps (bytes on disk) smaller than this are scanned line by line: below
#: it, setting up the vectorized scan costs more than it saves.
VECTOR_MIN_BYTES = 1 << 16

#: Modules read from fewer bytes keep what their parse freed for the next one: handing
#: it back (memory.release) costs a millisecond or more, and returns little.
RELEASE_MIN_BYTES = 1 << 24


def parse_module(
    files: list[tuple[str, str]],
    hlo_path: str | None = None,
    *,
    accelerate: bool = True,
    vector_min_bytes: int = VECTOR_MIN_BYTES,
    threads: int = 0,
) -> Reading:
    """Read a module's text dump files, given as (role, path).

    `accelerate=False` runs only the per-line state machine (the reference);
    `vector_min_bytes=0` sends every module the vectorized scanner can read to it.
    `threads`: how many more threads may work on it (cores to spare): they read ahead,
    read Used values blocks and parse instruction texts, all in Arrow kernels that
    release the GIL.
    """
    with memory.system_allocator():  # see memory.py: less memory held at the peak
        scanned = vector.scan(files, vector_min_bytes, threads > 0) if accelerate else None
        large = scanned is not None
        if scanned is None:
            scanned = scan.read(files)
        parsed = finish(scanned, files, hlo_path, read_lines, threads)
        del scanned
        if large:  # its scratch memory goes back to the OS; small modules skip the call
            memory.release()
    return parsed


def parse_profile(profile: ProfileFile, max_bytes: int | None = None) -> ParseResult:
    """Read one device memory profile whole. Never raises: damage fails the file, located;
    a pprof profile of another kind found in a tree is skipped (failed if given by name)."""
    try:
        snapshot = read_file(profile.path, max_bytes)
        tables = snapshot_tables(snapshot, profile.path, text_path(profile.path))
    except NotMemoryProfile as exc:
        return Failed(error=exc) if profile.explicit else Skipped(error=exc)
    except DumpError as exc:
        return Failed(error=exc)
    except (OverflowError, pa.ArrowInvalid) as exc:
        error = DumpError(profile.path, 0, f"a number is too large for its column ({exc})")
        return Failed(error=error)
    except Exception as exc:  # a bug of ours must not take the batch down
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        error = DumpError(
            profile.path, 0, f"internal error while reading (please report): {detail}"
        )
        return Failed(error=error)
    return ParsedSnapshot(
        snapshot=tables, content_hash=snapshot.content_hash, bytes_read=snapshot.bytes_read
    )


def parse_log(log: LogFile) -> ParseResult:
    """Scan one log for OOM events. Never raises: a log that could not be read and gave
    no event fails with why; one given by name that holds no message (and is no dump)
    fails with what was expected; any other is skipped."""
    try:
        events = read_log(log.path)
    except Exception as exc:  # a bug of ours must not take the batch down
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        error = DumpError(log.path, 0, f"internal error while scanning for OOM messages: {detail}")
        return Failed(error=error)
    if events.events.num_rows == 0:
        if events.file_problems:  # unreadable, corrupt .gz: said, never skipped in silence
            return Failed(bytes_read=events.bytes_read, error=events.file_problems[0])
        if log.explicit:
            return Failed(
                bytes_read=events.bytes_read,
                error=DumpError(
                    log.path,
                    0,
                    "neither a buffer-assignment dump nor a log with an OOM message: expected"
                    " the first line 'BufferAssignment:', a name ending in -buffer-assignment.txt,"
                    " or a RESOURCE_EXHAUSTED message",
                ),
            )
        return Quiet(bytes_read=events.bytes_read)
    return ParsedEvents(bytes_read=events.bytes_read, events=events)


def _unused_proto(exc: DumpError) -> DumpError:
    """A proto that cannot be read beside a text dump: the warning the module carries."""
    if isinstance(exc, proto.NoBufferAssignment):
        return exc
    return _unused_form(exc, "text dump")


def _unused_form(exc: DumpError, kept: str) -> DumpError:
    """One form of a compile that cannot be read, as the warning of the form kept."""
    return DumpError(
        exc.path, exc.line, f"{exc.message} (the {kept} beside it is loaded without it)", exc.text
    )


def parse_files(
    files: ModuleFiles | LogFile | ProfileFile,
    known: Container[str] = frozenset(),
    max_bytes: int | None = None,
    *,
    accelerate: bool = True,
    threads: int = 0,
    batched: bool = False,
    program: bytes | None = None,
) -> ParseResult:
    """Hash, skip if known, parse, and convert one module to Arrow tables. Never raises.

    `batched`: the module is one of a batch (parse.batch.parse_batch), which computes its
    assignment fingerprint and checks its row against the columns over the whole batch;
    here the row's fingerprint is left None and the row is not checked. `program`: a
    profile program's HloProto, when with_programs read it already (read here otherwise).

    The tables come without their module_id: the sink that takes the module adds it.
    A module may come as text, as an `.hlo.pb`, as both (one module: the text's tables,
    the proto's trace, disagreements as warnings) or from a profile; each form gives
    one Reading, and one derive step turns it into the module's rows. A LogFile is
    scanned for OOM events instead (parse_log), a ProfileFile read as a device memory
    snapshot (parse_profile).
    """
    if isinstance(files, LogFile):
        return parse_log(files)
    if isinstance(files, ProfileFile):
        return parse_profile(files, max_bytes)
    first = identified(files, known, max_bytes, program)
    if not isinstance(first, Identity):
        return first
    return parsed_module(
        files, first, lambda: _read(files, first, accelerate, threads), batched, max_bytes
    )


def identified(
    files: ModuleFiles, known: Container[str], max_bytes: int | None, program: bytes | None = None
) -> ParseResult | Identity:
    """The module's identity, or its result when that is all there is to it: skipped,
    failed before it is read, or present in the warehouse already."""
    if files.skip is not None:
        return Skipped(error=DumpError(files.display, 0, files.skip))
    if files.problems and files.buffer_assignment is None and files.proto is None:
        return Failed(error=files.problems[0])
    dump_files = files.dump_files()
    try:
        identity = _identify(files, max_bytes, program)
    except DumpError as exc:
        if exc.path != files.proto or not dump_files:
            return Failed(error=exc)
        files.problems.append(_unused_proto(exc))  # e.g. a corrupt .hlo.pb.gz
        files.proto = None
        try:
            identity = _identify(files, max_bytes)
        except DumpError as again:
            return Failed(error=again)
    digest, nbytes = identity.content_hash, identity.bytes_read
    if digest in known:
        return Present(content_hash=digest, bytes_read=nbytes)
    if identity.dump_hash in known:  # held under its dump files alone: see _held_without_hlo
        return _held_without_hlo(files, identity)
    return identity


def parsed_module(
    files: ModuleFiles,
    identity: Identity,
    read: Callable[[], Reading | _Split | None],
    batched: bool = False,
    max_bytes: int | None = None,
) -> ParseResult:
    """The module's result from its reading (`read` makes it): derived, its tables as the
    warehouse declares them; a failure of either, located, fails the module alone."""
    digest, nbytes = identity.content_hash, identity.bytes_read
    try:
        with memory.system_allocator():  # derive too: see memory.py
            reading = read()
            if isinstance(reading, _Split):
                return _split(files, reading, max_bytes)
            if reading is None:
                assert files.problems
                error = files.problems.pop()
                return Skipped(content_hash=digest, bytes_read=nbytes, error=error)
            origin = _origin(files, reading, digest, nbytes)
            derived = derive(reading, origin, fingerprint=not batched)
            del reading
            row = derived.row.as_dict()
            tables = module_tables(derived.tables) if batched else _check_fits(derived, row)
            if nbytes >= RELEASE_MIN_BYTES:
                # What derive freed goes back before the writer takes the tables: it was
                # the 500 MB module's peak (~1,000 MiB, ~300 MiB of it freed memory).
                memory.release()
    except DumpError as exc:
        return Failed(content_hash=digest, bytes_read=nbytes, error=exc)
    except (OverflowError, pa.ArrowInvalid) as exc:  # a number too large for its column
        return Failed(content_hash=digest, bytes_read=nbytes, error=range_error(files, exc))
    except Exception as exc:  # a bug of ours must not take the batch down
        error = internal_error(files, exc)
        return Failed(content_hash=digest, bytes_read=nbytes, error=error)
    warnings = [*files.problems, *derived.warnings]
    return ParsedModule(
        content_hash=digest, bytes_read=nbytes, row=row, tables=tables, warnings=warnings
    )


def _identify(files: ModuleFiles, max_bytes: int | None, data: bytes | None = None) -> Identity:
    """The module's content identity. A profile's program is known by its name and
    HloProto bytes (`data`), read here unless with_programs read them already."""
    if files.xplane is None:
        content = files.content_files()  # the dump files, then the proto: all that lands
        names = [file_name(p) for _, p in content]
        return module_identity([p for _, p in content], names, files.hlo, max_bytes)
    from bufferhouse.parse.proto.xplane import read_program

    assert files.program is not None
    if data is None:
        data = read_program(files.xplane, files.program, files.plane_offset)
    digest = proto.xplane_content_hash(files.program, data)
    return Identity(digest, digest, len(data), program_data=data)


def _read(
    files: ModuleFiles, identity: Identity, accelerate: bool, threads: int
) -> Reading | _Split | None:
    """The module's reading from its forms: a profile's program, or a text dump, a proto
    or both side by side. None when the only form is an HloProto without a buffer
    assignment (its problem recorded in files.problems)."""
    if files.xplane is not None:
        assert files.program is not None and identity.program_data is not None
        data, identity.program_data = identity.program_data, None
        try:
            return proto.parse_xplane_program(files.xplane, files.program, data)
        except proto.NoBufferAssignment as exc:
            files.problems.append(exc)
            return None
    dump_files = files.dump_files()
    from_proto = None
    if files.proto is not None:
        try:
            from_proto = proto.parse_proto_file(files.proto)
        except DumpError as exc:
            if not dump_files:
                if isinstance(exc, proto.NoBufferAssignment):
                    files.problems.append(exc)
                    return None
                raise
            # The text beside it is a module of its own: it lands, the proto's problem
            # is its warning (a damaged proto used to fail both).
            files.problems.append(_unused_proto(exc))
    if not dump_files:
        return from_proto
    try:
        text = parse_module(dump_files, files.hlo, accelerate=accelerate, threads=threads)
    except Exception as exc:
        if from_proto is None:
            raise
        # The proto beside it is a module of its own: it lands, the text's error (file,
        # line, what was expected) is its warning (a failing text used to fail both; a
        # bug of the text reader, found by bench/fuzz_pairing.py, still did).
        if not isinstance(exc, DumpError):
            exc = internal_error(files, exc)  # named by the buffer-assignment file
        files.problems.append(_unused_form(exc, "proto"))
        return from_proto
    if from_proto is None:
        return text
    why = proto.different_compiles(text, from_proto)
    if why is not None:
        return _Split(text, from_proto, why)
    return proto.combine_text_and_proto(text, from_proto, files.proto)


@dataclass
class _Split:
    """A text dump and a proto of one stem whose assignments differ: two compiles."""

    text: Reading
    proto: Reading
    why: str


def _split(files: ModuleFiles, split: _Split, max_bytes: int | None) -> ParsedModule:
    """Two modules from one group: the text dump's and the proto's, each with the identity
    and origin it has alone, and a warning naming both files."""
    assert files.proto is not None
    text_files = dataclasses.replace(files, proto=None, problems=list(files.problems))
    proto_files = dataclasses.replace(
        files,
        buffer_assignment=None,
        values=None,
        live_range=None,
        usage_report=None,
        problems=[],
    )
    note = (
        f"{files.buffer_assignment} and {files.proto} share a stem but not their assignments"
        f" ({split.why}): not one compile, loaded as two modules"
    )
    results = []
    for part, reading, path in (
        (text_files, split.text, files.buffer_assignment),
        (proto_files, split.proto, files.proto),
    ):
        identity = _identify(part, max_bytes)
        reading.warnings.append(DumpError(path, 0, note))
        derived = derive(
            reading, _origin(part, reading, identity.content_hash, identity.bytes_read)
        )
        row = derived.row.as_dict()
        tables = _check_fits(derived, row)
        warnings = [*part.problems, *derived.warnings]
        results.append(
            ParsedModule(
                content_hash=identity.content_hash,
                bytes_read=identity.bytes_read,
                row=row,
                tables=tables,
                warnings=warnings,
            )
        )
    results[0].companion = (proto_files, results[1])
    return results[0]


def _check_fits(derived: Derived, row: dict) -> dict[str, pa.Table]:
    """The tables as the warehouse declares them; the row's numbers (`row`: the module
    row as a dict, made once) must fit their columns too (raises OverflowError /
    ArrowInvalid otherwise)."""
    tables = module_tables(derived.tables)
    check_rows([row])
    return tables


def check_rows(rows: list[dict]) -> None:
    """Module rows (as dicts) must fit their columns: raises OverflowError / ArrowInvalid
    otherwise."""
    pa.Table.from_pylist(rows, schema=_MODULE_ROW)


def internal_error(files: ModuleFiles, exc: Exception) -> DumpError:
    detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return DumpError(files.display, 0, f"internal error while parsing (please report): {detail}")


_MODULE_ROW = arrow_schema(TABLES_BY_NAME["modules"])


Group = TypeVar("Group", bound="ModuleFiles | LogFile | ProfileFile")


def with_programs(groups: Sequence[Group]) -> Iterator[tuple[Group, bytes | None]]:
    """`groups` in their order, each with its HloProto when it is a program of a profile
    (None otherwise, or when it could not be read: its problem is the group's): all the programs of a profile in one pass over it, when the first
    of them comes up, instead of one pass per program (a `.gz` is decompressed from its
    start each time). The HloProtos of a profile's programs that have not come up yet
    wait here: discover lists a profile's programs one after the other, and largest_first
    keeps them so, so that is one profile's at a time, never the trace events. A profile
    that no longer reads (or lost a program) since discover listed it fails each of its
    programs with that error, located as discover's would be."""
    from bufferhouse.parse.proto.xplane import missing_program, read_programs

    wanted: dict[str, Counter[tuple[str, int]]] = {}  # profile -> (program, plane) -> groups
    for g in groups:
        if _reads_program(g):
            wanted.setdefault(g.xplane, Counter())[(g.program, g.plane_offset)] += 1
    read: dict[str, dict[tuple[str, int], bytes] | DumpError] = {}
    for g in groups:
        if _reads_program(g):
            path, key = g.xplane, (g.program, g.plane_offset)
            if path not in read:
                try:
                    read[path] = read_programs(path, wanted[path])
                except DumpError as exc:
                    read[path] = exc
            got, left = read[path], wanted[path]
            left[key] -= 1
            data = None
            if isinstance(got, DumpError):
                g.problems.append(got)
            elif key in got:  # kept only while another group still wants it
                data = got[key] if left[key] else got.pop(key)
            else:
                g.problems.append(missing_program(path, g.program))
            if left.total() == 0:
                del read[path], wanted[path]
            yield g, data
        else:
            yield g, None


def _reads_program(g: ModuleFiles | LogFile | ProfileFile) -> bool:
    return (
        isinstance(g, ModuleFiles) and g.xplane is not None and bool(g.program) and not g.problems
    )


def _held_without_hlo(files: ModuleFiles, identity: Identity) -> Present:
    """The warehouse holds these dump files under the identity of the dump files alone:
    loaded by a release whose identity left the HLO text out, or before this HLO file
    lay beside them. Loading them again would hold the module twice: it is present
    (labels go to the module held), and a warning says its HLO text is not compared."""
    assert files.hlo is not None
    note = DumpError(
        files.hlo,
        0,
        "the warehouse holds this module's dump files without this HLO text in its "
        "identity (loaded by an earlier release, or before the HLO file was there): "
        "kept as already present, with the source locations it was loaded with; a "
        "changed HLO file is not picked up (ingest into a new warehouse to load it)",
    )
    return Present(content_hash=identity.dump_hash, bytes_read=identity.bytes_read, warnings=[note])


def range_error(files: ModuleFiles, exc: Exception) -> DumpError:
    """A number that fits no warehouse column (INTEGER is 32 bits): name the line
    that prints it, found by searching the module's files for that number."""
    m = re.search(r"Value (-?\d+) too large", str(exc))
    if m:
        number = re.compile(rf"(?<![\d.]){m.group(1)}(?!\d)")
        for _, path in files.dump_files():
            for lineno, line in read_lines(path):
                if number.search(line):
                    return DumpError(
                        path, lineno, f"number {m.group(1)} is too large for its column", line
                    )
    return DumpError(files.display, 0, f"a number is too large for its column ({exc})")


def _origin(files: ModuleFiles, reading: Reading, digest: str, nbytes: int) -> Origin:
    """What the files' names say of the module: its name, number, backend and paths."""
    if files.xplane is not None:
        # A profile names programs `<module>(<program id>)`; the module name is XLA's.
        return Origin(
            file_stem=text_path(f"{os.path.basename(files.xplane)}#{files.program}"),
            module_name=reading.facts.module_name or files.program or "",
            module_number=None,
            backend=files.xplane_backend,
            target=None,
            stage="after_optimizations",
            paths=[text_path(files.xplane)],
            content_hash=digest,
            bytes_read=nbytes,
        )
    stem = text_path(files.stem)  # file names need not be UTF-8
    parts = stem_parts(stem)
    paths = [text_path(p) for _, p in files.content_files()]
    if files.hlo and "hlo" in reading.sections:
        paths.append(text_path(files.hlo))
    return Origin(
        file_stem=stem,
        module_name=parts["module_name"] or stem,
        module_number=parts["module_number"],
        backend=parts["backend"],
        target=parts["target"],
        stage=parts["stage"],
        paths=paths,
        content_hash=digest,
        bytes_read=nbytes,
        libtpu=files.libtpu,
    )


def module_tables(parsed: dict[str, pa.Table]) -> dict[str, pa.Table]:
    """The parsed tables as the warehouse declares them, but for their module_id: the sink
    that takes the module gives it its id and adds the column (Batch.pop_table,
    with_module_id), so no placeholder column is built, shipped and replaced."""
    return {t.name: _declared(parsed.get(t.name), t) for t in MODULE_TABLES}


def _declared(data: pa.Table | None, table: Table) -> pa.Table:
    """`data` with the declared schema (the same arrays); a table with no rows if None
    (e.g. heap_events: text dumps carry no trace). Most readings carry the declared
    schema already: they are passed on as they are, not rebuilt."""
    schema = parsed_schema(table)
    if data is None:
        return _empty_parsed(table)
    if data.schema.equals(schema, check_metadata=True):
        return data
    return pa.Table.from_arrays(data.columns, schema=schema)


@functools.cache
def _empty_parsed(table: Table) -> pa.Table:
    return parsed_schema(table).empty_table()


@functools.cache
def parsed_schema(table: Table) -> pa.Schema:
    """A module table's Arrow schema without its first column, module_id."""
    return arrow_schema(table).remove(0)
