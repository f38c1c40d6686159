"""What this machine calls its own places, so that no fixture keeps them: the checkouts
of this repository (its git worktrees), the folder that holds them, the home and the
temporary directory. Read from the machine, not written down, so that the code that
keeps them out names none of them (tests/house/test_fixture_paths.py,
tests/data/scrub_paths.py, tests/parse/test_jax012_fixtures.py)."""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def checkouts(root: Path = ROOT) -> list[Path]:
    """Every worktree of the repository at `root` (just `root` outside git)."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "worktree", "list", "--porcelain"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return [root]
    found = [
        Path(line.split(" ", 1)[1]) for line in out.splitlines() if line.startswith("worktree ")
    ]
    return found or [root]


def places(root: Path = ROOT, *, home: bool = True, temp: bool = True) -> list[Path]:
    """The checkouts, the folder beside the checkout (where worktrees and venvs are made),
    with `home` the home and with `temp` the temporary directory: deepest first, never `/`."""
    found = [*checkouts(root), root.parent]
    if home:
        found.append(Path.home())
    if temp:
        found.append(Path(tempfile.gettempdir()))
    unique = {p.resolve() for p in found if p.resolve() != Path("/")}
    return sorted(unique, key=lambda p: -len(p.parts))


def pattern(paths: list[Path]) -> re.Pattern[bytes]:
    """Any of `paths` as a directory prefix (`<path>/`), in bytes."""
    return re.compile(b"|".join(re.escape(str(p).encode() + b"/") for p in paths))


def tracked(root: Path, tops: tuple[str, ...]) -> list[Path]:
    """The files git tracks under `tops` (what a commit holds: not the extensions an
    editable install builds in place); every file there outside git."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--", *tops],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return [f for top in tops for f in (root / top).rglob("*") if f.is_file()]
    return [root / name for name in out.decode().split("\0") if name and (root / name).is_file()]
