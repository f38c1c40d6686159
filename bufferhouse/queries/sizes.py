"""A size with units, as a query parameter spells it (`16GiB`, `80GB`, `1.5 TiB`, bytes):
the one rule (the macro bh_size_bytes) that every size parameter is read with.

K, M, G, T, Ki... and KiB... are powers of 1024; KB, MB, GB and TB of 1000; a bare
number or B is bytes. Anything else (a typo, an empty string) is an error that names
the parameter, not a NULL that would pass for "no capacity given".
"""

from __future__ import annotations

SIZE_NAME = "bh_size_bytes"
SIZE_PARAMS = ("size_text", "param_name")
SIZE_DOC = (
    "the bytes a size with units spells (`16GiB`, `80GB`, `1.5 TiB`, `1000`; K, Ki and KiB ..."
    " are powers of 1024, KB ... of 1000); NULL for NULL, and for anything else an error"
    " naming `param_name`. Every size parameter (`capacity` of `fits` and `device-budget`)"
    " is read with it"
)
SIZE_COMMENT = f"{SIZE_DOC[0].upper()}{SIZE_DOC[1:]} (bufferhouse/queries/sizes.py). Usage: SELECT {SIZE_NAME}('16GiB', 'capacity')"

#: Unit (upper case, as written after the number) -> bytes.
UNITS: dict[str, str] = {
    "": "1",
    "B": "1",
    "KB": "1e3",
    "MB": "1e6",
    "GB": "1e9",
    "TB": "1e12",
    **{f"{p}{s}": str(1024.0**n) for n, p in enumerate("KMGT", 1) for s in ("", "I", "IB")},
}
#: The size's form, matched at the start: the whole text must be the match (no `$`
#: anchor: the other engines' parameter markers are checked not to contain one).
_FORM = r"^[0-9]+(\.[0-9]+)?\s*([KMGTkmgt]([Ii][Bb]?|[Bb])?|[Bb])?"


def size_body() -> str:
    units = "\n".join(f"        WHEN '{u}' THEN {v}" for u, v in UNITS.items())
    return f"""
  CASE
    WHEN size_text IS NULL THEN NULL
    WHEN regexp_extract(trim(size_text), '{_FORM}', 0) = trim(size_text)
      AND trim(size_text) <> ''
      THEN CAST(
        CAST(regexp_extract(trim(size_text), '^[0-9.]+', 0) AS DOUBLE)
        * CASE upper(regexp_replace(trim(size_text), '^[0-9.]+\\s*', ''))
{units}
        END AS BIGINT
      )
    ELSE error(
      'parameter ' || param_name
      || ' wants a size like 16GiB, 80GB or 1000000, got ''' || size_text || ''''
    )
  END"""


def size_macro_sql(temp: bool = False) -> str:
    kind = "TEMP MACRO" if temp else "MACRO"
    return f"CREATE OR REPLACE {kind} {SIZE_NAME}({', '.join(SIZE_PARAMS)}) AS{size_body()}"
