"""Read dump files as numbered text lines: plain or gzipped, LF or CRLF.

Errors name the file and line: a corrupt .gz, invalid UTF-8, a file that
expands past the size limit.
"""

from __future__ import annotations

import errno
import gzip
import hashlib
import io
import os
import stat
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from bufferhouse.errors import DumpError

CHUNK = 1 << 20

#: The one bound on decompression, for every gzip file any reader opens (text dumps,
#: HloProtos, XProf profiles, device memory profiles): a .gz may inflate to RATIO
#: times its compressed size, or FLOOR bytes if that is more; past it the read stops
#: with a located error ("a gzip bomb?"). Real dumps and protos compress 3 to 20 times,
#: pprof profiles 5 to 30 (docs/inputs.md, "Bounds"). OOM logs are the one exception:
#: they are streamed a window at a time (oom/scan.py), never held, and a log of
#: repeated lines compresses past any ratio.
RATIO = 100
FLOOR = 16 << 20


def inflation_bound(compressed: int) -> int:
    """The most bytes a .gz of `compressed` bytes may inflate to (see RATIO)."""
    return max(FLOOR, RATIO * compressed)


class Inflated(OSError):
    """A .gz that inflates past inflation_bound: read no further."""

    def __init__(self, bound: int) -> None:
        super().__init__(
            errno.EFBIG,
            f"inflates past {bound} bytes, {RATIO} times its compressed size (or"
            f" {FLOOR >> 20} MiB): a gzip bomb? reading stopped there",
        )


def check_inflation(total: int, compressed: int) -> None:
    """Raise Inflated when `total` inflated bytes are more than `compressed` may give."""
    bound = inflation_bound(compressed)
    if total > bound:
        raise Inflated(bound)


class _BoundedGzip(io.RawIOBase):
    """A gzip stream that stops at inflation_bound of its file's size."""

    def __init__(self, f, compressed: int) -> None:
        self._f, self._compressed, self._total = f, compressed, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self._f.readinto(buffer)
        self._total += n
        check_inflation(self._total, self._compressed)
        return n

    def close(self) -> None:
        if not self.closed:
            self._f.close()
        super().close()


#: A file inside a log of `--xla_dump_to=-` output: LOG::OFFSET::LENGTH::NAME.
MEMBER_SEP = "::"


def member_path(log: str, offset: int, length: int, name: str) -> str:
    return MEMBER_SEP.join((log, str(offset), str(length), name))


def split_member(path: str) -> tuple[str, int, int, str] | None:
    """(log, offset, length, name) when `path` names a file inside a stdout log."""
    parts = path.rsplit(MEMBER_SEP, 3)
    if len(parts) == 4 and parts[1].isdigit() and parts[2].isdigit():
        return parts[0], int(parts[1]), int(parts[2]), parts[3]
    return None


class _Member(io.RawIOBase):
    """The next `length` bytes of the open stream `f`, read in place: a file inside a
    log is read a chunk at a time, as files on disk are, not copied into memory whole."""

    def __init__(self, f, length: int) -> None:
        self._f, self._left = f, length

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        view = memoryview(buffer)[: min(len(buffer), self._left)]
        n = self._f.readinto(view) if len(view) else 0
        self._left -= n
        return n

    def close(self) -> None:
        if not self.closed:
            self._f.close()
        super().close()


def stored_size(path: str) -> int:
    """Bytes the file takes where it is stored (for a log member, its bytes in the log);
    raises OSError as os.path.getsize does."""
    member = split_member(path)
    if member is not None and not os.path.exists(path):
        return member[2]
    return os.path.getsize(path)


def file_name(path: str) -> str:
    """The dump file's own name (for a log member, the name XLA gave it)."""
    member = split_member(path)
    return member[3] if member else os.path.basename(path)


def require_regular(path: str) -> None:
    """Raise OSError unless `path` is a regular file (after links): a FIFO is never
    opened (open() would wait for a writer forever), nor a socket or device."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        kind = (
            "a FIFO"
            if stat.S_ISFIFO(mode)
            else "a directory"
            if stat.S_ISDIR(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "a device"
        )
        raise OSError(errno.EINVAL, f"not a regular file ({kind}); not read")


def unreadable(path: str, exc: BaseException, line: int = 0) -> DumpError:
    """The located error for a library exception met reading `path` (OSError, zlib...)."""
    return DumpError(path, line, f"cannot read file: {describe(exc)}")


#: What reading a file, plain or gzipped, may raise besides our own errors.
READ_ERRORS = (OSError, EOFError, zlib.error, gzip.BadGzipFile)


def open_dump(path: str):
    """The file as a binary stream: plain, .gz, or a member of a stdout log."""
    member = split_member(path)
    if member is not None and not os.path.exists(path):
        log, offset, length, _ = member
        f = open_dump(log)
        try:
            f.seek(offset)
        except BaseException:
            f.close()
            raise
        return io.BufferedReader(_Member(f, length), CHUNK)
    require_regular(path)
    if path.endswith(".gz"):
        return open_gzip(path)
    return open(path, "rb")


def open_gzip(path: str):
    """A gzip file, whatever its name, as a binary stream held to inflation_bound."""
    raw = gzip.open(path, "rb")  # noqa: SIM115 (closed with the reader)
    return io.BufferedReader(_BoundedGzip(raw, os.path.getsize(path)), CHUNK)


_BEGIN = b"*** Begin "
_MARK_END = b" ***"


def log_members(path: str) -> list[tuple[str, str]]:
    """(name, member path) of every file in a log of `--xla_dump_to=-` output.

    XLA wraps each file as `*** Begin NAME ***`, the contents, then
    `*** End NAME ***` (dump.cc); other lines of the log are ignored.
    """
    members = []
    offset = 0
    current: tuple[str, int] | None = None
    with open_dump(path) as f:
        for raw in f:
            line = raw.rstrip(b"\r\n")
            if line.startswith(_BEGIN) and line.endswith(_MARK_END) and current is None:
                name = line[len(_BEGIN) : -len(_MARK_END)].decode("utf-8", "replace")
                current = (name, offset + len(raw))
            elif current is not None and line == b"*** End " + current[0].encode() + _MARK_END:
                name, start = current
                length = max(offset - start - 1, 0)  # XLA adds one newline before the End line
                members.append(
                    (
                        os.path.basename(name),
                        member_path(path, start, length, os.path.basename(name)),
                    )
                )
                current = None
            offset += len(raw)
    return members


@dataclass
class Identity:
    """A module's identity, and the one earlier releases gave it."""

    #: The dump files and, when there is one, the HLO text beside them: every
    #: file whose content lands in the warehouse.
    content_hash: str
    #: The dump files alone, as earlier releases stored it; equal
    #: to content_hash for a module without an HLO file.
    dump_hash: str
    bytes_read: int
    #: A profile's program: its HloProto bytes, until the reader takes them.
    program_data: bytes | None = None


def module_identity(
    paths: list[str], names: list[str], hlo: str | None, max_bytes: int | None
) -> Identity:
    """The module's identity, in one pass over its files: SHA-256 over (base name,
    content) of each file, and the bytes of dump text read (`modules.bytes_read`).

    The names are part of the identity so that two compiles with identical
    text but different module numbers stay two modules, while the same tree
    read from another mount point is recognised as already loaded.
    The HLO text supplies source locations (stack frames), so a changed HLO
    beside unchanged dump files is a changed module. It is hashed after the
    dump files, so the dump-only hash of earlier releases comes out on the way.
    `max_bytes` limits the dump files only, as it always has; an HLO file that
    cannot be read is left out (the parser then loads no locations from it).
    """
    h = hashlib.sha256()
    total = 0
    for path, name in zip(paths, names):
        total = _feed(h, path, name, total, max_bytes)
    dump_hash = h.hexdigest()
    if hlo is None:
        return Identity(dump_hash, dump_hash, total)
    with_hlo = h.copy()
    with_hlo.update(b"hlo\0")
    try:
        _feed(with_hlo, hlo, file_name(hlo), 0, None)
    except DumpError:
        return Identity(dump_hash, dump_hash, total)
    return Identity(with_hlo.hexdigest(), dump_hash, total)


def _feed(h, path: str, name: str, total: int, max_bytes: int | None) -> int:
    """Hash one file's name and content into `h`; the bytes read so far."""
    h.update(name.encode("utf-8", "surrogateescape") + b"\0")
    try:
        with open_dump(path) as f:
            while chunk := f.read(CHUNK):
                total += len(chunk)
                if max_bytes is not None and total > max_bytes:
                    raise DumpError(
                        path, 0, f"more than --max-bytes {max_bytes} bytes of text; skipped"
                    )
                h.update(chunk)
    except READ_ERRORS as exc:
        raise unreadable(path, exc) from None
    h.update(b"\0")
    return total


def describe(exc: BaseException) -> str:
    """A library exception met reading a file, in words (the path is said elsewhere)."""
    if isinstance(exc, EOFError):
        return "compressed file ends before the end-of-stream marker (truncated .gz)"
    if isinstance(exc, (gzip.BadGzipFile, zlib.error)):
        return f"corrupt gzip data ({exc})"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, FileNotFoundError):
        return "no such file (a dangling symbolic link?)"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror  # the path is in the message already
    return str(exc) or type(exc).__name__


def read_blocks(path: str) -> Iterator[tuple[int, str]]:
    """Yield (number of the block's first line, text of whole lines).

    Each block but the last ends with a newline; CRLF becomes LF. Decoding
    8 MiB at a time keeps the per-line cost out of reading, and an invalid
    byte is reported at its exact line.
    """
    lineno = 1
    try:
        with open_dump(path) as f:
            rest = b""
            pending: list[bytes] = []  # pieces of a line longer than a chunk
            while True:
                chunk = f.read(CHUNK * 8)
                if not chunk:
                    break
                if b"\n" not in chunk:
                    pending.append(chunk)  # joined once, not re-copied per chunk
                    continue
                block = b"".join([rest, *pending, chunk])
                pending = []
                cut = block.rfind(b"\n") + 1
                rest = block[cut:]
                text = _decode(path, block[:cut], lineno - 1)
                if "\r" in text:
                    text = text.replace("\r\n", "\n")
                yield lineno, text
                lineno += text.count("\n")
            rest = b"".join([rest, *pending])
            if rest:
                text = _decode(path, rest, lineno - 1)
                yield lineno, text[:-1] if text.endswith("\r") else text
    except READ_ERRORS as exc:
        raise unreadable(path, exc, lineno) from None


def read_lines(path: str) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, line without its line end)."""
    for first, text in read_blocks(path):
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        yield from enumerate(lines, first)


def _decode(path: str, block: bytes, lines_before: int) -> str:
    nul = block.find(b"\0")  # NUL is valid UTF-8 but never in a dump: binary data
    try:
        text = block.decode("utf-8")
    except UnicodeDecodeError as exc:
        if 0 <= nul < exc.start:
            _nul_error(path, block, lines_before, nul)
        line_start = block.rfind(b"\n", 0, exc.start) + 1
        line_end = block.find(b"\n", exc.start)
        raw = block[line_start : line_end if line_end >= 0 else len(block)]
        raise DumpError(
            path,
            lines_before + block.count(b"\n", 0, exc.start) + 1,
            f"invalid UTF-8 at byte {exc.start - line_start + 1} of the line",
            raw.decode("utf-8", "replace"),
        ) from None
    if nul >= 0:
        _nul_error(path, block, lines_before, nul)
    return text


def _nul_error(path: str, block: bytes, lines_before: int, nul: int) -> None:
    line_start = block.rfind(b"\n", 0, nul) + 1
    line_end = block.find(b"\n", nul)
    raw = block[line_start : line_end if line_end >= 0 else len(block)]
    raise DumpError(
        path,
        lines_before + block.count(b"\n", 0, nul) + 1,
        f"NUL byte at byte {nul - line_start + 1} of the line (binary data, not a text dump)",
        raw.decode("utf-8", "replace"),
    )
