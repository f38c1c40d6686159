"""What an ingest reports: one outcome per module, and the run's totals."""

from __future__ import annotations

from dataclasses import dataclass, field

from bufferhouse.errors import DumpError
from bufferhouse.parse.discover import ModuleFiles


@dataclass
class ModuleOutcome:
    """What happened to one module of the batch."""

    files: ModuleFiles
    status: str  # loaded | present | failed | skipped (e.g. an HloProto without buffer assignment)
    module_id: int | None = None
    error: DumpError | None = None
    warnings: list[DumpError] = field(default_factory=list)
    bytes_read: int = 0


@dataclass
class IngestReport:
    db: str
    run_id: int
    outcomes: list[ModuleOutcome] = field(default_factory=list)
    seconds: float = 0.0
    stopped_early: bool = False

    def _with(self, status: str) -> list[ModuleOutcome]:
        return [o for o in self.outcomes if o.status == status]

    @property
    def loaded(self) -> list[ModuleOutcome]:
        return self._with("loaded")

    @property
    def present(self) -> list[ModuleOutcome]:
        return self._with("present")

    @property
    def failed(self) -> list[ModuleOutcome]:
        return self._with("failed")

    @property
    def skipped(self) -> list[ModuleOutcome]:
        """Files that hold no module (an HloProto without a buffer assignment): not errors."""
        return self._with("skipped")

    @property
    def bytes_read(self) -> int:
        return sum(o.bytes_read for o in self.outcomes)

    @property
    def ok(self) -> bool:
        return not self.failed and not self.stopped_early
