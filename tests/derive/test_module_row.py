"""ModuleRow (parse/derive) restates the `modules` table by hand: it is held against the
table's declaration in schema/tables.py, column for column, in order and nullability."""

from __future__ import annotations

import dataclasses
import types
import typing

from bufferhouse.parse.derive import ModuleRow
from bufferhouse.schema import TABLES_BY_NAME

_DUCK = {int: {"BIGINT", "INTEGER"}, str: {"VARCHAR"}, list: {"VARCHAR[]"}}


def _fields() -> list[tuple[str, type, bool]]:
    hints = typing.get_type_hints(ModuleRow)
    out = []
    for f in dataclasses.fields(ModuleRow):
        hint = hints[f.name]
        args = typing.get_args(hint)
        nullable = isinstance(hint, types.UnionType) and type(None) in args
        base = next(a for a in args if a is not type(None)) if nullable else hint
        out.append((f.name, typing.get_origin(base) or base, nullable))
    return out


def test_module_row_is_the_modules_table_column_for_column():
    columns = TABLES_BY_NAME["modules"].columns
    fields = _fields()
    names = [c.name for c in columns]
    # Every field is a column, in the table's order; the table may hold more.
    assert [n for n in names if n in {f for f, _, _ in fields}] == [f for f, _, _ in fields]
    by_name = {c.name: c for c in columns}
    for name, base, nullable in fields:
        column = by_name[name]
        assert column.type in _DUCK[base], (name, column.type, base)
        if not column.nullable:
            assert not nullable or name == "run_id", name  # run_id: the sink gives it
