"""Load stage: the ingest pipeline, from paths to modules in the warehouse.

Discovery groups files into modules; parsing (the parse stage) runs in worker
processes (`workers`), one module per task; the parent process is the single
writer (`writer`). It commits modules in batches (`pipeline`): each module
whole or not at all, one commit per batch. A module whose content hash is
already in the warehouse is not parsed again. Workers do not know module ids:
the writer assigns them (growing in ingest order) as it takes each module.

This face names what the higher stages use; the pieces live in:

- `pipeline`  ingest_paths, the shared ingest loop (run_batches), labels, run records
- `schedule`  how many parser processes, and the largest-first order
- `workers`   the parser process pool and its recovery from a dead worker
- `handoff`   tables from a worker to the writer through shared memory
- `writer`    ModuleBuffer / ModuleWriter / Batch: whole modules into the warehouse
- `report`    IngestReport, ModuleOutcome
"""

from __future__ import annotations

from bufferhouse.load.pipeline import (
    ingest_into,
    ingest_paths,
    new_run_id,
    parse_labels,
    run_batches,
    run_record,
)
from bufferhouse.load.report import IngestReport, ModuleOutcome
from bufferhouse.load.schedule import PARALLEL_MIN_BYTES, PARALLEL_MIN_MODULES
from bufferhouse.load.workers import parse_in_workers

__all__ = [
    "PARALLEL_MIN_BYTES",
    "PARALLEL_MIN_MODULES",
    "IngestReport",
    "ModuleOutcome",
    "ingest_into",
    "ingest_paths",
    "new_run_id",
    "parse_in_workers",
    "parse_labels",
    "run_batches",
    "run_record",
]
