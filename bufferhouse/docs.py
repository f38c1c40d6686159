"""Regenerate docs/schema.md and docs/queries.md from the declarations.

Usage: python -m bufferhouse.docs [DOCS_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

from bufferhouse import queries, schema


def generated() -> dict[str, str]:
    """File name -> content of every generated document."""
    return {
        "schema.md": schema.markdown_reference() + "\n",
        "queries.md": queries.markdown_reference() + "\n",
    }


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else Path(__file__).resolve().parent.parent / "docs"
    out.mkdir(parents=True, exist_ok=True)
    for name, text in generated().items():
        (out / name).write_text(text, encoding="utf-8")
        print(f"wrote {out / name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
