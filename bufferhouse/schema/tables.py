"""Every warehouse table and column, declared once with its documentation.

DDL, Arrow schemas, COMMENT ON statements, the sqlglot schema used to check
canned queries and docs/schema.md are all derived from this list, so a column
cannot exist in one of them and not in the others.
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEMA_VERSION = 16


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # DuckDB type name; see schema.types for the Arrow mapping
    doc: str
    nullable: bool = True
    #: DuckDB compression forced for the column; None lets DuckDB choose per segment.
    compression: str | None = None


@dataclass(frozen=True)
class Table:
    name: str
    doc: str
    columns: tuple[Column, ...]
    per_module: bool = True  # rows belong to one module (have module_id)
    #: Columns the writer sorts each module's rows by before storing them (after
    #: module_id): neighbours alike compress better. Queries see no difference.
    stored_order: tuple[str, ...] = ()

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


def _c(name: str, type_: str, doc: str, nullable: bool = True) -> Column:
    return Column(name, type_, doc, nullable)


def _instruction(doc: str) -> Column:
    """The instruction name of a table with rows by the value or step: zstd, not the FSST
    DuckDB picks, halves the write's CPU of each such column and stores it no larger
    (the 208 MB module's six: 0.64 -> 0.32 CPU-s, 17.7 -> 16.5 MB)."""
    return Column("instruction", "VARCHAR", doc, False, compression="zstd")


def _module_id() -> Column:
    return _c("module_id", "BIGINT", "Module this row belongs to (modules.module_id).", False)


RUNS = Table(
    "runs",
    "One row per `bufferhouse ingest` invocation that loaded or labelled anything.",
    (
        _c("run_id", "BIGINT", "Run identifier: microseconds since the epoch at the start.", False),
        _c("started_at", "TIMESTAMP", "When the ingest started (UTC)."),
        _c("roots", "VARCHAR[]", "Paths given to the ingest command, as given."),
        _c("labels", "VARCHAR[]", "`key=value` labels given with --label."),
        _c("host", "VARCHAR", "Host name of the machine that ran the ingest."),
        _c("tool_version", "VARCHAR", "bufferhouse version that wrote the rows."),
    ),
    per_module=False,
)

MODULES = Table(
    "modules",
    "One row per ingested module (one compiled HLO module's buffer-assignment dump). One "
    "compile read in several forms (text dump, .hlo.pb, profile) is a row per form: "
    "for one row per compile keep module_id IN (SELECT primary_module_id FROM "
    "compile_modules), as the canned queries do.",
    (
        _c(
            "module_id",
            "BIGINT",
            "Warehouse key of the module, growing with ingest order so that one module's rows sit"
            " together and scoped queries skip the rest: (unix milliseconds << 20) | 19 random bits,"
            " or the writer's previous id + 1 if larger. Local to a warehouse or dataset;"
            " content_hash identifies a module across them.",
            False,
        ),
        _c(
            "content_hash",
            "VARCHAR",
            "SHA-256 over the base names and bytes of the module's files: the module's identity everywhere (re-ingesting the same files adds nothing).",
            False,
        ),
        _c("run_id", "BIGINT", "Ingest run that first loaded the module (runs.run_id)."),
        _c(
            "module_name",
            "VARCHAR",
            "Module name from the file name, e.g. jit_train_step (the jit name).",
        ),
        _c(
            "module_number",
            "INTEGER",
            "XLA's per-process module counter from `module_NNNN` in the file name.",
        ),
        _c(
            "file_stem",
            "VARCHAR",
            "Common stem of the module's files, e.g. module_0007.jit_f.cpu_after_optimizations.",
        ),
        _c(
            "backend",
            "VARCHAR",
            "cpu, gpu or tpu: from the file name, else inferred from the layouts (tiles mean tpu); unknown if neither tells.",
        ),
        _c(
            "target",
            "VARCHAR",
            "Compile target from the file name, e.g. sm_9.0 for CUDA; NULL if not named.",
        ),
        _c("stage", "VARCHAR", "Pass stage from the file name, e.g. after_optimizations."),
        _c(
            "layout",
            "VARCHAR",
            "File layout: `combined` (one -buffer-assignment.txt with everything), `split` (2026-04+ siblings) or `proto` (read from an HloProto only).",
        ),
        _c(
            "format_era",
            "VARCHAR",
            "Earliest XLA commit date (YYYY-MM-DD) whose printing code matches the features seen; see docs/schema.md.",
        ),
        _c(
            "sections",
            "VARCHAR[]",
            "Sections present: allocations, totals, used_values, live_range, peak, stack_trace, usage_report, hlo (stack frames resolved), live_range_unavailable (XLA printed that HloLiveRange was not available); from a proto also proto, heap_trace (heap_events filled) and schedule (sequence filled from the HLO schedule).",
        ),
        _c("paths", "VARCHAR[]", "Absolute paths of the files read for this module."),
        _c(
            "bytes_read",
            "BIGINT",
            "Bytes of dump text read for this module (uncompressed); with a proto, its bytes too;"
            " from a profile, the bytes of the program's HloProto.",
        ),
        _c(
            "total_bytes",
            "BIGINT",
            "`Total bytes used` as printed: the sum of all allocation sizes (not a peak); from a proto, that sum. NULL if not printed.",
        ),
        _c("allocation_count", "INTEGER", "Number of allocations."),
        _c("value_count", "INTEGER", "Number of values placed in allocations."),
        _c(
            "schedule_length",
            "INTEGER",
            "`HloLiveRange (max N)`: the number of program-order steps. NULL without a live range section.",
        ),
        _c(
            "logical_peak_time",
            "INTEGER",
            "Program-order step printed as `Live ranges at T (peak)`.",
        ),
        _c(
            "logical_peak_bytes",
            "BIGINT",
            "HloLiveRange peak: sum of the printed peak list (logical, unpadded sizes, no buffer sharing).",
        ),
        _c(
            "heap_peak_bytes",
            "BIGINT",
            "The module's peak: heap_peaks.heap_peak_bytes of memory space 0 (indefinite allocations at"
            " their sizes + the most temp bytes in use at once), the same figure whichever form"
            " carried the module; peak_source says what gave it. NULL when nothing does"
            " (docs/metrics.md).",
        ),
        _c(
            "row_counts",
            "MAP(VARCHAR, BIGINT)",
            "Rows written per table for this module at ingest; `bufferhouse check` compares them.",
        ),
        _c(
            "xla_peak_bytes",
            "BIGINT",
            "XLA's own peak, memory_analysis().peak_memory_in_bytes: largest value of each non-thread-local"
            " parameter, constant or maybe-live-out allocation, all memory spaces, plus the replayed"
            " heap-simulator trace of the executable's buffer assignment, which is empty on CPU."
            " From text: NULL unless the file name says cpu (docs/metrics.md, xla_peak_bytes)."
            " From a proto (.hlo.pb or profile), every backend: the same rule over its"
            " BufferAssignmentProto, on CPU without the traces (the CPU executable keeps"
            " none; equal to memory_analysis() on every tests/data/proto module), elsewhere"
            " with them (= trace_peak_bytes; no oracle here). On CPU far below heap_peak_bytes"
            " (no temporaries, no thread-local): a different figure, not a disagreement.",
        ),
        _c(
            "trace_peak_bytes",
            "BIGINT",
            "From a proto only: XLA's ComputePeakMemorySizes rule with every heap-simulator"
            " trace replayed (the static buffers of xla_peak_bytes plus the trace's bytes in"
            " use at its worst point): the peak of the heap_events timeline. NULL without a"
            " trace.",
        ),
        _c(
            "assignment_fingerprint",
            "VARCHAR",
            "SHA-256 of the buffer assignment as text and proto both carry it (allocations:"
            " index, size, color, parameter number, constant/thread-local/maybe-live-out;"
            " placements: value id, defining instruction, shape index, allocation, offset,"
            " size). Equal for one compile seen as a text dump, an .hlo.pb or in a profile:"
            " join on it to match them (content_hash differs between forms).",
        ),
        _c(
            "source_kind",
            "VARCHAR",
            "Forms the module was read from: text, proto (.hlo.pb), text+proto (both, side"
            " by side, one module) or xplane (an XProf profile).",
        ),
        _c(
            "peak_source",
            "VARCHAR",
            "What gave heap_peak_bytes: trace (the heap-simulator trace of an .hlo.pb or"
            " profile), live_ranges (the text dump's HloLiveRange), allocations (no temp"
            " allocation in the space); NULL with heap_peak_bytes.",
        ),
        _c(
            "xla_temp_bytes",
            "BIGINT",
            "What memory_analysis().temp_size_in_bytes reports, where the rule is known: TPU"
            " (any form): memory space 0's temp allocation rounded up to 16 KiB, R, plus its"
            " fragmentation as libtpu counts it, R minus the most temp bytes in use and the"
            " tuple pointer tables; 0 with tuple tables only. When its heap-simulated"
            " values are all scalars, only libtpu's log of the compile (beside the dump)"
            " tells: by the rule if it prints an HBM `HLO temp`, else 0; NULL without"
            " that log, where the log disagrees with the dump (a warning says so),"
            " without a temp peak, and on other backends (docs/metrics.md, TPU temp).",
        ),
        _c(
            "generated_code_bytes",
            "BIGINT",
            "What memory_analysis().generated_code_size_in_bytes reports: TPU, from"
            " libtpu's log of the compile beside the dump (`Program hbm requirement` less"
            " its `HLO temp`: overlays and globals), where the log states it exactly (each"
            " part under 1 MiB). NULL where no dump or log states it: every text or proto"
            " dump alone, other backends (docs/metrics.md, TPU code size).",
        ),
    ),
    per_module=False,
)

LABELS = Table(
    "labels",
    "User labels of a module (`--label key=value` at ingest); a module ingested again with new labels gains them.",
    (
        _module_id(),
        _c("key", "VARCHAR", "Label key, e.g. jax.", False),
        _c("value", "VARCHAR", "Label value, e.g. 0.7.2.", False),
    ),
)

MODULE_TARGETS = Table(
    "module_targets",
    "The target a module was compiled for and its per-chip capacity, from the files XLA"
    " writes beside the dump (parse/target.py): filled by ingest after the module loads.",
    (
        _module_id(),
        _c("platform", "VARCHAR", "tpu or gpu, from topology.pb or the GPU target config."),
        _c(
            "device_kind",
            "VARCHAR",
            "The chip as jax names it: `TPU v5 lite` (topology.pb platform_version),"
            " `NVIDIA H100 80GB HBM3` (gpu_target_config device_description_str).",
        ),
        _c("chips", "INTEGER", "Chips of the TPU topology (target_arguments.txt bounds)."),
        _c(
            "capacity_bytes",
            "BIGINT",
            "Memory one chip gives a program: the GPU target config's device_memory_size"
            " (source dump), else the documented table's usable bytes (source table,"
            " docs/fits.md).",
        ),
        _c("capacity_source", "VARCHAR", "dump or table; NULL with no capacity."),
        _c("files", "VARCHAR[]", "The files read for it."),
    ),
)

ALLOCATIONS = Table(
    "allocations",
    "One row per `allocation N: size S, ...:` header of the BufferAssignment section.",
    (
        _module_id(),
        _c("allocation_index", "INTEGER", "Allocation index N.", False),
        _c(
            "size",
            "BIGINT",
            "Allocation size in bytes (padded, as assigned by the backend).",
            False,
        ),
        _c(
            "color", "INTEGER", "Memory space (color) of the allocation; 0 when not printed.", False
        ),
        _c(
            "parameter_number",
            "INTEGER",
            "Entry parameter number for parameter allocations, else NULL.",
        ),
        _c(
            "parameter_shape",
            "VARCHAR",
            "Shape printed as `shape |S|` of a parameter allocation (no layout).",
        ),
        _c(
            "parameter_shape_index",
            "VARCHAR",
            "ShapeIndex of the parameter buffer, e.g. {} or {1}.",
        ),
        _c("output_shape", "VARCHAR", "Root shape printed as `output shape is |S|`, else NULL."),
        _c("is_parameter", "BOOLEAN", "Entry-computation parameter allocation.", False),
        _c("is_constant", "BOOLEAN", "`constant` flag.", False),
        _c(
            "is_thread_local",
            "BOOLEAN",
            "`thread-local` flag (reducers, comparators: stack, not heap).",
            False,
        ),
        _c(
            "is_maybe_live_out",
            "BOOLEAN",
            "`maybe-live-out` flag: may hold (part of) the entry result.",
            False,
        ),
        _c(
            "is_preallocated_temp",
            "BOOLEAN",
            "`preallocated-temp` flag: scratch memory the runtime allocates. A proto has no such field: there it is XLA's IsPreallocatedTempBuffer, none of parameter, maybe-live-out, thread-local or constant.",
            False,
        ),
        _c(
            "category",
            "VARCHAR",
            "Exclusive kind, first match wins: parameter, output, thread-local, constant, temp (XProf's order).",
            False,
        ),
        _c("address", "VARCHAR", "Pointer printed by XLA before 2022-09 (`0x...`), else NULL."),
        _c("line", "INTEGER", "Line of the header in the dump file; NULL from a proto."),
        _c(
            "max_live_bytes",
            "BIGINT",
            "Temp allocations: most bytes in use at once (union of the byte ranges of values live at a step); NULL for other kinds or without live ranges (always from a proto).",
        ),
        _c(
            "page",
            "BIGINT",
            "`page N` (XLA 2026-06+, jaxlib 0.11.1+): the page of XLA's multi-page assignment, one heap per (color, page); 0 on every line today. NULL where not printed and from a proto (BufferAllocationProto has no page).",
        ),
        _c(
            "unknown_attributes",
            "VARCHAR",
            "Attributes of the allocation line this release does not know (a newer XLA's), as printed, `, `-separated; NULL when none. A warning in diagnostics names the first line.",
        ),
    ),
)

VALUES = Table(
    "hlo_values",
    "One row per HloValue placed in an allocation (` value: <id name{index} @color> ...` lines).",
    (
        _module_id(),
        _c("value_id", "BIGINT", "Dataflow value id (not contiguous).", False),
        _instruction("Defining instruction name."),
        _c(
            "shape_index",
            "VARCHAR",
            "ShapeIndex within the defining instruction, `{}` for array-shaped instructions.",
            False,
        ),
        _c("is_phi", "BOOLEAN", "SSA phi value (`(phi)`); NULL from a proto, which does not say."),
        _c(
            "color",
            "INTEGER",
            "Value color `@N` (memory space); may differ from the allocation's on GPU.",
        ),
        _c("shape", "VARCHAR", "Value shape with layout, as printed."),
        _c("element_type", "VARCHAR", "Element type, e.g. f32; NULL for tuples."),
        _c("dims", "BIGINT[]", "Dimensions (bounds for `<=N`, -1 for `?`); NULL for tuples."),
        _c("is_dynamic", "BOOLEAN", "Some dimension is dynamic (`<=N` or `?`)."),
        _c(
            "minor_to_major",
            "INTEGER[]",
            "Layout minor-to-major order, NULL when no layout is printed.",
        ),
        _c("tiles", "VARCHAR", "Layout tiling, e.g. (8,128)(2,1); NULL when untiled."),
        _c("memory_space", "INTEGER", "Layout memory space `S(n)`, 0 when absent."),
        _c(
            "logical_bytes",
            "BIGINT",
            "ShapeUtil::ByteSizeOf(shape, 8): unpadded size; tuples count 8 bytes per element.",
        ),
        _c("is_tuple", "BOOLEAN", "The value's shape is a tuple (its buffer is a pointer table)."),
        _c("line", "INTEGER", "Line of the value line in the dump file; NULL from a proto."),
        _c(
            "tiled_bytes",
            "BIGINT",
            "ShapeUtil::ArraySize: the array's bytes in its tiled layout (each minor"
            " dimension rounded up to the first tile's, e.g. bf16[1001,1000]{1,0:T(8,128)(2,1)}"
            " is 1,008 x 1,024 x 2 bytes); logical_bytes when untiled; NULL for tuples and"
            " unknown sizes. On TPU it is the assigned size (docs/metrics.md, tiled layouts).",
        ),
    ),
)

ASSIGNMENTS = Table(
    "assignments",
    "Where each value sits: allocation, offset and size (the value line's `(size=S,offset=O)`).",
    (
        _module_id(),
        _c("value_id", "BIGINT", "Value (hlo_values.value_id).", False),
        _c("allocation_index", "INTEGER", "Allocation holding the value.", False),
        _c(
            "byte_offset",
            "BIGINT",
            "Byte offset of the value's slice inside the allocation (XLA prints it as offset=).",
            False,
        ),
        _c("size", "BIGINT", "Bytes of the slice (padded; aliases share offset and size).", False),
        _c(
            "reused_cross_color",
            "BOOLEAN",
            "Also listed under `reused by buffers of a different color:` (GPU, 2026-06+).",
            False,
        ),
    ),
)

POSITIONS = Table(
    "positions",
    "Positions of each used value (` positions:` lines); the first is the defining position."
    " No rows from a proto: its buffer aliases are the positions of a whole buffer, not of a value.",
    (
        _module_id(),
        _c("value_id", "BIGINT", "Value (hlo_values.value_id).", False),
        _c("ordinal", "INTEGER", "Order in the printed list, from 0.", False),
        _instruction("Instruction at which the value appears."),
        _c(
            "shape_index",
            "VARCHAR",
            "ShapeIndex at that instruction, `{}` when not printed (array-shaped).",
        ),
    ),
)

USES = Table(
    "uses",
    "Uses of each used value (` uses:` lines); an empty list yields no rows. No rows from a proto.",
    (
        _module_id(),
        _c("value_id", "BIGINT", "Value (hlo_values.value_id).", False),
        _c(
            "ordinal",
            "INTEGER",
            "Order in the printed list, from 0 (uses are not sorted by XLA).",
            False,
        ),
        _instruction("Using instruction."),
        _c("operand_number", "INTEGER", "Operand number of the use.", False),
        _c("operand_index", "VARCHAR", "ShapeIndex within the operand, `{}` when not printed."),
    ),
)

INSTRUCTIONS = Table(
    "instructions",
    "Each distinct defining instruction of a used value, parsed from its `from instruction:` text.",
    (
        _module_id(),
        _instruction("Instruction name (unique in the module)."),
        _c("opcode", "VARCHAR", "HLO opcode, e.g. fusion, parameter, custom-call."),
        _c("shape", "VARCHAR", "Result shape with layout."),
        _c("operands", "VARCHAR[]", "Operand instruction names."),
        _c("parameter_number", "INTEGER", "N of parameter(N)."),
        _c("fusion_kind", "VARCHAR", "kind= of a fusion, e.g. kLoop."),
        _c(
            "called_computations",
            "VARCHAR[]",
            "Computations named by calls=, to_apply=, body=, condition=, branches.",
        ),
        _c("custom_call_target", "VARCHAR", "custom_call_target= of a custom-call."),
        _c(
            "op_name",
            "VARCHAR",
            "metadata op_name: the framework's name scope path, e.g. jit(f)/jit(main)/dot_general.",
        ),
        _c("op_type", "VARCHAR", "metadata op_type."),
        _c(
            "source_file",
            "VARCHAR",
            "metadata source_file, or resolved from stack_frame_id through the optimized HLO's tables.",
        ),
        _c("source_line", "INTEGER", "metadata source_line, or resolved from stack_frame_id."),
        _c(
            "source_function",
            "VARCHAR",
            "Function of the stack frame, when resolved from stack_frame_id.",
        ),
        _c("stack_frame_id", "INTEGER", "metadata stack_frame_id (XLA 2025+)."),
        Column(
            "text",
            "VARCHAR",
            "The instruction text as printed after `from instruction:` (stored zstd-compressed); NULL from a proto, whose columns above come from the HloInstructionProto.",
            compression="zstd",  # a third of FSST's size on long, repetitive HLO text
        ),
    ),
    # Sorted by name, instructions of a kind sit together: the texts (zstd) and names
    # shrink by a third, the warehouse of a 104 MB dump by 8%. Sorted by opcode instead,
    # the 208 MB module wrote 0.08 CPU-s faster but the 500 MB module's warehouse was
    # 1.3% larger (102.5-103.2 vs 101.9-102.1 MB).
    stored_order=("instruction",),
)

SEQUENCE = Table(
    "sequence",
    "HloLiveRange InstructionSequence: the flattened program order. From a proto: the module's"
    " schedule flattened as HloLiveRange flattens it (called computations of while, call,"
    " conditional and async-start before their caller, each once).",
    (
        _module_id(),
        _c("time", "INTEGER", "Program-order step, 0..schedule_length-1.", False),
        _instruction("Instruction scheduled at that step."),
    ),
)

LIVE_RANGES = Table(
    "live_ranges",
    "HloLiveRange BufferLiveRange: when each value is live (both ends inclusive). No rows from"
    " a proto (it does not carry them; heap_events has the simulator's own timeline).",
    (
        _module_id(),
        _c(
            "value_id",
            "BIGINT",
            "Value (hlo_values.value_id); NULL when the value has no allocation.",
        ),
        _instruction("Defining instruction name."),
        _c("shape_index", "VARCHAR", "ShapeIndex as printed.", False),
        _c("start_time", "INTEGER", "First step at which the value is live.", False),
        _c("end_time", "INTEGER", "Last step at which the value is live (inclusive).", False),
    ),
)

PEAK_VALUES = Table(
    "peak_values",
    "The `Live ranges at T (peak):` list as printed by HloLiveRange. No rows from a proto.",
    (
        _module_id(),
        _c("ordinal", "INTEGER", "Order in the printed list, from 0.", False),
        _c("instruction", "VARCHAR", "Defining instruction name.", False),
        _c("shape_index", "VARCHAR", "ShapeIndex as printed; NULL in eras that printed none."),
        _c("value_id", "BIGINT", "Value (hlo_values.value_id) when it can be resolved."),
        _c("bytes", "BIGINT", "Logical bytes as printed.", False),
        _c("cumulative_bytes", "BIGINT", "Running sum as printed (2025-05+), else NULL."),
    ),
)

STACK_TRACE = Table(
    "stack_trace",
    "`Stack trace breakdown for peak usage` tree (2025-07+), one row per printed node.",
    (
        _module_id(),
        _c("ordinal", "INTEGER", "Print order, from 0.", False),
        _c("depth", "INTEGER", "Nesting depth; 0 for the entry computation.", False),
        _c("parent_ordinal", "INTEGER", "ordinal of the parent node, NULL at depth 0."),
        _c("name", "VARCHAR", "Node label: computation name, op_name or instruction name.", False),
        _c("percent", "DOUBLE", "Share of the peak as printed (one decimal)."),
        _c("total_bytes", "BIGINT", "Bytes in this subtree."),
        _c("current_bytes", "BIGINT", "Bytes attributed to this node itself."),
        _c(
            "remaining_bytes",
            "BIGINT",
            "Overall total minus the running sum of current, as printed.",
        ),
    ),
)

USAGE_REPORT = Table(
    "usage_report",
    "Totals from the -memory-usage-report.txt sibling: overall (version A) or per memory space (version B).",
    (
        _module_id(),
        _c(
            "report_version",
            "VARCHAR",
            "A (2024-10 .. 2026-03, allocations listed) or B (2026-03+, per memory space).",
            False,
        ),
        _c("color", "INTEGER", "Memory space; NULL for the overall total of version A."),
        _c("space_name", "VARCHAR", "Name XLA printed for the memory space (version B)."),
        _c("total_bytes", "BIGINT", "Total bytes printed for that space (or overall).", False),
    ),
)

HEAP_PEAKS = Table(
    "heap_peaks",
    "Per module and memory space: the heap peak computed at ingest, from the heap-simulator trace where the module has one, else from the live ranges.",
    (
        _module_id(),
        _c("color", "INTEGER", "Memory space (allocation color).", False),
        _c("total_bytes", "BIGINT", "Sum of allocation sizes of this color.", False),
        _c(
            "indefinite_bytes",
            "BIGINT",
            "Parameter, maybe-live-out, constant and thread-local allocations of this color.",
            False,
        ),
        _c(
            "temp_allocation_bytes",
            "BIGINT",
            "Sum of preallocated-temp allocation sizes of this color.",
            False,
        ),
        _c(
            "temp_peak_bytes",
            "BIGINT",
            "The most temp bytes in use at once: from the heap-simulator trace where the space has"
            " one (its highest heap_events.heap_bytes), else from the live ranges (byte ranges in"
            " use at each step, counted once; tuple-shaped values, which XLA never"
            " heap-simulates, left out); 0 without temp allocations; NULL when neither is there.",
        ),
        _c(
            "heap_peak_bytes",
            "BIGINT",
            "indefinite_bytes + temp_peak_bytes: the space's peak, one figure whichever form"
            " carried the module (docs/metrics.md).",
        ),
        _c(
            "peak_time",
            "INTEGER",
            "First program-order step at which temp_peak_bytes is reached (from a trace: the"
            " step of the instruction whose event first reaches it).",
        ),
        _c(
            "peak_source",
            "VARCHAR",
            "trace, live_ranges or allocations (no temp allocation in the space): what gave"
            " temp_peak_bytes; NULL with it.",
        ),
    ),
)

HEAP_PEAK_BUFFERS = Table(
    "heap_peak_buffers",
    "Derived at ingest: the values that make up each module's heap peak per memory space"
    " (the heap_peak_values view reads them; the rule is in bufferhouse/schema/derive.py).",
    (
        _module_id(),
        _c("color", "INTEGER", "Memory space (allocation color).", False),
        _c("peak_time", "INTEGER", "Program-order step of the heap peak (heap_peaks.peak_time)."),
        _c("value_id", "BIGINT", "Value (hlo_values.value_id).", False),
        _c("allocation_index", "INTEGER", "Allocation holding the value.", False),
        _c(
            "category",
            "VARCHAR",
            "Allocation kind: parameter, output, thread-local, constant or temp.",
            False,
        ),
        _c("size", "BIGINT", "Assigned bytes of the value's slice.", False),
        _c("logical_bytes", "BIGINT", "Unpadded bytes of the value's shape."),
        _c(
            "live_at_peak",
            "BOOLEAN",
            "The live range covers the peak step; FALSE (NULL without a live range) for the one"
            " value shown for an indefinite allocation none of whose values is live then.",
        ),
    ),
)

HEAP_PEAK_SOURCES = Table(
    "heap_peak_sources",
    "Derived at ingest: heap_peak_buffers rolled up per module, memory space and the op and"
    " source line of the defining instruction (what by-source sums across the fleet).",
    (
        _module_id(),
        _c("color", "INTEGER", "Memory space.", False),
        _c("op_name", "VARCHAR", "Framework op name (instructions.op_name); NULL if unknown."),
        _c("source_file", "VARCHAR", "Source file of the op; NULL if unknown."),
        _c("source_line", "INTEGER", "Source line of the op; NULL if unknown."),
        _c("buffers", "BIGINT", "heap_peak_buffers rows with this op and source.", False),
        _c("bytes", "BIGINT", "Sum of their size.", False),
        _c("logical_bytes", "BIGINT", "Sum of their logical_bytes (NULL if all are NULL)."),
    ),
)

SPACE_TOTALS = Table(
    "space_totals",
    "Derived at ingest: per module and memory space, allocation bytes by XLA category and"
    " the distinct slices of the placed values with their padding.",
    (
        _module_id(),
        _c("color", "INTEGER", "Memory space (allocation color).", False),
        _c("total_bytes", "BIGINT", "Sum of allocation sizes.", False),
        _c("parameter_bytes", "BIGINT", "Sum over is_parameter allocations.", False),
        _c("output_bytes", "BIGINT", "Sum over is_maybe_live_out allocations.", False),
        _c(
            "alias_bytes",
            "BIGINT",
            "Sum over allocations both parameter and maybe-live-out.",
            False,
        ),
        _c("constant_bytes", "BIGINT", "Sum over is_constant allocations.", False),
        _c("thread_local_bytes", "BIGINT", "Sum over is_thread_local allocations.", False),
        _c("temp_bytes", "BIGINT", "Sum over is_preallocated_temp allocations.", False),
        _c(
            "slices",
            "BIGINT",
            "Distinct (allocation_index, byte_offset, size) slices of placed values.",
            False,
        ),
        _c("slice_bytes", "BIGINT", "Sum of the slices' sizes; NULL without slices."),
        _c(
            "slice_logical_bytes",
            "BIGINT",
            "Sum over slices of the largest logical_bytes of the values in each; NULL without slices.",
        ),
    ),
)

PADDED_VALUES = Table(
    "padded_values",
    "Derived at ingest: the placed values whose slice is larger than their shape"
    " (size > logical_bytes), with the names the padding query shows.",
    (
        _module_id(),
        _c("value_id", "BIGINT", "Value (hlo_values.value_id).", False),
        _c("instruction", "VARCHAR", "Defining instruction (hlo_values.instruction).", False),
        _c("shape_index", "VARCHAR", "ShapeIndex within the defining instruction.", False),
        _c("allocation_index", "INTEGER", "Allocation holding the value.", False),
        _c("category", "VARCHAR", "Allocation kind (allocations.category).", False),
        _c("color", "INTEGER", "Memory space of the allocation.", False),
        _c("shape", "VARCHAR", "Value shape with layout (the tiling explains the padding)."),
        _c("op_name", "VARCHAR", "Framework op name of the defining instruction."),
        _c("size", "BIGINT", "Assigned bytes (assignments.size).", False),
        _c("logical_bytes", "BIGINT", "hlo_values.logical_bytes.", False),
        _c("padding_bytes", "BIGINT", "size - logical_bytes (> 0).", False),
    ),
)

HEAP_EVENTS = Table(
    "heap_events",
    "The heap-simulator traces of a proto (.hlo.pb or profile): one row per ALLOC, FREE or"
    " SHARE_WITH event, in the order the simulator ran them. Text dumps carry no trace.",
    (
        _module_id(),
        _c("trace_index", "INTEGER", "Index of the trace in the buffer assignment.", False),
        _c("event_index", "BIGINT", "Order of the event in its trace, from 0.", False),
        _c("kind", "VARCHAR", "ALLOC, FREE or SHARE_WITH.", False),
        _c("value_id", "BIGINT", "Logical buffer of the event (hlo_values.value_id).", False),
        _c("instruction", "VARCHAR", "Instruction the simulator was processing."),
        _c("computation", "VARCHAR", "Computation of that instruction."),
        _c(
            "share_with",
            "BIGINT",
            "SHARE_WITH: the canonical buffer whose bytes this one reuses; else NULL.",
        ),
        _c(
            "color",
            "INTEGER",
            "Memory space of the trace: the color of the allocation its buffers are placed in"
            " (one color per trace: XLA simulates each color apart), else of its buffers.",
        ),
        _c(
            "allocation_index",
            "INTEGER",
            "The trace's buffer_allocation_index as XLA wrote it: the index its allocation had"
            " before CombineTempAllocations renumbered them, so it may name no allocation of"
            " the module (join value_id to assignments for the allocation; docs/proto-input.md).",
        ),
        _c("size", "BIGINT", "Bytes of the event's logical buffer.", False),
        _c(
            "heap_bytes",
            "BIGINT",
            "Bytes in use in this trace's heap after the event, counted as XLA counts them"
            " (a buffer's bytes while its reference count is above 0; shared buffers once).",
            False,
        ),
    ),
    stored_order=("trace_index", "event_index"),
)


def _event_id() -> Column:
    return _c("event_id", "BIGINT", "OOM event this row belongs to (oom_events.event_id).", False)


OOM_EVENTS = Table(
    "oom_events",
    "One row per out-of-memory message (RESOURCE_EXHAUSTED) found in a log: where it is, its"
    " form, the request and the totals it printed. Sizes are bytes; which of them XLA printed"
    " exactly (not rounded from a unit) is in exact_figures.",
    (
        _c(
            "event_id",
            "BIGINT",
            "Warehouse key of the event, growing with ingest order like modules.module_id;"
            " local to a warehouse or dataset (event_hash identifies an event across them).",
            False,
        ),
        _c(
            "event_hash",
            "VARCHAR",
            "SHA-256 of the log's base name (without .gz), the event's byte offset and its raw"
            " bytes: the event's identity (a log read again, moved, gzipped or grown adds no"
            " event twice).",
            False,
        ),
        _c("run_id", "BIGINT", "Ingest run that first loaded the event (runs.run_id)."),
        _c("path", "VARCHAR", "Absolute path of the log file.", False),
        _c("line", "INTEGER", "1-based line of the message's first line in the log.", False),
        _c("end_line", "INTEGER", "1-based line of its last line.", False),
        _c(
            "byte_offset",
            "BIGINT",
            "Offset of the first line's first byte in the log (uncompressed).",
            False,
        ),
        _c(
            "family",
            "VARCHAR",
            "xla (BufferAssignment summary, GPU/CPU), tpu (TPU compiler/runtime) or runtime"
            " (another RESOURCE_EXHAUSTED line about memory).",
            False,
        ),
        _c(
            "form",
            "VARCHAR",
            "buffer_assignment (`Peak buffers:`), tpu_compile (`Ran out of memory in memory space`),"
            " tpu_runtime (`Attempting to reserve`, `HBM capacity`), allocation (one line:"
            " `Allocation (size=N) would exceed memory (size=M)`) or other.",
            False,
        ),
        _c(
            "error_type",
            "VARCHAR",
            "Exception named before RESOURCE_EXHAUSTED, e.g. jaxlib.xla_extension.XlaRuntimeError.",
        ),
        _c(
            "error_code",
            "VARCHAR",
            "XLA's error code printed before the message (`E1000`; xla/error/error_codes.h,"
            " openxla.org/xla/errors); NULL for a message without one.",
        ),
        _c(
            "error_name",
            "VARCHAR",
            "The code's name as printed (`CompileTimeHbmOom`, `RuntimeBufferAllocationFailure`).",
        ),
        _c(
            "program_name",
            "VARCHAR",
            "Module or program named by the message (`Error loading program 'NAME'`,"
            " `HLO module: NAME.`,"
            " `{{function_node NAME}}`), else jit_F from the buffers' op_name prefix jit(F)"
            " (the most common one); NULL if none.",
        ),
        _c("memory_space", "VARCHAR", "Memory space named (hbm, vmem, ...); NULL if none."),
        _c(
            "requested_bytes",
            "BIGINT",
            "The allocation that failed: `trying to allocate N bytes`, `reserve X`,"
            " `Allocation (size=N)`.",
        ),
        _c(
            "capacity_bytes",
            "BIGINT",
            "Capacity of the memory space: `Used X of Y`, `HBM capacity Y`, `exceed memory (size=Y)`.",
        ),
        _c("used_bytes", "BIGINT", "TPU compile: `Used X of Y hbm`."),
        _c("exceeded_bytes", "BIGINT", "TPU compile: `Exceeded hbm capacity by X`."),
        _c("free_bytes", "BIGINT", "TPU run time: `There are X free`."),
        _c("allocated_bytes", "BIGINT", "TPU run time: `Currently allocated X`."),
        _c("parameter_bytes", "BIGINT", "XLA: `parameter allocation:`."),
        _c("constant_bytes", "BIGINT", "XLA: `constant allocation:`."),
        _c("maybe_live_out_bytes", "BIGINT", "XLA: `maybe_live_out allocation:`."),
        _c("temp_bytes", "BIGINT", "XLA: `preallocated temp allocation:`."),
        _c("temp_fragmentation_bytes", "BIGINT", "XLA: `preallocated temp fragmentation:`."),
        _c("total_allocation_bytes", "BIGINT", "XLA: `total allocation:`."),
        _c("total_fragmentation_bytes", "BIGINT", "XLA: `total fragmentation:`."),
        _c(
            "total_fragmentation_percent",
            "DOUBLE",
            "XLA: the percentage printed after `total fragmentation:`.",
        ),
        _c("total_usage_bytes", "BIGINT", "TPU: `Total hbm usage >= X`."),
        _c("reserved_bytes", "BIGINT", "TPU: `reserved` under Total usage."),
        _c("program_bytes", "BIGINT", "TPU: `program` under Total usage."),
        _c(
            "arguments_bytes",
            "BIGINT",
            "TPU: `arguments` under Total usage (or under Persistent allocations at run time).",
        ),
        _c(
            "output_bytes",
            "BIGINT",
            "TPU: `Output size X` (or `output` under Persistent allocations at run time).",
        ),
        _c("output_shared_bytes", "BIGINT", "TPU: `shares X with arguments`."),
        _c(
            "program_requirement_bytes",
            "BIGINT",
            "TPU: `Program hbm requirement X` (or `Program requirement` at run time).",
        ),
        _c("global_bytes", "BIGINT", "TPU: `global` under Program requirement."),
        _c("scoped_bytes", "BIGINT", "TPU: `scoped` under Program requirement."),
        _c("hlo_temp_bytes", "BIGINT", "TPU: `HLO temp` under Program requirement."),
        _c("hlo_temp_utilization", "DOUBLE", "TPU: HLO temp `N% utilization` (unpadded / padded)."),
        _c("unpadded_bytes", "BIGINT", "TPU: HLO temp `Unpadded (X)`."),
        _c("padded_bytes", "BIGINT", "TPU: HLO temp `Padded (X)`."),
        _c("hlo_temp_fragmentation_bytes", "BIGINT", "TPU: HLO temp `N% fragmentation (X)`."),
        _c(
            "figures",
            "MAP(VARCHAR, BIGINT)",
            "Every size the message printed, by name: the columns above and the lines with no"
            " column (`block/name`, e.g. hbm_capacity/top-of-memory_reserved).",
        ),
        _c(
            "exact_figures",
            "VARCHAR[]",
            "Names in figures printed in exact bytes; the others were rounded from a unit.",
        ),
        _c("buffer_count", "INTEGER", "Buffers listed (rows in oom_buffers).", False),
        _c(
            "truncated",
            "BOOLEAN",
            "The message was cut short (a pasted excerpt, a log cut mid-entry): what was read is"
            " kept, and a diagnostic says where it stops.",
            False,
        ),
        _c(
            "problem_count",
            "INTEGER",
            "Parts that could not be read (each a diagnostics row with this path and a line in"
            " line..end_line).",
            False,
        ),
        Column(
            "text",
            "VARCHAR",
            "The message as read, per-line log prefixes removed (stored zstd-compressed).",
            compression="zstd",
        ),
        _c(
            "is_fragment",
            "BOOLEAN",
            "The message starts without its first line (a log rotated mid-message, an excerpt"
            " that starts in the stats or the buffer list): the buffers it lists are kept.",
            False,
        ),
        _c(
            "byte_length",
            "BIGINT",
            "Bytes of the log the event_hash covers (for a message printed twice, both parts):"
            " a grown log's longer read of the same message replaces it. NULL for events"
            " loaded before schema 7.",
        ),
    ),
    per_module=False,
)

OOM_BUFFERS = Table(
    "oom_buffers",
    "One row per buffer an OOM message lists (`Peak buffers:`, `Largest program allocations`,"
    " the one-line form's allocation), in printed order.",
    (
        _event_id(),
        _c(
            "rank",
            "INTEGER",
            "Number printed before the buffer (`Buffer N:`, `N. Size:`); for the entry a"
            " fragment starts inside, one less than the next entry's; 0 when not known.",
            False,
        ),
        _c("line", "INTEGER", "1-based line of the buffer's first line in the log."),
        _c("size_bytes", "BIGINT", "`Size:` in bytes; NULL if it did not parse."),
        _c(
            "size_exact",
            "BOOLEAN",
            "size_bytes is exact (printed in bytes); false: rounded from the printed unit.",
        ),
        _c("size_text", "VARCHAR", "`Size:` as printed."),
        _c("unpadded_bytes", "BIGINT", "TPU: `Unpadded size:` (rounded)."),
        _c(
            "padding_bytes",
            "BIGINT",
            "TPU: `Extra memory due to padding` as printed, else size_bytes - unpadded_bytes.",
        ),
        _c(
            "padding_expansion",
            "DOUBLE",
            "TPU: `(N.Nx expansion)` as printed, else size_bytes / unpadded_bytes.",
        ),
        _c("op_type", "VARCHAR", "`Operator:` op_type."),
        _c("op_name", "VARCHAR", "`Operator:` op_name (framework name scope path)."),
        _c("source_file", "VARCHAR", "`Operator:` source_file."),
        _c("source_line", "INTEGER", "`Operator:` source_line."),
        _c(
            "xla_label",
            "VARCHAR",
            "`XLA Label:` as printed: the opcode (GPU/CPU) or the whole instruction (TPU).",
        ),
        _c("opcode", "VARCHAR", "HLO opcode, from the label."),
        _c(
            "instruction",
            "VARCHAR",
            "HLO instruction name, from a TPU label (`name = ...`) or the one-line form's tag.",
        ),
        _c("shape", "VARCHAR", "`Shape:` (or `Entry Parameter Subshape:`) as printed."),
        _c("element_type", "VARCHAR", "Element type of the shape; NULL for tuples or unparsed."),
        _c("dims", "BIGINT[]", "Dimensions of the shape."),
        _c("tiles", "VARCHAR", "Layout tiling, e.g. (8,128); NULL when untiled."),
        _c("minor_to_major", "INTEGER[]", "Layout minor-to-major order; NULL when not printed."),
        _c("memory_space", "INTEGER", "Layout memory space S(n), 0 when absent."),
        _c(
            "logical_bytes",
            "BIGINT",
            "ShapeUtil::ByteSizeOf of the shape (unpadded, no tiling); NULL if unknown.",
        ),
        _c(
            "allocation_type", "VARCHAR", "TPU: `Allocation type:` (HLO temp, scoped, global, ...)."
        ),
        _c(
            "is_entry_parameter",
            "BOOLEAN",
            "Listed as `Entry Parameter Subshape:` (an argument of the program).",
            False,
        ),
        _c("tag", "VARCHAR", "One-line form: the allocation's tag, e.g. output of add_fusion@{}."),
    ),
    per_module=False,
)

OOM_LABELS = Table(
    "oom_labels",
    "User labels of an OOM event (`--label key=value` at ingest), like labels for modules: an"
    " event ingested again with new labels gains them.",
    (
        _event_id(),
        _c("key", "VARCHAR", "Label key.", False),
        _c("value", "VARCHAR", "Label value.", False),
    ),
    per_module=False,
)


def _snapshot_id() -> Column:
    return _c(
        "snapshot_id",
        "BIGINT",
        "Snapshot this row belongs to (runtime_snapshots.snapshot_id).",
        False,
    )


RUNTIME_SNAPSHOTS = Table(
    "runtime_snapshots",
    "One row per device memory profile (pprof, as jax.profiler.save_device_memory_profile"
    " writes it): what the devices held at one moment of a running program. Sizes are bytes.",
    (
        _c(
            "snapshot_id",
            "BIGINT",
            "Warehouse key of the snapshot, growing with ingest order like modules.module_id;"
            " local to a warehouse or dataset (snapshot_hash identifies it across them).",
            False,
        ),
        _c(
            "snapshot_hash",
            "VARCHAR",
            "SHA-256 of the uncompressed Profile message: the snapshot's identity (the same"
            " profile read again, moved or recompressed adds nothing).",
            False,
        ),
        _c("run_id", "BIGINT", "Ingest run that first loaded the snapshot (runs.run_id)."),
        _c("path", "VARCHAR", "Absolute path of the profile file.", False),
        _c(
            "taken_at",
            "TIMESTAMP",
            "When the snapshot was taken (UTC): the profile's time_nanos where it records one,"
            " else the file's modification time at ingest (time_source says which).",
        ),
        _c("time_source", "VARCHAR", "profile (time_nanos) or file (modification time)."),
        _c("bytes_read", "BIGINT", "Uncompressed bytes of the Profile message.", False),
        _c(
            "sample_types",
            "VARCHAR[]",
            "The profile's sample types as type/unit, e.g. [allocations/count, space/bytes].",
        ),
        _c("buffer_count", "BIGINT", "Live buffers (kind buffer), all devices.", False),
        _c("buffer_bytes", "BIGINT", "Their bytes.", False),
        _c("executable_count", "BIGINT", "Loaded executables (kind executable).", False),
        _c(
            "executable_bytes",
            "BIGINT",
            "Their generated code's bytes as the runtime reports it (0 on CPU).",
            False,
        ),
        _c("device_count", "INTEGER", "Distinct devices holding buffers.", False),
        _c("stack_count", "INTEGER", "Distinct allocation stacks (runtime_frames).", False),
    ),
    per_module=False,
)

RUNTIME_SAMPLES = Table(
    "runtime_samples",
    "One row per sample of a device memory profile: `count` live buffers (or loaded"
    " executables) of one size, on one device, made at one Python stack; `bytes` is their"
    " total.",
    (
        _snapshot_id(),
        _c("sample_index", "INTEGER", "0-based position of the sample in the profile.", False),
        _c("kind", "VARCHAR", "buffer or executable (the profile's kind label).", False),
        _c(
            "device",
            "VARCHAR",
            "Device as the profile names it (cpu:0, cuda:0, TPU_0); NULL for executables.",
        ),
        _c("count", "BIGINT", "Buffers (or executables) in the sample.", False),
        _c("bytes", "BIGINT", "Their bytes in all (count times the size).", False),
        _c(
            "stack_id",
            "INTEGER",
            "Allocation stack (runtime_frames.stack_id of the snapshot); NULL without one.",
        ),
        _c(
            "source_file",
            "VARCHAR",
            "The allocating line's file: the innermost frame of the stack whose file is not"
            " under a jax or jaxlib directory; NULL if every frame is.",
        ),
        _c("source_line", "INTEGER", "Its line."),
        _c("source_function", "VARCHAR", "Its function."),
        _c("labels", "VARCHAR[]", "The sample's other labels as key=value."),
    ),
    per_module=False,
)

RUNTIME_FRAMES = Table(
    "runtime_frames",
    "The allocation stacks of a snapshot, interned: one row per frame of each distinct"
    " stack, innermost first (the Python traceback jax recorded when the buffer was made).",
    (
        _snapshot_id(),
        _c("stack_id", "INTEGER", "0-based stack number within the snapshot.", False),
        _c("depth", "INTEGER", "0 for the innermost frame, growing toward the caller.", False),
        _c("function", "VARCHAR", "Function name.", False),
        _c("file", "VARCHAR", "Source file as recorded.", False),
        _c("line", "INTEGER", "Line in the file.", False),
        _c("in_jax", "BOOLEAN", "The file is under a jax or jaxlib directory.", False),
    ),
    per_module=False,
)

RUNTIME_LABELS = Table(
    "runtime_labels",
    "User labels of a snapshot (`--label key=value` at ingest), like labels for modules: a"
    " snapshot ingested again with new labels gains them.",
    (
        _snapshot_id(),
        _c("key", "VARCHAR", "Label key.", False),
        _c("value", "VARCHAR", "Label value.", False),
    ),
    per_module=False,
)

DIAGNOSTICS = Table(
    "diagnostics",
    "Warnings about loaded modules and OOM events, and errors of modules that failed to load.",
    (
        _c("run_id", "BIGINT", "Ingest run that reported it.", False),
        _c("module_id", "BIGINT", "Module it concerns when it was loaded (warnings), else NULL."),
        _c("path", "VARCHAR", "File the message is about.", False),
        _c("line", "INTEGER", "1-based line in that file; 0 when about the whole file."),
        _c("severity", "VARCHAR", "error (module not loaded) or warning (loaded).", False),
        _c("message", "VARCHAR", "What was expected and what was found.", False),
        _c(
            "event_id",
            "BIGINT",
            "OOM event it concerns (oom_events.event_id): a part of the message that could not"
            " be read, the event loaded with the rest; NULL for modules.",
        ),
        _c(
            "text",
            "VARCHAR",
            "The input the message is about, as read (at most 2,000 characters): the"
            " unknown attribute or line a warning kept, the line an error refused; NULL"
            " when about the whole file.",
        ),
    ),
    per_module=False,
)

FILE_STATS = Table(
    "file_stats",
    "What ingest saw of each module's files when it last read them: one row per module"
    " loaded or found present, by the files' absolute paths. A module whose files all show"
    " the same size, mtime and inode again is known by its content hash without being read"
    " (`ingest --rehash` reads them anyway); any difference reads and hashes it again.",
    (
        _c("path", "VARCHAR", "The module's first file (absolute): the row's key.", False),
        _c(
            "paths",
            "VARCHAR[]",
            "Every file the module's content hash covers, absolute, in hashing order.",
            False,
        ),
        _c("sizes", "BIGINT[]", "Each file's size in bytes (st_size), in `paths` order.", False),
        _c(
            "mtimes_ns",
            "BIGINT[]",
            "Each file's modification time, ns since the epoch (st_mtime_ns).",
            False,
        ),
        _c("inodes", "BIGINT[]", "Each file's inode number (st_ino).", False),
        _c("content_hash", "VARCHAR", "The module's content hash (modules.content_hash).", False),
        _c("bytes_read", "BIGINT", "Bytes of dump text the hash read (modules.bytes_read).", False),
        _c("run_id", "BIGINT", "Ingest run that recorded the row.", False),
        _c(
            "targets_looked_ns",
            "BIGINT",
            "When ingest last looked beside the module's files for the files naming its"
            " target (module_targets) and found none: the newest modification time (ns)"
            " of the directories it listed. While they show it, no file was added or"
            " removed there, and the next ingest does not list them again; NULL: a target"
            " was found, or not looked for since the row was written.",
        ),
    ),
    per_module=False,
)

MEMORY_SPACES = Table(
    "memory_spaces",
    "Reference: names of memory spaces (colors) per backend. Colors are backend-specific integers.",
    (
        _c("backend", "VARCHAR", "cpu, gpu, tpu or unknown.", False),
        _c("color", "INTEGER", "Memory space number (allocation color, layout S(n)).", False),
        _c("name", "VARCHAR", "Short name, e.g. HBM, VMEM, host.", False),
        _c("description", "VARCHAR", "What the space is and where the mapping comes from."),
    ),
    per_module=False,
)

SHARDINGS = Table(
    "shardings",
    "How a partitioned module splits its arrays across devices, from a proto: one row per"
    " array of each entry parameter's sharding (spmd_parameters_shardings), of the entry"
    " result's (spmd_output_sharding) and of each instruction that carries one (`sharding`)."
    " No rows for a module that is not partitioned, nor from a text dump (jax 0.12's"
    " after-optimizations text prints no shardings).",
    (
        _module_id(),
        _c("target", "VARCHAR", "parameter, output or instruction.", False),
        _c("number", "INTEGER", "Entry parameter number N (target parameter); else NULL."),
        _c("instruction", "VARCHAR", "The instruction (target instruction); else NULL."),
        _c(
            "shape_index",
            "VARCHAR",
            "ShapeIndex of the array within the parameter, result or instruction, e.g. `{}`,"
            " `{1}` (an element of a tuple sharding).",
            False,
        ),
        _c(
            "sharding",
            "VARCHAR",
            "The sharding as XLA prints it: `{mesh[data=2, model=2], [{data}, {}]}` (a named"
            " sharding, jax 0.12), `{devices=[1,4]<=[4]}`, `{replicated}`, `{maximal device=0}`.",
            False,
        ),
        _c(
            "tiles",
            "INTEGER[]",
            "Pieces each dimension is cut into (the array's per-device dimensions times these"
            " are its logical ones, rounded up where uneven); NULL when not split by dimension"
            " (replicated, on one device, manual).",
        ),
    ),
    stored_order=("target", "number", "instruction", "shape_index"),
)

SCHEMA_INFO = Table(
    "schema_info",
    "Key-value facts about the warehouse itself, e.g. schema_version.",
    (
        _c("key", "VARCHAR", "Fact name.", False),
        _c("value", "VARCHAR", "Fact value.", False),
    ),
    per_module=False,
)

#: Tables filled per module by ingest, in load order.
MODULE_TABLES: tuple[Table, ...] = (
    ALLOCATIONS,
    VALUES,
    ASSIGNMENTS,
    POSITIONS,
    USES,
    INSTRUCTIONS,
    SEQUENCE,
    LIVE_RANGES,
    PEAK_VALUES,
    STACK_TRACE,
    USAGE_REPORT,
    HEAP_PEAKS,
    HEAP_EVENTS,
    SHARDINGS,
)

#: Per-module tables computed from the tables above (bufferhouse.schema.derive), in
#: the same transaction as the module's rows, so fleet-wide queries avoid their joins.
DERIVED_TABLES: tuple[Table, ...] = (
    HEAP_PEAK_BUFFERS,
    HEAP_PEAK_SOURCES,
    SPACE_TOTALS,
    PADDED_VALUES,
)

#: Tables of OOM events from logs: keyed by event_id, written whole per event.
OOM_TABLES: tuple[Table, ...] = (OOM_EVENTS, OOM_BUFFERS, OOM_LABELS)

#: Tables of device memory profiles: keyed by snapshot_id, written whole per snapshot.
RUNTIME_TABLES: tuple[Table, ...] = (
    RUNTIME_SNAPSHOTS,
    RUNTIME_SAMPLES,
    RUNTIME_FRAMES,
    RUNTIME_LABELS,
)

TABLES: tuple[Table, ...] = (
    SCHEMA_INFO,
    RUNS,
    MODULES,
    LABELS,
    MODULE_TARGETS,
    *MODULE_TABLES,
    *DERIVED_TABLES,
    *OOM_TABLES,
    *RUNTIME_TABLES,
    DIAGNOSTICS,
    MEMORY_SPACES,
)

#: The warehouse's own bookkeeping: in the warehouse file only, never exported (a
#: dataset is read, not re-ingested: it has no files to compare).
LOCAL_TABLES: tuple[Table, ...] = (FILE_STATS,)

#: Every table of a warehouse file.
WAREHOUSE_TABLES: tuple[Table, ...] = (*TABLES, *LOCAL_TABLES)

TABLES_BY_NAME = {t.name: t for t in WAREHOUSE_TABLES}

#: Seed rows of memory_spaces: (backend, color, name, description).
MEMORY_SPACE_NAMES: tuple[tuple[str, int, str, str], ...] = (
    ("cpu", 0, "host", "Host RAM; the CPU backend uses color 0 only."),
    ("gpu", 0, "device", "GPU device memory (gpu_memory_space_assignment.h kDefault)."),
    (
        "gpu",
        1,
        "collective",
        "Symmetric / NCCL user-buffer / NVSHMEM memory for collectives (kCollective).",
    ),
    (
        "gpu",
        2,
        "temp",
        "Combined temp buffer with --xla_gpu_temp_buffer_use_separate_color (kTempBuffer).",
    ),
    ("gpu", 5, "host", "Pinned host memory for offloading (Layout::kHostMemorySpace)."),
    (
        "gpu",
        6,
        "unpinned-host",
        "Unpinned host memory (Layout::kUnpinnedHostMemorySpace, 2026-05+).",
    ),
    # TPU names by color: XProf's memory viewer, the one public source that maps them
    # (openxla/xprof frontend/app/components/memory_viewer/memory_viewer_control/
    # memory_viewer_control.ng.html: 0 HBM, 1 VMEM, 2 Sflag, 3 CMEM, 4 SMEM, 5 Host,
    # 6 SparseCore); libtpu is closed. Seen in tests/data/tpu: 0, 1 (MSA's prefetches,
    # `S(1)`), 2 (async copies' u32 sync flags, `S(2)`) and 6 (scalar predicates and
    # loop counters, `S(6)`).
    ("tpu", 0, "HBM", "High-bandwidth device memory (XProf memory viewer, color 0)."),
    (
        "tpu",
        1,
        "VMEM",
        "On-chip vector memory that memory-space assignment prefetches into (color 1).",
    ),
    ("tpu", 2, "SFlag", "Sync flags: the u32 flags of async copies (XProf `Sflag`, color 2)."),
    ("tpu", 3, "CMEM", "Common memory (XProf memory viewer, color 3)."),
    ("tpu", 4, "SMEM", "Scalar memory (XProf memory viewer, color 4)."),
    ("tpu", 5, "Host", "Host memory (XProf memory viewer, color 5; Layout::kHostMemorySpace)."),
    (
        "tpu",
        6,
        "SparseCore",
        "XProf names 6 SparseCore; dumps show scalars here, which some tools call SMEM.",
    ),
    ("unknown", 0, "default", "Default memory space (Layout::kDefaultMemorySpace)."),
    ("unknown", 1, "fast", "Generic fast memory (Layout::kGenericFastMemorySpace)."),
    ("unknown", 5, "host", "Host memory (Layout::kHostMemorySpace)."),
    ("unknown", 6, "unpinned-host", "Unpinned host memory (Layout::kUnpinnedHostMemorySpace)."),
)
