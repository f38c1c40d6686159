"""Per-line log prefixes in front of OOM messages, found on the first line and stripped
from the lines that follow.

Loggers put a prefix on every line (a collector that splits lines), on the
first line only (glog, Python logging of a multi-line message) or nowhere (a
traceback on stderr). The first line's prefix is read as a sequence of known
kinds; each following line loses the same sequence if it starts with it.
Kinds that name a process (`[rank3]:`, `(pid=12)`) must match literally: a
line of another rank is not part of this rank's message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: (kind, pattern, literal): a literal kind must repeat the first line's text exactly.
_KINDS: tuple[tuple[str, re.Pattern[str], bool], ...] = (
    # containerd / CRI: 2025-05-04T09:05:40.719758Z stderr F
    (
        "cri",
        re.compile(
            r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)? (?:stdout|stderr) [FP] "
        ),
        False,
    ),
    # glog: E1122 10:01:02.345678 1234 file.cc:45]
    ("glog", re.compile(r"[IWEF]\d{4} \d\d:\d\d:\d\d(?:\.\d+)?\s+\d+\s+[^\s\]]+:\d+\] ?"), False),
    # ISO-like timestamps: 2025-05-04 09:05:40.719758: , [2025-05-04 09:05:40,123]
    (
        "time",
        re.compile(
            r"\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?:?\s+"
        ),
        False,
    ),
    # TensorFlow/XLA after a timestamp: E external/xla/xla/pjrt/x.cc:3077]
    ("level", re.compile(r"[IWEF] (?:\S+:\d+\] ?)"), False),
    # Python logging: ERROR:root:  /  ERROR:absl:
    ("pylog", re.compile(r"(?:CRITICAL|ERROR|WARNING|INFO|DEBUG):[\w.]*:"), False),
    # bracketed levels: [E] , [ERROR]
    ("blevel", re.compile(r"\[(?:CRITICAL|ERROR|WARNING|INFO|DEBUG|[EWIF])\] ?"), False),
    # torch.distributed / torchrun: [rank3]: , [default0]:
    ("rank", re.compile(r"\[(?:rank|Rank|RANK|default)\s*\d+\]:? ?"), True),
    # Ray workers: (pid=1234) , (TrainWorker pid=1234, ip=10.0.0.1)
    ("ray", re.compile(r"\((?:[\w.]+ )?pid=\d+(?:, ip=[\d.]+)?\) "), True),
)


@dataclass(frozen=True)
class Prefix:
    """The prefix kinds of a message's first line, in order, with their text there."""

    kinds: tuple[tuple[int, str], ...] = ()

    def strip(self, line: str) -> tuple[str, bool | None]:
        """(line without the prefix, True if stripped / False if absent / None if foreign).

        Foreign: the line carries a literal kind (a rank, a pid) with another value, so it
        belongs to another process's output interleaved with this message.
        """
        if not self.kinds:
            return line, False
        pos = 0
        for index, text in self.kinds:
            _kind, pattern, literal = _KINDS[index]
            m = pattern.match(line, pos)
            if not m:
                if pos == 0:
                    other = _foreign(line, index)
                    return (line, None) if other else (line, False)
                return line, False
            if literal and m.group() != text:
                return line, None
            pos = m.end()
        return line[pos:], True

    def logged_as_info(self) -> bool:
        """The line came through glog at INFO severity (`I1207 08:24:59.83 ... file.cc:N]`):
        libtpu's summary of a compile that fit, never an error's text."""
        return any(_KINDS[i][0] == "glog" and text.startswith("I") for i, text in self.kinds)


def _foreign(line: str, index: int) -> bool:
    _kind, pattern, literal = _KINDS[index]
    return literal and pattern.match(line) is not None


def detect(line: str) -> tuple[Prefix, str]:
    """The prefix of `line` (possibly none) and the rest of the line."""
    found: list[tuple[int, str]] = []
    pos = 0
    progress = True
    while progress and len(found) < 6:
        progress = False
        for index, (_, pattern, _) in enumerate(_KINDS):
            m = pattern.match(line, pos)
            if m and m.end() > pos:
                found.append((index, m.group()))
                pos = m.end()
                progress = True
                break
    return Prefix(tuple(found)), line[pos:]
