"""The shardings an HloModuleProto carries -> the `shardings` table.

A partitioned module records how each entry parameter and the entry's result
are split across devices (spmd_parameters_shardings, spmd_output_sharding), and
an instruction may carry its own (`sharding`). Each lands as one row per array
(a tuple sharding is one row per element, at its ShapeIndex), with XLA's text
form of the sharding and `tiles`, the number of pieces each dimension is cut
into: an array's per-device dimensions times its tiles are its logical ones
(rounded up where the split is uneven).

jax 0.12 (Shardy) writes a named sharding (a mesh of named axes and the axes
each dimension is split over); older releases a tile assignment. Both are read.
"""

from __future__ import annotations

from collections.abc import Iterator
from math import prod

import pyarrow as pa

from bufferhouse.parse.proto import hlo_pb2
from bufferhouse.parse.proto.tables import module_table

__all__ = ["sharding_text", "shardings_table", "tiles"]

_REPLICATED, _MAXIMAL, _TUPLE, _OTHER, _MANUAL, _UNKNOWN = range(6)
_NAMES = {_REPLICATED: "replicated", _MANUAL: "manual", _UNKNOWN: "unknown"}


def _axis(ref: hlo_pb2.AxisRefProto, mesh: hlo_pb2.MeshProto) -> tuple[str, int]:
    """(name, size) of an axis reference: a mesh axis, or a piece of one."""
    axes = mesh.axes
    axis = axes[ref.mesh_axis_index] if ref.mesh_axis_index < len(axes) else None
    name = axis.name if axis is not None else f"#{ref.mesh_axis_index}"
    if ref.HasField("sub_axis_info"):
        sub = ref.sub_axis_info
        return f"{name}:({sub.pre_size}){sub.size}", sub.size
    return name, axis.size if axis is not None else 1


def _named_text(named: hlo_pb2.NamedShardingProto) -> str:
    if not named.mesh.axes and not named.dim_shardings:
        return "{replicated}"  # Shardy's fully replicated sharding names no mesh
    mesh = ", ".join(f"{a.name}={a.size}" for a in named.mesh.axes)
    dims = ", ".join(
        "{" + ", ".join(_axis(r, named.mesh)[0] for r in d.axes) + "}" for d in named.dim_shardings
    )
    extra = "".join(
        f", {label}={{{', '.join(_axis(r, named.mesh)[0] for r in refs)}}}"
        for label, refs in (
            ("replicated", named.replicated_axes),
            ("unreduced", named.unreduced_axes),
            ("manual", named.manual_axes),
        )
        if refs
    )
    return f"{{mesh[{mesh}], [{dims}]{extra}}}"


def _devices(s: hlo_pb2.OpSharding) -> str:
    dims = ",".join(map(str, s.tile_assignment_dimensions))
    if s.iota_reshape_dims:
        reshape = ",".join(map(str, s.iota_reshape_dims))
        perm = list(s.iota_transpose_perm)
        tail = f"T({','.join(map(str, perm))})" if perm != sorted(perm) else ""
        return f"[{dims}]<=[{reshape}]{tail}"
    return f"[{dims}]{','.join(map(str, s.tile_assignment_devices))}"


def sharding_text(s: hlo_pb2.OpSharding) -> str:
    """XLA's printed form of one (non-tuple) sharding, e.g. `{devices=[1,4]<=[4]}`."""
    if s.HasField("named_sharding"):
        return _named_text(s.named_sharding)
    if s.type == _MAXIMAL:
        return f"{{maximal device={s.tile_assignment_devices[0] if s.tile_assignment_devices else '?'}}}"
    if s.type == _OTHER:
        last = " last_tile_dim_replicate" if s.replicate_on_last_tile_dim else ""
        return f"{{devices={_devices(s)}{last}}}"
    return "{" + _NAMES.get(s.type, f"type {s.type}") + "}"


def tiles(s: hlo_pb2.OpSharding) -> list[int] | None:
    """Pieces each dimension is cut into; None when the array is not split by dimension
    (replicated, on one device, manual)."""
    if s.HasField("named_sharding"):
        named = s.named_sharding
        if not named.dim_shardings:
            return None
        return [prod(_axis(r, named.mesh)[1] for r in d.axes) for d in named.dim_shardings]
    if s.type != _OTHER:
        return None
    rank = len(s.tile_assignment_dimensions) - len(s.last_tile_dims)
    rank -= 1 if s.replicate_on_last_tile_dim else 0
    return list(s.tile_assignment_dimensions[:rank])


def _elements(s: hlo_pb2.OpSharding, index: tuple[int, ...] = ()) -> Iterator[tuple]:
    """(ShapeIndex, sharding) of each array a (possibly tuple) sharding covers."""
    if s.type == _TUPLE and not s.HasField("named_sharding"):
        for i, t in enumerate(s.tuple_shardings):
            yield from _elements(t, (*index, i))
    else:
        yield index, s


def _rows(module: hlo_pb2.HloModuleProto) -> Iterator[tuple]:
    """(target, number, instruction, ShapeIndex, sharding) of every sharding."""
    for n, s in enumerate(module.spmd_parameters_shardings):
        for index, e in _elements(s):
            yield "parameter", n, None, index, e
    if module.HasField("spmd_output_sharding"):
        for index, e in _elements(module.spmd_output_sharding):
            yield "output", None, None, index, e
    for comp in module.computations:
        for ins in comp.instructions:
            if ins.HasField("sharding"):
                for index, e in _elements(ins.sharding):
                    yield "instruction", None, ins.name, index, e


def shardings_table(module: hlo_pb2.HloModuleProto) -> pa.Table:
    """The `shardings` rows of one module (none when it is not partitioned)."""
    rows = list(_rows(module))
    return module_table(
        "shardings",
        {
            "target": [r[0] for r in rows],
            "number": [r[1] for r in rows],
            "instruction": [r[2] for r in rows],
            "shape_index": ["{" + ",".join(map(str, r[3])) + "}" for r in rows],
            "sharding": [sharding_text(r[4]) for r in rows],
            "tiles": [tiles(r[4]) for r in rows],
        },
    )
