"""The three kinds of record (schema/kinds.py) against the tables they declare."""

from __future__ import annotations

from bufferhouse.schema import TABLES
from bufferhouse.schema.kinds import KINDS


def test_each_kind_keys_all_its_tables_by_its_id_and_names_its_hash():
    for kind in KINDS:
        assert kind.hash_column in kind.table.column_names, kind.name
        for table in kind.tables:
            assert table.column_names[0] == kind.id_column, (kind.name, table.name)


def test_every_table_of_records_belongs_to_exactly_one_kind():
    owners: dict[str, list[str]] = {}
    for kind in KINDS:
        for table in kind.tables:
            owners.setdefault(table.name, []).append(kind.name)
    assert all(len(names) == 1 for names in owners.values()), owners
    keyed = {
        t.name for t in TABLES if any(c in t.column_names[:1] for c in (k.id_column for k in KINDS))
    }
    assert keyed == set(owners)  # no table keyed by a record's id is left out of its kind
    assert {t.name for t in TABLES} - set(owners) == {
        "schema_info",
        "runs",
        "diagnostics",
        "memory_spaces",
    }
