"""Arrow tables in the warehouse's schema, as every part of the HloProto decoder builds them."""

from __future__ import annotations

import pyarrow as pa

from bufferhouse.schema import TABLES_BY_NAME, arrow_schema

__all__ = ["ColumnOverflow", "module_schema", "module_table"]


class ColumnOverflow(ValueError):
    """A number from the proto that its warehouse column cannot hold (an int64 field
    where the column is INTEGER): the caller names the file."""


def module_schema(table: str) -> pa.Schema:
    schema = arrow_schema(TABLES_BY_NAME[table])
    return schema.remove(schema.get_field_index("module_id"))


def module_table(name: str, columns: dict[str, object]) -> pa.Table:
    schema = module_schema(name)
    n = max((len(c) for c in columns.values() if c is not None), default=0)  # type: ignore[arg-type]
    arrays = []
    for f in schema:
        col = columns.get(f.name)
        if col is None:
            arrays.append(pa.nulls(n, f.type))
        else:
            try:
                if isinstance(col, (pa.Array, pa.ChunkedArray)):
                    arrays.append(col.cast(f.type) if col.type != f.type else col)
                else:
                    arrays.append(pa.array(col, f.type))
            except (pa.ArrowInvalid, OverflowError) as exc:
                raise ColumnOverflow(f"{name}.{f.name} ({f.type}): {exc}") from None
    return pa.Table.from_arrays(arrays, schema=schema)
