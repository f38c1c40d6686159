"""Pairing the modules of two sides.

Modules pair up by jit name (`modules.module_name`). Where a name has several
modules on a side, pairs are chosen greedily by, in this order: the same
parameter signature (entry parameter shapes without layout: the key JAX
compiles a jit again for, and the one thing a compiler upgrade cannot change),
then the closest instruction multiset (weighted Jaccard over opcode counts:
what the compiler made of the program, changed only in part by an upgrade),
then the same rank in module-number order (the order of compilation, which
shifts when other modules are compiled in between). Modules left over are
added or removed.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

import duckdb
import pyarrow as pa

from bufferhouse import queries
from bufferhouse.compare import statements
from bufferhouse.compare.sides import Opened
from bufferhouse.errors import DiffError

#: Above this many candidate pairs in one name, skip the instruction similarity.
_MAX_SIMILARITY_PAIRS = 250_000


@dataclass(frozen=True)
class ModuleRef:
    """A module as the matching sees it."""

    module_id: int
    name: str | None
    number: int | None


def modules_of(table: pa.Table) -> list[ModuleRef]:
    """The ModuleRefs of a side's `modules` rows."""
    rows = zip(
        table.column("module_id").to_pylist(),
        table.column("module_name").to_pylist(),
        table.column("module_number").to_pylist(),
    )
    return [ModuleRef(i, n, k) for i, n, k in rows]


def _order(m: ModuleRef) -> tuple:
    return (m.number is None, m.number or 0, m.module_id)


def groups(base: list[ModuleRef], head: list[ModuleRef]) -> dict:
    """name -> (base modules, head modules), each in module-number order."""
    out: dict[str | None, tuple[list[ModuleRef], list[ModuleRef]]] = defaultdict(lambda: ([], []))
    for m in base:
        out[m.name][0].append(m)
    for m in head:
        out[m.name][1].append(m)
    for b, h in out.values():
        b.sort(key=_order)
        h.sort(key=_order)
    return out


def ambiguous(by_name: dict) -> tuple[list[int], list[int]]:
    """Module ids (base, head) whose name needs a structural match."""
    base_ids: list[int] = []
    head_ids: list[int] = []
    for b, h in by_name.values():
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


def features(con: duckdb.DuckDBPyConnection, ids: list[int]) -> dict[int, Features]:
    """Parameter signature and opcode counts of each module id on one side."""
    if not ids:
        return {}
    sigs = dict(zip(*statements.run(con, "signatures", ids=ids).to_pydict().values()))
    ops: dict[int, Counter] = defaultdict(Counter)
    for row in statements.run(con, "opcodes", ids=ids).to_pylist():
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
    by_name = groups(base, head)
    for name in sorted(by_name, key=lambda n: (n is None, n or "")):
        bs, hs = by_name[name]
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


def pairs_table(pairs: list[tuple]) -> pa.Table:
    """The pairs as the `pairs` table the comparison SQL joins on, numbered."""
    columns = list(zip(*pairs)) if pairs else [(), (), (), ()]
    return pa.table(
        [pa.array(range(len(pairs)), pa.int32())]
        + [pa.array(c, f.type) for c, f in zip(columns, list(_PAIRS_SCHEMA)[1:])],
        schema=_PAIRS_SCHEMA,
    )


def select_pairs(pairs: list[tuple], key: str, b: Opened, h: Opened) -> list[tuple]:
    """The pairs whose base or head module `key` selects (name, stem, id or hash prefix)."""
    ids_b = set(queries.run(b.con, "modules", {"module": key}).column("module_id").to_pylist())
    ids_h = set(queries.run(h.con, "modules", {"module": key}).column("module_id").to_pylist())
    chosen = [p for p in pairs if p[2] in ids_b or p[3] in ids_h]
    if not chosen:
        names = sorted({p[0] for p in pairs if p[0] is not None})
        shown = ", ".join(names[:20]) + (" ..." if len(names) > 20 else "")
        raise DiffError(f"no module {key!r} on either side; modules: {shown}")
    return chosen


__all__ = [
    "Features",
    "ModuleRef",
    "ambiguous",
    "features",
    "groups",
    "match_modules",
    "modules_of",
    "pairs_table",
    "select_pairs",
]
