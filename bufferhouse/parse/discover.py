"""Find dump files under the given paths and group each module's siblings.

XLA writes several files per module that share a stem:
`<stem>-buffer-assignment.txt`, `-buffer-assignment-values.txt`,
`-live-range.txt`, `-memory-usage-report.txt`, and `<stem>.txt` (the
optimized HLO); with --xla_dump_hlo_as_proto also `<stem>.hlo.pb` (an
HloProto with the buffer assignment), grouped with the text of the same stem
into one module, or a module of its own in a proto-only tree. Any of them may
be gzipped. XProf profiles (`*.xplane.pb`) hold one module per program: their
metadata is read here (the trace events are skipped over) to list them; the
programs' HloProtos are read later, all in one pass (parse.with_programs). Files
that are none of these are skipped after a look at their name, or at most
their first bytes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bufferhouse.errors import DumpError
from bufferhouse.parse.reader import READ_ERRORS, log_members, open_dump, unreadable
from bufferhouse.parse.walk import Walk, file_identity, walk_paths

if TYPE_CHECKING:
    from bufferhouse.parse.tpulog import LibtpuCompanion

#: File-name suffix (without .gz) -> role of the file in its module.
SUFFIXES: tuple[tuple[str, str], ...] = (
    ("-buffer-assignment-values.txt", "values"),
    ("-buffer-assignment.txt", "buffer_assignment"),
    ("-live-range.txt", "live_range"),
    ("-memory-usage-report.txt", "usage_report"),
)

#: Files XLA writes beside a module that carry no buffer assignment, by the end of their
#: name (without .gz): known for what they are, so none is taken for a module, a log or a
#: device memory profile, nor sniffed. libtpu's two copies of the optimized module around
#: buffer assignment hold no BufferAssignmentProto (the one that does is
#: `<stem>.hlo.pb` of the `after_optimizations` stage); `-memory-usage-report.pb`
#: (MemoryUsageReportProto) is a truncated list of the top entries of the text report,
#: which is read instead (docs/discovery.md).
COMPANION_SUFFIXES: tuple[str, ...] = (
    "_after_buffer_assignment.hlo.pb",
    "_before_buffer_assignment.hlo.pb",
    ".after_codegen.hlo.pb",
    ".after_codegen.txt",
    "-memory-usage-report.pb",
    ".tpu_comp_env.txt",
    ".sparse_core_specific_metadata.txt",
    ".transfer_stats.txt",
    ".riegeli",
)
#: The files of the per-module folder (`<stem>/`) of today's XLA, by their whole name.
COMPANION_NAMES: frozenset[str] = frozenset({"topology.pb", "module.mlir", "compile_options.pb"})

_MAGIC = b"BufferAssignment:"


@dataclass
class ModuleFiles:
    """The files of one module, by role. Only buffer_assignment is required."""

    directory: str
    stem: str
    buffer_assignment: str | None = None
    values: str | None = None
    live_range: str | None = None
    usage_report: str | None = None
    hlo: str | None = None
    #: `<stem>.hlo.pb` (or .gz): the HloProto of the same compile.
    proto: str | None = None
    #: An XProf profile holding the module: its path, the program's event-metadata
    #: name there (e.g. `jit_f(3)`) and the uncompressed byte offset of its plane.
    xplane: str | None = None
    program: str | None = None
    plane_offset: int = 0
    xplane_backend: str | None = None
    #: libtpu's log of the compile, found beside the module (docs/discovery.md).
    libtpu: LibtpuCompanion | None = None
    #: Why the group is not a module (e.g. an HloProto from before optimizations):
    #: it is skipped quietly and counted.
    skip: str | None = None
    problems: list[DumpError] = field(default_factory=list)

    def dump_files(self) -> list[tuple[str, str]]:
        """(role, path) of the text files whose content defines the module, in parse order."""
        roles = ("buffer_assignment", "values", "live_range", "usage_report")
        return [(r, getattr(self, r)) for r in roles if getattr(self, r)]

    def content_files(self) -> list[tuple[str, str]]:
        """(role, path) of every file whose content lands in the warehouse (the content hash
        covers them all): the text files, then the proto."""
        return self.dump_files() + ([("proto", self.proto)] if self.proto else [])

    @property
    def display(self) -> str:
        if self.xplane is not None:
            return f"{self.xplane}#{self.program}"
        return self.buffer_assignment or self.proto or os.path.join(self.directory, self.stem)


def _role_of(name: str) -> tuple[str, str] | None:
    """(role, stem) of a file XLA names: a role of ModuleFiles, or "companion" for a file
    beside a module that holds none of its buffer assignment."""
    base = name[:-3] if name.endswith(".gz") else name
    if base in COMPANION_NAMES:
        return "companion", ""
    for suffix in COMPANION_SUFFIXES:
        if base.endswith(suffix):
            return "companion", base[: -len(suffix)]
    for suffix, role in SUFFIXES:
        if base.endswith(suffix):
            return role, base[: -len(suffix)]
    if base.endswith(".hlo.pb"):
        return "proto", base[: -len(".hlo.pb")]
    return None


def is_companion(name: str) -> bool:
    """A file XLA writes beside a module that holds none of its buffer assignment."""
    role_stem = _role_of(name)
    return role_stem is not None and role_stem[0] == "companion"


def _is_xplane(name: str) -> bool:
    return name.endswith((".xplane.pb", ".xplane.pb.gz"))


def _head(path: str, size: int) -> bytes:
    """The first `size` bytes (decompressed), or the located error that reading met: a
    corrupt .gz, a file that cannot be read, a FIFO (never opened)."""
    try:
        with open_dump(path) as f:
            return f.read(size)
    except READ_ERRORS as exc:
        raise unreadable(path, exc) from None


def _looks_like_buffer_assignment(path: str) -> bool:
    """Sniff the first bytes, so renamed dumps (e.g. `000_abc.txt`) are found too."""
    head = _head(path, 64)
    return head.lstrip(b"\xef\xbb\xbf \r\n").startswith(_MAGIC)


def _looks_like_log(path: str) -> bool:
    """A log of `--xla_dump_to=-` output: files wrapped in `*** Begin NAME ***` lines."""
    head = _head(path, 4096)
    return head.startswith(b"*** Begin ") or b"\n*** Begin " in head


def _looks_like_libtpu_log(path: str) -> bool:
    """libtpu's stderr with its memory summaries (parse/libtpu.py: a module's companion)."""
    from bufferhouse.parse.tpulog import is_libtpu_log

    return is_libtpu_log(_head(path, 1 << 20))


def _read_here(name: str) -> bool:
    """A name discovery reads (a dump's, a log's, a proto's): an unreadable or
    irregular file so named is reported, any other is passed over as not ours."""
    base = name[:-3] if name.endswith(".gz") else name
    return _role_of(name) is not None or base.endswith((*LOG_SUFFIXES, ".pb"))


def _siblings(path: str) -> list[str]:
    """The other files of the module of a dump file given by itself (a split set's
    -buffer-assignment.txt: its values and live-range files are beside it)."""
    directory, name = os.path.split(path)
    role_stem = _role_of(name)
    if role_stem is None:
        return []
    found = []
    for suffix, _ in SUFFIXES:
        for ending in ("", ".gz"):
            sibling = os.path.join(directory, role_stem[1] + suffix + ending)
            if sibling != path and os.path.isfile(sibling):
                found.append(sibling)
    return found


def walk_of(paths: Iterable[str | os.PathLike[str]]) -> Walk:
    """The one walk of `paths` (parse/walk.py) with discovery's own rules for names."""
    return walk_paths(paths, _read_here, _siblings)


def discover(paths: Iterable[str | os.PathLike[str]]) -> list[ModuleFiles]:
    """Group every dump file under `paths` into modules, in a stable order."""
    return dump_groups(walk_of(paths))


def dump_groups(walk: Walk) -> list[ModuleFiles]:
    """Group every dump file of `walk` into modules, in a stable order.

    A path may be a directory (searched recursively), a dump file, or a .gz of
    one (with the other files of its module beside it). A path that does not exist is
    reported as a module-level problem, not raised, so the rest of the batch still loads.
    """
    groups: dict[tuple[str, str], ModuleFiles] = {}
    missing: list[ModuleFiles] = []
    for path in walk.missing:
        mf = ModuleFiles(os.path.dirname(path), os.path.basename(path))
        mf.problems.append(DumpError(path, 0, "no such file or directory"))
        missing.append(mf)
    candidates = walk.files
    problems: list[DumpError] = list(walk.problems)

    hlo_names: dict[str, set[str]] = {}
    dir_logs: dict[str, list[str]] = {}  # directory -> its logs that may be libtpu's
    log_hlo: dict[tuple[str, str], str] = {}  # (log, stem) -> member path of its HLO
    seen_files: set[object] = set()
    for path, explicit in candidates:
        real = file_identity(path)
        if real in seen_files:
            continue
        seen_files.add(real)
        directory, name = os.path.split(path)
        if _is_xplane(name):
            missing.extend(_xplane_modules(path))
            continue
        role_stem = _role_of(name)
        if role_stem is None:
            base = name[:-3] if name.endswith(".gz") else name
            if base.endswith(".txt"):
                hlo_names.setdefault(directory, set()).add(name)
            if not (explicit or base.endswith(LOG_SUFFIXES)):
                continue
            try:
                is_dump = _looks_like_buffer_assignment(path)
                is_log = not is_dump and not path.endswith(".gz") and _looks_like_log(path)
            except DumpError as exc:  # reported here, once: discover_logs passes it over
                problems.append(exc)
                continue
            if not (is_dump or is_log or _xla_named(name)):
                dir_logs.setdefault(directory, []).append(path)
            if not base.endswith((".txt", ".log")) and not explicit:
                continue  # .out, .err: only read to see that they can be, for discover_logs
            if not is_dump:
                if is_log:
                    _add_log_members(path, groups, log_hlo)
                    continue
                # Not a dump: discover_logs scans it for OOM messages, and says so
                # if it was given by name and holds none.
                continue
            role, stem = (
                "buffer_assignment",
                base[: -len(".txt")] if base.endswith(".txt") else base,
            )
        else:
            role, stem = role_stem
            if role == "companion":
                continue
        mf = groups.setdefault((directory, stem), ModuleFiles(directory, stem))
        if getattr(mf, role) is not None:
            # foo.txt and foo.txt.gz side by side: prefer the plain file, say so.
            mf.problems.append(
                DumpError(
                    path, 0, f"duplicate {role} file for this module; using {getattr(mf, role)}"
                )
            )
            continue
        setattr(mf, role, path)

    for (directory, stem), mf in groups.items():
        if (directory, stem) in log_hlo:
            mf.hlo = log_hlo[(directory, stem)]
        for candidate in (stem + ".txt", stem + ".txt.gz"):
            path = os.path.join(directory, candidate)
            listed = candidate in hlo_names.get(directory, ())
            exists = listed or (directory not in hlo_names and os.path.isfile(path))
            if exists and path != mf.buffer_assignment:
                mf.hlo = path
                break
        if mf.proto is not None and "before_optimizations" in stem and not mf.dump_files():
            # e.g. before_optimizations.hlo.pb: an HloProto without a buffer assignment
            mf.skip = "HloProto from before optimizations (no buffer assignment)"
        elif mf.buffer_assignment is None and mf.proto is None:
            first = next(p for _, p in mf.dump_files())
            mf.problems.append(
                DumpError(first, 0, f"no {stem}-buffer-assignment.txt beside this file")
            )
    ordered = sorted(groups.values(), key=lambda m: (m.directory, m.stem))
    if dir_logs:
        from bufferhouse.parse.libtpu import attach_libtpu_logs  # parse.oom imports this

        attach_libtpu_logs(
            ordered, dir_logs, lambda stem: str(stem_parts(stem)["module_name"] or stem)
        )
    reported = {p.path: p for p in problems}  # a file given by name inside a tree given too
    return missing + [_problem_group(p) for p in reported.values()] + ordered


def _problem_group(problem: DumpError) -> ModuleFiles:
    """A file or directory that cannot be read, as a failed group saying so."""
    mf = ModuleFiles(os.path.dirname(problem.path), os.path.basename(problem.path))
    mf.problems.append(problem)
    return mf


def _xplane_modules(path: str) -> list[ModuleFiles]:
    """One module per program of an XProf profile (only its metadata is read), or one
    failed group saying why the file cannot be read or holds no HloProto."""
    from bufferhouse.parse.proto.xplane import list_programs

    directory, name = os.path.split(path)
    try:
        programs = list_programs(path)
    except DumpError as exc:
        mf = ModuleFiles(directory, name, xplane=path, program="")
        mf.problems.append(exc)
        return [mf]
    if not programs:
        mf = ModuleFiles(directory, name, xplane=path, program="")
        mf.problems.append(
            DumpError(
                path,
                0,
                "XProf profile without HloProtos: no event metadata with an 'Hlo Proto' stat"
                " in any plane (was the program compiled before the trace started?)",
            )
        )
        return [mf]
    return [
        ModuleFiles(
            directory,
            f"{name}#{p.name}",
            xplane=path,
            program=p.name,
            plane_offset=p.offset,
            xplane_backend=p.backend,
        )
        for p in programs
    ]


#: Extensions (before an optional .gz) of files scanned for OOM messages in a directory.
LOG_SUFFIXES = (".log", ".txt", ".out", ".err")


@dataclass
class LogFile:
    """A file to scan for OOM messages: not a module (its events load on their own).

    `explicit`: given by name and neither a dump nor a `--xla_dump_to=-` log, so
    finding no message in it is an error, not a quiet skip.
    """

    path: str
    explicit: bool = False
    problems: list[DumpError] = field(default_factory=list)

    @property
    def directory(self) -> str:
        return os.path.dirname(self.path)

    @property
    def stem(self) -> str:
        return os.path.basename(self.path)

    @property
    def display(self) -> str:
        return self.path

    def dump_files(self) -> list[tuple[str, str]]:
        return []


def _is_profile(path: str, explicit: bool) -> bool:
    from bufferhouse.parse.pprof import looks_like_profile

    return looks_like_profile(path, explicit)


def _xla_named(name: str) -> bool:
    """A file XLA named itself (module_NNNN.*, a role suffix): it never holds an OOM message."""
    base = name[:-3] if name.endswith(".gz") else name
    if _role_of(name) is not None:
        return True
    stem = base.rsplit(".", 1)[0]
    return stem_parts(stem)["module_number"] is not None


def discover_logs(paths: Iterable[str | os.PathLike[str]]) -> list[LogFile]:
    """Every file under `paths` that may hold OOM messages (log_groups)."""
    return log_groups(walk_of(paths))


def log_groups(walk: Walk) -> list[LogFile]:
    """Every file under `paths` that may hold OOM messages, in a stable order.

    In directories: `.log`, `.txt`, `.out`, `.err` files, plain or .gz, but for
    those XLA named as dump files (`module_NNNN...`, `-buffer-assignment.txt`):
    logs of `--xla_dump_to=-` and renamed dumps are scanned too, since a log can
    hold modules and OOM messages both. A file given by name is always scanned,
    but for protos (`.pb`: binary HloProtos and profiles) and files named as XLA
    names its dump files (`-buffer-assignment.txt` and the other roles): those are
    modules, read once (scanned too, a 200 MB dump given by name was read twice and
    took two parser processes instead of one with threads).
    """
    logs: list[LogFile] = []
    seen_files: set[object] = set()
    for candidate, explicit in walk.files:
        name = os.path.basename(candidate)
        base = name[:-3] if name.endswith(".gz") else name
        if (
            base.endswith(".pb")
            or (explicit and _role_of(name) is not None)
            or (not explicit and (not base.endswith(LOG_SUFFIXES) or _xla_named(name)))
        ):
            continue  # protos are binary; XLA's own dump files hold no messages
        if not os.path.isfile(candidate):
            continue
        real = file_identity(candidate)
        if real in seen_files or _is_profile(candidate, explicit):
            continue  # a device memory profile: discover_profiles has it
        seen_files.add(real)
        try:
            other_use = (
                _role_of(name) is not None
                or _looks_like_buffer_assignment(candidate)
                or (not candidate.endswith(".gz") and _looks_like_log(candidate))
                or (explicit and _looks_like_libtpu_log(candidate))
            )
        except DumpError:
            continue  # discover() reports it
        logs.append(LogFile(candidate, explicit=explicit and not other_use))
    return sorted(logs, key=lambda log: log.path)


@dataclass
class ProfileFile:
    """A device memory profile (pprof): not a module (its snapshot loads on its own).

    `explicit`: given by name, so a pprof profile of another kind (a CPU profile) is an
    error, not a quiet skip.
    """

    path: str
    explicit: bool = False
    problems: list[DumpError] = field(default_factory=list)

    @property
    def directory(self) -> str:
        return os.path.dirname(self.path)

    @property
    def stem(self) -> str:
        return os.path.basename(self.path)

    @property
    def display(self) -> str:
        return self.path

    def dump_files(self) -> list[tuple[str, str]]:
        return []


def discover_profiles(paths: Iterable[str | os.PathLike[str]]) -> list[ProfileFile]:
    """Every device memory profile under `paths` (profile_groups)."""
    return profile_groups(walk_of(paths))


def profile_groups(walk: Walk) -> list[ProfileFile]:
    """Every device memory profile under `paths`, whatever its name, in a stable order.

    Each file that is not one of XLA's dump files (by name) is sniffed: gzip data
    that is a pprof Profile by content, in any field order (pprof.looks_like_profile).
    """
    from bufferhouse.parse.pprof import looks_like_profile

    found: list[ProfileFile] = []
    seen_files: set[object] = set()
    for candidate, explicit in walk.files:
        name = os.path.basename(candidate)
        if _role_of(name) is not None or _is_xplane(name) or not os.path.isfile(candidate):
            continue
        real = file_identity(candidate)
        if real in seen_files or not looks_like_profile(candidate, explicit):
            continue
        seen_files.add(real)
        found.append(ProfileFile(candidate, explicit=explicit))
    return sorted(found, key=lambda p: p.path)


def _add_log_members(
    log: str, groups: dict[tuple[str, str], ModuleFiles], log_hlo: dict[tuple[str, str], str]
) -> None:
    """Group the dump files found inside a stdout log like files in a directory."""
    for name, member in log_members(log):
        role_stem = _role_of(name)
        if role_stem is None:
            if name.endswith(".txt"):
                log_hlo[(log, name[: -len(".txt")])] = member
            continue
        role, stem = role_stem
        if role == "companion":
            continue
        mf = groups.setdefault((log, stem), ModuleFiles(log, stem))
        if getattr(mf, role) is None:
            setattr(mf, role, member)
        else:
            mf.problems.append(
                DumpError(log, 0, f"{name} appears twice in this log; using the first")
            )


def text_path(path: str) -> str:
    """`path` as valid UTF-8 text for the warehouse and messages.

    File names are bytes; the ones that are not UTF-8 reach Python with
    surrogates, which no UTF-8 column can hold. Those bytes are shown as \\xNN.
    """
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return path


def stem_parts(stem: str) -> dict[str, str | int | None]:
    """Module number, name, target and stage from an XLA dump file stem.

    `module_0007.jit_train_step.sm_9.0_gpu_after_optimizations` ->
    number 7, name jit_train_step, backend gpu, target sm_9.0, stage after_optimizations.
    Non-XLA names (renamed files) give only what can be read safely.
    """
    out: dict[str, str | int | None] = {
        "module_number": None,
        "module_name": None,
        "backend": None,
        "target": None,
        "stage": None,
    }
    parts = stem.split(".")
    start = 0
    if not parts[0].startswith("module_") and len(parts) > 1 and parts[1].startswith("module_"):
        start = 1  # timestamp prefix
    head = parts[start] if start < len(parts) else ""
    if not head.startswith("module_") or not head[7:].isdigit():
        return out
    out["module_number"] = int(head[7:])
    rest = ".".join(parts[start + 1 :])
    marker = None
    for candidate in ("_gpu_after_optimizations", "cpu_after_optimizations", "after_optimizations"):
        idx = rest.rfind(candidate)
        if idx >= 0:
            marker = candidate
            break
    if marker is None:
        out["module_name"] = rest or None
        return out
    idx = rest.rfind(marker)
    before = rest[:idx].rstrip(".")
    out["stage"] = "after_optimizations"
    if marker == "_gpu_after_optimizations":
        out["backend"] = "gpu"
        # name.sm_9.0 -> target after the last '.' that starts the target
        for tgt_start in ("sm_", "gfx"):
            t = before.rfind("." + tgt_start)
            if t >= 0:
                out["target"] = before[t + 1 :]
                before = before[:t]
                break
    elif marker == "cpu_after_optimizations":
        out["backend"] = "cpu"
    out["module_name"] = before.split(".cl_")[0] or None
    return out
