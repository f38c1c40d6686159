"""Small modules parsed as a batch: each identified as parse_files does, their texts read
together, each derived, then the steps that are cheaper over the whole batch at once.

A fleet is mostly helper modules of a few kB (issue 39): their cost is the number of
Python and Arrow calls a module, not their bytes. `parse_batch` identifies each module
(its hash, the known check), reads the texts of all those left as one batch
(text/batch_scan.py, batch_rules.py, batch_finish.py: one table a kind with a module
column, split into the per-module Readings) and derives each Reading as parse_files
does; then the batch computes the assignment fingerprints (one sort, one text column and
one join over all the batch's allocations and placements:
derive.fingerprint.batch_fingerprints) and checks the module rows against their columns
(one Arrow table of all the rows).

Whole or nothing per module: a module that fails (a located DumpError, a number too
large for its column) fails alone with its own error, as it would parsed alone; the
others of its batch land whole. Each result is the one parse_files gives that module.
"""

from __future__ import annotations

from collections.abc import Container, Sequence

import pyarrow as pa

from bufferhouse.errors import DumpError
from bufferhouse.parse import (
    VECTOR_MIN_BYTES,
    Failed,
    ParsedModule,
    ParseResult,
    check_rows,
    identified,
    internal_error,
    memory,
    parse_files,
    parsed_module,
    range_error,
)
from bufferhouse.parse.derive.fingerprint import assignment_fingerprint, batch_fingerprints
from bufferhouse.parse.discover import ModuleFiles
from bufferhouse.parse.model import Reading
from bufferhouse.parse.reader import Identity, read_lines
from bufferhouse.parse.text.batch_finish import finish_batch
from bufferhouse.parse.text.batch_scan import read_batch

__all__ = ["BATCH_READING", "batchable", "parse_batch"]

#: Read a batch's texts as one (text.batch_scan, batch_finish); False reads each module
#: alone, as before (for comparisons: bench/batch_ab.py, tests).
BATCH_READING = True


def batchable(group: object) -> bool:
    """Whether a group can be one of a batch: a module of text dumps alone (no HloProto,
    no profile program: their identity and forms are parse_files' own), readable."""
    return (
        isinstance(group, ModuleFiles)
        and group.buffer_assignment is not None
        and group.proto is None
        and group.xplane is None
        and group.skip is None
        and not group.problems
    )


def parse_batch(
    groups: Sequence[ModuleFiles], known: Container[str] = frozenset(), max_bytes: int | None = None
) -> list[ParseResult]:
    """The result of each of `groups` (batchable ones), in their order. Never raises."""
    results = _parsed(groups, known, max_bytes)
    pending = [
        i
        for i, r in enumerate(results)
        if isinstance(r, ParsedModule) and r.row["assignment_fingerprint"] is None
    ]
    _fingerprint(groups, results, pending)
    _check_rows(groups, results, [i for i in pending if isinstance(results[i], ParsedModule)])
    return results


def _parsed(
    groups: Sequence[ModuleFiles], known: Container[str], max_bytes: int | None
) -> list[ParseResult]:
    """Each module identified; those to parse read together (_readings), then derived one
    by one; a module the batch leaves is parsed alone, as parse_files would."""
    results: list[ParseResult | None] = []
    pending: list[tuple[int, Identity]] = []
    for i, group in enumerate(groups):
        first = identified(group, known, max_bytes)
        if not isinstance(first, Identity):
            results.append(first)
        else:
            results.append(None)
            pending.append((i, first))
    readings = _readings([groups[i] for i, _ in pending])
    for (i, identity), reading in zip(pending, readings):
        if reading is None:
            results[i] = parse_files(groups[i], known, max_bytes, batched=True)
        else:
            results[i] = parsed_module(groups[i], identity, lambda r=reading: r, True, max_bytes)
    return results  # type: ignore[return-value]


def _readings(groups: Sequence[ModuleFiles]) -> list[Reading | None]:
    """The text Reading of each module read as one batch (text.batch_finish), None for a
    module the batch leaves: those are parsed alone. A batch-wide step that fails (what
    it cannot do batch-wide, or a bug of ours) fails the halves of the batch in turn, so
    only the module it cannot take is parsed alone."""
    if not groups or BATCH_READING is False:
        return [None] * len(groups)
    try:
        with memory.system_allocator():
            scanned = read_batch(
                [g.dump_files() for g in groups], [g.hlo for g in groups], VECTOR_MIN_BYTES
            )
            return finish_batch(scanned, read_lines).split()
    except Exception:
        if len(groups) == 1:
            return [None]
        half = len(groups) // 2
        return [*_readings(groups[:half]), *_readings(groups[half:])]


def _fingerprint(groups: Sequence[ModuleFiles], results: list[ParseResult], at: list[int]) -> None:
    """Each pending module's fingerprint, over the batch; module by module where the batch
    cannot take them together (a key that is not batch-wide), each failing alone."""
    if not at:
        return
    try:
        digests = batch_fingerprints([results[i].tables for i in at])
    except (ValueError, pa.ArrowException):
        digests = [None] * len(at)
    for i, digest in zip(at, digests):
        if digest is None:
            try:
                digest = assignment_fingerprint(results[i].tables)
            except Exception as exc:  # a bug of ours fails this module, not its batch
                results[i] = _failed(results[i], internal_error(groups[i], exc))
                continue
        results[i].row["assignment_fingerprint"] = digest


def _check_rows(groups: Sequence[ModuleFiles], results: list[ParseResult], at: list[int]) -> None:
    """The rows of the batch checked against the module columns at once; where one does
    not fit, each alone, so that only the module whose number is too large fails."""
    try:
        check_rows([results[i].row for i in at])
        return
    except (OverflowError, pa.ArrowInvalid):
        pass
    for i in at:
        try:
            check_rows([results[i].row])
        except (OverflowError, pa.ArrowInvalid) as exc:
            results[i] = _failed(results[i], range_error(groups[i], exc))


def _failed(result: ParsedModule, error: DumpError) -> Failed:
    """The module's result as a failure with `error`: no row, no tables, no warnings."""
    return Failed(content_hash=result.content_hash, bytes_read=result.bytes_read, error=error)
