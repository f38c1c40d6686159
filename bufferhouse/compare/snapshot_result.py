"""A snapshot diff's result: its sides, its gate and its tables (compare/snapshots.py
makes them), and the result as text: markdown for a pull-request comment, or aligned
columns for a terminal, one table per device of the lines whose bytes or buffers changed.
The comparison imports this module, never the other way."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from bufferhouse.compare.gate import Threshold, pct, signed
from bufferhouse.compare.report import _code, _grid, _limited, _more, _section
from bufferhouse.errors import DiffError
from bufferhouse.render import human_bytes

#: Result tables of a snapshot diff by name (`SnapshotDiffResult.table(name)`).
SNAPSHOT_TABLES = ("sources", "devices")


@dataclass(frozen=True)
class SnapshotSide:
    """One side of a snapshot diff, as given and as read."""

    spec: str  # as given: a profile, a directory, or a selector of the warehouse
    kind: str  # profile | profiles (a directory) | snapshot (of the warehouse)
    snapshots: tuple[str, ...]  # the snapshots' names: file, path in the directory, selector


@dataclass(frozen=True)
class SnapshotGate:
    """The gate of a snapshot diff: which devices' live buffer bytes grew past the
    threshold. A device new in head grows from 0 (past any percentage)."""

    threshold: Threshold
    failures: pa.Table  # rows of SnapshotDiffResult.devices over the threshold
    several: bool  # more than one snapshot pair: name the snapshot beside the device

    @property
    def passed(self) -> bool:
        return self.failures.num_rows == 0

    def details(self, limit: int = 10) -> str:
        what = f"more than {self.threshold} in live buffer bytes"
        rows = self.failures.to_pylist()
        if not rows:
            return f"no device grew {what}"
        shown = ", ".join(
            (f"{r['head_snapshot']} " if self.several else "")
            + f"{r['device']} {signed(r['delta_bytes'])}"
            + (f" ({pct(r['change_pct'])})" if r["change_pct"] is not None else " (new)")
            for r in rows[:limit]
        )
        more = f" and {len(rows) - limit} more" if len(rows) > limit else ""
        n = len(rows)
        return f"{n} device{'s' if n != 1 else ''} grew {what}: {shown}{more}"

    def describe(self, limit: int = 10) -> str:
        return f"gate {'passed' if self.passed else 'failed'}: {self.details(limit)}"


@dataclass(frozen=True)
class SnapshotDiffResult:
    """Two device memory snapshots compared, as Arrow tables plus a summary.

    - `sources`: per snapshot pair and device, the live buffer bytes and buffers of
      each allocating line (function, file:line), base and head, sorted by absolute
      change within the device; the rows of a device sum to its change;
    - `devices`: each device's totals, base and head (what the gate checks).

    Column meanings are in the headers of compare/sql/snapshot-*.sql.
    """

    base: SnapshotSide
    head: SnapshotSide
    sources: pa.Table
    devices: pa.Table
    gate: SnapshotGate | None

    @property
    def failed(self) -> bool:
        """The gate was set and some device's live bytes grew past it."""
        return self.gate is not None and not self.gate.passed

    def table(self, name: str) -> pa.Table:
        """One result table by name: sources or devices."""
        if name not in SNAPSHOT_TABLES:
            raise DiffError(
                f"no table {name!r} in a diff of device memory snapshots; tables: "
                f"{', '.join(SNAPSHOT_TABLES)}"
            )
        return getattr(self, name)

    def summary(self) -> dict[str, object]:
        """Counts of device rows by status, and live buffer bytes summed over the devices
        (and over the snapshot pairs, for two directories)."""
        rows = self.devices.to_pylist()
        base_sum = sum(r["base_bytes"] for r in rows)
        head_sum = sum(r["head_bytes"] for r in rows)
        statuses = ("grown", "shrunk", "same", "new", "gone")
        return {
            "base": self.base.spec,
            "head": self.head.spec,
            "pairs": len(set(self.devices.column("pair").to_pylist())),
            "devices": len(rows),
            **{k: sum(r["status"] == k for r in rows) for k in statuses},
            "base_bytes": base_sum,
            "head_bytes": head_sum,
            "delta_bytes": head_sum - base_sum,
            "gate": None if self.gate is None else ("passed" if self.gate.passed else "failed"),
        }

    def report(self, fmt: str = "markdown", top: int | None = 25) -> str:
        """`markdown` (a pull-request comment) or `table` (terminal): a table per device of
        the lines whose bytes or buffers changed, at most `top` rows each (None: all)."""
        return render(self, fmt, top)


_HEADERS = ["function", "source", "base", "head", "delta", "buffers", "count delta"]


def render(r: SnapshotDiffResult, fmt: str = "markdown", top: int | None = 25) -> str:
    """See SnapshotDiffResult.report."""
    if fmt not in ("markdown", "table"):
        raise DiffError(f"report format must be markdown or table, got {fmt!r}")
    md = fmt == "markdown"
    arrow = "→" if md else "->"
    s = r.summary()
    title = f"bufferhouse diff: {_code(r.base.spec, fmt)} {arrow} {_code(r.head.spec, fmt)}"
    out = [f"### {title}" if md else title, ""]
    counts = ", ".join(
        f"{s[k]} {word}"
        for k, word in (
            ("grown", "grown"),
            ("shrunk", "shrunk"),
            ("same", "unchanged"),
            ("new", "new"),
            ("gone", "gone"),
        )
        if s[k] or k in ("grown", "shrunk", "same")
    )
    devices = r.devices.to_pylist()
    n = len({d["device"] for d in devices})
    on = f"{n} device{'s' if n != 1 else ''}"
    if s["pairs"] == 1:
        out.append(f"Device memory snapshots on {on} ({counts}); {_totals(devices, arrow)}.")
    else:
        out.append(
            f"Device memory snapshots: {s['pairs']} pairs on {on} (per pair and device: {counts})."
        )
        out.append("")
        for pair in sorted({d["pair"] for d in devices}):
            rows = [d for d in devices if d["pair"] == pair]
            out.append(f"- {_code(rows[0]['head_snapshot'], fmt)}: {_totals(rows, arrow)}.")
    if r.gate is not None:
        word = "Gate passed:" if r.gate.passed else "Gate failed:"
        out += ["", f"{'**' + word + '**' if md else word} {r.gate.details(limit=top or 10)}."]
    sources = r.sources.to_pylist()
    several = s["pairs"] > 1
    for device in r.devices.to_pylist():
        out += _device(device, sources, fmt, top, several)
    out += [
        "",
        "The rows of a device sum to the change of its live buffer bytes; lines whose "
        "bytes and buffers are unchanged are not shown (the result tables hold every row).",
    ]
    return "\n".join(out).rstrip("\n") + "\n"


def _totals(devices: list[dict], arrow: str) -> str:
    """Live buffer bytes summed over `devices` (of one snapshot pair), base to head."""
    base = sum(d["base_bytes"] for d in devices)
    head = sum(d["head_bytes"] for d in devices)
    change = pct(100.0 * (head - base) / base) if base else ""
    return (
        f"live buffer bytes summed over the devices: {human_bytes(base)} {arrow} "
        f"{human_bytes(head)} ({signed(head - base) or '0 B'}{', ' + change if change else ''})"
    )


def _device(d: dict, sources: list[dict], fmt: str, top: int | None, several: bool) -> list[str]:
    """One device's section: its totals, then its changed lines by absolute change."""
    arrow = "→" if fmt == "markdown" else "->"
    name = f"{d['device']}" if d["device"] is not None else "(no device)"
    if several:
        name = f"{d['head_snapshot']}, {name}"
    change = pct(d["change_pct"]) if d["change_pct"] is not None else d["status"]
    title = (
        f"{name}: {human_bytes(d['base_bytes'])} {arrow} {human_bytes(d['head_bytes'])} "
        f"({signed(d['delta_bytes']) or '0 B'}, {change}), "
        f"{d['base_count']} {arrow} {d['head_count']} buffers"
    )
    out = _section(title, fmt)
    changed = [
        x
        for x in sources
        if x["pair"] == d["pair"]
        and x["device"] == d["device"]
        and (x["delta_bytes"] or x["count_delta"])
    ]
    if not changed:
        return [*out, "No allocating line holds more or less than before."]
    shown, hidden = _limited(changed, top)
    rows = [
        [
            _code(x["function"], fmt) if x["function"] else "",
            _code(x["source"], fmt),
            human_bytes(x["base_bytes"]),
            human_bytes(x["head_bytes"]),
            signed(x["delta_bytes"]) or "0 B",
            f"{x['base_count']} {arrow} {x['head_count']}",
            f"{x['count_delta']:+d}",
        ]
        for x in shown
    ]
    return out + _grid(_HEADERS, rows, {2, 3, 4, 5, 6}, fmt) + _more(hidden, "lines")


__all__ = ["render"]
