"""Small modules parsed as a batch: what one module's parse does for each, then the steps
that are cheaper over the whole batch at once than module by module.

A fleet is mostly helper modules of a few kB (issue 39): their cost is the number of
Python and Arrow calls a module, not their bytes. `parse_batch` reads each module as
parse_files does (identity, the known check, the reading, derive), leaving two steps to
the batch: the assignment fingerprints (one sort, one text column and one join over all
the batch's allocations and placements: derive.fingerprint.batch_fingerprints) and the
check of the module rows against their columns (one Arrow table of all the rows).

Whole or nothing per module: a module that fails (a located DumpError, a number too
large for its column) fails alone with its own error, as it would parsed alone; the
others of its batch land whole. Each result is the one parse_files gives that module.
"""

from __future__ import annotations

from collections.abc import Container, Sequence

import pyarrow as pa

from bufferhouse.errors import DumpError
from bufferhouse.parse import (
    Failed,
    ParsedModule,
    ParseResult,
    check_rows,
    internal_error,
    parse_files,
    range_error,
)
from bufferhouse.parse.derive.fingerprint import assignment_fingerprint, batch_fingerprints
from bufferhouse.parse.discover import ModuleFiles

__all__ = ["batchable", "parse_batch"]


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
    results = [parse_files(g, known, max_bytes, batched=True) for g in groups]
    pending = [
        i
        for i, r in enumerate(results)
        if isinstance(r, ParsedModule) and r.row["assignment_fingerprint"] is None
    ]
    _fingerprint(groups, results, pending)
    _check_rows(groups, results, [i for i in pending if isinstance(results[i], ParsedModule)])
    return results


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
