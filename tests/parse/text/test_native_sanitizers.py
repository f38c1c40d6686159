"""The compiled reader under AddressSanitizer and UndefinedBehaviorSanitizer
(docs/native.md): every extension setup.py builds (bufferhouse/parse/text/native/_*.c)
is built with the sanitizers into a copy of this tree, and the tests that drive the
kernels run there in a subprocess with the sanitizer runtimes preloaded (CPython
itself is not instrumented): the native kernel tests (tests/parse/text/test_native*.py, less
this file and the install test), the fuzz suite (its `sanitizers` profile) and the
mutant tests of tests/parse/text/test_parse_paths.py, less two slow ones that test other things
(LEFT_OUT). They must pass with no sanitizer report: 3-4 minutes on 2 busy cores.

Without gcc or its runtimes this skips with the reason; CI sets
conftest.NEED_SANITIZERS, so there it fails instead.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import conftest
from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # a build and a run of several suites, under the sanitizers

NATIVE = Path("bufferhouse") / "parse" / "text" / "native"
FLAGS = "-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all -g -O1"
#: Python's CFLAGS say -fwrapv, under which UBSan lets signed overflow pass: a kernel
#: refuses numbers past int64, so any overflow is a bug to report.
FLAGS += " -fno-wrapv"
RUNTIMES = ("libasan.so", "libubsan.so")
#: What a sanitizer prints when it finds something (UBSan: `file:line: runtime error:`).
REPORTS = re.compile(r"ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:")
#: The kernel tests that do not drive the kernels: they build or install.
NOT_KERNEL_TESTS = {"test_native_sanitizers.py", "test_native_install.py"}
#: Tests of those suites left out here, and why: each takes minutes under the sanitizers.
LEFT_OUT = {
    # the writer's all-or-nothing; its parse half is test_mutated_dumps_parse_or_fail_with_a_line
    "tests/parse/test_fuzz.py::test_mutated_modules_land_whole_or_not_at_all",
    # the line reader on a 1 GiB line; split_lines on one is test_split_lines_on_a_1_gb_line
    "tests/parse/text/test_native_hostile.py::"
    "test_an_ingest_fails_the_dump_with_a_1_gb_line_there_and_loads_the_rest",
}


def _unavailable(why: str) -> None:
    if os.environ.get(conftest.NEED_SANITIZERS):
        pytest.fail(f"{why} ({conftest.NEED_SANITIZERS} is set)")
    pytest.skip(f"{why} (set {conftest.NEED_SANITIZERS}=1 to fail instead)")


def _runtimes() -> list[str]:
    """The ASan and UBSan runtimes of gcc, to preload."""
    if not sys.platform.startswith("linux"):
        _unavailable("the sanitizer runtimes are preloaded with LD_PRELOAD, on Linux only")
    if shutil.which("gcc") is None:
        _unavailable("no gcc to build the extensions with the sanitizers")
    found = []
    for name in RUNTIMES:
        path = subprocess.run(
            ["gcc", f"-print-file-name={name}"], capture_output=True, text=True, check=True
        ).stdout.strip()
        if not os.path.isabs(path) or not os.path.exists(path):
            _unavailable(f"gcc has no {name} (Debian: apt-get install libasan8 libubsan1)")
        found.append(path)
    return found


def _copy(tmp: Path) -> Path:
    """The package, its tests and the bench scripts they import, nothing built."""
    copy = tmp / "tree"
    ignore = shutil.ignore_patterns("*.so", "*.pyd", "__pycache__", "build", "*.egg-info")
    for name in ("bufferhouse", "tests", "bench"):
        shutil.copytree(ROOT / name, copy / name, ignore=ignore)
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, copy / name)
    return copy


def _build(copy: Path) -> None:
    """setup.py's extensions, built in place with the sanitizers; each must be there
    (they are optional: a failed build would otherwise pass unseen)."""
    env = {**os.environ, "CC": "gcc", "LDSHARED": "gcc -shared", "CFLAGS": FLAGS}
    env["LDFLAGS"] = "-fsanitize=address,undefined"
    proc = subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--inplace"],
        capture_output=True,
        text=True,
        env=env,
        cwd=copy,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for source in sorted((copy / NATIVE).glob("_*.c")):
        built = list(source.parent.glob(f"{source.stem}.*.so"))
        assert built, f"{source.name} was not built with the sanitizers:\n{proc.stdout[-3000:]}"
        assert b"__asan_report" in built[0].read_bytes(), f"{built[0]} is not instrumented"


def _tests(copy: Path) -> list[str]:
    """The native kernel tests, the fuzz suite and the mutant tests, as pytest ids."""
    here = copy / "tests" / "parse" / "text"
    native = sorted(
        f"tests/parse/text/{p.name}"
        for p in here.glob("test_native*.py")
        if p.name not in NOT_KERNEL_TESTS
    )
    paths = (here / "test_parse_paths.py").read_text(encoding="utf-8")
    mutants = re.findall(r"^def (test_\w*mutat\w*)\(", paths, re.MULTILINE)
    assert native and mutants, (native, mutants)
    return [
        *native,
        "tests/parse/test_fuzz.py",
        *(f"tests/parse/text/test_parse_paths.py::{m}" for m in mutants),
    ]


@pytest.fixture(scope="module")
def sanitized(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """The sanitized copy, and the environment its subprocesses run in."""
    runtimes = _runtimes()
    copy = _copy(tmp_path_factory.mktemp("sanitized"))
    _build(copy)
    env = {
        **os.environ,
        "PYTHONPATH": str(copy),
        "LD_PRELOAD": " ".join(runtimes),
        # CPython's own allocations are never freed at exit: not leaks worth a report.
        "ASAN_OPTIONS": "detect_leaks=0",
        "UBSAN_OPTIONS": "print_stacktrace=1",
        "BUFFERHOUSE_FUZZ": "sanitizers",
    }
    return copy, env


def test_the_sanitized_copy_is_what_runs(sanitized):
    copy, env = sanitized
    probe = "from bufferhouse.parse.text import native; print(native.MISSING, native.__file__)"
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=copy
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["None", str(copy / NATIVE / "__init__.py")], proc.stdout


def test_the_kernel_tests_pass_under_the_sanitizers(sanitized):
    copy, env = sanitized
    # --capture=sys: a sanitizer writes to file descriptor 2 as it ends the process,
    # which pytest's default capture would take down with it.
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", "--capture=sys"]
    cmd += ["--basetemp", str(copy.parent / "bt"), *_tests(copy)]
    cmd += [f"--deselect={test}" for test in sorted(LEFT_OUT)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=copy)
    output = proc.stdout + proc.stderr
    report = REPORTS.search(output)
    assert not report, output[max(report.start() - 200, 0) :][:6000]
    assert proc.returncode == 0, output[-6000:]
    assert re.search(r"\d+ passed", output), output[-3000:]
