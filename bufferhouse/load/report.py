"""What an ingest reports: one outcome per module, and the run's totals."""

from __future__ import annotations

from dataclasses import dataclass, field

from bufferhouse.errors import DumpError
from bufferhouse.parse.discover import LogFile, ModuleFiles, ProfileFile
from bufferhouse.render import human_bytes


@dataclass
class ModuleOutcome:
    """What happened to one module of the batch (or to one log scanned for OOM events)."""

    files: ModuleFiles | LogFile | ProfileFile
    #: loaded | present | failed | skipped (e.g. an HloProto without buffer assignment);
    #: for a log: events | quiet (nothing new: no message, or only events held) | failed;
    #: for a device memory profile: snapshot | present | failed | skipped (another kind)
    status: str
    module_id: int | None = None
    error: DumpError | None = None
    warnings: list[DumpError] = field(default_factory=list)
    bytes_read: int = 0
    #: A log's OOM events: added by this run, and already held (only labelled).
    events_loaded: int = 0
    events_present: int = 0
    #: A present module first loaded by this very run, from another file with the same
    #: content (jax writes its helper programs into every dump directory): one module.
    repeat: bool = False


@dataclass
class IngestReport:
    db: str
    run_id: int
    outcomes: list[ModuleOutcome] = field(default_factory=list)
    seconds: float = 0.0
    stopped_early: bool = False
    #: Logs scanned that held no OOM message (or only events already held): skipped
    #: quietly, so not among the outcomes; their bytes count in bytes_read.
    logs_skipped: int = 0
    skipped_bytes: int = 0
    events_skipped: int = 0  # events already held, of logs that added none
    #: Why this run read its text dumps without the compiled reader (native.MISSING),
    #: None when it had it or read none: the run then said so once, as a notice.
    compiled_reader_missing: str | None = None

    def _with(self, status: str) -> list[ModuleOutcome]:
        return [o for o in self.outcomes if o.status == status]

    @property
    def loaded(self) -> list[ModuleOutcome]:
        return self._with("loaded")

    @property
    def present(self) -> list[ModuleOutcome]:
        return self._with("present")

    @property
    def held_before(self) -> list[ModuleOutcome]:
        """Present modules the warehouse held before this run."""
        return [o for o in self.present if not o.repeat]

    @property
    def repeats(self) -> list[ModuleOutcome]:
        """Present modules this run loaded from another file first (identical content)."""
        return [o for o in self.present if o.repeat]

    @property
    def failed(self) -> list[ModuleOutcome]:
        return self._with("failed")

    @property
    def skipped(self) -> list[ModuleOutcome]:
        """Files that hold no module (an HloProto without a buffer assignment, a pprof
        profile of another kind): not errors; each says why (`error`)."""
        return self._with("skipped")

    def skipped_by_reason(self) -> dict[str, list[ModuleOutcome]]:
        """The skipped files by why: HloProtos without a buffer assignment, pprof
        profiles of another kind (a CPU profile); each outcome carries its message."""
        by: dict[str, list[ModuleOutcome]] = {}
        for o in self.skipped:
            why = (
                "pprof profiles of another kind"
                if isinstance(o.files, ProfileFile)
                else "HloProtos without buffer assignment"
            )
            by.setdefault(why, []).append(o)
        return by

    @property
    def bytes_read(self) -> int:
        return sum(o.bytes_read for o in self.outcomes) + self.skipped_bytes

    @property
    def found_nothing(self) -> bool:
        """No module and no OOM event under the paths (a wrong directory, most likely)."""
        return not self.outcomes and not self.events_present

    @property
    def events_loaded(self) -> int:
        """OOM events this run added."""
        return sum(o.events_loaded for o in self.outcomes)

    @property
    def events_present(self) -> int:
        """OOM events found again that the warehouse already held."""
        return sum(o.events_present for o in self.outcomes) + self.events_skipped

    @property
    def snapshots_loaded(self) -> int:
        """Device memory profiles this run added."""
        return len(self._with("snapshot"))

    @property
    def ok(self) -> bool:
        return not self.failed and not self.stopped_early

    def summary(self, labels: tuple[str, ...] = ()) -> str:
        """The one line `bufferhouse ingest` closes with: counts, bytes, rate, warehouse.

        `labels` (`key=value`, the run's) are named beside the present modules, which
        gain them too.
        """
        present = f"{len(self.held_before)} already present"
        if labels and self.present:  # present modules are labelled too: say so
            present += f" (labelled {', '.join(labels)})"
        if self.repeats:
            present += (
                f", {len(self.repeats)} repeated (the same content as another file of this "
                "run, e.g. a helper program in each dump directory: loaded once)"
            )
        events = ""
        if self.events_loaded or self.events_present:
            events = (
                f"; OOM events: {self.events_loaded} loaded, {self.events_present} already present"
            )
        if self.snapshots_loaded:
            events += f"; device memory snapshots: {self.snapshots_loaded} loaded"
        reasons = self.skipped_by_reason()
        skipped = ""
        if self.skipped:
            why = ", ".join(
                f"{len(o)} {r}" if len(reasons) > 1 else r for r, o in sorted(reasons.items())
            )
            skipped = f", {len(self.skipped)} skipped ({why})"
        rate = self.bytes_read / 1e6 / self.seconds if self.seconds > 0 else 0.0
        return (
            f"{len(self.loaded)} loaded, {present}, {len(self.failed)} failed{skipped}{events}"
            f"; {human_bytes(self.bytes_read)} read in {self.seconds:.1f}s ({rate:.1f} MB/s)"
            f" -> {self.db}"
        )

    def __repr__(self) -> str:
        """One line, as the CLI prints it (a notebook shows this, not every outcome)."""
        stop = ", stopped early" if self.stopped_early else ""
        return f"<IngestReport run {self.run_id}: {self.summary()}{stop}>"
