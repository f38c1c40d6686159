"""docs/queries.md, generated from the query headers."""

from __future__ import annotations

from bufferhouse.queries.header import queries, views
from bufferhouse.queries.helpers import HELPER_NAME
from bufferhouse.queries.selector import SELECTOR_NAME, SELECTOR_PARAMS
from bufferhouse.queries.sizes import SIZE_DOC, SIZE_NAME, SIZE_PARAMS


def markdown_reference() -> str:
    """docs/queries.md, generated from the query headers."""
    out = [
        "# Canned queries",
        "",
        "Generated from the headers of `bufferhouse/queries/*.sql` "
        "(`python -m bufferhouse.docs` rewrites it; a test checks it is current).",
        "Run one with `bufferhouse query NAME [--param k=v]`, from Python with "
        "`bufferhouse.query(NAME, db=..., k=v)`, or in the duckdb shell as "
        "`FROM bh_NAME(k := v)` (by name: DuckDB 1.2 and 1.3 shells bind the macros' "
        "parameters only by name; from 1.4 on they may also be given in order).",
        "",
    ]
    for q in queries():
        out += [f"## `{q.name}`", "", q.description, ""]
        if q.params:
            out += ["| parameter | type | default | meaning |", "| --- | --- | --- | --- |"]
            out += [
                f"| `{p.name}` | {' '.join([p.type, p.constraint]).strip()} | `{p.default}` "
                f"| {p.doc} |"
                for p in q.params
            ]
            out.append("")
        out += ["| column | meaning |", "| --- | --- |"]
        out += [f"| `{c}` | {d} |" for c, d in q.columns]
        out.append("")
        out += [n + "\n" for n in q.notes]
        out += ["```sh", *(q.examples or (f"bufferhouse query {q.name}",))]
        out += [f'duckdb fleet.duckdb -c "{q.shell_example()}"', "```", ""]
    out.append("## Views\n")
    out.append("Installed into the warehouse beside the tables; the queries build on them.\n")
    for v in views():
        out += [f"### `{v.name}`", "", v.description, "", "| column | meaning |", "| --- | --- |"]
        out += [f"| `{c}` | {d} |" for c, d in v.columns]
        out.append("")
    out += [
        "## Macros\n",
        f"`{SELECTOR_NAME}({', '.join(SELECTOR_PARAMS)})`: true when `key` is the module's "
        "name, file stem, module_id or 12-digit content-hash prefix, the keys `module_keys` "
        "lists; every `module` parameter selects modules with it. Installed beside the views:",
        "",
        "```sql",
        f"SELECT * FROM modules WHERE {SELECTOR_NAME}('jit_train_step', module_name, file_stem,"
        " module_id, content_hash)",
        "```",
        "",
        f"`{HELPER_NAME}(module_name)`: true when the module is one of jax's helper programs "
        "(`jit__<private function>` such as `jit__normal`, or `jit_<lax primitive>` from eager "
        "op-by-op dispatch such as `jit_convert_element_type`; the rule and its limits: "
        "`bufferhouse/queries/helpers.py`, docs/pictures.md). `top-modules` and `recompiles` "
        "leave them out with `helpers := false`; the report does:",
        "",
        "```sql",
        f"SELECT module_name, heap_peak_bytes FROM modules WHERE NOT {HELPER_NAME}(module_name)",
        "```",
        "",
        f"`{SIZE_NAME}({', '.join(SIZE_PARAMS)})`: {SIZE_DOC}:",
        "",
        "```sql",
        f"SELECT {SIZE_NAME}('16GiB', 'capacity')  -- 17179869184",
        "```",
        "",
    ]
    return "\n".join(out)
