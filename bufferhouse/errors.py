"""One root exception for everything bufferhouse raises on purpose.

Library code raises these and never prints or exits; the CLI turns them into
messages and exit codes in one place.
"""

from __future__ import annotations


class BufferhouseError(Exception):
    """Root of every error bufferhouse raises deliberately."""


class DumpError(BufferhouseError):
    """A dump file cannot be read or parsed.

    Carries the file, the 1-based line (0 when the problem is the whole file)
    and the offending text, so a message can point at the exact spot.
    """

    def __init__(self, path: str, line: int, message: str, text: str | None = None):
        self.path = path
        self.line = line
        # A message quotes input at most in part: a 10 MB line must not become a 10 MB message.
        self.message = message if len(message) <= 500 else message[:497] + "..."
        self.text = text
        super().__init__(self.describe())

    def __reduce__(self):
        # Rebuilt from the fields, so the error crosses process boundaries intact.
        return (type(self), (self.path, self.line, self.message, self.text))

    def describe(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        shown = ""
        if self.text is not None:
            snippet = self.text if len(self.text) <= 120 else self.text[:117] + "..."
            shown = f"\n    {snippet!r}"
        return f"{where}: {self.message}{shown}"


class ParseError(DumpError):
    """The text does not follow the dump grammar (or breaks one of its invariants)."""


class UnknownInput(DumpError):
    """Well-formed input this release does not know (an attribute, line, file kind or
    field a newer XLA writes): kept and reported as a warning, the module loads;
    `--strict` refuses it as an error."""


class WarehouseError(BufferhouseError):
    """The warehouse file cannot be used as asked."""


class SchemaVersionError(WarehouseError):
    """The warehouse was written by an incompatible bufferhouse schema version."""


class WarehouseLockedError(WarehouseError):
    """Another process holds the warehouse file."""


class QueryError(BufferhouseError):
    """A canned query or its parameters are not valid."""


class ExportError(BufferhouseError):
    """A Parquet export or dataset cannot be written, read or attached as asked."""


class UnknownModuleError(QueryError):
    """No module in the warehouse matches the name, stem, id or hash prefix given."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(message)


class UnknownSnapshotError(QueryError):
    """No device memory snapshot in the warehouse matches the id, hash prefix, path or
    file name given."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(message)


class UnknownLabelError(QueryError):
    """No module, OOM event or snapshot in the warehouse carries the `key=value` label
    given."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(message)


class UnknownEventError(QueryError):
    """No OOM event in the warehouse matches the event id or hash prefix given."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(message)


class PlotError(BufferhouseError):
    """A plot or report cannot be drawn as asked (nothing to draw, unknown output format)."""


class MissingExtraError(BufferhouseError):
    """An optional dependency is not installed; the message names the pip extra that brings it."""

    def __init__(self, package: str, extra: str, purpose: str):
        self.package = package
        self.extra = extra
        super().__init__(
            f"{purpose} needs {package}, which is not installed: pip install 'bufferhouse[{extra}]'"
        )


class DiffError(BufferhouseError):
    """The two sides of a diff cannot be read or compared as asked."""
