"""Diff two runs: what changed in memory, module by module.

A side of a diff is one of

- a label (`jax=0.7.2`, or several joined by commas: all must hold) selecting
  modules of the warehouse `db`;
- a warehouse file (every module in it);
- a dump tree or dump file, ingested into a temporary warehouse that is
  removed afterwards.

Modules pair up by jit name (`modules.module_name`). Where a name has several
modules on a side, pairs are chosen greedily by, in this order: the same
parameter signature (entry parameter shapes without layout: the key JAX
compiles a jit again for, and the one thing a compiler upgrade cannot change),
then the closest instruction multiset (weighted Jaccard over opcode counts:
what the compiler made of the program, changed only in part by an upgrade),
then the same rank in module-number order (the order of compilation, which
shifts when other modules are compiled in between). Modules left over are
added or removed.

The comparison SQL is in `bufferhouse/queries/diff/*.sql` (documented like the
canned queries); values are bound, never spliced.

`bufferhouse.diff` (the public API) calls `diff` here.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections import Counter, defaultdict
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse import queries
from bufferhouse.errors import BufferhouseError, DiffError
from bufferhouse.load import ingest_paths
from bufferhouse.render import human_bytes
from bufferhouse.schema.warehouse import connect as _connect
from bufferhouse.schema.warehouse import default_db

#: --peak choices and the figure each names.
PEAKS = {"heap": "heap_peak_bytes", "logical": "logical_peak_bytes", "total": "total_bytes"}
PEAK_TITLES = {
    "heap": "heap peak (memory space 0)",
    "logical": "logical peak",
    "total": "total bytes",
}
#: The figures compared for every module pair, in report order.
METRICS = (
    "heap_peak_bytes",
    "logical_peak_bytes",
    "total_bytes",
    "parameter_bytes",
    "output_bytes",
    "alias_bytes",
    "constant_bytes",
    "thread_local_bytes",
    "temp_bytes",
)
#: Result tables by name (`DiffResult.table(name)`).
TABLES = ("modules", "changes", "buffers", "sources")

_ALL_ROWS = 2**31 - 1
#: Above this many candidate pairs in one name, skip the instruction similarity.
_MAX_SIMILARITY_PAIRS = 250_000
_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_THRESHOLD = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(%|[a-z]*)\s*$", re.IGNORECASE)


# --------------------------------------------------------------------- gate


@dataclass(frozen=True)
class Threshold:
    """How much a module's peak may grow: a percentage of its base, or bytes."""

    kind: str  # "pct" or "bytes"
    value: float
    text: str

    def exceeded(self, base: int | None, head: int | None) -> bool:
        """Whether growing from `base` to `head` bytes is past the threshold (strictly)."""
        if base is None or head is None or head <= base:
            return False
        delta = head - base
        if self.kind == "bytes":
            return delta > self.value
        return base == 0 or delta * 100 > self.value * base

    def __str__(self) -> str:
        return self.text


def parse_threshold(spec: str | int | Threshold) -> Threshold:
    """`5%`, `0.5%`, `1048576`, `10MiB` or `1.5GB` (a bare number is bytes)."""
    if isinstance(spec, Threshold):
        return spec
    if isinstance(spec, bool) or not isinstance(spec, (str, int)):
        raise DiffError(f"threshold must be PCT% or BYTES, got {spec!r}")
    if isinstance(spec, int):
        if spec < 0:
            raise DiffError(f"threshold must not be negative, got {spec}")
        return Threshold("bytes", float(spec), f"{spec} B")
    m = _THRESHOLD.match(spec)
    unit = m.group(2).lower() if m else ""
    if not m or (unit != "%" and unit not in _UNITS):
        raise DiffError(f"threshold {spec!r} is not PCT% or BYTES (e.g. 5%, 1048576, 10MiB, 1.5GB)")
    number = float(m.group(1))
    if unit == "%":
        return Threshold("pct", number, f"{m.group(1)}%")
    return Threshold("bytes", number * _UNITS[unit], spec.strip())


@dataclass(frozen=True)
class Gate:
    """The CI gate: which matched modules' chosen peak grew past the threshold."""

    peak: str  # heap | logical | total
    threshold: Threshold
    failures: pa.Table  # rows of DiffResult.modules over the threshold

    @property
    def passed(self) -> bool:
        return self.failures.num_rows == 0

    def details(self, limit: int = 10) -> str:
        """Which modules grew past the threshold (at most `limit` named), or that none did."""
        what = f"more than {self.threshold} in {PEAK_TITLES[self.peak]}"
        if self.passed:
            return f"no matched module grew {what}"
        rows = self.failures.to_pylist()
        shown = ", ".join(
            f"{r['module_name']} {_signed(r['delta_bytes'])}"
            + (f" ({_pct(r['change_pct'])})" if r["change_pct"] is not None else "")
            for r in rows[:limit]
        )
        more = f" and {len(rows) - limit} more" if len(rows) > limit else ""
        n = len(rows)
        return f"{n} matched module{'s' if n != 1 else ''} grew {what}: {shown}{more}"

    def describe(self, limit: int = 10) -> str:
        return f"gate {'passed' if self.passed else 'failed'}: {self.details(limit)}"


# -------------------------------------------------------------------- sides


@dataclass(frozen=True)
class Side:
    """One side of a diff, as given and as read."""

    spec: str  # as given: a label, a warehouse file or a dump path
    kind: str  # label | warehouse | dumps
    modules: int  # modules on this side


def _is_duckdb_file(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(12)
    except OSError:
        return False
    return head[8:12] == b"DUCK"


def _classify(spec: str, role: str) -> tuple[str, list[str]]:
    """(kind, labels) of a side given as text: an existing path wins over a label."""
    path = Path(spec)
    if path.is_dir():
        return "dumps", []
    if path.is_file():
        return ("warehouse" if _is_duckdb_file(path) else "dumps"), []
    if "=" in spec:
        labels = [part.strip() for part in spec.split(",")]
        bad = [x for x in labels if not x.partition("=")[0].strip() or "=" not in x]
        if bad:
            raise DiffError(f"{role} {spec!r}: {bad[0]!r} is not a key=value label")
        return "label", labels
    raise DiffError(
        f"{role} {spec!r} is neither an existing file or directory nor a key=value label"
    )


def _sql(name: str) -> queries.Query:
    return queries.sql_files("bufferhouse.queries", "diff", "diff")[f"diff-{name}"]


def diff_queries() -> list[queries.Query]:
    """The documented comparison queries in bufferhouse/queries/diff/."""
    return list(queries.sql_files("bufferhouse.queries", "diff", "diff").values())


def _run(con: duckdb.DuckDBPyConnection, name: str, **params: object) -> pa.Table:
    q = _sql(name)
    try:
        return queries.arrow_result(con.sql(q.sql, params=q.bind(params) if q.params else None))
    except duckdb.Error as exc:
        raise DiffError(f"{q.source}: {exc}") from None


class _Open:
    """A side's warehouse, open read-only, and its modules."""

    def __init__(self, side: Side, con: duckdb.DuckDBPyConnection, modules: pa.Table):
        self.side = side
        self.con = con
        self.modules = modules


def _open_side(
    spec: str | os.PathLike[str],
    role: str,
    db: str | os.PathLike[str] | None,
    stack: ExitStack,
    jobs: int | None,
) -> _Open:
    spec = os.fspath(spec)
    kind, labels = _classify(spec, role)
    if kind == "label":
        path = os.fspath(db) if db is not None else default_db()
    elif kind == "warehouse":
        path = spec
    else:
        scratch = tempfile.mkdtemp(prefix=f"bufferhouse-diff-{role}-")
        stack.callback(shutil.rmtree, scratch, True)
        path = os.path.join(scratch, "warehouse.duckdb")
        report = ingest_paths([spec], path, jobs=jobs, after_open=queries.install_macros)
        if report.failed:
            first = report.failed[0]
            why = first.error.describe() if first.error else first.files.display
            raise DiffError(
                f"{role} {spec!r}: {len(report.failed)} module(s) failed to ingest, "
                f"so the diff would be incomplete; first: {why}"
            )
    try:
        con = _connect(path, read_only=True)
    except BufferhouseError as exc:
        raise DiffError(f"{role} {spec!r}: {exc}") from None
    stack.callback(con.close)
    queries.use_package_views(con)
    modules = queries.run(con, "modules")
    if labels:
        ids = _run(con, "labelled", labels=labels).column("module_id")
        modules = modules.filter(pc.is_in(modules.column("module_id"), value_set=ids))
    if modules.num_rows == 0:
        if kind == "label":
            present = con.execute(
                "SELECT DISTINCT key || '=' || value FROM labels ORDER BY 1"
            ).fetchall()
            valid = ", ".join(r[0] for r in present[:20]) or "none"
            raise DiffError(
                f"{role} {spec!r}: no module in {path} carries that label; labels: {valid}"
            )
        where = "no dump files found there" if kind == "dumps" else "the warehouse is empty"
        raise DiffError(f"{role} {spec!r}: no modules ({where})")
    return _Open(Side(spec, kind, modules.num_rows), con, modules)


# ----------------------------------------------------------------- matching


@dataclass(frozen=True)
class ModuleRef:
    """A module as the matching sees it."""

    module_id: int
    name: str | None
    number: int | None


def _modules(table: pa.Table) -> list[ModuleRef]:
    rows = zip(
        table.column("module_id").to_pylist(),
        table.column("module_name").to_pylist(),
        table.column("module_number").to_pylist(),
    )
    return [ModuleRef(i, n, k) for i, n, k in rows]


def _order(m: ModuleRef) -> tuple:
    return (m.number is None, m.number or 0, m.module_id)


def _groups(base: list[ModuleRef], head: list[ModuleRef]) -> dict:
    groups: dict[str | None, tuple[list[ModuleRef], list[ModuleRef]]] = defaultdict(
        lambda: ([], [])
    )
    for m in base:
        groups[m.name][0].append(m)
    for m in head:
        groups[m.name][1].append(m)
    for b, h in groups.values():
        b.sort(key=_order)
        h.sort(key=_order)
    return groups


def _ambiguous(groups: dict) -> tuple[list[int], list[int]]:
    """Module ids (base, head) whose name needs a structural match."""
    base_ids: list[int] = []
    head_ids: list[int] = []
    for b, h in groups.values():
        if b and h and (len(b) > 1 or len(h) > 1):
            base_ids += [m.module_id for m in b]
            head_ids += [m.module_id for m in h]
    return base_ids, head_ids


def _similarity(a: Mapping[str, int], b: Mapping[str, int]) -> float:
    """Weighted Jaccard of two multisets: 1 when equal, 0 when disjoint."""
    a, b = Counter(a), Counter(b)
    union = sum((a | b).values())
    return 1.0 if union == 0 else sum((a & b).values()) / union


@dataclass(frozen=True)
class Features:
    """What the structural match compares: parameter signature and opcode counts."""

    signature: str | None
    opcodes: Mapping[str, int]


def _features(con: duckdb.DuckDBPyConnection, ids: list[int]) -> dict[int, Features]:
    if not ids:
        return {}
    sigs = dict(zip(*_run(con, "signatures", ids=ids).to_pydict().values()))
    ops: dict[int, Counter] = defaultdict(Counter)
    for row in _run(con, "opcodes", ids=ids).to_pylist():
        ops[row["module_id"]][row["opcode"]] = row["instructions"]
    return {i: Features(sigs.get(i), ops[i]) for i in ids}


def match_modules(
    base: list[ModuleRef],
    head: list[ModuleRef],
    base_features: dict[int, Features] | None = None,
    head_features: dict[int, Features] | None = None,
) -> list[tuple[str | None, str | None, int | None, int | None]]:
    """Pairs (module_name, match, base_module_id, head_module_id); one id None when unmatched.

    `match` is `name` (the only module of that name on each side), `signature`
    (same parameter shapes) or `structure` (closest instruction multiset, then
    module-number order); see the module docstring for why.
    """
    base_features = base_features or {}
    head_features = head_features or {}
    empty = Features(None, Counter())
    out: list[tuple[str | None, str | None, int | None, int | None]] = []
    groups = _groups(base, head)
    for name in sorted(groups, key=lambda n: (n is None, n or "")):
        bs, hs = groups[name]
        taken_b: set[int] = set()
        taken_h: set[int] = set()
        if len(bs) == 1 and len(hs) == 1:
            out.append((name, "name", bs[0].module_id, hs[0].module_id))
            taken_b.add(0)
            taken_h.add(0)
        elif bs and hs:
            fb = [base_features.get(m.module_id, empty) for m in bs]
            fh = [head_features.get(m.module_id, empty) for m in hs]
            similar = len(bs) * len(hs) <= _MAX_SIMILARITY_PAIRS
            candidates = []
            for i, x in enumerate(fb):
                for j, y in enumerate(fh):
                    same = x.signature is not None and x.signature == y.signature
                    sim = _similarity(x.opcodes, y.opcodes) if similar else 0.0
                    candidates.append((not same, -sim, abs(i - j), i, j))
            candidates.sort()
            for different, _, _, i, j in candidates:
                if i in taken_b or j in taken_h:
                    continue
                taken_b.add(i)
                taken_h.add(j)
                match = "structure" if different else "signature"
                out.append((name, match, bs[i].module_id, hs[j].module_id))
        out += [(name, None, m.module_id, None) for i, m in enumerate(bs) if i not in taken_b]
        out += [(name, None, None, m.module_id) for j, m in enumerate(hs) if j not in taken_h]
    return out


_PAIRS_SCHEMA = pa.schema(
    [
        ("pair", pa.int32()),
        ("module_name", pa.string()),
        ("match", pa.string()),
        ("base_module_id", pa.int64()),
        ("head_module_id", pa.int64()),
    ]
)


def _pairs_table(pairs: list[tuple]) -> pa.Table:
    columns = list(zip(*pairs)) if pairs else [(), (), (), ()]
    return pa.table(
        [pa.array(range(len(pairs)), pa.int32())]
        + [pa.array(c, f.type) for c, f in zip(columns, list(_PAIRS_SCHEMA)[1:])],
        schema=_PAIRS_SCHEMA,
    )


# ------------------------------------------------------------------- result


@dataclass(frozen=True)
class DiffResult:
    """Everything a diff found, as Arrow tables plus a summary.

    - `modules`: one row per module pair (or added/removed module) with the
      chosen peak, sorted by absolute delta;
    - `changes`: every figure (three peaks, six categories) of every pair;
    - `buffers`, `sources`: the drill-down (`module=`), else None.

    Column meanings are in the headers of bufferhouse/queries/diff/*.sql.
    """

    base: Side
    head: Side
    peak: str
    module: str | None
    modules: pa.Table
    changes: pa.Table
    buffers: pa.Table | None
    sources: pa.Table | None
    gate: Gate | None

    @property
    def failed(self) -> bool:
        """The gate was set and some matched module grew past it."""
        return self.gate is not None and not self.gate.passed

    def table(self, name: str) -> pa.Table:
        """One result table by name: modules, changes, buffers or sources."""
        if name not in TABLES:
            raise DiffError(f"no diff table {name!r}; tables: {', '.join(TABLES)}")
        table = getattr(self, name)
        if table is None:
            raise DiffError(f"the {name} table comes with a drill-down: pass a module")
        return table

    def summary(self) -> dict[str, object]:
        """Counts by status, and the chosen peak summed over the matched modules."""
        status = self.modules.column("status").to_pylist()
        counts = Counter(status)
        matched = [r for r in self.modules.to_pylist() if r["status"] not in ("added", "removed")]
        base_sum = sum(r["base_bytes"] or 0 for r in matched)
        head_sum = sum(r["head_bytes"] or 0 for r in matched)
        return {
            "base": self.base.spec,
            "head": self.head.spec,
            "base_modules": self.base.modules,
            "head_modules": self.head.modules,
            "peak": self.peak,
            "matched": len(matched),
            **{k: counts.get(k, 0) for k in ("grown", "shrunk", "same", "unknown")},
            "added": counts.get("added", 0),
            "removed": counts.get("removed", 0),
            "base_bytes": base_sum,
            "head_bytes": head_sum,
            "delta_bytes": head_sum - base_sum,
            "gate": None if self.gate is None else ("passed" if self.gate.passed else "failed"),
        }

    def report(self, fmt: str = "markdown", top: int | None = 25) -> str:
        """A human report: `markdown` (fit for a pull-request comment) or `table` (terminal).

        Tables list the changed rows, largest absolute change first, at most
        `top` each (None for all); the result tables hold every row.
        """
        return _report(self, fmt, top)


def diff(
    base: str | os.PathLike[str],
    head: str | os.PathLike[str],
    db: str | os.PathLike[str] | None = None,
    *,
    module: str | None = None,
    peak: str = "heap",
    fail_above: str | int | Threshold | None = None,
    jobs: int | None = None,
) -> DiffResult:
    """Compare two runs module by module: which modules' memory changed, and why.

    `base` and `head` are each a label (`jax=0.6.2`, looked up in `db`), a
    warehouse file, or a dump tree (ingested into a temporary warehouse, with
    `jobs` parser processes). `module` (a name, file stem, module_id or hash
    prefix on either side) restricts the diff to that module's pairs and adds
    the drill-down into the buffers live at its heap peak. `fail_above`
    (`5%`, `10MiB`, bytes as int) sets the gate on the `peak` (heap, logical
    or total) of the matched modules.

    >>> r = bufferhouse.diff("jax=0.6.2", "jax=0.7.2", db="fleet.duckdb", fail_above="5%")
    >>> r.modules, r.failed
    """
    if peak not in PEAKS:
        raise DiffError(f"peak must be one of {', '.join(PEAKS)}, got {peak!r}")
    threshold = parse_threshold(fail_above) if fail_above is not None else None
    with ExitStack() as stack:
        b = _open_side(base, "base", db, stack, jobs)
        h = _open_side(head, "head", db, stack, jobs)
        base_mods, head_mods = _modules(b.modules), _modules(h.modules)
        base_ids, head_ids = _ambiguous(_groups(base_mods, head_mods))
        pairs = match_modules(
            base_mods, head_mods, _features(b.con, base_ids), _features(h.con, head_ids)
        )
        if module is not None:
            pairs = _select(pairs, module, b, h)
        pairs_table = _pairs_table(pairs)
        scratch = stack.enter_context(duckdb.connect())
        scratch.register("pairs", pairs_table)
        scratch.register("base_modules", b.modules)
        scratch.register("head_modules", h.modules)
        changes = _run(scratch, "changes")
        buffers = sources = None
        if module is not None:
            scratch.register("base_buffers", _peak_buffers(b.con, pairs_table, "base_module_id"))
            scratch.register("head_buffers", _peak_buffers(h.con, pairs_table, "head_module_id"))
            buffers = _run(scratch, "buffers")
            sources = _run(scratch, "sources")
    modules = changes.filter(pc.equal(changes.column("metric"), PEAKS[peak])).drop_columns(
        ["metric"]
    )
    gate = None
    if threshold is not None:
        over = [
            r["status"] not in ("added", "removed")
            and threshold.exceeded(r["base_bytes"], r["head_bytes"])
            for r in modules.to_pylist()
        ]
        gate = Gate(peak, threshold, modules.filter(pa.array(over, pa.bool_())))
    return DiffResult(b.side, h.side, peak, module, modules, changes, buffers, sources, gate)


def _select(pairs: list[tuple], key: str, b: _Open, h: _Open) -> list[tuple]:
    """The pairs whose base or head module `key` selects (name, stem, id or hash prefix)."""
    ids_b = set(queries.run(b.con, "modules", {"module": key}).column("module_id").to_pylist())
    ids_h = set(queries.run(h.con, "modules", {"module": key}).column("module_id").to_pylist())
    chosen = [p for p in pairs if p[2] in ids_b or p[3] in ids_h]
    if not chosen:
        names = sorted({p[0] for p in pairs if p[0] is not None})
        shown = ", ".join(names[:20]) + (" ..." if len(names) > 20 else "")
        raise DiffError(f"no module {key!r} on either side; modules: {shown}")
    return chosen


def _peak_buffers(con: duckdb.DuckDBPyConnection, pairs: pa.Table, id_column: str) -> pa.Table:
    """The `peak-buffers` rows of each pair's module on one side, with the pair number."""
    parts = []
    for pair, module_id in zip(
        pairs.column("pair").to_pylist(), pairs.column(id_column).to_pylist()
    ):
        if module_id is None:
            continue
        rows = queries.run(con, "peak-buffers", {"module": str(module_id), "top": _ALL_ROWS})
        rows = rows.filter(pc.equal(rows.column("module_id"), module_id))
        parts.append(rows.append_column("pair", pa.array([pair] * rows.num_rows, pa.int32())))
    if not parts:
        empty = queries.run(con, "peak-buffers", {"top": 0})
        return empty.append_column("pair", pa.array([], pa.int32()))
    return pa.concat_tables(parts)


# ------------------------------------------------------------------ reports


def _signed(n: int | None) -> str:
    if n is None:
        return ""
    return ("+" if n > 0 else "") + human_bytes(n)


def _pct(p: float | None) -> str:
    if p is None:
        return ""
    if p == 0:
        return "0%"
    if abs(p) < 0.05:
        return f"{p:+.1g}%"
    return f"{p:+.1f}%"


def _grid(headers: list[str], rows: list[list[str]], right: set[int], fmt: str) -> list[str]:
    if fmt == "markdown":
        out = ["| " + " | ".join(headers) + " |"]
        out.append(
            "| " + " | ".join("---:" if i in right else "---" for i in range(len(headers))) + " |"
        )
        for r in rows:
            cells = [c.replace("|", "\\|").replace("\n", " ") for c in r]
            out.append("| " + " | ".join(cells) + " |")
        return out
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ).rstrip()

    return [line(headers), "  ".join("-" * w for w in widths)] + [line(r) for r in rows]


def _code(text: str | None, fmt: str) -> str:
    if text is None:
        return ""
    return f"`{text}`" if fmt == "markdown" and "`" not in text else text


def _section(title: str, fmt: str) -> list[str]:
    return ["", f"#### {title}" if fmt == "markdown" else title, ""]


def _limited(rows: list, top: int | None) -> tuple[list, int]:
    if top is None or len(rows) <= top:
        return rows, 0
    return rows[:top], len(rows) - top


def _more(hidden: int, what: str) -> list[str]:
    if not hidden:
        return []
    return ["", f"... and {hidden} more {what} not shown (the result tables hold every row)."]


def _report(r: DiffResult, fmt: str, top: int | None) -> str:
    if fmt not in ("markdown", "table"):
        raise DiffError(f"report format must be markdown or table, got {fmt!r}")
    md = fmt == "markdown"
    s = r.summary()
    arrow = "→" if md else "->"
    title = f"bufferhouse diff: {_code(r.base.spec, fmt)} {arrow} {_code(r.head.spec, fmt)}"
    if r.module is not None:
        title += f", module {_code(r.module, fmt)}"
    out = [f"### {title}" if md else title, ""]
    peak_title = PEAK_TITLES[r.peak]
    base_sum, head_sum = s["base_bytes"], s["head_bytes"]
    change = _pct(100.0 * (head_sum - base_sum) / base_sum) if base_sum else ""
    unknown = f", {s['unknown']} unknown" if s["unknown"] else ""
    out.append(
        f"{s['matched']} matched module{'s' if s['matched'] != 1 else ''} "
        f"({s['grown']} grown, {s['shrunk']} shrunk, {s['same']} unchanged{unknown}), "
        f"{s['added']} added, {s['removed']} removed "
        f"({r.base.modules} base modules, {r.head.modules} head modules). "
        f"{peak_title.capitalize()} summed over the matched modules: {human_bytes(base_sum)} "
        f"{arrow} {human_bytes(head_sum)} ({_signed(s['delta_bytes'])}"
        f"{', ' + change if change else ''})."
    )
    if r.gate is not None:
        word = "Gate passed:" if r.gate.passed else "Gate failed:"
        out += ["", f"{'**' + word + '**' if md else word} {r.gate.details(limit=top or 10)}."]

    names = Counter(r.modules.column("module_name").to_pylist())

    def module(x: dict) -> str:
        text = _code(x["module_name"], fmt)
        if names[x["module_name"]] > 1:  # say which compile of the name
            numbers = [x["base_number"], x["head_number"]]
            text += " #" + f" {arrow} #".join("" if n is None else str(n) for n in numbers)
        return text

    changed = [row for row in r.modules.to_pylist() if row["status"] != "same"]
    out += _section(f"Modules by {peak_title} change", fmt)
    if changed:
        shown, hidden = _limited(changed, top)
        rows = [
            [
                module(x),
                x["status"],
                x["match"] or "",
                human_bytes(x["base_bytes"]),
                human_bytes(x["head_bytes"]),
                _signed(x["delta_bytes"]),
                _pct(x["change_pct"]),
            ]
            for x in shown
        ]
        headers = ["module", "status", "match", "base", "head", "delta", "change"]
        out += _grid(headers, rows, {3, 4, 5, 6}, fmt) + _more(hidden, "rows")
    else:
        out.append(f"No module's {peak_title} changed.")

    figures = [
        row
        for row in r.changes.to_pylist()
        if row["status"] not in ("same", "added", "removed") and row["delta_bytes"]
    ]
    n_same = len([x for x in r.modules.to_pylist() if x["status"] == "same"])
    if figures:
        shown, hidden = _limited(figures, top)
        rows = [
            [
                module(x),
                x["metric"],
                human_bytes(x["base_bytes"]),
                human_bytes(x["head_bytes"]),
                _signed(x["delta_bytes"]),
                _pct(x["change_pct"]),
            ]
            for x in shown
        ]
        headers = ["module", "figure", "base", "head", "delta", "change"]
        label = f"Every changed figure of the matched modules ({len(figures)})"
        if md:
            out += ["", f"<details><summary>{label}</summary>", ""]
        else:
            out += _section(label, fmt)
        out += _grid(headers, rows, {2, 3, 4, 5}, fmt) + _more(hidden, "rows")
        if md:
            out += ["", "</details>"]
    if n_same:
        out += [
            "",
            f"{n_same} matched module{'s' if n_same != 1 else ''} unchanged in {peak_title}.",
        ]

    if r.buffers is not None and r.sources is not None:
        out += _drill_down(r, fmt, top)
    return "\n".join(out).rstrip("\n") + "\n"


def _drill_down(r: DiffResult, fmt: str, top: int | None) -> list[str]:
    out: list[str] = []
    assert r.buffers is not None and r.sources is not None
    buffers = r.buffers.to_pylist()
    counts = Counter(x["status"] for x in buffers)
    base_total = sum(x["base_size"] or 0 for x in buffers)
    head_total = sum(x["head_size"] or 0 for x in buffers)
    out += _section(f"Buffers live at the heap peak of {_code(r.module, fmt)}", fmt)
    out.append(
        f"{counts['new']} new, {counts['gone']} gone, {counts['grown']} grown, "
        f"{counts['shrunk']} shrunk, {counts['same']} same; "
        f"{human_bytes(base_total)} {'→' if fmt == 'markdown' else '->'} {human_bytes(head_total)} "
        f"({_signed(head_total - base_total)}). Buffers match by op_name and shape, "
        "then by defining instruction, then (without an op_name) by opcode and shape."
    )
    changed = [x for x in buffers if x["status"] != "same"]
    if changed:
        out.append("")
        shown, hidden = _limited(changed, top)
        several = len({x["pair"] for x in buffers}) > 1
        arrow = "→" if fmt == "markdown" else "->"
        compiles = {
            x["pair"]: f" {arrow} ".join(
                "-" if n is None else f"#{n}" for n in (x["base_number"], x["head_number"])
            )
            for x in r.modules.to_pylist()
        }
        rows = []
        for x in shown:
            instruction = x["head_instruction"] or x["base_instruction"]
            row = [
                x["status"],
                _code(x["op_name"] or instruction, fmt),
                _code(x["shape"], fmt),
                x["head_category"] or x["base_category"] or "",
                human_bytes(x["base_size"]),
                human_bytes(x["head_size"]),
                _signed(x["delta_bytes"]),
                x["source"] or "",
            ]
            rows.append(([compiles[x["pair"]]] if several else []) + row)
        headers = ["status", "op_name or instruction", "shape", "category", "base", "head"]
        headers += ["delta", "source"]
        right = {4, 5, 6}
        if several:
            headers = ["modules", *headers]
            right = {i + 1 for i in right}
        out += _grid(headers, rows, right, fmt) + _more(hidden, "rows")

    sources = [
        x
        for x in r.sources.to_pylist()
        if x["delta_bytes"] or x["base_buffers"] != x["head_buffers"]
    ]
    out += _section(f"Bytes at the heap peak of {_code(r.module, fmt)} by source line", fmt)
    if sources:
        shown, hidden = _limited(sources, top)
        rows = [
            [
                _code(x["source"], fmt),
                f"{x['base_buffers']} {'→' if fmt == 'markdown' else '->'} {x['head_buffers']}",
                human_bytes(x["base_bytes"]),
                human_bytes(x["head_bytes"]),
                _signed(x["delta_bytes"]),
                _pct(x["change_pct"]),
            ]
            for x in shown
        ]
        headers = ["source", "buffers", "base", "head", "delta", "change"]
        out += _grid(headers, rows, {2, 3, 4, 5}, fmt) + _more(hidden, "rows")
    else:
        out.append("No source line holds more or less than before.")
    return out
