"""The compiled column reader (bufferhouse/parse/text/native/, docs/native.md).

Each extension is optional: where it cannot be built (no C compiler), the install
still succeeds and ingest reads dumps with the line reader, saying so once.
Everything else about the package is declared in pyproject.toml.
"""

from setuptools import Extension, setup

NATIVE = "bufferhouse/parse/text/native"


def _extension(name: str) -> Extension:
    return Extension(
        f"bufferhouse.parse.text.native.{name}",
        [f"{NATIVE}/{name}.c"],
        depends=[f"{NATIVE}/native.h"],
        optional=True,
    )


setup(
    ext_modules=[
        _extension(name) for name in ("_lines", "_allocations", "_blocks", "_instructions")
    ]
)
