"""The one walk of the paths an ingest is given: every file under them, once.

Each source (parse/sources.py) is offered the same list, so a tree is listed once
however many forms it holds (it was listed three times: once for dumps, once for logs,
once for device memory profiles)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from bufferhouse.errors import DumpError
from bufferhouse.parse.reader import describe, require_regular, unreadable


@dataclass(frozen=True)
class Walk:
    """What the walk found: `files`, each (path, given by name), in walk order; the
    paths given that do not exist; the files and directories it could not use."""

    files: tuple[tuple[str, bool], ...]
    missing: tuple[str, ...] = ()
    problems: tuple[DumpError, ...] = field(default=())


def walk_paths(
    paths: Iterable[str | os.PathLike[str]],
    named_ours: Callable[[str], bool],
    siblings: Callable[[str], list[str]],
) -> Walk:
    """Walk `paths` once: a directory is searched to any depth (each directory once, over
    all the paths), a file is taken with the `siblings` of its module beside it."""
    files: list[tuple[str, bool]] = []
    missing: list[str] = []
    problems: list[DumpError] = []
    seen_dirs: set[tuple[int, int]] = set()
    for raw in paths:
        path = os.path.abspath(os.fspath(raw))
        if os.path.isdir(path):
            files.extend((p, False) for p in walk_tree(path, seen_dirs, problems, named_ours))
        elif os.path.exists(path):
            files.append((path, True))
            files.extend((p, False) for p in siblings(path))
        else:
            missing.append(path)
    return Walk(tuple(files), tuple(missing), tuple(problems))


def walk_tree(
    root: str,
    seen: set[tuple[int, int]],
    problems: list[DumpError],
    named_ours: Callable[[str], bool],
) -> Iterator[str]:
    """All files under root, following directory links once (symlink loops end).

    Depth-first with a stack of its own, not recursion: a tree thousands of directories
    deep is walked (issue 31: RecursionError). A directory that cannot be listed, and
    a FIFO, socket or device with a name discovery reads (`named_ours`), are added to `problems`
    (never opened: a FIFO would block discovery forever)."""
    stack: list[Iterator[os.DirEntry[str]]] = []

    def enter(path: str) -> None:
        try:
            st = os.stat(path)
        except OSError:
            return
        key = (st.st_dev, st.st_ino)
        if key in seen:
            return
        seen.add(key)
        try:
            with os.scandir(path) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            problems.append(DumpError(path, 0, f"cannot list directory: {describe(exc)}"))
            return
        stack.append(iter(entries))

    enter(root)
    while stack:
        entry = next(stack[-1], None)
        if entry is None:
            stack.pop()
            continue
        try:
            if entry.is_dir(follow_symlinks=True):
                enter(entry.path)
                continue
            is_file = entry.is_file(follow_symlinks=True)
            exists = is_file or os.path.exists(entry.path)
        except OSError:  # e.g. a link that points at itself
            is_file, exists = False, False
        if is_file or (entry.is_symlink() and not exists):
            # Links to nothing are yielded too: if the name is a dump's, reading it
            # fails with a message naming it instead of the module vanishing silently.
            yield entry.path
        elif exists and named_ours(entry.name):
            try:
                require_regular(entry.path)
            except OSError as exc:
                problems.append(unreadable(entry.path, exc))


def file_identity(path: str) -> object:
    """The file a path names, whichever link led to it: one stat, where realpath
    took one per directory of the path (a third of finding 3,500 files)."""
    try:
        st = os.stat(path)
    except OSError:  # a dangling link: its name is all there is
        return os.path.realpath(path)
    return (st.st_dev, st.st_ino)
